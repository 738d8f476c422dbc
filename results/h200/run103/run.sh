#!/usr/bin/env bash
# run 103: dev/cuda/kfv_mma diagnostics 12 (version 4 with no DRAM reads) and 13 (version 4's
# loads, stores and barriers alone) beside version 4, then ncu of each at 128K
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r103; mkdir -p $R
BUILD_TARGETS=dev_kfv_mma PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run103.tgz .); }
timeout 150 $K --rounds 10 4 12 13 > $R/bf16.txt 2>&1; echo "bf16 rc=$?"; grep -vE "nmse" $R/bf16.txt
save
for v in 12 13; do
  timeout 120 ncu --kernel-name regex:first_pass --launch-skip 4 --launch-count 1 --section SpeedOfLight --section SchedulerStats --section Occupancy --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum $K $v --rounds 1 --lengths 131072 > $R/ncu-$v.txt 2>&1; echo "ncu $v rc=$?"
  grep -E "Duration|DRAM Throughput|Issued Warp|inst_executed.sum|Achieved Active Warps|stalled" $R/ncu-$v.txt | awk '$NF+0 > 0.2 || /Duration|DRAM|Issued|inst_exec|Achieved/' | head -18
  save
done
