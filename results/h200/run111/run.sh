#!/usr/bin/env bash
# run 111: dev/cuda/tiles_streamk (the Q4_0 tile product's chunks split evenly over one wave of
# warps, the runs' partials added by a second kernel) against the library's kernel at the 31B
# shapes: within 2e-6 of the largest |y| and bitwise repeats first, then A B B A; memcheck of
# one pass over every shape.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r111; mkdir -p $R
BUILD_TARGETS=dev_tiles_streamk PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
save() { (cd $R && tar czf $OUT/run111.tgz .); }
T=build-h200/dev/tiles_streamk
timeout 240 $T > $R/dev-tiles-streamk.txt 2>&1; echo "tiles_streamk rc=$?"; cat $R/dev-tiles-streamk.txt
save
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $T --once > $R/memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck.txt
save
