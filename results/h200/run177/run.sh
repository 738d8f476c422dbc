#!/usr/bin/env bash
# run 177: dev/cpu/mv_split on the Xeon host: a token of the 2gb preset's products (60 layers,
# tapered split, 4 KiB prefetch into L2) with x's digits by the caller (xq 0) against by the
# items from 2,048 columns (o's 8,192 and down's 2,048), 10 rounds in one process, twice.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r177; mkdir -p $R
save() { (cd $R && tar czf $OUT/run177.tgz .); }
GEM_GIT_COMMIT=$(cat results/h200/run177/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="dev_mv_split" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
for i in 1 2; do
  timeout 60 build-h200/dev/mv_split --layers 60 --rounds 10 --splits t6 --prefetch 4096 \
    --into 2 --xq 0,2048 --alloc huge > $R/mv_split-$i.txt 2>&1
  echo "process $i rc=$? at $(el) s"; grep -E "read bandwidth|^t6" $R/mv_split-$i.txt
  save
done
