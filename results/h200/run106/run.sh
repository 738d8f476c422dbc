#!/usr/bin/env bash
# run 106: dev/cuda/kfv_mma versions 16 and 17 (version 15 with its descriptors made once a
# tile and its copies at constant offsets, without the L2 hint; three and two stages) on the
# view K = V, and versions 18 and 19 (version 17 on the K-from-V view, the rotating dims on the
# F64 tensor cores; one and two warpgroups a block), against the double reference and beside
# 15 and 4. first-try/ and
# second-try/: two calls whose copies stopped on an illegal instruction (see COMMAND.md)
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r106; mkdir -p $R
BUILD_TARGETS=dev_kfv_mma PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run106.tgz .); }
timeout 40 $K --rounds 1 --partitions 33 --lengths 1,13,64,65,4097,8193 17 16 > $R/small-alias.txt 2>&1; echo "small 16 17 rc=$?"; grep -E "nmse|INVALID" $R/small-alias.txt | sed 's/against.*//' | tr '\n' ';'; echo
timeout 40 $K --rounds 1 --partitions 33 --lengths 1,13,64,65,4097,8193 18 19 > $R/small-kfv.txt 2>&1; echo "small 18 19 rc=$?"; grep -E "nmse|INVALID" $R/small-kfv.txt | sed 's/against.*//' | tr '\n' ';'; echo
timeout 40 $K --rounds 1 --partitions 33 --lengths 8193 --pos0 1000000 18 19 > $R/pos-kfv.txt 2>&1; echo "pos 18 19 rc=$?"; grep -E "nmse|INVALID" $R/pos-kfv.txt | sed 's/against.*//' | tr '\n' ';'; echo
save
timeout 90 $K --rounds 10 --partitions 33 15 17 16 > $R/bf16-alias-p33.txt 2>&1; echo "alias P 33 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-alias-p33.txt
save
timeout 90 $K --rounds 10 --partitions 33 18 19 > $R/bf16-kfv-p33.txt 2>&1; echo "kfv P 33 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-kfv-p33.txt
timeout 60 $K --rounds 10 --partitions 64 4 > $R/bf16-kfv-p64.txt 2>&1; echo "v4 P 64 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-kfv-p64.txt
save
for v in 16 18 19; do
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $K $v --rounds 1 --partitions 33 --lengths 13,4097 > $R/memcheck-$v.txt 2>&1; echo "memcheck $v rc=$?"; tail -1 $R/memcheck-$v.txt
done
for v in 19 18; do
  timeout 90 ncu --kernel-name regex:first_pass --launch-skip 4 --launch-count 1 --section SpeedOfLight --section SchedulerStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum $K $v --rounds 1 --partitions 33 --lengths 131072 > $R/ncu-$v.txt 2>&1; echo "ncu $v rc=$?"
  grep -E "Duration|DRAM Throughput|Issued Warp|inst_executed.sum|stalled" $R/ncu-$v.txt | awk '$NF+0 > 0.15 || /Duration|DRAM|Issued|inst_exec/' | head -14
  save
done
