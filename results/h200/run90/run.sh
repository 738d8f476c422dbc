#!/usr/bin/env bash
# run 90: the tile item with each operand tile reloaded as soon as its last TDP is issued, and
# the next V slice relaid behind the TDPs (part amx-pipe) beside the earlier order (amx)
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r90; mkdir -p $R
BUILD_TARGETS=dev_fused_parts PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
lscpu > $R/cpu-host.txt; uname -a >> $R/cpu-host.txt
timeout 120 build-h200/dev/fused_parts --dtype bf16 --tokens 256 --reps 300 --rounds 5 --threads 1,16 > $R/parts-l2.txt 2>&1; echo "l2 rc=$?"; cat $R/parts-l2.txt
(cd $R && tar czf $OUT/run90.tgz .)
timeout 300 build-h200/dev/fused_parts --dtype bf16 --tokens 16384 --reps 6 --rounds 3 --threads 1,16 > $R/parts-dram.txt 2>&1; echo "dram rc=$?"; cat $R/parts-dram.txt
(cd $R && tar czf $OUT/run90.tgz .)
