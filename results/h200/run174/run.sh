#!/usr/bin/env bash
# run 174: dev/cpu/geglu_items on the Xeon host (all cores, then 8 threads): GeGLU's activation
# as a pool run after the gate/up products (the decoder before mv_pair) against inside their
# items (mv_pair), A B B A rounds in one process, five processes.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r174; mkdir -p $R
save() { (cd $R && tar czf $OUT/run174.tgz .); }
lscpu | grep -E "Model name|^CPU\(s\)|Thread|MHz" > $R/cpu-host.txt
GEM_GIT_COMMIT=$(cat results/h200/run174/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="dev_geglu_items" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
G=build-h200/dev/geglu_items
for i in 1 2 3; do
  timeout 60 $G --layers 120 --rounds 20 > $R/geglu-$i.txt 2>&1; echo "process $i rc=$?"
  grep -E "check|INVALID|median|pair /" $R/geglu-$i.txt
done
for i in 4 5; do
  timeout 60 $G --threads 8 --layers 120 --rounds 20 > $R/geglu-t8-$i.txt 2>&1
  echo "process $i (8 threads) rc=$?"; grep -E "INVALID|median|pair /" $R/geglu-t8-$i.txt
done
save
echo "done at $(el) s"
