#!/usr/bin/env bash
# run 117: dev/cuda/kfv_mma version 23 (version 22 with its w cos, w sin table built by each
# block in shared memory): checked against the double reference at small lengths, two partition
# counts and from position 10^6; timed beside version 22 (A B B A, one process), then version 23
# and version 4 (at its 64 partitions, another process) at 8K-128K for the crossover; memcheck,
# racecheck.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r117; mkdir -p $R
BUILD_TARGETS="dev_kfv_mma" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run117.tgz .); }
ok=1
for P in 33 7; do
  timeout 40 $K --rounds 1 --partitions $P --lengths 1,13,64,65,4097,8193 23 > $R/small-23-p$P.txt 2>&1; rc=$?
  echo "small 23 P $P rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-23-p$P.txt | sed 's/against.*//' | tr '\n' ';'; echo
  if [ $rc -ne 0 ] || grep -q INVALID $R/small-23-p$P.txt; then ok=0; fi
done
timeout 40 $K --rounds 1 --partitions 33 --lengths 13,8193 --pos0 1000000 23 > $R/small-23-pos.txt 2>&1; rc=$?
echo "pos0 1e6 rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-23-pos.txt | sed 's/against.*//' | tr '\n' ';'; echo
if [ $rc -ne 0 ] || grep -q INVALID $R/small-23-pos.txt; then ok=0; fi
save
if [ $ok -eq 1 ]; then
  timeout 100 $K --rounds 10 --partitions 33 22 23 > $R/bf16-p33.txt 2>&1; echo "P 33 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-p33.txt
  save
  L=8192,16384,24576,32768,49152
  timeout 100 $K --rounds 10 --partitions 33 --lengths $L 23 > $R/cross-23.txt 2>&1; echo "cross 23 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/cross-23.txt
  timeout 100 $K --rounds 10 --partitions 64 --lengths $L,65536,131072 4 > $R/cross-4.txt 2>&1; echo "cross 4 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/cross-4.txt
  save
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $K 23 --rounds 1 --partitions 33 --lengths 13,4097 > $R/memcheck-23.txt 2>&1; echo "memcheck 23 rc=$?"; tail -1 $R/memcheck-23.txt
  timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $K 23 --rounds 1 --partitions 33 --lengths 13,4097 > $R/racecheck-23.txt 2>&1; echo "racecheck 23 rc=$?"; tail -1 $R/racecheck-23.txt
  save
fi
