#!/usr/bin/env bash
# run 114: dev/cuda/kfv_mma version 20 (warps that own whole 16-token tiles, on the view K = V):
# checked against the double reference at small lengths and several partition counts, timed
# beside version 10 (the library's stored pass on the same view) and version 4 (the library's
# K-from-V pass), memcheck and racecheck, ncu at 128K. Then run 113's timeline (its second call).
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r114; mkdir -p $R
BUILD_TARGETS="dev_kfv_mma dev_tiles_timeline" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run114.tgz .); }
ok=1
for P in 33 7 64; do
  timeout 40 $K --rounds 1 --partitions $P --lengths 1,13,64,65,4097,8193 20 > $R/small-20-p$P.txt 2>&1; rc=$?
  echo "small 20 P $P rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-20-p$P.txt | sed 's/against.*//' | tr '\n' ';'; echo
  if [ $rc -ne 0 ] || grep -q INVALID $R/small-20-p$P.txt; then ok=0; fi
done
save
if [ $ok -eq 1 ]; then
  timeout 100 $K --rounds 10 --partitions 33 10 20 > $R/bf16-alias-p33.txt 2>&1; echo "alias P 33 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-alias-p33.txt
  save
  timeout 60 $K --rounds 10 --partitions 64 4 > $R/bf16-kfv-p64.txt 2>&1; echo "v4 P 64 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-kfv-p64.txt
  save
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $K 20 --rounds 1 --partitions 33 --lengths 13,4097 > $R/memcheck-20.txt 2>&1; echo "memcheck 20 rc=$?"; tail -1 $R/memcheck-20.txt
  timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $K 20 --rounds 1 --partitions 33 --lengths 13,4097 > $R/racecheck-20.txt 2>&1; echo "racecheck 20 rc=$?"; tail -2 $R/racecheck-20.txt
  save
  timeout 90 ncu --kernel-name regex:first_pass --launch-skip 4 --launch-count 1 --section SpeedOfLight --section SchedulerStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum $K 20 --rounds 1 --partitions 33 --lengths 131072 > $R/ncu-20.txt 2>&1; echo "ncu 20 rc=$?"
  grep -E "Duration|DRAM Throughput|Issued Warp|inst_executed.sum|stalled" $R/ncu-20.txt | awk '$NF+0 > 0.15 || /Duration|DRAM|Issued|inst_exec/' | head -14
  save
fi
R3=/tmp/r113; mkdir -p $R3
timeout 100 build-h200/dev/tiles_timeline > $R3/dev-tiles-timeline.txt 2>&1; echo "tiles_timeline rc=$?"; tail -40 $R3/dev-tiles-timeline.txt
(cd $R3 && tar czf $OUT/run113.tgz .)
