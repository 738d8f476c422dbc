#!/usr/bin/env bash
# run 167 (Xeon host; also runs run 166): the CPU fused route's one pool run at one partition
# and its first span's V rows asked for early (B = this tree, the branch attn-one-pass) against
# main (A = build-a165/a-tree.tgz, 63d2597: the same library code as main's head).
#  1. builds: A (gem, mv_chain), C of run 166 (build-c166/c-tree.tgz), B (gem, small_live,
#     test_decode_bad_input), in parallel
#  2. run 166 (results/h200/run166/run.sh, about 100 s)
#  3. B: test_decode_bad_input; dev/cpu/small_live with the four variants in the same rounds
#     (main, one, firstv, both), sliding and full, live 64, 256, 1,024, P 1 and 4
#  4. whole tokens of the 2gb preset, gem profile at contexts 64 and 1,024, processes
#     A B B A A B B A ... until 520 s
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r167; mkdir -p $R/abba-2gb
save() { (cd $R && tar czf $OUT/run167.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
echo "A=$(cat build-a165/a-commit) B=$(cat results/h200/run167/commit)" > $R/commits.txt
lscpu > $R/lscpu.txt 2>&1
for t in a165 c166; do
  L=${t:0:1}; mkdir -p /tmp/$t && tar xzf build-$t/$L-tree.tgz -C /tmp/$t && ln -sfn $PWD/.deps /tmp/$t/.deps
done
(GEM_GIT_COMMIT=$(cat build-a165/a-commit) PHASES=build BUILD_TARGETS="gem dev_mv_chain" JOBS=5 \
   bash /tmp/a165/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
(GEM_GIT_COMMIT=$(cat build-c166/c-commit) PHASES=build BUILD_TARGETS="dev_mv_chain test_cpu_pool" JOBS=5 \
   bash /tmp/c166/scripts/h200-run.sh /tmp/c-out > /tmp/c166-build.txt 2>&1) &
GEM_GIT_COMMIT=$(cat results/h200/run167/commit) PHASES=build JOBS=6 \
  BUILD_TARGETS="gem dev_small_live test_decode_bad_input" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
wait; tail -n 1 $R/build-a.txt $R/build.txt /tmp/c166-build.txt; echo "builds done at $(el) s"
save
bash results/h200/run166/run.sh
echo "run 166 done at $(el) s"
B=build-h200
$B/test_decode_bad_input > $R/test_decode_bad_input.txt 2>&1; tail -n 1 $R/test_decode_bad_input.txt
timeout 120 $B/dev/small_live --lengths 64,256,1024 --partitions 1,4 --rounds 7 --calls 40 \
  --layouts head --variants main,one,firstv,both > $R/small_live.txt 2>&1
echo "small_live rc=$? at $(el) s"; grep -E " (64|1024) +1 " $R/small_live.txt | head -40
save
[ -f /tmp/synth-2gb.gguf ] || $B/gem synth --preset 2gb --out /tmp/synth-2gb.gguf > $R/synth-2gb.txt 2>&1
i=0
for X in A B B A A B B A A B B A; do
  i=$((i+1)); [ $(el) -gt 520 ] && { echo "stop before process $i"; break; }
  G=/tmp/a165/build-h200/gem; [ $X = B ] && G=$B/gem
  for c in 64 1024; do
    GEM_QUIET=1 timeout 60 $G profile --model /tmp/synth-2gb.gguf --context $c --prompt 16 --reps 3 \
      --samples 4 --threads 0 --out $R/abba-2gb/$X-$i-ctx$c.json > $R/abba-2gb/$X-$i-ctx$c.txt 2>&1
    echo "2gb $X-$i ctx $c rc=$? $(grep -E '^fused +whole token' $R/abba-2gb/$X-$i-ctx$c.txt | head -1 | cut -c1-60)"
  done
  save
done
echo "end at $(el) s"
