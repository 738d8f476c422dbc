#!/usr/bin/env bash
# run 195: the design's promotion on this tree (Q6_K tiles, GeGLU with the plain products'
# warps) for the 31B dimensions in Q4_0 (the design's setting) and in the Q4_K_M mix (weights
# generated on the GPU, F32 caches with K stored): `gem profile` of both routes at 8K / 64K /
# 128K (three interleaved repetitions of five samples, the stage profile), then `gem analyze
# promotion` and `gem analyze ceiling` for each.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r195; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run195.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run195/commit) PHASES=build JOBS=16 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
G=build-h200/gem
for TY in q4_0 q4_k_m; do
  D=$R/$TY; mkdir -p $D
  $G synth --preset 31b --type $TY --no-matrices --context-length 262144 --out /tmp/m31.gguf \
    > $D/synth.txt 2>&1
  echo "synth $TY rc=$? at $(el) s"
  timeout 200 $G profile --model /tmp/m31.gguf --backend cuda --random-weights 1 \
    --context 8192,65536,131072 --kv-dtype f32 --reps 3 --samples 5 --bw-mib 4096 \
    --out $D/p.json --stage-profile $D/s.json > $D/profile.txt 2>&1
  echo "profile $TY rc=$? at $(el) s"; grep -v "^\[" $D/profile.txt | grep -E "whole token"
  $G analyze promotion --long $D/p-ctx65536.json --long $D/p-ctx131072.json \
    --short $D/p-ctx8192.json --out $D/promotion.json > $D/promotion.txt 2>&1
  echo "analyze promotion rc=$?"; cat $D/promotion.txt
  $G analyze ceiling $D/s-ctx65536.json $D/s-ctx131072.json --out $D/ceiling.json \
    > $D/ceiling.txt 2>&1
  echo "analyze ceiling rc=$?"; cat $D/ceiling.txt
  save
done
save; echo "done at $(el) s"
