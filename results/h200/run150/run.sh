#!/usr/bin/env bash
# run 150: one wave of the long F32 K-from-V pass by default, from 8,192 rows (the kernel as in
# run 140): the query and decode tests (the long lengths too); racecheck of dev/cuda/kfv_timeline
# versions 3-5 (the library's body, its prologue's loads first, and the lean merge) at 33 and 64
# partitions, and the four sanitizers over the library's pass at 8,192 and 20,480 rows (one
# wave); gem bench --k-from-v for F32 and BF16.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r150; mkdir -p $R
save() { (cd $R && tar czf $OUT/run150.tgz .); }
GEM_GIT_COMMIT=$(cat results/h200/run150/commit 2>/dev/null || echo unknown) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem dev_kfv_timeline dev_kfv_mma test_decode test_cuda_queries test_decode_bad_input" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(( $(date +%s) - T0 )) s"
B=build-h200; K=$B/dev/kfv_mma; TL=$B/dev/kfv_timeline
for T in test_cuda_queries test_decode_bad_input test_decode; do
  GEM_QUIET=1 timeout 100 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$?"; tail -n 1 $R/$T.txt
done
save
for P in 33 64; do
  timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 --kernel-name kns=tl_copy $TL --check-only --versions 3,4,5 --lengths 20480 --partitions $P > $R/racecheck-tl-P$P.txt 2>&1; echo "racecheck tl P$P rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "v[0-9] INVALID|nmse|SUMMARY" $R/racecheck-tl-P$P.txt | tail -4
  grep -c "Race reported" $R/racecheck-tl-P$P.txt
  save
done
for L in 8192 20480; do
  for T in racecheck memcheck synccheck initcheck; do
    timeout 60 compute-sanitizer --tool $T --error-exitcode 9 --kernel-name kns=k_from_v_f32_long $K --f32 1 --rounds 1 --lengths $L > $R/$T-f32-long-$L.txt 2>&1; echo "$T f32 $L rc=$?"; tail -1 $R/$T-f32-long-$L.txt
  done
  save
done
for DT in f32 bf16; do
  timeout 60 $B/gem bench --backend cuda --a fused --b fused --k-from-v --kv-dtype $DT --lengths 8192,16384,32768,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10 --out $R/bench-kfv-$DT.json > $R/bench-kfv-$DT.txt 2>&1; echo "bench $DT rc=$?"; grep -E "^[0-9]|A/B" $R/bench-kfv-$DT.txt
  save
done
GEM_QUIET=1 timeout 150 $B/test_decode --long > $R/test_decode-long.txt 2>&1; echo "test_decode --long rc=$?"; tail -n 1 $R/test_decode-long.txt
save
echo "done at $(( $(date +%s) - T0 )) s"
