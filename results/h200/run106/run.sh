#!/usr/bin/env bash
# run 106: dev/cuda/kfv_mma versions 16 and 17 (version 15 with its descriptors and copies made
# once a tile; three and two stages) against the double reference and beside 15 and 10
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r106; mkdir -p $R
BUILD_TARGETS=dev_kfv_mma PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run106.tgz .); }
timeout 60 $K --rounds 1 --partitions 33 --lengths 1,13,64,65,4097,8193 16 17 > $R/small.txt 2>&1; echo "small rc=$?"; grep -E "nmse|INVALID" $R/small.txt | sed 's/against.*//' | tr '\n' ';'; echo
save
timeout 150 $K --rounds 10 --partitions 33 15 17 16 > $R/bf16-p33.txt 2>&1; echo "P 33 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-p33.txt
save
# version 10 at 64 partitions: first-try/bf16-p64.txt (this tree but for the copies' source size)
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $K 16 --rounds 1 --partitions 33 --lengths 13,4097 > $R/memcheck-16.txt 2>&1; echo "memcheck 16 rc=$?"; tail -1 $R/memcheck-16.txt
timeout 120 ncu --kernel-name regex:first_pass --launch-skip 4 --launch-count 1 --section SpeedOfLight --section SchedulerStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum $K 16 --rounds 1 --partitions 33 --lengths 131072 > $R/ncu-16.txt 2>&1; echo "ncu 16 rc=$?"
grep -E "Duration|DRAM Throughput|Issued Warp|inst_executed.sum|stalled" $R/ncu-16.txt | awk '$NF+0 > 0.15 || /Duration|DRAM|Issued|inst_exec/' | head -14
save
