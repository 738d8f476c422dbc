#!/usr/bin/env bash
# run 219: the tree that puts E2 in gem_session_greedy (a graph a token, the first token on the
# stream, the executables kept in the session) with `gem profile --greedy`. test_model_cuda
# (tgreedy now also checks that a CUDA greedy call leaves the stage times as they were), then
# on an H100 whole 31B tokens in Q4_0 as a decode loop gets them: `gem profile --fused-only
# --greedy 32` at 8K and 128K, F32 and BF16 caches (runs of 32 tokens A B B A, A = 32 calls of
# gem_session_eval_argmax, B = one gem_session_greedy call). On an H200, run 206 instead (its
# promotion profiles now with --greedy 16).
# Predictions (H100): greedy/token by token 0.976-0.982 at 8K and 0.984-0.990 at 128K (run
# 218's graph saving of 0.24-0.27 ms a token, the first token's none, over 32 tokens); the
# fused F32 token at 128K as the loop gets it ~81.5-82% of the floor (run 209: 80.6% for a
# token on the stream, GPU clock).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r219; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run219.tgz --exclude='*.gguf' .); }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run219/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem test_model_cuda" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build at $(el) s"
G=$PWD/build-h200/gem
[ -x $G ] || { echo "no build"; save; exit 1; }
$G synth --preset 31b --type q4_0 --no-matrices --context-length 262144 \
  --out /tmp/m31-q4_0.gguf > $R/synth.txt 2>&1 &
SYN=$!
timeout 150 build-h200/test_model_cuda > $R/test_model_cuda.txt 2>&1
echo "test_model_cuda rc=$? at $(el) s"; grep -E "FAIL|passed" $R/test_model_cuda.txt | head
wait $SYN; echo "synth rc=$? at $(el) s"
save
case "$GPU" in
  *H200*) echo "run 206 from $(el) s"; LIMIT_S=$(( ${LIMIT_S:-590} - $(el) )) \
    bash results/h200/run206/run.sh ;;
  *) echo "not an H200: run 206 waits"
    for KV in f32 bf16; do
      timeout 150 $G profile --model /tmp/m31-q4_0.gguf --backend cuda --random-weights 1 \
        --context 8192,131072 --reps 1 --samples 7 --bw-mib 4096 --kv-dtype $KV --fused-only \
        --greedy 32 --out $R/q4_0-$KV.json > $R/q4_0-$KV.txt 2>&1
      echo "profile q4_0 $KV rc=$? at $(el) s"; grep -E "whole token|greedy" $R/q4_0-$KV.txt
      save
    done ;;
esac
save; echo "done at $(el) s"
