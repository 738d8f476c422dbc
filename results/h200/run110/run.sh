#!/usr/bin/env bash
# run 110: test_model_cuda with its Q4_0 model of hidden size 2,176 (the norm kernels in three
# blocks writing the products' scratch), then memcheck and racecheck of the post-attention and
# post-MLP norm kernels (filtered to them) in the 31B dimensions' six layers (six blocks a
# kernel), through gem model-diff --backend cuda.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r110; mkdir -p $R
BUILD_TARGETS="gem test_model_cuda" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
save() { (cd $R && tar czf $OUT/run110.tgz .); }
timeout 150 build-h200/test_model_cuda > $R/test-model-cuda.txt 2>&1; echo "test_model_cuda rc=$?"; grep -E "CPU vs CUDA|passed" $R/test-model-cuda.txt | tail -14
save
G=build-h200/gem
$G synth --preset 31b --type q4_0 --no-matrices --layers 6 --context-length 8192 --out /tmp/m6.gguf > /dev/null 2>&1
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --kernel-name kns=post_ --error-exitcode 9 \
    $G model-diff --model /tmp/m6.gguf --backend cuda --random-weights 1 --fill 32 --contexts 40 --steps 2 \
    --out $R/md6-$tool > $R/$tool-post-kernels.txt 2>&1; echo "$tool rc=$?"; tail -2 $R/$tool-post-kernels.txt
  save
done
