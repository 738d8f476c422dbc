#!/usr/bin/env bash
# run 175: dev/cpu/geglu_items on the Xeon host: --step heads (the per-head norms after q/k/v as
# a pool run of their own against inside the products' items, mv_batch_then), three processes,
# and --step geglu twice more (run 174's question on this host); test_matvec and test_model.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r175; mkdir -p $R
save() { (cd $R && tar czf $OUT/run175.tgz .); }
lscpu | grep -E "Model name|^CPU\(s\)|Thread|MHz" > $R/cpu-host.txt
GEM_GIT_COMMIT=$(cat results/h200/run175/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="dev_geglu_items test_matvec test_model" bash scripts/h200-run.sh /tmp/b-out \
  > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
for T in test_matvec test_model; do
  GEM_QUIET=1 timeout 60 build-h200/$T > $R/$T.txt 2>&1; echo "$T rc=$?"; tail -n 1 $R/$T.txt
done
G=build-h200/dev/geglu_items
for i in 1 2 3; do
  timeout 60 $G --step heads --layers 120 --rounds 20 > $R/heads-$i.txt 2>&1
  echo "heads $i rc=$?"; grep -E "check|INVALID|median|then /" $R/heads-$i.txt
  timeout 60 $G --layers 120 --rounds 20 > $R/geglu-$i.txt 2>&1
  echo "geglu $i rc=$?"; grep -E "INVALID|median|pair /" $R/geglu-$i.txt
done
save
echo "done at $(el) s"
