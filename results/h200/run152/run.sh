#!/usr/bin/env bash
# run 152: the one-wave boundary of the long F32 K-from-V pass at 12,288 rows: test_cuda_queries,
# the decode matrix, and gem bench --k-from-v (F32) at 8K, 12K and 16K.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r152; mkdir -p $R
save() { (cd $R && tar czf $OUT/run152.tgz .); }
GEM_GIT_COMMIT=$(cat results/h200/run152/commit 2>/dev/null || echo unknown) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem test_decode test_cuda_queries" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(( $(date +%s) - T0 )) s"
B=build-h200
for T in test_cuda_queries test_decode; do
  GEM_QUIET=1 timeout 60 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$?"; tail -n 1 $R/$T.txt
done
save
timeout 60 $B/gem bench --backend cuda --a fused --b fused --k-from-v --kv-dtype f32 --lengths 8192,12288,16384 --rounds 10 --bw-mib 4096 --bw-reps 10 --out $R/bench-kfv-f32.json > $R/bench-kfv-f32.txt 2>&1; echo "bench f32 rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "^[0-9 ]|A/B" $R/bench-kfv-f32.txt | grep -v "host time\|nominal"
save
