#!/usr/bin/env bash
# run 142: ncu of both long K-from-V passes at 128K without their L2 prefetch (what limits them
# now): speed of light, compute, memory workload, occupancy, warp states, instructions, one
# launch each inside gem bench --k-from-v.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r142; mkdir -p $R
save() { (cd $R && tar czf $OUT/run142.tgz .); }
BUILD_TARGETS="gem" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; echo "build rc=$?"; rm -f $R/receipts.tar.gz
for DT in f32 bf16; do
  GEM_QUIET=1 timeout 120 ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section InstructionStats \
    --metrics dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum \
    -k regex:"k_from_v_${DT}_long" --launch-skip 2 --launch-count 1 --log-file $R/ncu-kfv-$DT-long.txt \
    build-h200/gem bench --backend cuda --a fused --b fused --k-from-v --kv-dtype $DT --lengths 131072 \
    --rounds 1 --warmup 0 --bw-mib 64 --bw-reps 1 --out $R/ncu-bench-$DT.json > $R/ncu-bench-$DT.txt 2>&1; echo "ncu $DT rc=$?"
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Executed Ipc A|Issue Slots Busy|Warp Cycles Per Issued|Eligible Warps|Active Warps Per|Stall|Executed Instructions  |dram__bytes|lts__t_sectors|L2 Hit|Mem Busy|Max Bandwidth" $R/ncu-kfv-$DT-long.txt | head -24
  save
done
