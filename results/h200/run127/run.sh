#!/usr/bin/env bash
# run 127: the long F32 K-from-V first pass through gem bench --k-from-v (V alone against stored
# K and V, read probe in the same run), then the decode matrix's long lengths (64K and 128K for
# every V type, the F32 K-from-V ones now on the new pass).
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r127; mkdir -p $R
save() { (cd $R && tar czf $OUT/run127.tgz .); }
BUILD_TARGETS="gem test_decode" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
B=build-h200
timeout 60 $B/gem bench --backend cuda --a fused --b fused --k-from-v --kv-dtype f32 --lengths 8192,32768,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10 --out $R/bench-kfv-f32.json > $R/bench-kfv-f32.txt 2>&1; echo "bench rc=$?"; tail -8 $R/bench-kfv-f32.txt
save
timeout 330 $B/test_decode --long > $R/test-decode-long.txt 2>&1; echo "test_decode --long rc=$?"; tail -2 $R/test-decode-long.txt
save
