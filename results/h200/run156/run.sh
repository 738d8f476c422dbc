#!/usr/bin/env bash
# run 156: test_cuda_queries (FP8 refused on CUDA) and memcheck over it, on the tree's commit.
set -u -o pipefail
R=/tmp/r156; mkdir -p $R
GEM_GIT_COMMIT=$(cat results/h200/run156/commit) PHASES=build JOBS=16 BUILD_TARGETS="test_cuda_queries gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1; tail -n 1 $R/build.txt
GEM_QUIET=1 timeout 60 build-h200/test_cuda_queries > $R/test_cuda_queries.txt 2>&1; echo "test_cuda_queries rc=$?"; tail -n 1 $R/test_cuda_queries.txt; grep -A1 FAIL $R/test_cuda_queries.txt | head -6
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 build-h200/test_cuda_queries > $R/memcheck-queries.txt 2>&1; echo "memcheck rc=$?"; grep SUMMARY $R/memcheck-queries.txt
build-h200/gem resources --out $R/resources.json > $R/resources.txt 2>&1; echo "resources rc=$?"; tail -n 5 $R/resources.txt
(cd $R && tar czf $OUT/run156.tgz .)
