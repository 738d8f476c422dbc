#!/usr/bin/env bash
# run 138: dev/cuda/tiles_regring (the plain Q4_0 tile product with its register slots reloaded
# chunk by chunk) checked bit for bit against the library and timed beside it at the 31B shapes,
# cold and --hot; dev/cuda/kfv_mma versions 34 and 35 (version 30's L2 prefetch of the next
# tile never / after the scores) against 30 and the library at 64K and 128K, then ncu's DRAM
# bytes of 30 and 34 at 128K.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r138; mkdir -p $R
save() { (cd $R && tar czf $OUT/run138.tgz .); }
BUILD_TARGETS="dev_tiles_regring dev_kfv_mma" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; echo "build rc=$?"; tail -2 $R/runner.txt
rm -f $R/receipts.tar.gz
B=build-h200
timeout 150 $B/dev/tiles_regring > $R/tiles-regring.txt 2>&1; echo "regring rc=$?"; cat $R/tiles-regring.txt
save
timeout 100 $B/dev/tiles_regring --hot --reps 50 > $R/tiles-regring-hot.txt 2>&1; echo "regring hot rc=$?"; grep -v "^check" $R/tiles-regring-hot.txt
save
K=$B/dev/kfv_mma
timeout 60 $K --f32 --rounds 1 --partitions 33 --lengths 1,13,4097,8193 34 35 > $R/kfv-small.txt 2>&1; echo "kfv small rc=$?"; grep -cE "INVALID" $R/kfv-small.txt
timeout 150 $K --f32 --rounds 10 --partitions 64 --lengths 65536,131072 1 30 34 35 > $R/kfv-f32-p64.txt 2>&1; echo "kfv P64 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/kfv-f32-p64.txt
save
for V in 30 34; do
  timeout 60 ncu --clock-control none --metrics dram__bytes_read.sum,gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum \
    -k regex:'kfv_tf32_pair_mbar' --launch-skip 1 --launch-count 1 --log-file $R/ncu-v$V.txt \
    $K --f32 --rounds 1 --partitions 64 --lengths 131072 $V > $R/ncu-v$V-out.txt 2>&1; echo "ncu $V rc=$?"; grep -E "dram__bytes|duration|lts__t|Section|  [a-z_]+<|^  [A-Za-z]" $R/ncu-v$V.txt | head -12
done
save
