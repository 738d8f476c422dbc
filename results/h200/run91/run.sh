#!/usr/bin/env bash
# run 91: the tile unit with the item's own tile shapes (8-column and 8-row tiles), and the tile
# item with its rows in L1 (32 tokens), L2 (256) and beyond (2,048), one thread
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r91; mkdir -p $R
BUILD_TARGETS=dev_fused_parts PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
for n in 32 256 2048; do
  timeout 100 build-h200/dev/fused_parts --dtype bf16 --tokens $n --reps $((6400 / n + 10)) --rounds 3 --threads 1 > $R/parts-$n.txt 2>&1; echo "$n rc=$?"; cat $R/parts-$n.txt
  (cd $R && tar czf $OUT/run91.tgz .)
done
