#!/usr/bin/env bash
# run 130: is racecheck's report on dev/cuda/kfv_mma versions 30 and 32 (pairs of warps at an
# mbarrier each, run 129) about the pattern or the tool? A minimal kernel of the same pattern
# in five variants (mbarrier_racecheck.cu), racecheck and synccheck of each; versions 30 and 32
# under racecheck with the full report, and under synccheck.
set -u -o pipefail
R=/tmp/r130; mkdir -p $R
save() { (cd $R && tar czf $OUT/run130.tgz .); }
nvcc -arch=sm_90 -lineinfo -o $R/mbr results/h200/run130/mbarrier_racecheck.cu > $R/nvcc.txt 2>&1 || { echo nvcc failed; cat $R/nvcc.txt; exit 1; }
compute-sanitizer --version | tail -1
for V in 0 1 2 3 4; do
  timeout 60 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 $R/mbr $V > $R/mbr-racecheck-$V.txt 2>&1; echo "minimal $V racecheck rc=$?"; grep -E "SUMMARY" $R/mbr-racecheck-$V.txt
  timeout 60 compute-sanitizer --tool synccheck --error-exitcode 9 $R/mbr $V > $R/mbr-synccheck-$V.txt 2>&1; echo "minimal $V synccheck rc=$?"; tail -1 $R/mbr-synccheck-$V.txt
done
save
BUILD_TARGETS="dev_kfv_mma" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; echo "build rc=$?"; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
timeout 90 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 4 --error-exitcode 9 $K --f32 30 --rounds 1 --partitions 33 --lengths 13 > $R/racecheck-30-all.txt 2>&1; echo "racecheck 30 rc=$?"; tail -1 $R/racecheck-30-all.txt
for V in 27 29 30; do
  timeout 60 compute-sanitizer --tool synccheck --error-exitcode 9 $K --f32 $V --rounds 1 --partitions 33 --lengths 13,4097 > $R/synccheck-$V.txt 2>&1; echo "synccheck $V rc=$?"; tail -1 $R/synccheck-$V.txt
done
timeout 60 compute-sanitizer --tool synccheck --error-exitcode 9 $K 32 --rounds 1 --partitions 64 --lengths 13,4097 > $R/synccheck-32.txt 2>&1; echo "synccheck 32 rc=$?"; tail -1 $R/synccheck-32.txt
save
