#!/usr/bin/env bash
# run 132: compute-sanitizer initcheck (reads of device memory never written), which no run
# has used, over the decode matrix's small cases, both long K-from-V passes, the Q4_0 tiles'
# test and the CUDA decoder's test; then memcheck and racecheck of the long BF16 pass alone.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r132; mkdir -p $R
save() { (cd $R && tar czf $OUT/run132.tgz .); }
BUILD_TARGETS="test_decode test_cuda_matvec test_model_cuda dev_kfv_mma" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; echo "runner rc=$?"; tail -1 $R/runner.txt
rm -f $R/receipts.tar.gz
B=build-h200; K=$B/dev/kfv_mma
timeout 200 compute-sanitizer --tool initcheck --error-exitcode 9 $B/test_decode --small > $R/initcheck-decode-small.txt 2>&1; echo "initcheck decode small rc=$?"; tail -2 $R/initcheck-decode-small.txt
grep -E "^=========     at |Uninitialized" $R/initcheck-decode-small.txt | sort | uniq -c | sort -rn | head -8
save
timeout 90 compute-sanitizer --tool initcheck --error-exitcode 9 $K --f32 1 --rounds 1 --partitions 64 --lengths 32768,40001 > $R/initcheck-f32-long.txt 2>&1; echo "initcheck f32 long rc=$?"; tail -1 $R/initcheck-f32-long.txt
timeout 90 compute-sanitizer --tool initcheck --error-exitcode 9 $K 1 --rounds 1 --partitions 64 --lengths 32768,40001 > $R/initcheck-bf16-long.txt 2>&1; echo "initcheck bf16 long rc=$?"; tail -1 $R/initcheck-bf16-long.txt
for T in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $T --error-exitcode 9 --kernel-name kns=k_from_v_bf16_long $K 1 --rounds 1 --partitions 64 --lengths 32768,40001 > $R/$T-bf16-long.txt 2>&1; echo "$T bf16 long rc=$?"; tail -1 $R/$T-bf16-long.txt
done
save
timeout 150 compute-sanitizer --tool initcheck --error-exitcode 9 $B/test_cuda_matvec --tiles > $R/initcheck-tiles.txt 2>&1; echo "initcheck tiles rc=$?"; tail -1 $R/initcheck-tiles.txt
grep -E "^=========     at |Uninitialized" $R/initcheck-tiles.txt | sort | uniq -c | sort -rn | head -5
save
timeout 220 compute-sanitizer --tool initcheck --error-exitcode 9 $B/test_model_cuda > $R/initcheck-model.txt 2>&1; echo "initcheck model rc=$?"; tail -1 $R/initcheck-model.txt
grep -E "^=========     at |Uninitialized" $R/initcheck-model.txt | sort | uniq -c | sort -rn | head -8
save
