#!/usr/bin/env bash
# run 102: dev/cuda/kfv_mma version 11 (version 4 with 32-token tiles, cp.async into two
# buffers) beside 4 and 6 (16-token tiles by cp.async, three buffers); sanitizers and ncu
# stall reasons of version 11 against 4; its SASS
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r102; mkdir -p $R
BUILD_TARGETS=dev_kfv_mma PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run102.tgz .); }
timeout 60 $K --rounds 1 --lengths 1,13,33,4097,8193 4 11 > $R/small.txt 2>&1; echo "small rc=$?"; grep -E "nmse|INVALID" $R/small.txt | sed 's/against.*//' | tr '\n' ';'; echo
timeout 60 $K --rounds 1 --lengths 8193 --pos0 1000000 4 11 > $R/pos.txt 2>&1; echo "pos rc=$?"; grep -E "nmse|INVALID" $R/pos.txt | sed 's/against.*//' | tr '\n' ';'; echo
save
timeout 150 $K --rounds 10 4 6 11 > $R/bf16.txt 2>&1; echo "bf16 rc=$?"; grep -vE "nmse" $R/bf16.txt
save
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $K 11 --rounds 1 --lengths 13,4097 > $R/memcheck-11.txt 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck-11.txt
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $K 11 --rounds 1 --lengths 4097 > $R/racecheck-11.txt 2>&1; echo "racecheck rc=$?"; tail -1 $R/racecheck-11.txt
save
for v in 11 4; do
  timeout 120 ncu --kernel-name regex:first_pass --launch-skip 4 --launch-count 1 --section SpeedOfLight --section SchedulerStats --section Occupancy --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum $K $v --rounds 1 --lengths 131072 > $R/ncu-$v.txt 2>&1; echo "ncu $v rc=$?"
  grep -E "Duration|DRAM Throughput|Issued Warp|inst_executed.sum|Achieved Active Warps|stalled" $R/ncu-$v.txt | awk '$NF+0 > 0.2 || /Duration|DRAM|Issued|inst_exec|Achieved/' | head -18
  save
done
cuobjdump -sass -fun kfv_dmma32_first_pass $K > $R/sass-11.txt 2>&1; echo "sass rc=$? $(wc -l < $R/sass-11.txt) lines"
save
