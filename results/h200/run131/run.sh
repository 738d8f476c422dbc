#!/usr/bin/env bash
# run 131: the long F32 K-from-V pass with every pair at the same barrier instructions (a pair
# past its tiles skips the work between them; run 130's synccheck reported version 29's form):
# the whole test suite; synccheck over the decode matrix's small cases (the first synccheck of
# the library) and of both long K-from-V passes (F32 and BF16, 32,768 and 40,001 rows), with
# memcheck and racecheck of the F32 one; the pass against version 29 (the old form, the same
# arithmetic: bits compared) at 33 and 64 partitions; synccheck of the CUDA decoder's tests.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r131; mkdir -p $R
save() { (cd $R && tar czf $OUT/run131.tgz .); }
PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; echo "runner rc=$?"; tail -1 $R/runner.txt
rm -f $R/receipts.tar.gz
B=build-h200
(cd $B && GEM_QUIET=1 timeout 120 ctest --output-on-failure -j8) > $R/ctest.txt 2>&1; echo "ctest rc=$?"; tail -3 $R/ctest.txt
grep -E "FAIL|failed" $R/ctest.txt | head -5
save
K=$B/dev/kfv_mma
for P in 33 64; do
  timeout 120 $K --f32 --rounds 10 --partitions $P --lengths 32768,65536,131072 1 29 > $R/f32-lib-vs-v29-p$P.txt 2>&1; echo "f32 P $P rc=$?"; grep -vE "^live|^K rebuilt" $R/f32-lib-vs-v29-p$P.txt | sed 's/against.*//'
  save
done
timeout 200 compute-sanitizer --tool synccheck --error-exitcode 9 $B/test_decode --small > $R/synccheck-decode-small.txt 2>&1; echo "synccheck decode small rc=$?"; tail -2 $R/synccheck-decode-small.txt
grep -E "at .* in |Barrier error" $R/synccheck-decode-small.txt | sort | uniq -c | sort -rn | head -6
save
for T in synccheck memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $T --error-exitcode 9 --kernel-name kns=k_from_v_f32_long $K --f32 1 --rounds 1 --partitions 64 --lengths 32768 > $R/$T-f32-long.txt 2>&1; echo "$T f32 long rc=$?"; tail -1 $R/$T-f32-long.txt
  save
done
timeout 60 compute-sanitizer --tool synccheck --error-exitcode 9 --kernel-name kns=k_from_v_f32_long $K --f32 1 --rounds 1 --partitions 7 --lengths 40001 > $R/synccheck-f32-long-p7.txt 2>&1; echo "synccheck f32 long P7 rc=$?"; tail -1 $R/synccheck-f32-long-p7.txt
timeout 60 compute-sanitizer --tool synccheck --error-exitcode 9 --kernel-name kns=k_from_v_bf16_long $K 1 --rounds 1 --partitions 64 --lengths 32768,40001 > $R/synccheck-bf16-long.txt 2>&1; echo "synccheck bf16 long rc=$?"; tail -1 $R/synccheck-bf16-long.txt
save
timeout 150 compute-sanitizer --tool synccheck --error-exitcode 9 $B/test_cuda_matvec --tiles > $R/synccheck-tiles.txt 2>&1; echo "synccheck tiles rc=$?"; tail -1 $R/synccheck-tiles.txt
save
timeout 200 compute-sanitizer --tool synccheck --error-exitcode 9 $B/test_model_cuda > $R/synccheck-model.txt 2>&1; echo "synccheck model rc=$?"; tail -1 $R/synccheck-model.txt
grep -E "at .* in |Barrier error" $R/synccheck-model.txt | sort | uniq -c | sort -rn | head -6
save
