#!/usr/bin/env bash
# run 140: the library's long BF16 K-from-V pass without its L2 prefetch (dev version 36's
# change) and the long F32 pass from 20,480 rows: the whole test suite and gem resources; the
# BF16 pass through gem_decode (kfv_mma version 1) beside versions 23 and 36; the F32 boundary
# (version 1 at 16K, 20K, 24K against version 34); the four sanitizers over both long passes;
# gem bench --k-from-v for F32 and BF16.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r140; mkdir -p $R
save() { (cd $R && tar czf $OUT/run140.tgz .); }
BUDGET_S=200 PHASES="build resources" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1
echo "runner rc=$?"; grep -E "^== |FAIL|verdict" $R/runner.txt | tail -4
save
B=build-h200; K=$B/dev/kfv_mma
(cd $B && GEM_QUIET=1 timeout 120 ctest --output-on-failure -j8) > $R/ctest.txt 2>&1; echo "ctest rc=$?"; tail -3 $R/ctest.txt
grep -E "FAIL|failed" $R/ctest.txt | head -5
save
timeout 100 $K --rounds 10 --partitions 64 --lengths 32768,65536,131072 1 23 36 > $R/bf16-lib-23-36.txt 2>&1; echo "bf16 lib rc=$?"; grep -vE "^live|^K rebuilt" $R/bf16-lib-23-36.txt | sed 's/against.*//'
timeout 80 $K --f32 --rounds 10 --partitions 64 --lengths 16384,20480,24576 1 34 > $R/f32-cross.txt 2>&1; echo "f32 cross rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/f32-cross.txt
save
for T in memcheck racecheck synccheck initcheck; do
  timeout 100 compute-sanitizer --tool $T --error-exitcode 9 --kernel-name kns=k_from_v_bf16_long $K 1 --rounds 1 --lengths 32768 > $R/$T-bf16-long.txt 2>&1; echo "$T bf16 rc=$?"; tail -1 $R/$T-bf16-long.txt
  timeout 100 compute-sanitizer --tool $T --error-exitcode 9 --kernel-name kns=k_from_v_f32_long $K --f32 1 --rounds 1 --lengths 20480 > $R/$T-f32-long.txt 2>&1; echo "$T f32 rc=$?"; tail -1 $R/$T-f32-long.txt
done
save
for DT in f32 bf16; do
  timeout 60 $B/gem bench --backend cuda --a fused --b fused --k-from-v --kv-dtype $DT --lengths 32768,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10 --out $R/bench-kfv-$DT.json > $R/bench-kfv-$DT.txt 2>&1; echo "bench $DT rc=$?"; grep -E "^[0-9]|A/B" $R/bench-kfv-$DT.txt
done
save
