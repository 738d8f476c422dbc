#!/usr/bin/env bash
# run 176: whole tokens of the 2gb preset on the Xeon host, main (A, build-a/a-tree.tgz at
# build-a/commit) against this tree (B: GeGLU's activation and the per-head norms inside the
# products' items): gem profile at context 64 (then 1,024 while time lasts), prompt 16, 3
# interleaved repetitions of 4 samples, all cores; processes A B B A x 4.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r176; mkdir -p $R/abba-2gb
save() { (cd $R && tar czf $OUT/run176.tgz .); }
echo "A=$(cat build-a/commit) B=$(cat results/h200/run176/commit)" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(GEM_GIT_COMMIT=$(cat build-a/commit) PHASES=build BUILD_TARGETS="gem" JOBS=8 \
   bash /tmp/a/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$(cat results/h200/run176/commit) PHASES=build JOBS=8 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
wait; tail -n 1 $R/build-a.txt $R/build.txt; echo "builds done at $(el) s"
build-h200/gem synth --preset 2gb --out /tmp/synth-2gb.gguf > $R/synth-2gb.txt 2>&1
echo "synth done at $(el) s"
i=0
for c in 64 1024; do
  for X in A B B A A B B A A B B A A B B A; do
    i=$((i+1)); [ $(el) -gt 270 ] && { echo "stop before process $i"; break 2; }
    G=/tmp/a/build-h200/gem; [ $X = B ] && G=build-h200/gem
    GEM_QUIET=1 timeout 40 $G profile --model /tmp/synth-2gb.gguf --context $c --prompt 16 \
      --reps 3 --samples 4 --threads 0 --out $R/abba-2gb/$X-$i-ctx$c.json \
      > $R/abba-2gb/$X-$i-ctx$c.txt 2>&1
    echo "$X-$i ctx $c rc=$? at $(el) s" \
      "$(grep -E 'fused +whole token' $R/abba-2gb/$X-$i-ctx$c.txt | head -1 | cut -c1-90)"
  done
  save
done
save
echo "done at $(el) s"
