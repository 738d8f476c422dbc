#!/usr/bin/env bash
# run 121: after the versions 20-23 of dev/cuda/kfv_mma call the library's helpers (and the
# library's merge takes the warp count as a template argument): versions 20-23 against the
# double reference at small lengths, and the library's long pass through gem_decode (version 1)
# at 32,768 and 40,001 rows.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r121; mkdir -p $R
save() { (cd $R && tar czf $OUT/run121.tgz .); }
BUILD_TARGETS="dev_kfv_mma" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
timeout 60 $K --rounds 1 --partitions 33 --lengths 1,13,65,4097,8193 20 21 22 23 > $R/small-20-23.txt 2>&1; echo "small rc=$?"; grep -cE "nmse" $R/small-20-23.txt; grep -E "INVALID|rror" $R/small-20-23.txt | head -3
timeout 60 $K --rounds 3 --lengths 32768,40001 1 > $R/lib-long.txt 2>&1; echo "lib rc=$?"; grep -E "nmse|INVALID" $R/lib-long.txt | sed 's/against.*//'
save
