#!/usr/bin/env bash
# run 88: what the tile unit gives one thread (TDPBF16PS with fixed and reloaded operands), and
# the tile item again (dev/cpu/fused_parts, BF16, rows in L2)
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r88; mkdir -p $R
BUILD_TARGETS=dev_fused_parts PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
timeout 120 build-h200/dev/fused_parts --dtype bf16 --tokens 256 --reps 200 --rounds 3 --threads 1,16 > $R/parts-l2.txt 2>&1; echo "l2 rc=$?"; cat $R/parts-l2.txt
(cd $R && tar czf $OUT/run88.tgz .)
