#!/usr/bin/env bash
# run 146: dev/cuda/tiles_split (the plain Q4_0 tile product with at most 12, 16 or 24 chunks a
# warp instead of 8) held to the library within 1e-6 of its largest |y| and timed beside it at
# the 31B shapes, cold and --hot.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r146; mkdir -p $R
save() { (cd $R && tar czf $OUT/run146.tgz .); }
BUILD_TARGETS="dev_tiles_split" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; echo "build rc=$?"; rm -f $R/receipts.tar.gz
timeout 200 build-h200/dev/tiles_split > $R/tiles-split.txt 2>&1; echo "cold rc=$?"; cat $R/tiles-split.txt
save
timeout 120 build-h200/dev/tiles_split --hot --reps 50 > $R/tiles-split-hot.txt 2>&1; echo "hot rc=$?"; grep -v "^check" $R/tiles-split-hot.txt
save
