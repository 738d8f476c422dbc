#!/usr/bin/env bash
# run 145: ncu of the library's plain Q4_0 tile product (q4t_kernel) at the 31B shapes, one launch
# each inside dev/cuda/tiles_smemfirst --once: where its warps wait (stall reasons per issued
# instruction), its issue, L1 and DRAM throughput.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r145; mkdir -p $R
save() { (cd $R && tar czf $OUT/run145.tgz .); }
BUILD_TARGETS="dev_tiles_smemfirst" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; echo "build rc=$?"; rm -f $R/receipts.tar.gz
S=smsp__average_warps_issue_stalled
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,sm__warps_active.avg.per_cycle_active"
for r in long_scoreboard short_scoreboard lg_throttle mio_throttle wait math_pipe_throttle not_selected selected barrier no_instruction dispatch_stall branch_resolving tex_throttle drain membar imc_miss sleeping; do M="$M,${S}_${r}_per_issue_active.ratio"; done
timeout 200 ncu --clock-control none --metrics "$M" -k regex:q4t_kernel --log-file $R/ncu-q4t.txt \
  build-h200/dev/tiles_smemfirst --once > $R/once.txt 2>&1; echo "ncu rc=$?"
grep -E "q4t_kernel|duration|dram__bytes|pct_of_peak|inst_executed|warps_active|stalled_(long|short|lg|mio|wait|math|not_sel|selected|barrier|no_inst|dispatch|branch)" $R/ncu-q4t.txt | sed 's/smsp__average_warps_issue_stalled_//' | head -150
save
