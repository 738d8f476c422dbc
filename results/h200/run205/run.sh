#!/usr/bin/env bash
# run 205: on an H200 alone (an H100 ends the call at once): the tight Q4_0 loop of branch
# tiles-tight-warp (T, build-a/t-tree.tgz) against main (A, build-a/a-tree.tgz), processes
# A T T A at 8K and 128K (the 31B dimensions, F32 caches, K stored); on this tree (B: the Q8_0
# and BF16 tiles) the design's promotion in Q4_0 (both routes at 8K / 64K / 128K, three
# interleaved repetitions) with `gem analyze promotion` and `ceiling`; then the 31B dimensions
# in BF16 at 8K and 128K (B) while time lasts.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r205; rm -rf $R; mkdir -p $R/tight
save() { (cd $R && tar czf $OUT/run205.tgz .); }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
H200=0; case "$GPU" in *H200*) H200=1;; esac
[ $H200 = 1 ] || { echo "not an H200 ($GPU): nothing to run"; save; exit 0; }
CA=$(cat build-a/commit); CT=$(cat build-a/t-commit); CB=$(cat results/h200/run205/commit)
echo "A=$CA T=$CT B=$CB H200=$H200" | tee $R/commits.txt
if [ $H200 = 1 ]; then
  for X in a t; do
    C=$CA; [ $X = t ] && C=$CT
    mkdir -p /tmp/$X && tar xzf build-a/$X-tree.tgz -C /tmp/$X && ln -sfn $PWD/.deps /tmp/$X/.deps
    (cd /tmp/$X && GEM_GIT_COMMIT=$C PHASES=build BUILD_TARGETS="gem" JOBS=5 \
      bash scripts/h200-run.sh /tmp/$X-out > $R/build-$X.txt 2>&1) &
  done
fi
GEM_GIT_COMMIT=$CB PHASES=build JOBS=6 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
for f in $R/build-*.txt; do tail -n 1 $f; done; echo "builds done at $(el) s"
B=build-h200
if [ $H200 = 1 ]; then
  (for TY in q4_0 bf16; do
    $B/gem synth --preset 31b --type $TY --no-matrices --context-length 262144 \
      --out /tmp/m31-$TY.gguf > $R/synth-$TY.txt 2>&1; echo "synth $TY rc=$? at $(el) s" >> $R/synth-rc.txt
  done) &
fi
while ! grep -q "synth q4_0" $R/synth-rc.txt 2>/dev/null; do sleep 1; done; echo "q4_0 synth at $(el) s"
i=0
for X in A T T A; do
  i=$((i+1))
  [ $(left) -lt 60 ] && { echo "stop before $X-$i: $(left) s left"; break; }
  G=/tmp/a/build-h200/gem; [ $X = T ] && G=/tmp/t/build-h200/gem
  timeout 60 $G profile --model /tmp/m31-q4_0.gguf --backend cuda --random-weights 1 \
    --context 8192,131072 --reps 1 --samples 7 --bw-mib 4096 --kv-dtype f32 --fused-only \
    > $R/tight/q4_0-$X-$i.txt 2>&1
  echo "tight $X-$i rc=$? at $(el) s"; grep -E "whole token" $R/tight/q4_0-$X-$i.txt
  save
done
D=$R/q4_0; mkdir -p $D
timeout $(( $(left) - 15 )) $B/gem profile --model /tmp/m31-q4_0.gguf --backend cuda --random-weights 1 \
  --context 8192,65536,131072 --kv-dtype f32 --reps 3 --samples 5 --bw-mib 4096 \
  --out $D/p.json --stage-profile $D/s.json > $D/profile.txt 2>&1
echo "profile rc=$? at $(el) s"; grep -v "^\[" $D/profile.txt | grep -E "gem profile|whole token"
$B/gem analyze promotion --long $D/p-ctx65536.json --long $D/p-ctx131072.json \
  --short $D/p-ctx8192.json --out $D/promotion.json > $D/promotion.txt 2>&1
echo "analyze promotion rc=$?"; cat $D/promotion.txt
$B/gem analyze ceiling $D/s-ctx65536.json $D/s-ctx131072.json --out $D/ceiling.json \
  > $D/ceiling.txt 2>&1
echo "analyze ceiling rc=$?"; cat $D/ceiling.txt
save
wait; cat $R/synth-rc.txt
if [ $(left) -gt 60 ]; then
  timeout 60 $B/gem profile --model /tmp/m31-bf16.gguf --backend cuda --random-weights 1 \
    --context 8192,131072 --reps 1 --samples 5 --bw-mib 4096 --kv-dtype f32 --fused-only \
    > $R/bf16-B.txt 2>&1
  echo "bf16 B rc=$? at $(el) s"; grep -E "whole token" $R/bf16-B.txt
fi
save; echo "done at $(el) s"
