#!/usr/bin/env bash
# run 92: the tile unit's probe with the item's two load patterns (A from rows 1 KiB apart, B
# just written by vector stores), three processes one after the other (dev/cpu/fused_parts)
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r92; mkdir -p $R
BUILD_TARGETS=dev_fused_parts PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
for i in 1 2 3; do
  timeout 100 build-h200/dev/fused_parts --dtype bf16 --tokens 256 --reps 35 --rounds 2 --threads 1 > $R/parts-256-$i.txt 2>&1; echo "$i rc=$?"; grep -E "tile unit|TSC|amx" $R/parts-256-$i.txt
  (cd $R && tar czf $OUT/run92.tgz .)
done
