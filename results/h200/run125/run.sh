#!/usr/bin/env bash
# run 125: dev/cuda/kfv_mma version 29 (version 28 with the pairs meeting at the block's barrier):
# checked against the double reference at small lengths, two partition counts and from position
# 10^6; racecheck and memcheck of 29; timed beside versions 1, 26, 28 at 64K and 128K, then 1,
# 26 and 29 from 8K to 48K for the crossover (A B B A, one process each).
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r125; mkdir -p $R
BUILD_TARGETS="dev_kfv_mma" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run125.tgz .); }
ok=1
for P in 33 7; do
  timeout 60 $K --f32 --rounds 1 --partitions $P --lengths 1,13,64,65,4097,8193 29 > $R/small-p$P.txt 2>&1; rc=$?
  echo "small P $P rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-p$P.txt | sed 's/against.*//' | tr '\n' ';'; echo
  if [ $rc -ne 0 ] || grep -q INVALID $R/small-p$P.txt; then ok=0; fi
done
timeout 60 $K --f32 --rounds 1 --partitions 33 --lengths 13,8193 --pos0 1000000 29 > $R/small-pos.txt 2>&1; rc=$?
echo "pos0 1e6 rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-pos.txt | sed 's/against.*//' | tr '\n' ';'; echo
if [ $rc -ne 0 ] || grep -q INVALID $R/small-pos.txt; then ok=0; fi
save
if [ $ok -eq 1 ]; then
  for V in 29; do
    timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $K --f32 $V --rounds 1 --partitions 33 --lengths 13,4097 > $R/racecheck-$V.txt 2>&1; echo "racecheck $V rc=$?"; tail -1 $R/racecheck-$V.txt
  done
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $K --f32 29 --rounds 1 --partitions 33 --lengths 13,4097 > $R/memcheck-29.txt 2>&1; echo "memcheck 29 rc=$?"; tail -1 $R/memcheck-29.txt
  save
  timeout 150 $K --f32 --rounds 10 --partitions 33 --lengths 65536,131072 1 26 28 29 > $R/f32-p33.txt 2>&1; echo "P 33 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/f32-p33.txt
  save
  timeout 150 $K --f32 --rounds 10 --partitions 33 --lengths 8192,16384,24576,32768,49152 1 26 29 > $R/cross.txt 2>&1; echo "cross rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/cross.txt
  save
fi
