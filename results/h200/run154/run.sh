#!/usr/bin/env bash
# run 154: where the CPU decoder's products lose to the read probe on the H200 host's Xeon
# (issue 10: the 2gb preset's products at 66-71% of the probe, runs 64-66, cause not found).
# dev/cpu/mv_chain times the same 2.0 GB of packed Q8_0 weights as the decoder's 240 product
# dispatches a token, as one product a layer, as one product, as plain reads split like the
# products and in one dispatch, and as empty dispatches; then per kind of dispatch the read's
# item stamps (wake, busy share, tail, return). 16 threads (the default), then 8; the reads
# 4 KiB ahead (the products' choice on this processor), then none. Then dev/cpu/mv_wide: the
# library's packed product of wide matrices (the preset's o, the 31B's q and down; Q8_0 and
# Q4_K) at spans 1, 2, 4, 8 and mv_span_for's, on 16 threads and one. CPU only: no GPU work.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r154; mkdir -p $R
save() { (cd $R && tar czf $OUT/run154.tgz .); }
CB=$(cat results/h200/run154/commit 2>/dev/null || echo unknown)
echo "tree $CB" > $R/commits.txt
lscpu > $R/lscpu.txt 2>&1; nproc >> $R/lscpu.txt
CA=$(cat build-a154/commit 2>/dev/null || echo none)
echo "A $CA (the products before the spans)" >> $R/commits.txt
if [ -f build-a154/a-tree.tgz ]; then
  mkdir -p /tmp/a && tar xzf build-a154/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
  (GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS=gem JOBS=6 bash /tmp/a/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
fi
GEM_GIT_COMMIT=$CB PHASES=build JOBS=10 BUILD_TARGETS="gem dev_mv_chain dev_mv_wide" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(( $(date +%s) - T0 )) s"
D=build-h200/dev
for A in "--rounds 5" "--rounds 5 --ahead 0" "--rounds 5 --threads 8"; do
  N=$(echo "$A" | tr -d ' -' | tr -c 'a-z0-9\n' _)
  timeout 150 $D/mv_chain --layers 60 $A > $R/mv_chain-$N.txt 2>&1; echo "mv_chain $A rc=$? at $(( $(date +%s) - T0 )) s"
  sed -n '3,30p' $R/mv_chain-$N.txt
  save
done
for A in "--threads 0,1 --shapes 1024x8192,8192x5376,5376x21504" \
         "--threads 0 --type q4_k --shapes 8192x5376,5376x21504" \
         "--threads 0,1 --type q6_k --shapes 8192x5376" \
         "--threads 0 --parts-per-thread 1 --shapes 1024x8192,8192x5376"; do
  N=$(echo "$A" | tr -d ' -' | tr -c 'a-z0-9\n' _ | cut -c1-60)
  timeout 150 $D/mv_wide --rounds 5 $A > $R/mv_wide-$N.txt 2>&1; echo "mv_wide $A rc=$? at $(( $(date +%s) - T0 )) s"
  grep -E "shape|threads|GB/s" $R/mv_wide-$N.txt
  save
done
# whole tokens of six layers of the 31B's dimensions in Q8_0, A (before the spans) B B A, while
# time lasts (each process loads 4.6 GB and packs it)
wait
tail -n 1 $R/build-a.txt 2>/dev/null
if [ -x /tmp/a/build-h200/gem ] && [ $(( $(date +%s) - T0 )) -lt 330 ]; then
  build-h200/gem synth --preset 31b --layers 6 --type q8_0 --out /tmp/w6-q8.gguf > $R/synth-w6.txt 2>&1
  mkdir -p $R/abba-w6
  i=0
  for X in A B B A; do
    i=$((i+1)); [ $(( $(date +%s) - T0 )) -gt 520 ] && { echo "stop before process $i"; break; }
    G=/tmp/a/build-h200/gem; [ $X = B ] && G=build-h200/gem
    GEM_QUIET=1 timeout 60 $G profile --model /tmp/w6-q8.gguf --context 64 --prompt 16 --reps 3 --samples 4 --out $R/abba-w6/$X-$i-ctx64.json > $R/abba-w6/$X-$i.txt 2>&1
    echo "w6 $X-$i rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "whole token" $R/abba-w6/$X-$i.txt
    save
  done
fi
echo "done at $(( $(date +%s) - T0 )) s"
