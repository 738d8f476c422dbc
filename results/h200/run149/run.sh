#!/usr/bin/env bash
# run 149: the long F32 K-from-V pass with its prologue's loads first and the lean merge (also
# the long BF16 pass's merge), and one wave of it by default for an F32 V from 20,480 rows:
# the query and decode tests; dev/cuda/kfv_timeline at 8K-128K, 33 partitions (version 0 is
# gem_decode's default: the CUDA-core pass below 20,480 rows); the four sanitizers over both
# long passes through gem_decode.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r149; mkdir -p $R
save() { (cd $R && tar czf $OUT/run149.tgz .); }
GEM_GIT_COMMIT=$(cat results/h200/run149/commit 2>/dev/null || echo unknown) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem dev_kfv_timeline dev_kfv_mma test_decode test_cuda_queries test_decode_bad_input" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(( $(date +%s) - T0 )) s"
B=build-h200; K=$B/dev/kfv_mma
for T in test_cuda_queries test_decode_bad_input test_decode; do
  GEM_QUIET=1 timeout 100 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$?"; tail -n 1 $R/$T.txt
done
save
timeout 200 $B/dev/kfv_timeline --rounds 10 --lengths 8192,12288,16384,20480,32768,65536,131072 --partitions 33 > $R/timeline.txt 2>&1
echo "timeline rc=$? at $(( $(date +%s) - T0 )) s"; grep -v "stamps\|nmse" $R/timeline.txt
save
for T in memcheck racecheck synccheck initcheck; do
  timeout 60 compute-sanitizer --tool $T --error-exitcode 9 --kernel-name kns=k_from_v_bf16_long $K 1 --rounds 1 --lengths 32768 > $R/$T-bf16-long.txt 2>&1; echo "$T bf16 rc=$?"; tail -1 $R/$T-bf16-long.txt
  timeout 60 compute-sanitizer --tool $T --error-exitcode 9 --kernel-name kns=k_from_v_f32_long $K --f32 1 --rounds 1 --lengths 20480 > $R/$T-f32-long.txt 2>&1; echo "$T f32 rc=$?"; tail -1 $R/$T-f32-long.txt
  save
done
echo "done at $(( $(date +%s) - T0 )) s"
