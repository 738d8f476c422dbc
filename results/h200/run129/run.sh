#!/usr/bin/env bash
# run 129: the whole test suite (test_model_cuda's route refusals run on a GPU for the first
# time); dev/cuda/kfv_mma versions 30 (F32 pairs, an mbarrier a pair), 31 and 32 (BF16 on pairs
# of warps, at the block's barrier / an mbarrier a pair) checked against the double reference at
# small lengths, racecheck, then timed beside their parents (A B B A, one process each).
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r129; mkdir -p $R
save() { (cd $R && tar czf $OUT/run129.tgz .); }
PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; echo "runner rc=$?"; tail -1 $R/runner.txt
rm -f $R/receipts.tar.gz
B=build-h200
(cd $B && GEM_QUIET=1 timeout 120 ctest --output-on-failure -j8) > $R/ctest.txt 2>&1; echo "ctest rc=$?"; tail -3 $R/ctest.txt
grep -E "FAIL|failed" $R/ctest.txt | head -5
save
K=$B/dev/kfv_mma
okf=1; okb=1
for P in 33 7; do
  timeout 60 $K --f32 --rounds 1 --partitions $P --lengths 1,13,64,65,4097,8193 30 > $R/small-f32-p$P.txt 2>&1; rc=$?
  echo "f32 small P $P rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-f32-p$P.txt | sed 's/against.*//' | tr '\n' ';'; echo
  if [ $rc -ne 0 ] || grep -q INVALID $R/small-f32-p$P.txt; then okf=0; fi
  timeout 60 $K --rounds 1 --partitions $P --lengths 1,13,64,65,4097,8193 31 32 > $R/small-bf16-p$P.txt 2>&1; rc=$?
  echo "bf16 small P $P rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-bf16-p$P.txt | sed 's/against.*//' | tr '\n' ';'; echo
  if [ $rc -ne 0 ] || grep -q INVALID $R/small-bf16-p$P.txt; then okb=0; fi
done
timeout 60 $K --rounds 1 --partitions 64 --lengths 13,8193 --pos0 1000000 31 32 > $R/small-bf16-pos.txt 2>&1; rc=$?
echo "bf16 pos0 1e6 rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-bf16-pos.txt | sed 's/against.*//' | tr '\n' ';'; echo
if [ $rc -ne 0 ] || grep -q INVALID $R/small-bf16-pos.txt; then okb=0; fi
save
if [ $okb -eq 1 ]; then
  timeout 150 $K --rounds 10 --partitions 64 --lengths 8192,65536,131072 23 31 32 > $R/bf16-p64.txt 2>&1; echo "bf16 P 64 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-p64.txt
  save
fi
if [ $okf -eq 1 ]; then
  timeout 120 $K --f32 --rounds 10 --partitions 33 --lengths 65536,131072 1 29 30 > $R/f32-p33.txt 2>&1; echo "f32 P 33 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/f32-p33.txt
  save
fi
for V in 31 32; do
  [ $okb -eq 1 ] || break
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $K $V --rounds 1 --partitions 64 --lengths 13,4097 > $R/racecheck-$V.txt 2>&1; echo "racecheck $V rc=$?"; tail -1 $R/racecheck-$V.txt
done
if [ $okf -eq 1 ]; then
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $K --f32 30 --rounds 1 --partitions 33 --lengths 13,4097 > $R/racecheck-30.txt 2>&1; echo "racecheck 30 rc=$?"; tail -1 $R/racecheck-30.txt
fi
save
