#!/usr/bin/env bash
# run 151: the tree that ships one wave of the long F32 K-from-V pass by default (from 8,192
# rows) with gem bench binding route B on the view of V alone: gem bench --k-from-v for F32 and
# BF16; test_cuda_queries; then the decode matrix with its long lengths while time lasts.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r151; mkdir -p $R
save() { (cd $R && tar czf $OUT/run151.tgz .); }
GEM_GIT_COMMIT=$(cat results/h200/run151/commit 2>/dev/null || echo unknown) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem test_decode test_cuda_queries" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(( $(date +%s) - T0 )) s"
B=build-h200
GEM_QUIET=1 timeout 60 $B/test_cuda_queries > $R/test_cuda_queries.txt 2>&1; echo "test_cuda_queries rc=$?"; tail -n 1 $R/test_cuda_queries.txt
for DT in f32 bf16; do
  timeout 90 $B/gem bench --backend cuda --a fused --b fused --k-from-v --kv-dtype $DT --lengths 8192,16384,32768,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10 --out $R/bench-kfv-$DT.json > $R/bench-kfv-$DT.txt 2>&1; echo "bench $DT rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "^[0-9 ]|A/B" $R/bench-kfv-$DT.txt | grep -v "host time"
  save
done
GEM_QUIET=1 timeout 300 $B/test_decode --long > $R/test_decode-long.txt 2>&1; echo "test_decode --long rc=$? at $(( $(date +%s) - T0 )) s"; tail -n 1 $R/test_decode-long.txt
save
echo "done at $(( $(date +%s) - T0 )) s"
