#!/usr/bin/env bash
# run 118: the library with the long BF16 K-from-V first pass (dev/cuda/kfv_mma version 23's
# design, four warps a block, from 32,768 rows on): the whole test suite (its decode matrix
# holds BF16 K-from-V at 32,768 and 40,001 rows), gem resources (gem.resources.v6) and its
# analysis, the library's pass through gem_decode (kfv_mma version 1) against version 4 (the
# staged pass) in one process, memcheck and racecheck of the new kernel, gem bench --k-from-v
# for BF16, then the decode matrix's long lengths.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r118; mkdir -p $R
save() { (cd $R && tar czf $OUT/run118.tgz .); }
BUDGET_S=200 PHASES="build resources" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1
echo "runner rc=$?"; grep -E "^== |FAIL|verdict|gate" $R/runner.txt | tail -8
save
B=build-h200
(cd $B && GEM_QUIET=1 timeout 200 ctest --output-on-failure -j4) > $R/ctest.txt 2>&1; echo "ctest rc=$?"; tail -3 $R/ctest.txt
grep -E "FAIL|failed" $R/ctest.txt | head -5
save
K=$B/dev/kfv_mma
timeout 90 $K --rounds 10 --partitions 64 --lengths 8192,32768,65536,131072 1 4 > $R/kfv-lib-vs-v4.txt 2>&1; echo "lib vs v4 rc=$?"; grep -vE "^live|^K rebuilt" $R/kfv-lib-vs-v4.txt
save
timeout 80 compute-sanitizer --tool memcheck --error-exitcode 9 --kernel-name kns=k_from_v_bf16_long $K 1 --rounds 1 --lengths 32768,40001 > $R/memcheck-long.txt 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck-long.txt
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 --kernel-name kns=k_from_v_bf16_long $K 1 --rounds 1 --lengths 32768 > $R/racecheck-long.txt 2>&1; echo "racecheck rc=$?"; tail -1 $R/racecheck-long.txt
save
timeout 60 $B/gem bench --backend cuda --a fused --b fused --k-from-v --kv-dtype bf16 --lengths 8192,32768,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10 --out $R/bench-kfv-bf16.json > $R/bench-kfv-bf16.txt 2>&1; echo "bench rc=$?"; tail -8 $R/bench-kfv-bf16.txt
save
timeout 150 $B/test_decode --long > $R/test-decode-long.txt 2>&1; echo "long rc=$?"; tail -2 $R/test-decode-long.txt
save
