#!/usr/bin/env bash
# run 192: Q6_K tiles (B, this tree) against main (A, build-a/a-tree.tgz, Q6_K on the F32
# kernel). dev/cuda/tiles_q6k (checks, then chained ABBA against the F32 kernel); on B
# test_cuda_matvec, test_model_cuda, memcheck over test_cuda_matvec --tiles. The 31B dimensions
# (weights generated on the GPU, F32 caches, K stored) in Q6_K and, when B's synth has it, in
# the Q4_K_M mix: the fused route's whole tokens at 8,192, processes A B. Then racecheck over
# test_cuda_matvec --tiles and ncu over tiles_q6k --once with what is left.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r192; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run192.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); CB=$(cat results/h200/run192/commit); echo "A=$CA B=$CB" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gem" JOBS=6 \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build JOBS=10 \
  BUILD_TARGETS="gem test_cuda_matvec test_model_cuda dev_tiles_q6k" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
for f in $R/build-a.txt $R/build-b.txt; do tail -n 1 $f; done; echo "builds done at $(el) s"
B=build-h200
for TY in q6_k q4_k_m; do # the digests take a while: beside the checks
  $B/gem synth --preset 31b --type $TY --no-matrices --context-length 262144 \
    --out /tmp/m31-$TY.gguf > $R/synth-$TY.txt 2>&1; echo "synth $TY rc=$?" >> $R/synth-rc.txt
done &
timeout 150 $B/dev/tiles_q6k > $R/tiles-q6k.txt 2>&1; echo "tiles_q6k rc=$? at $(el) s"
grep -E "FAILED|probe:|^(v|q|o-swa|gate|down|head) " $R/tiles-q6k.txt; grep -c " ok$" $R/tiles-q6k.txt
save
for T in test_cuda_matvec test_model_cuda; do
  GEM_QUIET=1 timeout 90 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$? at $(el) s"; tail -n 2 $R/$T.txt
done
save
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_matvec --tiles \
  > $R/memcheck-matvec.txt 2>&1
echo "memcheck rc=$? at $(el) s"; tail -n 2 $R/memcheck-matvec.txt
save
wait; cat $R/synth-rc.txt; echo "synths done at $(el) s"
for TY in q6_k q4_k_m; do
  for X in A B; do
    [ $(left) -lt 50 ] && { echo "stop: $(left) s left"; break; }
    G=/tmp/a/build-h200/gem; [ $X = B ] && G=$B/gem
    timeout 45 $G profile --model /tmp/m31-$TY.gguf --backend cuda --random-weights 1 \
      --context 8192 --reps 1 --samples 5 --bw-mib 4096 --kv-dtype f32 --fused-only \
      --out $R/$TY-$X-8192.json > $R/$TY-$X-8192.txt 2>&1
    echo "$TY $X ctx 8192 rc=$? at $(el) s"; grep -E "whole token" $R/$TY-$X-8192.txt | head -1
    grep -A9 "with every stage timed" $R/$TY-$X-8192.txt | grep -E "projections|mlp|logits|norms"
    save
  done
done
if [ $(left) -gt 60 ]; then
  timeout 40 ncu --clock-control none -k regex:"q6kt_kernel" -c 40 --csv --metrics \
smsp__inst_executed.sum,gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__block_size,launch__registers_per_thread \
    $B/dev/tiles_q6k --once > $R/ncu.csv 2> $R/ncu.err
  echo "ncu rc=$? at $(el) s"; tail -n 2 $R/ncu.err
fi
if [ $(left) -gt 40 ]; then
  timeout $(( $(left) - 10 )) compute-sanitizer --tool racecheck --error-exitcode 9 \
    $B/test_cuda_matvec --tiles > $R/racecheck-matvec.txt 2>&1
  echo "racecheck rc=$? at $(el) s"; tail -n 2 $R/racecheck-matvec.txt
fi
save; echo "done at $(el) s"
