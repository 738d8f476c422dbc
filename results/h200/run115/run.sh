#!/usr/bin/env bash
# run 115: dev/cuda/kfv_mma version 21 (version 20's warps on the K-from-V view, the rotating
# dims on the F64 tensor cores): checked against the double reference at small lengths, two
# partition counts and from position 10^6, timed beside version 4 (the library's K-from-V pass,
# at its 64 partitions) and version 20 (the view K = V), memcheck, racecheck, ncu at 128K.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r115; mkdir -p $R
BUILD_TARGETS="dev_kfv_mma" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run115.tgz .); }
ok=1
for P in 33 7; do
  timeout 40 $K --rounds 1 --partitions $P --lengths 1,13,64,65,4097,8193 21 > $R/small-21-p$P.txt 2>&1; rc=$?
  echo "small 21 P $P rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-21-p$P.txt | sed 's/against.*//' | tr '\n' ';'; echo
  if [ $rc -ne 0 ] || grep -q INVALID $R/small-21-p$P.txt; then ok=0; fi
done
timeout 40 $K --rounds 1 --partitions 33 --lengths 13,8193 --pos0 1000000 21 > $R/small-21-pos.txt 2>&1; rc=$?
echo "pos0 1e6 rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-21-pos.txt | sed 's/against.*//' | tr '\n' ';'; echo
if [ $rc -ne 0 ] || grep -q INVALID $R/small-21-pos.txt; then ok=0; fi
save
if [ $ok -eq 1 ]; then
  timeout 100 $K --rounds 10 --partitions 33 20 21 > $R/bf16-p33.txt 2>&1; echo "P 33 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-p33.txt
  save
  timeout 60 $K --rounds 10 --partitions 64 4 > $R/bf16-kfv-p64.txt 2>&1; echo "v4 P 64 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-kfv-p64.txt
  save
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $K 21 --rounds 1 --partitions 33 --lengths 13,4097 > $R/memcheck-21.txt 2>&1; echo "memcheck 21 rc=$?"; tail -1 $R/memcheck-21.txt
  timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $K 21 --rounds 1 --partitions 33 --lengths 13,4097 > $R/racecheck-21.txt 2>&1; echo "racecheck 21 rc=$?"; tail -1 $R/racecheck-21.txt
  save
  timeout 90 ncu --kernel-name regex:first_pass --launch-skip 4 --launch-count 1 --section SpeedOfLight --section SchedulerStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,smsp__inst_executed_pipe_fp64.sum $K 21 --rounds 1 --partitions 33 --lengths 131072 > $R/ncu-21.txt 2>&1; echo "ncu 21 rc=$?"
  grep -E "Duration|DRAM Throughput|Issued Warp|inst_executed|stalled" $R/ncu-21.txt | awk '$NF+0 > 0.15 || /Duration|DRAM|Issued|inst_exec/' | head -16
  save
fi
