#!/usr/bin/env bash
# run 215 (any one GPU): run 214's C with the tickets taken as one release-acquire atomic by
# thread 0 after the block's barrier (D, build-a/d-tree.tgz) instead of a device fence by each
# row's writer, an atomic and a fence after it; whole 31B Q4_0 tokens, F32 caches, fused route,
# 8K and 128K, processes A D D A A D D A (A = main, build-a/m-tree.tgz). Prediction: the fences
# are most of run 214's C - B (0.43 ms a token, 7 us a layer): D/A 1.00-1.02.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r215; rm -rf $R; mkdir -p $R/ab
save() { (cd $R && tar czf $OUT/run215.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/m-commit); CD=$(cat build-a/d-commit)
echo "A=$CA D=$CD" | tee $R/commits.txt
for X in a d; do
  C=$CA; [ $X = d ] && C=$CD
  [ -x /tmp/$X/build-h200/gem ] && [ $X = a ] && continue
  rm -rf /tmp/$X && mkdir -p /tmp/$X && tar xzf build-a/$X-tree.tgz -C /tmp/$X 2>/dev/null ||
    tar xzf build-a/m-tree.tgz -C /tmp/$X
  ln -sfn $PWD/.deps /tmp/$X/.deps
  (cd /tmp/$X && GEM_GIT_COMMIT=$C PHASES=build BUILD_TARGETS="gem" JOBS=8 \
    bash scripts/h200-run.sh /tmp/$X-out > $R/build-$X.txt 2>&1) &
done
wait; tail -qn 1 $R/build-*.txt; echo "builds at $(el) s"
A=/tmp/a/build-h200/gem D=/tmp/d/build-h200/gem
[ -f /tmp/m31-q4_0.gguf ] || $D synth --preset 31b --type q4_0 --no-matrices \
  --context-length 262144 --out /tmp/m31-q4_0.gguf > $R/synth.txt 2>&1
i=0
for X in A D D A A D D A; do
  i=$((i+1)); G=$A; [ $X = D ] && G=$D
  timeout 50 $G profile --model /tmp/m31-q4_0.gguf --backend cuda --random-weights 1 \
    --context 8192,131072 --reps 1 --samples 7 --bw-mib 4096 --kv-dtype f32 --fused-only \
    > $R/ab/$X-$i.txt 2>&1
  echo "$X-$i rc=$? at $(el) s"; grep -E "whole token" $R/ab/$X-$i.txt
  save
done
save; echo "done at $(el) s"
