#!/usr/bin/env bash
# run 194: GeGLU on tiles with the plain products' warps (B, this tree) against the GeGLU
# kernels of run 192's tree (A, build-a/a-tree.tgz). dev/cuda/geglu_split (checks, then chained
# A B B A at the 31B gate/up shape for Q4_0, Q4_K and Q6_K); on B test_cuda_matvec,
# test_model_cuda, memcheck and racecheck over test_cuda_matvec --tiles. The 31B dimensions in
# Q4_0, the Q4_K_M mix and Q6_K (weights generated on the GPU, F32 caches, K stored): the fused
# route's whole tokens at 8,192, processes A B B A while time lasts.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r194; rm -rf $R; mkdir -p $R/abba
save() { (cd $R && tar czf $OUT/run194.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); CB=$(cat results/h200/run194/commit); echo "A=$CA B=$CB" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gem" JOBS=6 \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build JOBS=10 \
  BUILD_TARGETS="gem test_cuda_matvec test_model_cuda dev_geglu_split" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
for f in $R/build-a.txt $R/build-b.txt; do tail -n 1 $f; done; echo "builds done at $(el) s"
B=build-h200
for TY in q4_0 q4_k_m q6_k; do # the digests take a while: beside the checks
  $B/gem synth --preset 31b --type $TY --no-matrices --context-length 262144 \
    --out /tmp/m31-$TY.gguf > $R/synth-$TY.txt 2>&1; echo "synth $TY rc=$?" >> $R/synth-rc.txt
done &
timeout 150 $B/dev/geglu_split > $R/geglu-split.txt 2>&1; echo "geglu_split rc=$? at $(el) s"
grep -E "FAILED|probe:|^q[46]_[0k] " $R/geglu-split.txt; grep -c " ok$" $R/geglu-split.txt
save
for T in test_cuda_matvec test_model_cuda; do
  GEM_QUIET=1 timeout 90 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$? at $(el) s"; tail -n 2 $R/$T.txt
done
save
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 $B/test_cuda_matvec --tiles \
    > $R/$tool-matvec.txt 2>&1
  echo "$tool rc=$? at $(el) s"; tail -n 2 $R/$tool-matvec.txt
done
save
wait; cat $R/synth-rc.txt; echo "synths done at $(el) s"
i=0
for spec in A B B A; do
  for TY in q4_0 q4_k_m q6_k; do
    i=$((i+1)); X=$spec
    [ $(left) -lt 40 ] && { echo "stop before $X $TY: $(left) s left"; break 2; }
    G=/tmp/a/build-h200/gem; [ $X = B ] && G=$B/gem
    timeout 40 $G profile --model /tmp/m31-$TY.gguf --backend cuda --random-weights 1 \
      --context 8192 --reps 1 --samples 5 --bw-mib 4096 --kv-dtype f32 --fused-only \
      --out $R/abba/$TY-$X-$i.json > $R/abba/$TY-$X-$i.txt 2>&1
    echo "$TY $X-$i rc=$? at $(el) s $(grep -E 'whole token' $R/abba/$TY-$X-$i.txt | head -1)"
    grep -A9 "with every stage timed" $R/abba/$TY-$X-$i.txt | grep -E " mlp "
    save
  done
done
save; echo "done at $(el) s"
