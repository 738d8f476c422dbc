#!/usr/bin/env bash
# run 166 (Xeon host): half of run 165's pool change, the branch pool-claims (C: claims read
# the counter before they add; each thread's owned tags on one line; the busy count kept)
# against main (A): dev/cpu/mv_chain's empty dispatch and products, processes A C C A A C C A.
# Called by results/h200/run167/run.sh, which builds A (/tmp/a165 from build-a165/a-tree.tgz)
# and C (/tmp/c166 from build-c166/c-tree.tgz) first.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r166; mkdir -p $R
save() { (cd $R && tar czf $OUT/run166.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
echo "A=$(cat build-a165/a-commit) C=$(cat build-c166/c-commit)" > $R/commits.txt
cp /tmp/c166-build.txt $R/build-c.txt 2>/dev/null
/tmp/c166/build-h200/test_cpu_pool > $R/test_cpu_pool.txt 2>&1; tail -n 1 $R/test_cpu_pool.txt
i=0
for X in A C C A A C C A; do
  i=$((i+1)); [ $(el) -gt 110 ] && { echo "stop before process $i"; break; }
  G=/tmp/a165/build-h200; [ $X = C ] && G=/tmp/c166/build-h200
  timeout 30 $G/dev/mv_chain --layers 60 --rounds 3 > $R/mv_chain-$i-$X.txt 2>&1
  echo "mv_chain $X rc=$? at $(el) s: $(grep -E '^(products|empty)' $R/mv_chain-$i-$X.txt | awk '{printf "%s %s  ", $1, $2}')"
  save
done
