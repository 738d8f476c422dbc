#!/usr/bin/env bash
# run 157 (right after run 156 on the same machine): more of the same A/B (A = a3f115d, B = this
# tree: pool lines and the tapered split): mv_split 4, t4, t6 with 10 rounds; whole tokens of
# the 2gb preset A B B A x 3 at contexts 64 and 1024; then test_decode's default matrix.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r157; mkdir -p $R/abba-2gb
save() { (cd $R && tar czf $OUT/run157.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
if [ ! -x /tmp/a/build-h200/gem ]; then
  mkdir -p /tmp/a && tar xzf build-a156/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
  (GEM_GIT_COMMIT=a3f115d PHASES=build BUILD_TARGETS="gem" JOBS=6 bash /tmp/a/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
fi
GEM_GIT_COMMIT=$(cat results/h200/run156/commit) PHASES=build JOBS=10 BUILD_TARGETS="gem dev_mv_split test_decode" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
wait; echo "builds done at $(el) s"
B=build-h200
timeout 120 $B/dev/mv_split --threads 16 --layers 60 --rounds 10 --splits 4,t4,t6 \
  --prefetch 4096 --into 2 > $R/mv_split.txt 2>&1; echo "mv_split rc=$? at $(el) s"; tail -n 4 $R/mv_split.txt; save
[ -f /tmp/2gb.gguf ] || $B/gem synth --preset 2gb --out /tmp/2gb.gguf > $R/synth-2gb.txt 2>&1
i=0
for X in A B B A A B B A A B B A; do
  i=$((i+1)); [ $(el) -gt 300 ] && { echo "stop before process $i"; break; }
  G=/tmp/a/build-h200/gem; [ $X = B ] && G=$B/gem
  for c in 64 1024; do
    GEM_QUIET=1 timeout 60 $G profile --model /tmp/2gb.gguf --context $c --prompt 16 --reps 3 \
      --samples 4 --threads 0 --out $R/abba-2gb/$X-$i-ctx$c.json > $R/abba-2gb/$X-$i-ctx$c.txt 2>&1
    echo "2gb $X-$i ctx $c rc=$? $(grep -E 'fused +whole token' $R/abba-2gb/$X-$i-ctx$c.txt | head -1 | cut -c1-60)"
  done
  save
done
GEM_QUIET=1 timeout $(( 570 - $(el) )) $B/test_decode > $R/test_decode.txt 2>&1; echo "test_decode rc=$? at $(el) s"; grep -c FAIL $R/test_decode.txt; tail -n 2 $R/test_decode.txt
save
