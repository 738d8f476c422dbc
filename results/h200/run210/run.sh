#!/usr/bin/env bash
# run 210 (any one GPU): the q/k/v kernel's sums through block_sum_once (this tree): the CUDA
# decoder's test, and racecheck, synccheck and memcheck over the decoder on the tiny fixture
# (two tokens, F32 products; two with Q4_0 tiles).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r210; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run210.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run210/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem test_model_cuda" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build at $(el) s"
G=build-h200/gem
timeout 60 build-h200/test_model_cuda > $R/test-model-cuda.txt 2>&1
echo "test_model_cuda rc=$? at $(el) s"; tail -n 1 $R/test-model-cuda.txt
$G synth --preset tiny --out /tmp/tiny.gguf > /dev/null
$G synth --preset tiny --type q4_0 --embd 256 --ff 512 --vocab 1024 --out /tmp/tiles.gguf > /dev/null
for M in tiny tiles; do
  for tool in racecheck synccheck memcheck; do
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $G generate --model /tmp/$M.gguf \
      --backend cuda --prompt-tokens 2,3 -n 2 > $R/sanitizer-$M-$tool.txt 2>&1
    echo "$tool $M rc=$? at $(el) s"; tail -n 1 $R/sanitizer-$M-$tool.txt
  done
done
save; echo "done at $(el) s"
