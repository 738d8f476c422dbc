#!/usr/bin/env bash
# run 95: dev/cuda/kfv_mma versions 6 and 7 (version 4 with cp.async rings of 3 and 4 tiles)
# beside 4 and the library's passes; ncu of versions 4, 7 and 5 at 128K
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r95; mkdir -p $R
BUILD_TARGETS=dev_kfv_mma PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run95.tgz .); }
timeout 60 $K --rounds 1 --lengths 1,13,4097,8193 4 6 7 > $R/small.txt 2>&1; echo "small rc=$?"; grep -E "nmse|INVALID" $R/small.txt | sed 's/against.*//' | tr '\n' ';'; echo
timeout 60 $K --rounds 1 --lengths 8193 --pos0 1000000 4 6 7 > $R/pos.txt 2>&1; echo "pos rc=$?"; grep -E "nmse|INVALID" $R/pos.txt | sed 's/against.*//' | tr '\n' ';'; echo
save
timeout 150 $K --rounds 10 2 4 6 7 > $R/bf16.txt 2>&1; echo "bf16 rc=$?"; grep -vE "nmse" $R/bf16.txt
save
for v in 6 7; do
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $K $v --rounds 1 --lengths 13,4097 > $R/memcheck-$v.txt 2>&1; echo "memcheck $v rc=$?"; tail -1 $R/memcheck-$v.txt
  timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $K $v --rounds 1 --lengths 4097 > $R/racecheck-$v.txt 2>&1; echo "racecheck $v rc=$?"; tail -1 $R/racecheck-$v.txt
done
save
for v in 7 4 "--f32 5"; do
  n=${v// /}
  timeout 120 ncu --kernel-name regex:first_pass --launch-skip 4 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section Occupancy $K $v --rounds 1 --lengths 131072 > $R/ncu-$n.txt 2>&1; echo "ncu $v rc=$?"
  grep -E "Duration|DRAM Throughput|Compute \(SM\) Throughput|Issued Ipc|No Eligible|Warp Cycles Per Issued|Stall|Achieved Occupancy|Registers|pipe" $R/ncu-$n.txt | head -24
  save
done
