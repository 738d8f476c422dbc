#!/usr/bin/env bash
# run 166 (Xeon host, right after run 165): half of run 165's pool change, the branch
# pool-claims (C: claims read the counter before they add; each thread's owned tags on one
# line; the busy count kept) against main (A, build-a165/a-tree.tgz): dev/cpu/mv_chain's empty
# dispatch and products, processes A C C A A C C A.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r166; mkdir -p $R
save() { (cd $R && tar czf $OUT/run166.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
echo "A=$(cat build-a165/a-commit) C=$(cat results/h200/run166/commit)" > $R/commits.txt
if [ ! -x /tmp/a165/build-h200/dev/mv_chain ]; then
  mkdir -p /tmp/a165 && tar xzf build-a165/a-tree.tgz -C /tmp/a165 && ln -sfn $PWD/.deps /tmp/a165/.deps
  (GEM_GIT_COMMIT=$(cat build-a165/a-commit) PHASES=build BUILD_TARGETS="dev_mv_chain" JOBS=8 \
     bash /tmp/a165/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
fi
GEM_GIT_COMMIT=$(cat results/h200/run166/commit) PHASES=build JOBS=8 \
  BUILD_TARGETS="dev_mv_chain test_cpu_pool" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
wait; tail -n 1 $R/build.txt; echo "builds done at $(el) s"
build-h200/test_cpu_pool > $R/test_cpu_pool.txt 2>&1; tail -n 1 $R/test_cpu_pool.txt
i=0
for X in A C C A A C C A; do
  i=$((i+1)); [ $(el) -gt 100 ] && { echo "stop before process $i"; break; }
  G=/tmp/a165/build-h200; [ $X = C ] && G=build-h200
  timeout 30 $G/dev/mv_chain --layers 60 --rounds 3 > $R/mv_chain-$i-$X.txt 2>&1
  echo "mv_chain $X rc=$? at $(el) s: $(grep -E '^(products|empty)' $R/mv_chain-$i-$X.txt | awk '{printf "%s %s  ", $1, $2}')"
  save
done
