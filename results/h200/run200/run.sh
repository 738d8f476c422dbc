#!/usr/bin/env bash
# run 200: on this tree (B: Q8_0 and BF16 tiles), the design's promotion in Q4_0 (the 31B
# dimensions, F32 caches, K stored; both routes at 8K / 64K / 128K, three interleaved
# repetitions) with `gem analyze promotion` and `ceiling`; the tight Q4_0 loop of branch
# tiles-tight-warp (T, build-a/t-tree.tgz) against main (A, build-a/a-tree.tgz): the fused
# route's whole tokens at 8K and 128K, processes A T T A; dev/cuda/tiles_q8_0 and the 31B
# dimensions in Q8_0 and BF16 on B (fused route at 8K and 128K); then the promotion with BF16
# caches while time lasts. Written for an H200; it runs as it is on an H100.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r200; rm -rf $R; mkdir -p $R/tight
save() { (cd $R && tar czf $OUT/run200.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); CT=$(cat build-a/t-commit); CB=$(cat results/h200/run200/commit)
echo "A=$CA T=$CT B=$CB" | tee $R/commits.txt
for X in a t; do
  mkdir -p /tmp/$X && tar xzf build-a/$X-tree.tgz -C /tmp/$X && ln -sfn $PWD/.deps /tmp/$X/.deps
done
(cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gem" JOBS=5 \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
(cd /tmp/t && GEM_GIT_COMMIT=$CT PHASES=build BUILD_TARGETS="gem" JOBS=5 \
  bash scripts/h200-run.sh /tmp/t-out > $R/build-t.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build JOBS=6 BUILD_TARGETS="gem dev_tiles_q8_0" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
for f in $R/build-a.txt $R/build-t.txt $R/build-b.txt; do tail -n 1 $f; done
echo "builds done at $(el) s"
B=build-h200
(for TY in q4_0 q8_0 bf16; do
  $B/gem synth --preset 31b --type $TY --no-matrices --context-length 262144 \
    --out /tmp/m31-$TY.gguf > $R/synth-$TY.txt 2>&1; echo "synth $TY rc=$? at $(el) s" >> $R/synth-rc.txt
done) &
timeout 100 $B/dev/tiles_q8_0 > $R/tiles-q8_0.txt 2>&1; echo "tiles_q8_0 rc=$? at $(el) s"
grep -E "FAILED|probe:|^(k|q|o-swa|o-full|gate|down|head) " $R/tiles-q8_0.txt
save
while ! grep -q "synth q4_0" $R/synth-rc.txt 2>/dev/null; do sleep 1; done; echo "q4_0 synth at $(el) s"
D=$R/q4_0; mkdir -p $D
timeout 200 $B/gem profile --model /tmp/m31-q4_0.gguf --backend cuda --random-weights 1 \
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
wait; cat $R/synth-rc.txt
for TY in q8_0 bf16; do
  [ $(left) -lt 60 ] && { echo "stop before $TY: $(left) s left"; break; }
  timeout 60 $B/gem profile --model /tmp/m31-$TY.gguf --backend cuda --random-weights 1 \
    --context 8192,131072 --reps 1 --samples 5 --bw-mib 4096 --kv-dtype f32 --fused-only \
    > $R/$TY-B.txt 2>&1
  echo "$TY B rc=$? at $(el) s"; grep -E "whole token" $R/$TY-B.txt
  save
done
if [ $(left) -gt 110 ]; then
  D=$R/q4_0-bf16kv; mkdir -p $D
  timeout $(( $(left) - 15 )) $B/gem profile --model /tmp/m31-q4_0.gguf --backend cuda \
    --random-weights 1 --context 8192,65536,131072 --kv-dtype bf16 --reps 3 --samples 5 \
    --bw-mib 4096 --out $D/p.json > $D/profile.txt 2>&1
  echo "profile bf16 caches rc=$? at $(el) s"; grep -v "^\[" $D/profile.txt | grep -E "whole token"
  $B/gem analyze promotion --long $D/p-ctx65536.json --long $D/p-ctx131072.json \
    --short $D/p-ctx8192.json --out $D/promotion.json > $D/promotion.txt 2>&1
  echo "analyze promotion rc=$?"; cat $D/promotion.txt
fi
save; echo "done at $(el) s"
