#!/usr/bin/env bash
# run 97: test_cuda_queries with the K-from-V passes' 33,280 dynamic bytes (run 96 failed it on
# the test's old expectation), and gem resources + its analysis again on this tree
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
BUILD_TARGETS="test_cuda_queries gem" PHASES="build resources" bash scripts/h200-run.sh $OUT > /tmp/runner97.txt 2>&1
echo "runner rc=$?"; grep -E "^== |FAIL|verdict|pass" /tmp/runner97.txt | tail -8
build-h200/test_cuda_queries 2>&1 | tee $OUT/test-cuda-queries.txt | tail -3
