#!/usr/bin/env bash
# run 112: the library's F16 staged passes after the Q exponent moved into one helper: the
# device tests that cover them (test_decode --long: every route, KV type and length, K rebuilt
# from V; test_cuda_queries: the launch contract and resources).
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r112; mkdir -p $R
BUILD_TARGETS="test_decode test_cuda_queries" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
save() { (cd $R && tar czf $OUT/run112.tgz .); }
timeout 100 build-h200/test_cuda_queries > $R/test-cuda-queries.txt 2>&1; echo "test_cuda_queries rc=$?"; tail -1 $R/test-cuda-queries.txt
save
timeout 300 build-h200/test_decode --long > $R/test-decode-long.txt 2>&1; echo "test_decode --long rc=$?"; tail -1 $R/test-decode-long.txt
save
