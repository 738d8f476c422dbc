#!/usr/bin/env bash
# run 208 (any one GPU): branch norm-one-barrier (N, build-a/n-tree.tgz: one barrier a sum of
# squares in the norm kernels) against this tree (B), whole 31B Q4_0 tokens at 8K and 128K in
# processes B N N B B N N B (F32 caches, fused route); then racecheck and synccheck over N's
# decoder on the tiny fixture (two tokens, F32 products and Q4_0 tiles) and N's
# test_model_cuda.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r208; rm -rf $R; mkdir -p $R/ab
save() { (cd $R && tar czf $OUT/run208.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $R/gpu.txt
CN=$(cat build-a/n-commit); CB=$(cat results/h200/run208/commit)
echo "N=$CN B=$CB" | tee $R/commits.txt
(mkdir -p /tmp/n && tar xzf build-a/n-tree.tgz -C /tmp/n && ln -sfn $PWD/.deps /tmp/n/.deps &&
  cd /tmp/n && GEM_GIT_COMMIT=$CN PHASES=build BUILD_TARGETS="gem test_model_cuda" JOBS=8 \
  bash scripts/h200-run.sh /tmp/n-out > $R/build-n.txt 2>&1) &
BN=$!
GEM_GIT_COMMIT=$CB PHASES=build JOBS=8 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait $BN; tail -n 1 $R/build-b.txt $R/build-n.txt; echo "builds at $(el) s"
B=$PWD/build-h200/gem; N=/tmp/n/build-h200/gem
$B synth --preset 31b --type q4_0 --no-matrices --context-length 262144 --out /tmp/m31-q4_0.gguf \
  > $R/synth-q4_0.txt 2>&1; echo "synth rc=$? at $(el) s"
i=0
for X in B N N B B N N B; do
  i=$((i+1))
  [ $(left) -lt 120 ] && { echo "stop before $X-$i: $(left) s left"; break; }
  G=$B; [ $X = N ] && G=$N
  timeout 40 $G profile --model /tmp/m31-q4_0.gguf --backend cuda --random-weights 1 \
    --context 8192,131072 --reps 1 --samples 7 --bw-mib 4096 --kv-dtype f32 --fused-only \
    > $R/ab/q4_0-$X-$i.txt 2>&1
  echo "ab $X-$i rc=$? at $(el) s"; grep -E "whole token|norms" $R/ab/q4_0-$X-$i.txt
done
save
$N synth --preset tiny --out /tmp/tiny.gguf > /dev/null
$N synth --preset tiny --type q4_0 --embd 256 --ff 512 --vocab 1024 --out /tmp/tiles.gguf > /dev/null
for M in tiny tiles; do
  for tool in racecheck synccheck; do
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $N generate --model /tmp/$M.gguf \
      --backend cuda --prompt-tokens 2,3 -n 2 > $R/sanitizer-$M-$tool.txt 2>&1
    echo "$tool $M rc=$? at $(el) s"; tail -n 1 $R/sanitizer-$M-$tool.txt
  done
done
save
timeout $(( $(left) - 10 )) /tmp/n/build-h200/test_model_cuda > $R/test-model-cuda-n.txt 2>&1
echo "test_model_cuda N rc=$? at $(el) s"; tail -n 1 $R/test-model-cuda-n.txt
save; echo "done at $(el) s"
