#!/usr/bin/env bash
# run 217: (1) run 216's graph a token (D) gave other logits than the stream over 3 tokens,
# where one token's graph gave the stream's bits. The check re-ran 3 positions after the stream
# had run them, and every fixture's sliding rings were full (tiny: window 8; 31B: 1024 at 8K and
# 128K): the stream's later tokens had overwritten the oldest rows of the rings that D's tokens
# then read. dev/cuda/token_graph now saves the rings before the stream's tokens and restores
# them before D's. (2) gem_session_greedy, the library's greedy loop with a CUDA graph a token
# (the embedding reads the token id on the device from the argmax before it): test_model_cuda
# checks it against gem_session_eval_argmax on every configuration, token_graph (E) against the
# stream at 8K and 128K and times it, runs of 5 tokens A E E A; memcheck over gem generate on
# the tiny fixtures (every embedding row kernel's device-id form the tiles take).
# Predictions: D and E equal the stream bit for bit everywhere; graph/stream and D/A as in run
# 216 on an H100 (0.971-0.984 and 0.977-0.986); E/A within 0.005 of D/A (E is D with the id
# read on the device; the stream it is timed against feeds back its argmax as E does).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r217; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run217.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run217/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem dev_token_graph test_model_cuda" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build at $(el) s"
G=$PWD/build-h200/gem TG=$PWD/build-h200/dev/token_graph
[ -x $G ] && [ -x $TG ] || { echo "no build"; save; exit 1; }
$G synth --preset 31b --type q4_0 --no-matrices --context-length 262144 \
  --out /tmp/m31-q4_0.gguf > $R/synth.txt 2>&1 &
SYN=$!
timeout 150 build-h200/test_model_cuda > $R/test_model_cuda.txt 2>&1
echo "test_model_cuda rc=$? at $(el) s"; grep -E "FAIL|passed" $R/test_model_cuda.txt | head
$G synth --preset tiny --type q4_0 --embd 256 --ff 512 --vocab 1024 --out /tmp/tiny.gguf \
  > $R/synth-tiny.txt 2>&1
$G synth --preset tiny --out /tmp/tiny-q8.gguf > $R/synth-tiny-q8.txt 2>&1
wait $SYN; echo "synth rc=$? at $(el) s"
q31() {
  timeout 150 $TG --model /tmp/m31-q4_0.gguf --random-weights 1 --context 8192,131072 \
    --rounds 10 --kv-dtype $1 > $R/q4_0-$1.txt 2>&1
  echo "q4_0 $1 rc=$? at $(el) s"; cat $R/q4_0-$1.txt; save
}
gen() {
  timeout 60 $G generate --model /tmp/$1.gguf --backend cuda --prompt-tokens 2,17,33 -n 12 \
    --ignore-eos > $R/generate-$1.txt 2>&1; echo "generate $1 rc=$?"
  timeout 60 $G generate --model /tmp/$1.gguf --backend cpu --prompt-tokens 2,17,33 -n 12 \
    --ignore-eos > $R/generate-$1-cpu.txt 2>&1
  cmp <(head -1 $R/generate-$1.txt) <(head -1 $R/generate-$1-cpu.txt) \
    && echo "generate $1: the CPU's text" || echo "generate $1: text DIFFERS from the CPU's"
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $G generate \
    --model /tmp/$1.gguf --backend cuda --prompt-tokens 2,17,33 -n 6 --ignore-eos \
    > $R/memcheck-generate-$1.txt 2>&1
  echo "memcheck generate $1 rc=$? at $(el) s"; tail -n 2 $R/memcheck-generate-$1.txt; save
}
q31 f32
gen tiny
q31 bf16
gen tiny-q8
for KV in f32 bf16; do
  timeout 60 $TG --model /tmp/tiny.gguf --context 64,300 --rounds 5 --kv-dtype $KV \
    > $R/tiny-$KV.txt 2>&1
  echo "tiny $KV rc=$? at $(el) s"; grep -E "\(D\)|\(E\)|E/A|  |token_graph: [oF]" $R/tiny-$KV.txt
done
save
