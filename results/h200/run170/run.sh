#!/usr/bin/env bash
# run 170: dev/cuda/tiles_lean (the plain Q4_0 tile product's loop on 32-bit counts and stepped
# pointers) against the library's kernel: the bit check, ABBA timing, ncu's instructions a launch
# (--once), and the SASS of both kernels.
set -u -o pipefail
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
W=/tmp/w169; rm -rf $W; mkdir -p $W
WORK=$W PHASES="build" BUILD_TARGETS="dev_tiles_lean" BUDGET_S=300 \
  bash scripts/h200-run.sh $OUT/h200 > /dev/null 2>&1
echo "h200-run.sh rc=$? at $(el) s"; grep -E "FAIL|fail|error" $OUT/h200/log.txt | tail -8
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 build-h200/dev/tiles_lean 2>&1 | tee $OUT/tiles-lean.txt
echo "tiles_lean rc=$? at $(el) s"
timeout 120 ncu --clock-control none -k regex:"q4t_kernel|lean_kernel" -c 200 --csv --metrics \
smsp__inst_executed.sum,gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__block_size,launch__registers_per_thread \
  build-h200/dev/tiles_lean --once > $OUT/ncu-lean.csv 2> $OUT/ncu-lean.err
echo "ncu rc=$? at $(el) s"
cuobjdump -sass -fun _Z11lean_kernel10TileParams build-h200/dev/tiles_lean > $OUT/lean.sass 2>&1
echo "sass rc=$? lines $(wc -l < $OUT/lean.sass)"
