#!/usr/bin/env bash
# run 101: dev/cuda/kfv_mma version 10 (the library's stored-K pass given V as its K, so DRAM
# serves each row once) beside versions 2 and 4, BF16 and F32; then compute-sanitizer racecheck
# of the decode matrix's small cases, whose run 100 was cut by a 70-second limit
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r101; mkdir -p $R
BUILD_TARGETS="dev_kfv_mma gem test_decode" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run101.tgz .); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv > $R/nvidia-smi.txt 2>&1
timeout 60 $K --rounds 1 --lengths 1,13,4097,8193 10 > $R/small.txt 2>&1; echo "small rc=$?"; grep -E "nmse|INVALID" $R/small.txt | sed 's/against.*//' | tr '\n' ';'; echo
save
timeout 150 $K --rounds 10 2 10 4 > $R/bf16.txt 2>&1; echo "bf16 rc=$?"; grep -vE "nmse" $R/bf16.txt
save
timeout 150 $K --f32 --rounds 10 2 10 > $R/f32.txt 2>&1; echo "f32 rc=$?"; grep -vE "nmse" $R/f32.txt
save
timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 build-h200/test_decode --small > $R/sanitizer-racecheck.txt 2>&1
echo "racecheck rc=$?"; tail -2 $R/sanitizer-racecheck.txt; save
