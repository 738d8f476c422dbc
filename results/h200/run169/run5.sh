#!/usr/bin/env bash
# run 169, ncu over the library's Q4_0 tile products at the 31B shapes (dev/cuda/tiles_split
# --once: each shape's library launch): DRAM bytes read, L2 bytes the L1 asks for, the L1 hit
# rate, instructions and duration, to see what the x scratch's digits cost beside the weights.
set -u -o pipefail
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
W=/tmp/w169; rm -rf $W; mkdir -p $W
WORK=$W PHASES="build" BUILD_TARGETS="dev_tiles_split" BUDGET_S=300 \
  bash scripts/h200-run.sh $OUT/h200 > /dev/null 2>&1
echo "h200-run.sh rc=$? at $(el) s"; grep -E "FAIL|fail|error" $OUT/h200/log.txt | tail -8
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 240 ncu --clock-control none -k regex:q4t -c 400 --csv --metrics \
dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__t_sector_hit_rate.pct,smsp__inst_executed.sum,gpu__time_duration.sum,launch__grid_size,launch__block_size \
  build-h200/dev/tiles_split --once > $OUT/ncu-tiles.csv 2> $OUT/ncu-tiles.err
echo "ncu rc=$? at $(el) s"; tail -3 $OUT/ncu-tiles.err; wc -l $OUT/ncu-tiles.csv
