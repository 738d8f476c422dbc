#!/usr/bin/env bash
# run 173: the CPU decoder with GeGLU's activation inside the gate/up items (B, this tree)
# against main (A, build-a/a-tree.tgz at build-a/commit) on the Xeon host: test_matvec and
# test_model on B, then whole tokens of the 2gb preset (gem profile at contexts 64 and 1,024,
# prompt 16, 3 interleaved repetitions of 4 samples, all cores), processes A B B A x 3 while time
# lasts.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r173; mkdir -p $R/abba-2gb
save() { (cd $R && tar czf $OUT/run173.tgz .); }
lscpu | grep -E "Model name|^CPU\(s\)|Thread|MHz" > $R/cpu-host.txt; cat $R/cpu-host.txt
echo "A=$(cat build-a/commit) B=$(cat results/h200/run173/commit)" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(GEM_GIT_COMMIT=$(cat build-a/commit) PHASES=build BUILD_TARGETS="gem" JOBS=8 \
   bash /tmp/a/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$(cat results/h200/run173/commit) PHASES=build JOBS=8 \
  BUILD_TARGETS="gem test_matvec test_model" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
wait; tail -n 1 $R/build-a.txt $R/build.txt; echo "builds done at $(el) s"
B=build-h200
for T in test_matvec test_model; do
  GEM_QUIET=1 timeout 60 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$?"; tail -n 1 $R/$T.txt
done
$B/gem synth --preset 2gb --out /tmp/synth-2gb.gguf > $R/synth-2gb.txt 2>&1
echo "synth done at $(el) s"
i=0
for X in A B B A A B B A A B B A; do
  i=$((i+1)); [ $(el) -gt 500 ] && { echo "stop before process $i"; break; }
  G=/tmp/a/build-h200/gem; [ $X = B ] && G=$B/gem
  for c in 64 1024; do
    GEM_QUIET=1 timeout 60 $G profile --model /tmp/synth-2gb.gguf --context $c --prompt 16 \
      --reps 3 --samples 4 --threads 0 --out $R/abba-2gb/$X-$i-ctx$c.json \
      > $R/abba-2gb/$X-$i-ctx$c.txt 2>&1
    echo "$X-$i ctx $c rc=$? at $(el) s" \
      "$(grep -E 'fused +whole token' $R/abba-2gb/$X-$i-ctx$c.txt | head -1 | cut -c1-70)"
  done
  save
done
echo "done at $(el) s"
