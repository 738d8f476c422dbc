#!/usr/bin/env bash
# run 207 (any one GPU; H200s did not come for run 206): on this tree (B), the design's
# correctness gate from one build in one call, as run 168's gate.sh (`gem resources`, the 31B
# model differentials in Q4_0 at 8,191 / 8,192 / 8,193 cached tokens on CUDA, the CUDA decoder
# on the tiny fixture against the CPU and the transformers reference, the five operator
# differentials of the design's geometry on the host's CPU and the CUDA route's beside them,
# `gem analyze correctness`); whole 31B Q4_0 tokens at 8K and 128K in processes A B B A A B B A
# (A = main before the norm kernels' change, build-a/a-tree.tgz); memcheck over the decoder's
# test.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
W=/tmp/w207; rm -rf $W; mkdir -p $W/rec/ab
save() { (cd $W/rec && tar czf $OUT/run207.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $W/rec/gpu.txt
CA=$(cat build-a/commit); CB=$(cat results/h200/run207/commit)
echo "A=$CA B=$CB" | tee $W/rec/commits.txt
(mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps &&
  cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gem" JOBS=6 \
  bash scripts/h200-run.sh /tmp/a-out > $W/rec/build-a.txt 2>&1) &
BA=$!
GEM_GIT_COMMIT=$CB WORK=$W PHASES="build resources model31 model" \
  BUILD_TARGETS="gem dev_fused_decode test_model_cuda" BUDGET_S=500 MODEL_CONTEXTS=8192 \
  MODEL_REPS=1 MODEL_SAMPLES=3 JOBS=10 bash scripts/h200-run.sh $OUT/h200 > /dev/null 2>&1
echo "h200-run.sh rc=$? at $(el) s"; grep -E "^== |FAIL|fail" $OUT/h200/log.txt | tail -12
G=$PWD/build-h200/gem
sha256sum $G > $W/rec/gem.sha256
wait $BA; tail -n 1 $W/rec/build-a.txt; echo "build A at $(el) s"
$G synth --preset 31b --type q4_0 --no-matrices --context-length 262144 --out /tmp/m31-q4_0.gguf \
  > $W/rec/synth-q4_0.txt 2>&1; echo "synth rc=$? at $(el) s"
i=0
for X in A B B A A B B A; do
  i=$((i+1))
  [ $(left) -lt 200 ] && { echo "stop before $X-$i: $(left) s left"; break; }
  P=$G; [ $X = A ] && P=/tmp/a/build-h200/gem
  timeout 40 $P profile --model /tmp/m31-q4_0.gguf --backend cuda --random-weights 1 \
    --context 8192,131072 --reps 1 --samples 7 --bw-mib 4096 --kv-dtype f32 --fused-only \
    > $W/rec/ab/q4_0-$X-$i.txt 2>&1
  echo "ab $X-$i rc=$? at $(el) s"; grep -E "whole token|norms" $W/rec/ab/q4_0-$X-$i.txt
done
save
$G diff --backend cpu --partitions 32 --tile 4 --ref-partitions 16 --out $W/rec/diff-cpu \
  > $W/rec/diff-cpu.txt 2>&1
echo "gem diff cpu rc=$? at $(el) s"; tail -n 1 $W/rec/diff-cpu.txt
$G diff --backend cuda --out $W/rec/diff-cuda > $W/rec/diff-cuda.txt 2>&1
echo "gem diff cuda rc=$? at $(el) s"; tail -n 1 $W/rec/diff-cuda.txt
M=$W/rec/model-diff-31b-q4_0
D() { ls $W/rec/diff-cpu/*live$1-*.json | head -1; }
MD() { ls $M/*ctx$1-*.json | head -1; }
$G analyze correctness --merge results/cpu/merge-check.json \
  --merge-analysis results/cpu/merge-boundary-analysis.json \
  --resources $W/rec/resources.json --resources-analysis $W/rec/resources-analysis.json \
  --diff $(D 8191) --diff $(D 8192) --diff $(D 8193) --diff $(D 65536) --diff $(D 131072) \
  --model $(MD 8191) --model $(MD 8192) --model $(MD 8193) --root . \
  --out $W/rec/correctness-analysis.json > $W/rec/correctness.txt 2>&1
echo "analyze correctness rc=$? at $(el) s"; tail -n 3 $W/rec/correctness.txt
save
[ $(left) -gt 30 ] && { timeout $(( $(left) - 15 )) compute-sanitizer --tool memcheck \
  --error-exitcode 9 build-h200/test_model_cuda > $W/rec/sanitizer-model-memcheck.txt 2>&1
  echo "memcheck test_model_cuda rc=$? at $(el) s"; tail -n 2 $W/rec/sanitizer-model-memcheck.txt; }
save; echo "done at $(el) s"
