#!/usr/bin/env bash
# run 165 (Xeon host): the pool's run ends on each worker's own line (B = this tree, the branch
# pool-ends) against main (A, build-a165/a-tree.tgz). test_cpu_pool on B; dev/cpu/mv_chain
# (the empty dispatch and the 2gb products) processes A B B A; whole tokens of the 2gb preset
# (gem profile, contexts 64 and 1,024) processes A B B A x 3 while time lasts.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r165; mkdir -p $R/abba-2gb
save() { (cd $R && tar czf $OUT/run165.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
echo "A=$(cat build-a165/a-commit) B=$(cat results/h200/run165/commit)" > $R/commits.txt
lscpu > $R/lscpu.txt 2>&1
if [ ! -x /tmp/a165/build-h200/gem ]; then
  mkdir -p /tmp/a165 && tar xzf build-a165/a-tree.tgz -C /tmp/a165 && ln -sfn $PWD/.deps /tmp/a165/.deps
  (GEM_GIT_COMMIT=$(cat build-a165/a-commit) PHASES=build BUILD_TARGETS="gem dev_mv_chain" JOBS=8 \
     bash /tmp/a165/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
fi
GEM_GIT_COMMIT=$(cat results/h200/run165/commit) PHASES=build JOBS=8 \
  BUILD_TARGETS="gem dev_mv_chain test_cpu_pool" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
wait; tail -n 1 $R/build-a.txt $R/build.txt; echo "builds done at $(el) s"
B=build-h200
for i in 1 2 3; do build-h200/test_cpu_pool > $R/test_cpu_pool-$i.txt 2>&1; tail -n 1 $R/test_cpu_pool-$i.txt; done
i=0
for X in A B B A; do
  i=$((i+1)); G=/tmp/a165/build-h200; [ $X = B ] && G=$B
  timeout 90 $G/dev/mv_chain --layers 60 --rounds 3 > $R/mv_chain-$i-$X.txt 2>&1
  echo "mv_chain $X rc=$? at $(el) s"; grep -E "^(products|empty)" $R/mv_chain-$i-$X.txt
done
save
[ -f /tmp/synth-2gb.gguf ] || $B/gem synth --preset 2gb --out /tmp/synth-2gb.gguf > $R/synth-2gb.txt 2>&1
i=0
for X in A B B A A B B A A B B A; do
  i=$((i+1)); [ $(el) -gt 170 ] && { echo "stop before process $i"; break; }
  G=/tmp/a165/build-h200/gem; [ $X = B ] && G=$B/gem
  for c in 64 1024; do
    GEM_QUIET=1 timeout 60 $G profile --model /tmp/synth-2gb.gguf --context $c --prompt 16 --reps 3 \
      --samples 4 --threads 0 --out $R/abba-2gb/$X-$i-ctx$c.json > $R/abba-2gb/$X-$i-ctx$c.txt 2>&1
    echo "2gb $X-$i ctx $c rc=$? $(grep -E '^fused +whole token' $R/abba-2gb/$X-$i-ctx$c.txt | head -1 | cut -c1-60)"
  done
  save
done
