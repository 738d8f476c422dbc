#!/usr/bin/env bash
# run 139: the library's long F32 K-from-V pass without its L2 prefetch of the next tile (dev
# version 34's form): the whole test suite and gem resources; the pass through gem_decode
# (kfv_mma version 1) beside versions 30 and 34 at 64 partitions and 34 at 33; the crossover with
# the CUDA-core pass below 24,576 rows; the four sanitizers over the pass; gem bench --k-from-v.
# dev version 36 (the BF16 design, version 23, without its prefetch): checked, then timed beside
# 23 and the library.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r139; mkdir -p $R
save() { (cd $R && tar czf $OUT/run139.tgz .); }
BUDGET_S=200 PHASES="build resources" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1
echo "runner rc=$?"; grep -E "^== |FAIL|verdict" $R/runner.txt | tail -4
save
B=build-h200; K=$B/dev/kfv_mma
(cd $B && GEM_QUIET=1 timeout 120 ctest --output-on-failure -j8) > $R/ctest.txt 2>&1; echo "ctest rc=$?"; tail -3 $R/ctest.txt
grep -E "FAIL|failed" $R/ctest.txt | head -5
save
timeout 120 $K --f32 --rounds 10 --partitions 64 --lengths 32768,65536,131072 1 30 34 > $R/f32-lib-30-34.txt 2>&1; echo "f32 lib rc=$?"; grep -vE "^live|^K rebuilt" $R/f32-lib-30-34.txt | sed 's/against.*//'
timeout 80 $K --f32 --rounds 10 --partitions 33 --lengths 65536,131072 1 34 > $R/f32-p33.txt 2>&1; echo "f32 P33 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/f32-p33.txt
timeout 80 $K --f32 --rounds 10 --partitions 64 --lengths 12288,16384,20480,24576 1 34 > $R/f32-cross.txt 2>&1; echo "cross rc=$?"; grep -vE "^live|^K rebuilt|nmse|bits" $R/f32-cross.txt
save
okb=1
for P in 33 7; do
  timeout 60 $K --rounds 1 --partitions $P --lengths 1,13,64,65,4097,8193 36 > $R/small-bf16-p$P.txt 2>&1; rc=$?
  echo "bf16 small P $P rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-bf16-p$P.txt | sed 's/against.*//' | tr '\n' ';'; echo
  if [ $rc -ne 0 ] || grep -q INVALID $R/small-bf16-p$P.txt; then okb=0; fi
done
if [ $okb -eq 1 ]; then
  timeout 100 $K --rounds 10 --partitions 33 --lengths 65536,131072 1 23 36 > $R/bf16-23-36.txt 2>&1; echo "bf16 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-23-36.txt
fi
save
for T in memcheck racecheck synccheck initcheck; do
  timeout 100 compute-sanitizer --tool $T --error-exitcode 9 --kernel-name kns=k_from_v_f32_long $K --f32 1 --rounds 1 --lengths 32768 > $R/$T-f32-long.txt 2>&1; echo "$T rc=$?"; tail -1 $R/$T-f32-long.txt
done
save
timeout 60 $B/gem bench --backend cuda --a fused --b fused --k-from-v --kv-dtype f32 --lengths 32768,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10 --out $R/bench-kfv-f32.json > $R/bench-kfv-f32.txt 2>&1; echo "bench rc=$?"; tail -6 $R/bench-kfv-f32.txt
save
