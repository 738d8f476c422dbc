#!/usr/bin/env bash
# run 96: the library with the tensor-core K-from-V first passes (BF16, F16): the whole test
# suite and the decode matrix with the long lengths, gem resources (gem.resources.v5) and its
# analysis, gem bench --k-from-v for F32, BF16 and F16, compute-sanitizer over the small matrix
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
BUDGET_S=575 PHASES="build test resources kfv sanitize" bash scripts/h200-run.sh $OUT > /tmp/runner96.txt 2>&1
echo "runner rc=$?"; grep -E "^== |FAIL|fail|passed|ERROR SUMMARY|RACECHECK SUMMARY|verdict|median|ms" /tmp/runner96.txt | tail -40
