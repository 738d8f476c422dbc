#!/usr/bin/env bash
# run 212 (any one GPU; written for an H100, where the 31B dimensions in BF16 with F32 caches do
# not fit at 128K): the design's promotion on the 31B dimensions with BF16 weights and BF16
# caches (61.4 GB of weights, 11.6 GB of caches at 128K), both routes at 8K / 64K / 128K, three
# interleaved repetitions x 5 tokens, with `gem analyze promotion`. Prediction: promote, with
# gains smaller than Q4_0's with BF16 caches (11.2% / 17.7%, run 209), since the weights'
# 61.4 GB dilute attention: about 6-9% at 64K and 11-14% at 128K; the fused token at 128K near
# 80% of its floor (the BF16 tiles read at the probe's rate on the head, run 199).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r212; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run212.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run206/commit) PHASES=build JOBS=16 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build at $(el) s"
B=$PWD/build-h200/gem
$B synth --preset 31b --type bf16 --no-matrices --context-length 262144 \
  --out /tmp/m31-bf16.gguf > $R/synth.txt 2>&1; echo "synth rc=$? at $(el) s"
D=$R/bf16-bf16kv; mkdir -p $D
timeout ${PROFILE_S:-300} $B profile --model /tmp/m31-bf16.gguf --backend cuda --random-weights 1 \
  --context 8192,65536,131072 --kv-dtype bf16 --reps 3 --samples 5 --bw-mib 4096 \
  --out $D/p.json --stage-profile $D/s.json > $D/profile.txt 2>&1
echo "profile rc=$? at $(el) s"; grep -v "^\[" $D/profile.txt | grep -E "gem profile|whole token|error|out of"
$B analyze promotion --long $D/p-ctx65536.json --long $D/p-ctx131072.json \
  --short $D/p-ctx8192.json --out $D/promotion.json > $D/promotion.txt 2>&1
echo "analyze promotion rc=$?"; cat $D/promotion.txt
save; echo "done at $(el) s"
