#!/usr/bin/env bash
# run 158: the CPU's sliding attention at context 1,024 on the Xeon (16 KV heads x 4 partitions
# = 64 equal items for 16 threads, the ragged end run 154 found in the products).
#  - dev/cpu/small_live (this tree): sliding and full shapes at live 512, 1,024, 2,048, P 2, 4,
#    8, 16, caches cold and hot, 16 threads.
#  - whole tokens of the 2gb preset at context 1,024, B (this tree) against C (this tree with one
#    partition per 128 rows below 8,192 instead of 256: P 8 at 1,024), B C C B x 3.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r158; mkdir -p $R/abba-2gb
save() { (cd $R && tar czf $OUT/run158.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/c && tar xzf build-a156/c-tree.tgz -C /tmp/c && ln -sfn $PWD/.deps /tmp/c/.deps
(GEM_GIT_COMMIT=c-of-$(cat results/h200/run158/commit) PHASES=build BUILD_TARGETS="gem" JOBS=7 \
   bash /tmp/c/scripts/h200-run.sh /tmp/c-out > $R/build-c.txt 2>&1) &
GEM_GIT_COMMIT=$(cat results/h200/run158/commit) PHASES=build JOBS=9 BUILD_TARGETS="gem dev_small_live" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
wait; for f in build build-c; do tail -n 1 $R/$f.txt; done; echo "builds done at $(el) s"
B=build-h200
timeout 150 $B/dev/small_live --threads 16 --lengths 512,1024,2048 --partitions 2,4,8,16 \
  --shapes sliding,full --layouts head --rounds 5 > $R/small_live.txt 2>&1
echo "small_live rc=$? at $(el) s"; grep -E "^(sliding|full)" $R/small_live.txt | grep -v " 1 " ; save
$B/gem synth --preset 2gb --out /tmp/2gb.gguf > $R/synth-2gb.txt 2>&1
i=0
for X in B C C B B C C B B C C B; do
  i=$((i+1)); [ $(el) -gt 420 ] && { echo "stop before process $i"; break; }
  G=$B/gem; [ $X = C ] && G=/tmp/c/build-h200/gem
  GEM_QUIET=1 timeout 60 $G profile --model /tmp/2gb.gguf --context 1024 --prompt 16 --reps 3 \
    --samples 4 --threads 0 --out $R/abba-2gb/$X-$i-ctx1024.json > $R/abba-2gb/$X-$i-ctx1024.txt 2>&1
  echo "2gb $X-$i rc=$? $(grep -E 'fused +whole token' $R/abba-2gb/$X-$i-ctx1024.txt | head -1 | cut -c1-50)"
  save
done
echo "done at $(el) s"
