#!/usr/bin/env bash
# run 105: dev/cuda/kfv_mma version 15 (the view K = V on warpgroup MMAs, one warpgroup
# a block, 64-token tiles) against the double reference and beside versions 10 and 4 (the
# second try: first-try/ holds the first, whose other reading of the descriptor crashed)
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r105; mkdir -p $R
BUILD_TARGETS=dev_kfv_mma PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run105.tgz .); }
timeout 60 $K --rounds 1 --partitions 33 --lengths 1,13,64,65,4097,8193 10 15 > $R/small.txt 2>&1; echo "small rc=$?"; grep -E "nmse|INVALID" $R/small.txt | sed 's/against.*//' | tr '\n' ';'; echo
save
for P in 33 66; do
  timeout 150 $K --rounds 10 --partitions $P 15 > $R/bf16-p$P.txt 2>&1; echo "P $P rc=$?"; grep -vE "^live|^K rebuilt" $R/bf16-p$P.txt | grep -v "nmse" ; grep nmse $R/bf16-p$P.txt | head -6 | sed 's/against.*//' | tr '\n' ';'; echo
  save
done
timeout 150 $K --rounds 10 --partitions 64 10 4 > $R/bf16-p64.txt 2>&1; echo "P 64 rc=$?"; grep -vE "nmse|^live|^K rebuilt" $R/bf16-p64.txt
save
for v in 15; do
  if grep -qE "131072 +v$v +[0-9]" $R/bf16-p33.txt; then
    timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $K $v --rounds 1 --partitions 33 --lengths 13,4097 > $R/memcheck-$v.txt 2>&1; echo "memcheck $v rc=$?"; tail -1 $R/memcheck-$v.txt
    timeout 120 ncu --kernel-name regex:first_pass --launch-skip 4 --launch-count 1 --section SpeedOfLight --section SchedulerStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum $K $v --rounds 1 --partitions 33 --lengths 131072 > $R/ncu-$v.txt 2>&1; echo "ncu $v rc=$?"
    grep -E "Duration|DRAM Throughput|Issued Warp|inst_executed.sum|stalled" $R/ncu-$v.txt | awk '$NF+0 > 0.2 || /Duration|DRAM|Issued|inst_exec/' | head -14
    save
    break
  fi
done
