#!/usr/bin/env bash
# run 133: does racecheck report version 30 only in blocks whose mbarriers are never arrived
# at? Run 130's minimal kernel with pairs that run no iteration (variants 5, 6: without and
# with mbarrier.inval); version 30 under racecheck at 13 rows (blocks without tiles) and at
# 4,097 (every pair has tiles); version 33 (30 with mbarrier.inval at the end) checked,
# under racecheck, synccheck and memcheck, then timed beside 29 and 30 at 33 and 64 partitions.
set -u -o pipefail
R=/tmp/r133; mkdir -p $R
save() { (cd $R && tar czf $OUT/run133.tgz .); }
nvcc -arch=sm_90 -lineinfo -o $R/mbr results/h200/run133/mbarrier_racecheck.cu > $R/nvcc.txt 2>&1 || { echo nvcc failed; cat $R/nvcc.txt; exit 1; }
for V in 0 5 6; do
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $R/mbr $V > $R/mbr-racecheck-$V.txt 2>&1; echo "minimal $V racecheck rc=$?"; grep -E "SUMMARY" $R/mbr-racecheck-$V.txt
done
save
BUILD_TARGETS="dev_kfv_mma" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; echo "build rc=$?"; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
for L in 13 4097; do
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $K --f32 30 --rounds 1 --partitions 33 --lengths $L > $R/racecheck-30-$L.txt 2>&1; echo "racecheck 30 at $L rc=$?"; tail -1 $R/racecheck-30-$L.txt
done
ok=1
for P in 33 7; do
  timeout 60 $K --f32 --rounds 1 --partitions $P --lengths 1,13,64,65,4097,8193 30 33 > $R/small-p$P.txt 2>&1; rc=$?
  echo "small P $P rc=$rc"; grep -E "nmse|INVALID|bits" $R/small-p$P.txt | sed 's/against.*//' | tr '\n' ';'; echo
  if [ $rc -ne 0 ] || grep -q INVALID $R/small-p$P.txt; then ok=0; fi
done
save
if [ $ok -eq 1 ]; then
  for T in racecheck synccheck memcheck; do
    timeout 60 compute-sanitizer --tool $T --error-exitcode 9 $K --f32 33 --rounds 1 --partitions 33 --lengths 13,4097 > $R/$T-33.txt 2>&1; echo "$T 33 rc=$?"; tail -1 $R/$T-33.txt
  done
  save
  for P in 33 64; do
    timeout 100 $K --f32 --rounds 10 --partitions $P --lengths 65536,131072 29 30 33 > $R/time-p$P.txt 2>&1; echo "time P $P rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/time-p$P.txt
    save
  done
fi
