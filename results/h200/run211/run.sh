#!/usr/bin/env bash
# run 211 (any one GPU, after run 210 in the same call): whole 31B tokens in Q4_0, F32 caches,
# fused route, at 8K and 128K, processes A B B A A B B A: A = main before the change
# (build-a/m-tree.tgz, its commit in build-a/m-commit), B = this tree (block_sum as a barrier
# and block_sum_once, the q/k/v kernel's sums with two barriers fewer). Prediction: B/A
# 0.999 +- 0.002 (60 q/k/v kernels a token, a few tenths of a microsecond each), inside the
# processes' spread. A's build runs before any timing.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r211; rm -rf $R; mkdir -p $R/ab
save() { (cd $R && tar czf $OUT/run211.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/m-commit); CB=$(cat results/h200/run210/commit)
echo "A=$CA B=$CB" | tee $R/commits.txt
B=$PWD/build-h200/gem
[ -x $B ] || { echo "no B build (run 210 builds it)"; save; exit 1; }
$B synth --preset 31b --type q4_0 --no-matrices --context-length 262144 \
  --out /tmp/m31-q4_0.gguf > $R/synth.txt 2>&1 &
SYN=$!
(mkdir -p /tmp/a && tar xzf build-a/m-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps &&
  cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gem" JOBS=14 \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1)
tail -n 1 $R/build-a.txt; wait $SYN; echo "A built, synth rc=$? at $(el) s"
i=0
for X in A B B A A B B A; do
  i=$((i+1)); G=$B; [ $X = A ] && G=/tmp/a/build-h200/gem
  timeout 40 $G profile --model /tmp/m31-q4_0.gguf --backend cuda --random-weights 1 \
    --context 8192,131072 --reps 1 --samples 7 --bw-mib 4096 --kv-dtype f32 --fused-only \
    > $R/ab/$X-$i.txt 2>&1
  echo "$X-$i rc=$? at $(el) s"; grep -E "whole token" $R/ab/$X-$i.txt
  save
done
save; echo "done at $(el) s"
