#!/usr/bin/env bash
# run 109: the Q4_0 tile products with their matrix already in the L2 (dev/cuda/tiles_prefetch
# --hot: one copy of each matrix, called again and again), beside run 107's cold figures: what
# a product gains when its weights were brought into the L2 before it starts; then racecheck
# of test_model_cuda (the norm kernels of 9d58cc3, one block per slice).
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r109; mkdir -p $R
BUILD_TARGETS="dev_tiles_prefetch test_model_cuda" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
save() { (cd $R && tar czf $OUT/run109.tgz .); }
timeout 200 build-h200/dev/tiles_prefetch --hot > $R/dev-tiles-prefetch-hot.txt 2>&1; echo "tiles_prefetch --hot rc=$?"; grep -v "^check" $R/dev-tiles-prefetch-hot.txt
save
timeout 240 compute-sanitizer --tool racecheck --error-exitcode 9 build-h200/test_model_cuda > $R/racecheck-test-model-cuda.txt 2>&1; echo "racecheck rc=$?"; tail -2 $R/racecheck-test-model-cuda.txt
save
