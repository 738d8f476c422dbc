#!/usr/bin/env bash
# run 93: the library's item with its scores on the tile unit (part amx-score: no V relayout),
# beside the FMA item and the tile item, rows in L2 and from DRAM, 1 and 16 threads
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r93; mkdir -p $R
BUILD_TARGETS=dev_fused_parts PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
timeout 90 build-h200/dev/fused_parts --dtype bf16 --tokens 256 --reps 200 --rounds 3 --threads 1,16 > $R/parts-l2.txt 2>&1; echo "l2 rc=$?"; grep -vE "^ +(1|16)  (online)" $R/parts-l2.txt
(cd $R && tar czf $OUT/run93.tgz .)
timeout 120 build-h200/dev/fused_parts --dtype bf16 --tokens 16384 --reps 4 --rounds 2 --threads 1,16 > $R/parts-dram.txt 2>&1; echo "dram rc=$?"; grep -vE "^ +(1|16)  (online)" $R/parts-dram.txt
(cd $R && tar czf $OUT/run93.tgz .)
