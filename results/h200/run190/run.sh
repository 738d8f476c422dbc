#!/usr/bin/env bash
# run 190: dev/cuda/tiles_q4k versions 2 and 3 (the library's Q4_0 tile loop applied to Q4_K:
# whole super-blocks a warp in batches of 2 or 1, the six-bit scales decoded four bytes at a
# time) against version 1 (run 33) and the library's F32 Q4_K kernel: the checks against the
# double reference, ABBA timing over the four, ncu's instructions a launch (--once), memcheck.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r190; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run190.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run190/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="dev_tiles_q4k" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
timeout 150 build-h200/dev/tiles_q4k > $R/tiles-q4k.txt 2>&1
echo "tiles_q4k rc=$? at $(el) s"; cat $R/tiles-q4k.txt
save
timeout 90 ncu --clock-control none -k regex:"q4kt|mv_kernel" -c 200 --csv --metrics \
smsp__inst_executed.sum,gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__block_size,launch__registers_per_thread \
  build-h200/dev/tiles_q4k --once > $R/ncu.csv 2> $R/ncu.err
echo "ncu rc=$? at $(el) s"; tail -n 1 $R/ncu.err
save
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 build-h200/dev/tiles_q4k --once \
  > $R/memcheck.txt 2>&1
echo "memcheck rc=$? at $(el) s"; grep -E "check|ERROR SUMMARY" $R/memcheck.txt | tail -n 4
save; echo "done at $(el) s"
