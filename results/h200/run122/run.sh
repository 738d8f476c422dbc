#!/usr/bin/env bash
# run 122: dev/cuda/kfv_mma versions 24 and 25 (an F32 V cache on warps that own whole tiles,
# every product three TF32 MMAs): checked against the double reference at small lengths, two
# partition counts and from position 10^6; timed beside version 1 (the library's CUDA-core
# K-from-V pass) and version 2 (the library's stored K+V pass) at 8K, 64K, 128K (A B B A, one
# process); memcheck and racecheck; ncu of version 24 at 128K.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r122; mkdir -p $R
BUILD_TARGETS="dev_kfv_mma" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run122.tgz .); }
ok=1
for P in 33 7; do
  timeout 60 $K --f32 --rounds 1 --partitions $P --lengths 1,13,64,65,4097,8193 24 25 > $R/small-p$P.txt 2>&1; rc=$?
  echo "small P $P rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-p$P.txt | sed 's/against.*//' | tr '\n' ';'; echo
  if [ $rc -ne 0 ] || grep -q INVALID $R/small-p$P.txt; then ok=0; fi
done
timeout 60 $K --f32 --rounds 1 --partitions 33 --lengths 13,8193 --pos0 1000000 24 25 > $R/small-pos.txt 2>&1; rc=$?
echo "pos0 1e6 rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-pos.txt | sed 's/against.*//' | tr '\n' ';'; echo
if [ $rc -ne 0 ] || grep -q INVALID $R/small-pos.txt; then ok=0; fi
save
if [ $ok -eq 1 ]; then
  timeout 150 $K --f32 --rounds 10 --partitions 33 1 2 24 25 > $R/f32-p33.txt 2>&1; echo "P 33 rc=$?"; grep -vE "^live|^K rebuilt" $R/f32-p33.txt | sed 's/against.*//'
  save
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $K --f32 24 25 --rounds 1 --partitions 33 --lengths 13,4097 > $R/memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck.txt
  timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $K --f32 24 --rounds 1 --partitions 33 --lengths 13,4097 > $R/racecheck.txt 2>&1; echo "racecheck rc=$?"; tail -1 $R/racecheck.txt
  save
  timeout 150 ncu --kernel-name kfv_tf32_first_pass --launch-skip 1 --launch-count 1 --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis $K --f32 --rounds 1 --partitions 33 --lengths 131072 24 > $R/ncu-24.txt 2>&1; echo "ncu rc=$?"
  grep -E "Duration|DRAM Throughput|Issued Ipc|Executed Ipc|No Eligible|Warp Cycles Per Issued|Registers|Stall|Bank" $R/ncu-24.txt | head -30
  save
fi
