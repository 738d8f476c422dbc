#!/usr/bin/env bash
# run 191: Q4_K tiles in the library (B, this tree) against the F32 Q4_K kernel of the tree
# before (A, build-a/a-tree.tgz). On B: test_cuda_matvec, test_model_cuda, memcheck over
# test_cuda_matvec --tiles. The 31B dimensions in Q4_K (weights generated on the GPU, F32
# caches, K stored), the fused route's whole tokens at 8,192, processes A B. Racecheck over
# test_cuda_matvec --tiles with what is left.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-300} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r191; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run191.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); CB=$(cat results/h200/run191/commit); echo "A=$CA B=$CB" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gem" JOBS=6 \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build BUILD_TARGETS="gem test_cuda_matvec test_model_cuda" JOBS=10 \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
for f in $R/build-a.txt $R/build-b.txt; do tail -n 1 $f; done; echo "builds done at $(el) s"
B=build-h200
for T in test_cuda_matvec test_model_cuda; do
  GEM_QUIET=1 timeout 60 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$? at $(el) s"; tail -n 2 $R/$T.txt
done
save
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_matvec --tiles \
  > $R/memcheck-matvec.txt 2>&1
echo "memcheck rc=$? at $(el) s"; tail -n 2 $R/memcheck-matvec.txt
save
$B/gem synth --preset 31b --type q4_k --no-matrices --context-length 262144 --out /tmp/m31k.gguf \
  > $R/synth.txt 2>&1; echo "synth rc=$? at $(el) s"
for X in A B; do
  G=/tmp/a/build-h200/gem; [ $X = B ] && G=$B/gem
  timeout 45 $G profile --model /tmp/m31k.gguf --backend cuda --random-weights 1 --context 8192 \
    --reps 1 --samples 5 --bw-mib 4096 --kv-dtype f32 --fused-only --out $R/$X-8192.json \
    > $R/$X-8192.txt 2>&1
  echo "$X ctx 8192 rc=$? at $(el) s"; grep -E "whole token" $R/$X-8192.txt | head -1
  grep -A9 "with every stage timed" $R/$X-8192.txt | grep -E "projections|mlp|logits|norms"
  save
done
if [ $(left) -gt 40 ]; then
  timeout $(( $(left) - 10 )) compute-sanitizer --tool racecheck --error-exitcode 9 \
    $B/test_cuda_matvec --tiles > $R/racecheck-matvec.txt 2>&1
  echo "racecheck rc=$? at $(el) s"; tail -n 2 $R/racecheck-matvec.txt
fi
save; echo "done at $(el) s"
