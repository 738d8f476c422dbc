#!/usr/bin/env bash
# run 160, second call (the same branch): whole tokens of the 2gb preset, A = main (the tree in
# build-a160/a-tree.tgz, its commit in build-a160/a-commit) against B = this tree (owned items
# and the next product's preload, the branch's default), gem profile at contexts 64 and 1,024
# (prompt 16, 3 interleaved repetitions of 4 samples), processes A B B A x 3 while time lasts.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r160b; mkdir -p $R/abba-2gb
save() { (cd $R && tar czf $OUT/run160b.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
echo "A=$(cat build-a160/a-commit) B=$(cat results/h200/run160/commit)" > $R/commits.txt
if [ ! -x /tmp/a/build-h200/gem ]; then
  mkdir -p /tmp/a && tar xzf build-a160/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
  (GEM_GIT_COMMIT=$(cat build-a160/a-commit) PHASES=build BUILD_TARGETS="gem" JOBS=8 \
     bash /tmp/a/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
fi
GEM_GIT_COMMIT=$(cat results/h200/run160/commit) PHASES=build JOBS=8 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
wait; tail -n 1 $R/build-a.txt $R/build.txt; echo "builds done at $(el) s"
B=build-h200
[ -f /tmp/synth-2gb.gguf ] || $B/gem synth --preset 2gb --out /tmp/synth-2gb.gguf > $R/synth-2gb.txt 2>&1
i=0
for X in A B B A A B B A A B B A; do
  i=$((i+1)); [ $(el) -gt 420 ] && { echo "stop before process $i"; break; }
  G=/tmp/a/build-h200/gem; [ $X = B ] && G=$B/gem
  for c in 64 1024; do
    GEM_QUIET=1 timeout 60 $G profile --model /tmp/synth-2gb.gguf --context $c --prompt 16 --reps 3 \
      --samples 4 --threads 0 --out $R/abba-2gb/$X-$i-ctx$c.json > $R/abba-2gb/$X-$i-ctx$c.txt 2>&1
    echo "2gb $X-$i ctx $c rc=$? $(grep -E 'fused +whole token' $R/abba-2gb/$X-$i-ctx$c.txt | head -1 | cut -c1-60)"
  done
  save
done
