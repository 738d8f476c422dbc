#!/usr/bin/env bash
# run 209 (any one GPU; the H200s of run 206 did not come): the design's promotion on the tree
# that ships the norm kernels of runs 207-208, the 31B dimensions in Q4_0, F32 caches and then
# BF16 caches (K stored): both routes at 8K / 64K / 128K, three interleaved repetitions, stage
# profiles, `gem analyze promotion` and `ceiling`.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r209; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run209.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $R/gpu.txt
CB=$(cat results/h200/run209/commit); echo "B=$CB" | tee $R/commits.txt
GEM_GIT_COMMIT=$CB PHASES=build JOBS=16 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
tail -n 1 $R/build-b.txt; echo "build at $(el) s"
B=$PWD/build-h200/gem
$B synth --preset 31b --type q4_0 --no-matrices --context-length 262144 --out /tmp/m31-q4_0.gguf \
  > $R/synth-q4_0.txt 2>&1; echo "synth rc=$? at $(el) s"
for KV in f32 bf16; do
  D=$R/q4_0-$KV; mkdir -p $D
  [ $(left) -lt 60 ] && { echo "stop before $KV: $(left) s left"; break; }
  timeout $(( $(left) - 20 )) $B profile --model /tmp/m31-q4_0.gguf --backend cuda \
    --random-weights 1 --context 8192,65536,131072 --kv-dtype $KV --reps 3 --samples 5 \
    --bw-mib 4096 --out $D/p.json --stage-profile $D/s.json > $D/profile.txt 2>&1
  echo "profile $KV rc=$? at $(el) s"; grep -v "^\[" $D/profile.txt | grep -E "gem profile|whole token"
  $B analyze promotion --long $D/p-ctx65536.json --long $D/p-ctx131072.json \
    --short $D/p-ctx8192.json --out $D/promotion.json > $D/promotion.txt 2>&1
  echo "analyze promotion $KV rc=$?"; cat $D/promotion.txt
  $B analyze ceiling $D/s-ctx65536.json $D/s-ctx131072.json --out $D/ceiling.json \
    > $D/ceiling.txt 2>&1
  echo "analyze ceiling $KV rc=$?"; cat $D/ceiling.txt
  save
done
save; echo "done at $(el) s"
