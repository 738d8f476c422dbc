#!/usr/bin/env bash
# run 143: dev/cuda/norm_prefetch, the decoder's norm kernels asking the L2 for the next
# product's first 0 / 8 / 16 / 32 MB of weights, in chains of 31B sliding layers (Q4_0 tiles).
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r143; mkdir -p $R
save() { (cd $R && tar czf $OUT/run143.tgz .); }
BUILD_TARGETS="dev_norm_prefetch" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; echo "build rc=$?"; rm -f $R/receipts.tar.gz
for L in 12 60; do
  timeout 120 build-h200/dev/norm_prefetch --rounds 10 --layers $L > $R/norm-prefetch-l$L.txt 2>&1; echo "layers $L rc=$?"; cat $R/norm-prefetch-l$L.txt
  save
done
