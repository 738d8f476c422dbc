#!/usr/bin/env bash
# run 116: dev/cuda/kfv_mma version 22 (version 21 with eight warps an SM, one stage each, the
# next tile's rows asked of the L2): checked against the double reference at small lengths, two
# partition counts and from position 10^6, timed beside version 21 in one process (A B B A) and
# version 4 at its 64 partitions, memcheck, racecheck, ncu at 128K.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r116; mkdir -p $R
BUILD_TARGETS="dev_kfv_mma" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run116.tgz .); }
ok=1
for P in 33 7; do
  timeout 40 $K --rounds 1 --partitions $P --lengths 1,13,64,65,4097,8193 22 > $R/small-22-p$P.txt 2>&1; rc=$?
  echo "small 22 P $P rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-22-p$P.txt | sed 's/against.*//' | tr '\n' ';'; echo
  if [ $rc -ne 0 ] || grep -q INVALID $R/small-22-p$P.txt; then ok=0; fi
done
timeout 40 $K --rounds 1 --partitions 33 --lengths 13,8193 --pos0 1000000 22 > $R/small-22-pos.txt 2>&1; rc=$?
echo "pos0 1e6 rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-22-pos.txt | sed 's/against.*//' | tr '\n' ';'; echo
if [ $rc -ne 0 ] || grep -q INVALID $R/small-22-pos.txt; then ok=0; fi
save
if [ $ok -eq 1 ]; then
  timeout 100 $K --rounds 10 --partitions 33 21 22 > $R/bf16-p33.txt 2>&1; echo "P 33 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-p33.txt
  save
  timeout 60 $K --rounds 10 --partitions 64 4 > $R/bf16-kfv-p64.txt 2>&1; echo "v4 P 64 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-kfv-p64.txt
  save
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $K 22 --rounds 1 --partitions 33 --lengths 13,4097 > $R/memcheck-22.txt 2>&1; echo "memcheck 22 rc=$?"; tail -1 $R/memcheck-22.txt
  timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $K 22 --rounds 1 --partitions 33 --lengths 13,4097 > $R/racecheck-22.txt 2>&1; echo "racecheck 22 rc=$?"; tail -1 $R/racecheck-22.txt
  save
  timeout 90 ncu --kernel-name regex:first_pass --launch-skip 4 --launch-count 1 --section SpeedOfLight --section SchedulerStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum $K 22 --rounds 1 --partitions 33 --lengths 131072 > $R/ncu-22.txt 2>&1; echo "ncu 22 rc=$?"
  grep -E "Duration|DRAM Throughput|Issued Warp|inst_executed|stalled" $R/ncu-22.txt | awk '$NF+0 > 0.15 || /Duration|DRAM|Issued|inst_exec/' | head -16
  save
fi
