#!/usr/bin/env bash
# run 126: the library with the long F32 K-from-V first pass (dev/cuda/kfv_mma version 29's
# design, five pairs of warps a block, from 24,576 rows on): the whole test suite (its decode
# matrix holds F32 K-from-V at 24,576 and 40,001 rows), gem resources (gem.resources.v7) and its
# analysis, the library's pass through gem_decode (kfv_mma version 1) beside version 29 in one
# process, memcheck and racecheck of the new kernel.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r126; mkdir -p $R
save() { (cd $R && tar czf $OUT/run126.tgz .); }
BUDGET_S=200 PHASES="build resources" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1
echo "runner rc=$?"; grep -E "^== |FAIL|verdict|gate" $R/runner.txt | tail -8
save
B=build-h200
(cd $B && GEM_QUIET=1 timeout 170 ctest --output-on-failure -j8) > $R/ctest.txt 2>&1; echo "ctest rc=$?"; tail -3 $R/ctest.txt
grep -E "FAIL|failed" $R/ctest.txt | head -5
save
K=$B/dev/kfv_mma
timeout 70 $K --f32 --rounds 10 --partitions 33 --lengths 8192,24576,32768,65536,131072 1 29 > $R/kfv-lib-vs-v29.txt 2>&1; echo "lib vs v29 rc=$?"; grep -vE "^live|^K rebuilt" $R/kfv-lib-vs-v29.txt | sed 's/against.*//'
save
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 --kernel-name kns=k_from_v_f32_long $K --f32 1 --rounds 1 --lengths 24576,40001 > $R/memcheck-long.txt 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck-long.txt
timeout 80 compute-sanitizer --tool racecheck --error-exitcode 9 --kernel-name kns=k_from_v_f32_long $K --f32 1 --rounds 1 --lengths 24576 > $R/racecheck-long.txt 2>&1; echo "racecheck rc=$?"; tail -1 $R/racecheck-long.txt
save
