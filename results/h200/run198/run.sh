#!/usr/bin/env bash
# run 198: Q8_0 tiles (B, this tree) against main (A, build-a/a-tree.tgz, Q8_0 on the F32
# kernel). dev/cuda/tiles_q8_0 (checks, then per launch and chained A B C D D C B A against the
# F32 kernel); on B test_cuda_matvec, test_model_cuda, memcheck over test_cuda_matvec --tiles.
# The 31B dimensions in Q8_0 (weights generated on the GPU, F32 caches, K stored): the fused
# route's whole tokens at 8,192, processes A B B A; then B at 131,072 and racecheck over
# test_cuda_matvec --tiles with what is left.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r198; rm -rf $R; mkdir -p $R/abba
save() { (cd $R && tar czf $OUT/run198.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); CB=$(cat results/h200/run198/commit); echo "A=$CA B=$CB" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gem" JOBS=6 \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build JOBS=10 \
  BUILD_TARGETS="gem test_cuda_matvec test_model_cuda dev_tiles_q8_0" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
for f in $R/build-a.txt $R/build-b.txt; do tail -n 1 $f; done; echo "builds done at $(el) s"
B=build-h200
($B/gem synth --preset 31b --type q8_0 --no-matrices --context-length 262144 \
  --out /tmp/m31-q8_0.gguf > $R/synth-q8_0.txt 2>&1; echo "synth q8_0 rc=$?" > $R/synth-rc.txt) &
timeout 150 $B/dev/tiles_q8_0 > $R/tiles-q8_0.txt 2>&1; echo "tiles_q8_0 rc=$? at $(el) s"
grep -E "FAILED|probe:|^(k|q|o-swa|o-full|gate|down|head) " $R/tiles-q8_0.txt
grep -c " ok$" $R/tiles-q8_0.txt
save
for T in test_cuda_matvec test_model_cuda; do
  GEM_QUIET=1 timeout 90 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$? at $(el) s"; tail -n 2 $R/$T.txt
done
save
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_matvec --tiles \
  > $R/memcheck-matvec.txt 2>&1
echo "memcheck rc=$? at $(el) s"; tail -n 2 $R/memcheck-matvec.txt
save
wait; cat $R/synth-rc.txt; echo "synth done at $(el) s"
i=0
for X in A B B A; do
  i=$((i+1))
  [ $(left) -lt 50 ] && { echo "stop before $X-$i: $(left) s left"; break; }
  G=/tmp/a/build-h200/gem; [ $X = B ] && G=$B/gem
  timeout 50 $G profile --model /tmp/m31-q8_0.gguf --backend cuda --random-weights 1 \
    --context 8192 --reps 1 --samples 5 --bw-mib 4096 --kv-dtype f32 --fused-only \
    --out $R/abba/q8_0-$X-$i.json > $R/abba/q8_0-$X-$i.txt 2>&1
  echo "q8_0 $X-$i rc=$? at $(el) s $(grep -E 'whole token' $R/abba/q8_0-$X-$i.txt | head -1)"
  grep -A9 "with every stage timed" $R/abba/q8_0-$X-$i.txt | grep -E "projections|mlp|logits"
  save
done
if [ $(left) -gt 70 ]; then
  timeout 60 $B/gem profile --model /tmp/m31-q8_0.gguf --backend cuda --random-weights 1 \
    --context 131072 --reps 1 --samples 5 --bw-mib 4096 --kv-dtype f32 --fused-only \
    --out $R/q8_0-B-131072.json > $R/q8_0-B-131072.txt 2>&1
  echo "q8_0 B 131072 rc=$? at $(el) s"; grep -E "whole token|floor" $R/q8_0-B-131072.txt | head -3
  save
fi
if [ $(left) -gt 40 ]; then
  timeout $(( $(left) - 10 )) compute-sanitizer --tool racecheck --error-exitcode 9 \
    $B/test_cuda_matvec --tiles > $R/racecheck-matvec.txt 2>&1
  echo "racecheck rc=$? at $(el) s"; tail -n 2 $R/racecheck-matvec.txt
fi
save; echo "done at $(el) s"
