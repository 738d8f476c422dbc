#!/usr/bin/env bash
# run 137: ncu of the long F32 K-from-V pass at 128K (its pairs at mbarriers of their own):
# what limits it (speed of light, pipes, warp states), one launch inside gem bench --k-from-v.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r137; mkdir -p $R
save() { (cd $R && tar czf $OUT/run137.tgz .); }
BUILD_TARGETS="gem" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; echo "build rc=$?"; rm -f $R/receipts.tar.gz
GEM_QUIET=1 timeout 100 ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis \
  --section Occupancy --section WarpStateStats --section InstructionStats \
  -k regex:'k_from_v_f32_long' --launch-skip 2 --launch-count 1 --log-file $R/ncu-kfv-f32-long.txt \
  build-h200/gem bench --backend cuda --a fused --b fused --k-from-v --kv-dtype f32 --lengths 131072 \
  --rounds 1 --warmup 0 --bw-mib 64 --bw-reps 1 --out $R/ncu-bench.json > $R/ncu-bench.txt 2>&1; echo "ncu rc=$?"
grep -E "Duration|DRAM Throughput|Compute \(SM\)|Executed Ipc|Issue Slots Busy|Warp Cycles Per Issued|Eligible Warps|Active Warps Per|Stall|Executed Instructions  " $R/ncu-kfv-f32-long.txt | head -30
save
