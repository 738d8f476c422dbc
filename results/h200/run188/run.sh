#!/usr/bin/env bash
# run 188: dev/cuda/tiles_tight (the Q4_0 tile products with fewer instructions around the
# chunks: the plain product's full batches loaded from stepped pointers, GeGLU's ring addresses
# stepped) against the library's kernels: the bit check, ABBA timing in two processes, ncu's
# instructions a launch (--once), and the SASS of the four kernels.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r188; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run188.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run188/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="dev_tiles_tight" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
for i in 1 2; do
  timeout 150 build-h200/dev/tiles_tight > $R/tiles-tight-$i.txt 2>&1
  echo "tiles_tight $i rc=$? at $(el) s"; grep -E "check|probe|^[a-z+-]+ +(library|tight)" \
    $R/tiles-tight-$i.txt | grep -v "^check" ; grep -c "bit for bit" $R/tiles-tight-$i.txt
  save
done
timeout 150 ncu --clock-control none -k regex:"q4t_kernel|q4t_geglu_kernel|tight_kernel|tight_geglu" \
  -c 200 --csv --metrics \
smsp__inst_executed.sum,gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__block_size,launch__registers_per_thread \
  build-h200/dev/tiles_tight --once > $R/ncu.csv 2> $R/ncu.err
echo "ncu rc=$? at $(el) s"; tail -n 2 $R/ncu.err
for f in _Z12tight_kernel10TileParams _Z18tight_geglu_kernel10TileParams; do
  cuobjdump -sass -fun $f build-h200/dev/tiles_tight > $R/$f.sass 2>&1
done
save; echo "done at $(el) s"
