#!/usr/bin/env bash
# run 144: dev/cuda/tiles_smemfirst (the plain Q4_0 tile product with each warp's first batch
# in shared memory and its second asked for right after the launch wait) checked bit for bit
# against the library and timed beside it at the 31B shapes, cold and --hot.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r144; mkdir -p $R
save() { (cd $R && tar czf $OUT/run144.tgz .); }
BUILD_TARGETS="dev_tiles_smemfirst" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; echo "build rc=$?"; rm -f $R/receipts.tar.gz
timeout 150 build-h200/dev/tiles_smemfirst > $R/tiles-smemfirst.txt 2>&1; echo "cold rc=$?"; grep -v "^check" $R/tiles-smemfirst.txt; grep -c "bit for bit" $R/tiles-smemfirst.txt
save
timeout 100 build-h200/dev/tiles_smemfirst --hot --reps 50 > $R/tiles-smemfirst-hot.txt 2>&1; echo "hot rc=$?"; grep -v "^check" $R/tiles-smemfirst-hot.txt
save
