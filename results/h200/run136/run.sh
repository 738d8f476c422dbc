#!/usr/bin/env bash
# run 136: the long F32 K-from-V pass from 24,576 rows on (run 135's crossover): the decode
# matrix (its F32 K-from-V case at the new boundary); racecheck of the pass at 24,576 and
# 32,768 rows (run 135's at two lengths ran past its limit); the library through gem_decode
# at 16K, 24K and 32K beside version 30 at the same 64 partitions.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r136; mkdir -p $R
save() { (cd $R && tar czf $OUT/run136.tgz .); }
BUILD_TARGETS="test_decode dev_kfv_mma" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; echo "build rc=$?"; rm -f $R/receipts.tar.gz
B=build-h200; K=$B/dev/kfv_mma
timeout 60 $K --f32 --rounds 10 --partitions 64 --lengths 16384,24576,32768 1 30 > $R/lib-vs-30.txt 2>&1; echo "lib rc=$?"; grep -vE "^live|^K rebuilt" $R/lib-vs-30.txt | sed 's/against.*//'
save
GEM_QUIET=1 timeout 100 $B/test_decode > $R/test-decode.txt 2>&1; echo "test_decode rc=$?"; tail -1 $R/test-decode.txt
save
for L in 24576 32768; do
  timeout 170 compute-sanitizer --tool racecheck --error-exitcode 9 --kernel-name kns=k_from_v_f32_long $K --f32 1 --rounds 1 --lengths $L > $R/racecheck-f32-long-$L.txt 2>&1; echo "racecheck $L rc=$?"; tail -1 $R/racecheck-f32-long-$L.txt
  save
done
