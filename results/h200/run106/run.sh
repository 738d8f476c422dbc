#!/usr/bin/env bash
# run 106: dev/cuda/kfv_mma versions 16 and 17 (version 15 with its descriptors made once a
# tile and its copies at constant offsets, without the L2 hint; three and two stages) on the
# view K = V, and versions 18 and 19 (version 17 on the K-from-V view, the rotating dims on the
# F64 tensor cores; one and two warpgroups a block), each checked against the double reference
# in its own process, then the ones that pass timed together beside 15 and 4; memcheck and ncu.
# first-try/ and second-try/: two calls whose copies stopped on an illegal instruction
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r106; mkdir -p $R
BUILD_TARGETS=dev_kfv_mma PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run106.tgz .); }
alias_ok=""; kfv_ok=""
for v in 17 16 19 18; do
  timeout 40 $K --rounds 1 --partitions 33 --lengths 1,13,64,65,4097,8193 $v > $R/small-$v.txt 2>&1; rc=$?

  if [ $v -ge 18 ]; then
    timeout 40 $K --rounds 1 --partitions 33 --lengths 8193 --pos0 1000000 $v >> $R/small-$v.txt 2>&1 || rc=1
  fi
  echo "small $v rc=$rc"; grep -E "nmse|INVALID|ERROR" $R/small-$v.txt | sed 's/against.*//' | tr '\n' ';'; echo
  if [ $rc -eq 0 ] && ! grep -q INVALID $R/small-$v.txt; then
    if [ $v -ge 18 ]; then kfv_ok="$kfv_ok $v"; else alias_ok="$alias_ok $v"; fi
  fi
  save
done
timeout 90 $K --rounds 10 --partitions 33 15 $alias_ok > $R/bf16-alias-p33.txt 2>&1; echo "alias P 33 ($alias_ok) rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-alias-p33.txt
save
if [ -n "$kfv_ok" ]; then
  timeout 90 $K --rounds 10 --partitions 33 $kfv_ok > $R/bf16-kfv-p33.txt 2>&1; echo "kfv P 33 ($kfv_ok) rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-kfv-p33.txt
fi
timeout 60 $K --rounds 10 --partitions 64 4 > $R/bf16-kfv-p64.txt 2>&1; echo "v4 P 64 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-kfv-p64.txt
save
for v in $alias_ok $kfv_ok; do
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $K $v --rounds 1 --partitions 33 --lengths 13,4097 > $R/memcheck-$v.txt 2>&1; echo "memcheck $v rc=$?"; tail -1 $R/memcheck-$v.txt
done
save
for v in $kfv_ok; do
  timeout 90 ncu --kernel-name regex:first_pass --launch-skip 4 --launch-count 1 --section SpeedOfLight --section SchedulerStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum $K $v --rounds 1 --partitions 33 --lengths 131072 > $R/ncu-$v.txt 2>&1; echo "ncu $v rc=$?"
  grep -E "Duration|DRAM Throughput|Issued Warp|inst_executed.sum|stalled" $R/ncu-$v.txt | awk '$NF+0 > 0.15 || /Duration|DRAM|Issued|inst_exec/' | head -14
  save
done
