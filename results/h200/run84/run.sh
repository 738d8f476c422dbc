#!/usr/bin/env bash
# run 84: the fused item's kernels apart on the host CPU (dev/cpu/fused_parts)
set -u -o pipefail
export GEM_GIT_COMMIT=2c79a6b
R=/tmp/r84; mkdir -p $R
BUILD_TARGETS=dev_fused_parts PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
for t in bf16 f32; do timeout 60 build-h200/dev/fused_parts --dtype $t --reps 400 --rounds 5 --threads 1,8,16 > $R/fused-parts-$t.txt 2>&1; echo "$t rc=$?"; cat $R/fused-parts-$t.txt; (cd $R && tar czf $OUT/run84.tgz .); done
