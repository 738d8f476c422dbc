#!/usr/bin/env bash
# run 113: dev/cuda/tiles_timeline: the scratch kernel and the Q4_0 tile product of one call in
# a chain, block by block (global timer stamps), at the 31B plain shapes.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r113; mkdir -p $R
BUILD_TARGETS=dev_tiles_timeline PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
timeout 100 build-h200/dev/tiles_timeline > $R/dev-tiles-timeline.txt 2>&1; echo "tiles_timeline rc=$?"; cat $R/dev-tiles-timeline.txt
(cd $R && tar czf $OUT/run113.tgz .)
