#!/usr/bin/env bash
# run 119: the decode matrix's long lengths (test_decode --long: 64K and 128K for every route
# and KV type, BF16 K from V on the long pass among them) on the library of run 118, and the
# long pass against the staged one through gem_decode past the boundary (kfv_mma version 1
# against version 4, 36K-48K).
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r119; mkdir -p $R
save() { (cd $R && tar czf $OUT/run119.tgz .); }
BUILD_TARGETS="test_decode dev_kfv_mma" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
timeout 60 build-h200/dev/kfv_mma --rounds 10 --partitions 64 --lengths 36864,40960,49152 1 4 > $R/kfv-lib-vs-v4.txt 2>&1; echo "lib vs v4 rc=$?"; grep -vE "^live|^K rebuilt" $R/kfv-lib-vs-v4.txt
save
timeout 330 build-h200/test_decode --long > $R/test-decode-long.txt 2>&1; echo "test_decode --long rc=$?"; tail -2 $R/test-decode-long.txt
save
