#!/usr/bin/env bash
# run 123: dev/cuda/kfv_mma versions 26 (version 24 with whole tiles copied a row an add from
# the last and shared loads at immediate offsets) and 27 (version 26 on pairs of warps sharing a
# tile, ten warps an SM): checked against the double reference at small lengths, two partition
# counts and from position 10^6; timed beside versions 1 and 24 at 8K, 64K, 128K (A B B A, one
# process); memcheck and racecheck; ncu stall reasons of 24, 26, 27 at 128K.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r123; mkdir -p $R
BUILD_TARGETS="dev_kfv_mma" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run123.tgz .); }
ok=1
for P in 33 7; do
  timeout 60 $K --f32 --rounds 1 --partitions $P --lengths 1,13,64,65,4097,8193 26 27 > $R/small-p$P.txt 2>&1; rc=$?
  echo "small P $P rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-p$P.txt | sed 's/against.*//' | tr '\n' ';'; echo
  if [ $rc -ne 0 ] || grep -q INVALID $R/small-p$P.txt; then ok=0; fi
done
timeout 60 $K --f32 --rounds 1 --partitions 33 --lengths 13,8193 --pos0 1000000 26 27 > $R/small-pos.txt 2>&1; rc=$?
echo "pos0 1e6 rc=$rc"; grep -E "nmse|INVALID|ERROR|error" $R/small-pos.txt | sed 's/against.*//' | tr '\n' ';'; echo
if [ $rc -ne 0 ] || grep -q INVALID $R/small-pos.txt; then ok=0; fi
save
if [ $ok -eq 1 ]; then
  timeout 150 $K --f32 --rounds 10 --partitions 33 1 24 26 27 > $R/f32-p33.txt 2>&1; echo "P 33 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/f32-p33.txt
  save
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $K --f32 26 27 --rounds 1 --partitions 33 --lengths 13,4097 > $R/memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck.txt
  timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $K --f32 26 27 --rounds 1 --partitions 33 --lengths 13,4097 > $R/racecheck.txt 2>&1; echo "racecheck rc=$?"; tail -1 $R/racecheck.txt
  save
  for V in 24 26 27; do
    timeout 60 ncu --kernel-name regex:tf32 --launch-skip 1 --launch-count 1 --section SpeedOfLight --section SchedulerStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum $K --f32 --rounds 1 --partitions 33 --lengths 131072 $V > $R/ncu-$V.txt 2>&1; echo "ncu $V rc=$?"
    grep -E "Duration|DRAM Throughput|Issued Warp|inst_executed|stalled" $R/ncu-$V.txt | awk '$NF+0 > 0.15 || /Duration|DRAM|Issued|inst_exec/' | head -14
  done
  save
fi
