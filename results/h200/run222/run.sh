#!/usr/bin/env bash
# run 222 (an H100): the 31B dimensions in Q4_0 with the full layers storing V alone (the
# K = V route, `gem profile --k-from-v`), greedy decoding as an application runs it (`--greedy
# 32`: one gem_session_greedy call of 32 tokens, a CUDA graph a token, against 32 calls of
# gem_session_eval_argmax), at 8K and 128K with F32 and BF16 caches, beside the stored K + V
# route of run 219 (not rerun here: compare by milliseconds on the same card type). The KV
# memory the route saves is in each profile's first lines.
# Predictions: greedy/token by token 0.975-0.985 as in run 219 (the graph loop does not depend
# on the route); at 128K F32 about 13.3-13.8 ms a token on the loop against run 219's 15.810
# (full attention reads 10.7 GB instead of 21.5 at 128K: about 3.3 ms of bytes less at 3.2
# TB/s, less the K-from-V pass's extra arithmetic: docs/k-from-v.md, 0.281 / 0.476 of the
# stored pass on an H200).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r222; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run222.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run222/commit) PHASES=build JOBS=16 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build at $(el) s"
G=$PWD/build-h200/gem
[ -x $G ] || { echo "no build"; save; exit 1; }
$G synth --preset 31b --type q4_0 --no-matrices --context-length 262144 \
  --out /tmp/m31-q4_0.gguf > $R/synth.txt 2>&1; echo "synth rc=$? at $(el) s"
for KV in f32 bf16; do
  timeout 150 $G profile --model /tmp/m31-q4_0.gguf --backend cuda --random-weights 1 \
    --context 8192,131072 --reps 1 --samples 7 --bw-mib 4096 --kv-dtype $KV --k-from-v \
    --greedy 32 --out $R/q4_0-$KV-kfv.json > $R/q4_0-$KV-kfv.txt 2>&1
  echo "profile q4_0 $KV k-from-v rc=$? at $(el) s"
  grep -E "KV cache|whole token|greedy" $R/q4_0-$KV-kfv.txt | grep -v "^\["
  save
done
save; echo "done at $(el) s"
