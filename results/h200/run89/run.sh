#!/usr/bin/env bash
# run 89: the library's CPU route at 64K and 128K on the host's 16 cores, F32, BF16 and F16
# (gem bench --backend cpu; its probe in the same process), with dot_8x2 compiled apart for
# rows of 512 (330a585), not measured on the Xeon before
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r89; mkdir -p $R
BUILD_TARGETS=gem PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
lscpu > $R/cpu-host.txt
for t in bf16 f16 f32; do
  timeout 170 build-h200/gem bench --backend cpu --kv-dtype $t --a fused --b fused --lengths 65536,131072 --rounds 5 \
      --bw-mib 4096 --out $R/cpu-bench-$t.json > $R/cpu-bench-$t.txt 2>&1; echo "$t rc=$?"
  grep -E "read bandwidth|baseline_|fused_|ratio" $R/cpu-bench-$t.txt
  (cd $R && tar czf $OUT/run89.tgz .)
done
