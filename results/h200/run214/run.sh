#!/usr/bin/env bash
# run 214 (the GPU of run 213, right after it): whole 31B tokens in Q4_0, F32 caches, fused
# route, at 8K and 128K, processes A B C C B A A B C: A = main before both changes, B = the
# q/k/v step in the products' blocks (60 launches and dependent waits a token fewer), C = B and
# GeGLU writing the down product's scratch (60 more); run 213 built all three. Predictions:
# B/A 0.975-0.99 at 8K, 0.985-0.995 at 128K (2-4 us a layer); C/B 0.99-0.995 at 8K (about
# 1.25 us a layer, run 108's cost of a scratch kernel, less what the tickets add).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r214; rm -rf $R; mkdir -p $R/ab
save() { (cd $R && tar czf $OUT/run214.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
C=$PWD/build-h200/gem A=/tmp/a/build-h200/gem B=/tmp/b/build-h200/gem
[ -x $A ] && [ -x $B ] && [ -x $C ] || { echo "no builds (run 213 makes them)"; save; exit 1; }
$C synth --preset 31b --type q4_0 --no-matrices --context-length 262144 \
  --out /tmp/m31-q4_0.gguf > $R/synth.txt 2>&1; echo "synth rc=$? at $(el) s"
i=0
for X in A B C C B A A B C; do
  i=$((i+1))
  [ $(( ${LIMIT_S:-580} - $(el) )) -lt 50 ] && { echo "stop before $X-$i"; break; }
  G=$C; [ $X = A ] && G=$A; [ $X = B ] && G=$B
  timeout 50 $G profile --model /tmp/m31-q4_0.gguf --backend cuda --random-weights 1 \
    --context 8192,131072 --reps 1 --samples 7 --bw-mib 4096 --kv-dtype f32 --fused-only \
    > $R/ab/$X-$i.txt 2>&1
  echo "$X-$i rc=$? at $(el) s"; grep -E "whole token" $R/ab/$X-$i.txt
  save
done
save; echo "done at $(el) s"
