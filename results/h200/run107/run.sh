#!/usr/bin/env bash
# run 107: dev/cuda/tiles_prefetch (the Q4_0 tile product with an L2 bulk prefetch of each
# block's weights at its start, three forms) against the library's kernel, checked bit for bit
# first, at the 31B shapes; then memcheck of one pass over every shape.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r107; mkdir -p $R
BUILD_TARGETS=dev_tiles_prefetch PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
save() { (cd $R && tar czf $OUT/run107.tgz .); }
T=build-h200/dev/tiles_prefetch
timeout 300 $T > $R/dev-tiles-prefetch.txt 2>&1; echo "tiles_prefetch rc=$?"; cat $R/dev-tiles-prefetch.txt
save
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $T --once > $R/memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -2 $R/memcheck.txt
save
