#!/usr/bin/env bash
# run 218: greedy decoding in one call with a CUDA graph a token, in the form a library call can
# run (dev/cuda/token_graph E2: the call's first token queued on the stream while the second is
# captured, the two executables kept from call to call) against run 217's form (E1: the first
# token captured with the GPU idle, two executables instantiated a call, measured at
# 1.045-1.096 of the stream) and the stream, runs of 5 tokens A E1 E2 E2 E1 A, the 31B
# dimensions in Q4_0 at 8K and 128K, F32 and BF16 caches; E1 and E2 checked against the stream
# bit for bit first. Predictions: E1/A 1.04-1.10 again; E2/A 0.980-0.992 (its four graph tokens
# each as D's, 0.976-0.988 of the stream, and its first token the stream's). E2 goes into
# gem_session_greedy only if E2/A < 1 at both lengths on both cache types. token_graph prints the
# runtime's reason for each refused executable update (runs 216-217 saw two a D run, reason not
# recorded). test_cuda_matvec runs gem_dmv_row_at's checks on a GPU for the first time.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r218; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run218.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run218/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem dev_token_graph test_model_cuda test_cuda_matvec" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build at $(el) s"
G=$PWD/build-h200/gem TG=$PWD/build-h200/dev/token_graph
[ -x $G ] && [ -x $TG ] || { echo "no build"; save; exit 1; }
$G synth --preset 31b --type q4_0 --no-matrices --context-length 262144 \
  --out /tmp/m31-q4_0.gguf > $R/synth.txt 2>&1 &
SYN=$!
timeout 150 build-h200/test_model_cuda > $R/test_model_cuda.txt 2>&1
echo "test_model_cuda rc=$? at $(el) s"; grep -E "FAIL|passed" $R/test_model_cuda.txt | head
# gem_dmv_row_at (the embedding's id read on the device) in every layout: its first GPU run
timeout 120 build-h200/test_cuda_matvec > $R/test_cuda_matvec.txt 2>&1
echo "test_cuda_matvec rc=$? at $(el) s"; grep -E "FAIL|passed" $R/test_cuda_matvec.txt | head
wait $SYN; echo "synth rc=$? at $(el) s"
for KV in f32 bf16; do
  timeout 150 $TG --model /tmp/m31-q4_0.gguf --random-weights 1 --context 8192,131072 \
    --rounds 10 --kv-dtype $KV > $R/q4_0-$KV.txt 2>&1
  echo "q4_0 $KV rc=$? at $(el) s"; cat $R/q4_0-$KV.txt; save
done
$G synth --preset tiny --type q4_0 --embd 256 --ff 512 --vocab 1024 --out /tmp/tiny.gguf \
  > $R/synth-tiny.txt 2>&1
timeout 60 $TG --model /tmp/tiny.gguf --context 64,300 --rounds 5 > $R/tiny-f32.txt 2>&1
echo "tiny rc=$? at $(el) s"; grep -E "E[12]|token_graph: [oF]" $R/tiny-f32.txt
save
# E2 in the library (branch greedy-e2, build-a/e2-tree.tgz, its commit in build-a/e2-commit):
# gem_session_greedy as E2, the executables kept in the session; test_model_cuda (tgreedy: its
# tokens, position and cache against gem_session_eval_argmax bit for bit over several calls on
# one session), gem generate's text against the CPU's, and memcheck over gem generate
e2lib() {
  local E=/tmp/e2 D=$R/e2; mkdir -p $D
  [ -s build-a/e2-tree.tgz ] || { echo "no build-a/e2-tree.tgz"; return; }
  mkdir -p $E && tar xzf build-a/e2-tree.tgz -C $E && ln -sfn $PWD/.deps $E/.deps
  local C=$(cat build-a/e2-commit)
  (cd $E && GEM_GIT_COMMIT=$C PHASES=build JOBS=16 \
    BUILD_TARGETS="gem test_model_cuda" bash scripts/h200-run.sh /tmp/e2-out) > $D/build.txt 2>&1
  tail -n 1 $D/build.txt; echo "e2 build at $(el) s"
  timeout 150 $E/build-h200/test_model_cuda > $D/test_model_cuda.txt 2>&1
  echo "e2 test_model_cuda rc=$? at $(el) s"; grep -E "FAIL|passed" $D/test_model_cuda.txt | head
  $G synth --preset tiny --out /tmp/tiny-q8.gguf > $D/synth-tiny-q8.txt 2>&1
  for F in tiny tiny-q8; do
    for B in cuda cpu; do
      timeout 60 $E/build-h200/gem generate --model /tmp/$F.gguf --backend $B \
        --prompt-tokens 2,17,33 -n 12 --ignore-eos > $D/generate-$F-$B.txt 2>&1
    done
    cmp <(head -1 $D/generate-$F-cuda.txt) <(head -1 $D/generate-$F-cpu.txt) \
      && echo "e2 generate $F: the CPU's text" || echo "e2 generate $F: text DIFFERS"
    timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $E/build-h200/gem generate \
      --model /tmp/$F.gguf --backend cuda --prompt-tokens 2,17,33 -n 6 --ignore-eos \
      > $D/memcheck-generate-$F.txt 2>&1
    echo "e2 memcheck generate $F rc=$? at $(el) s"; tail -n 2 $D/memcheck-generate-$F.txt
  done
  save
}
# on an H200, the rest of the call goes to run 206 (the promotion, BF16 31B at 128K); on an
# H100, to E2 in the library
case "$(cat $R/gpu.txt)" in
  *H200*) echo "run 206 from $(el) s"; LIMIT_S=$(( ${LIMIT_S:-590} - $(el) )) \
    bash results/h200/run206/run.sh ;;
  *) echo "not an H200: run 206 waits"; e2lib ;;
esac
