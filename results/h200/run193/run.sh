#!/usr/bin/env bash
# run 193: the design's promotion on the 31B dimensions in llama.cpp's Q4_K_M mix (Q4_K, with
# the head, half of attn_v and half of ffn_down in Q6_K, all on the tensor cores since run 192;
# weights generated on the GPU, F32 caches with K stored): `gem profile` of both routes at 8K /
# 64K / 128K (three interleaved repetitions of five samples, the stage profile), `gem analyze
# promotion` and `gem analyze ceiling`. Then main (A, build-a/a-tree.tgz: Q6_K on the F32
# kernel) at 128K, the fused route, one process. On an H200, dev/cuda/tiles_tight after.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r193; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run193.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); CB=$(cat results/h200/run193/commit); echo "A=$CA B=$CB" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gem" JOBS=6 \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build JOBS=10 BUILD_TARGETS="gem dev_tiles_tight" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
G=build-h200/gem
$G synth --preset 31b --type q4_k_m --no-matrices --context-length 262144 --out /tmp/m31.gguf \
  > $R/synth.txt 2>&1
echo "synth rc=$? at $(el) s"
timeout 400 $G profile --model /tmp/m31.gguf --backend cuda --random-weights 1 \
  --context 8192,65536,131072 --kv-dtype f32 --reps 3 --samples 5 --bw-mib 4096 \
  --out $R/p.json --stage-profile $R/s.json > $R/profile.txt 2>&1
echo "profile rc=$? at $(el) s"; grep -v "^\[" $R/profile.txt | grep -E "gem profile|whole token"
save
$G analyze promotion --long $R/p-ctx65536.json --long $R/p-ctx131072.json \
  --short $R/p-ctx8192.json --out $R/promotion.json > $R/promotion.txt 2>&1
echo "analyze promotion rc=$? at $(el) s"; cat $R/promotion.txt
$G analyze ceiling $R/s-ctx65536.json $R/s-ctx131072.json --out $R/ceiling.json \
  > $R/ceiling.txt 2>&1
echo "analyze ceiling rc=$? at $(el) s"; cat $R/ceiling.txt
save
wait; tail -n 1 $R/build-a.txt
if [ $(left) -gt 60 ]; then
  timeout 50 /tmp/a/build-h200/gem profile --model /tmp/m31.gguf --backend cuda \
    --random-weights 1 --context 131072 --reps 1 --samples 5 --bw-mib 4096 --kv-dtype f32 \
    --fused-only --out $R/A-131072.json > $R/A-131072.txt 2>&1
  echo "A ctx 131072 rc=$? at $(el) s"; grep -E "whole token" $R/A-131072.txt | head -1
  grep -A9 "with every stage timed" $R/A-131072.txt
fi
save
if grep -q H200 $R/gpu.txt && [ $(left) -gt 100 ]; then
  timeout $(( $(left) - 20 )) build-h200/dev/tiles_tight > $R/tiles-tight.txt 2>&1
  echo "tiles_tight rc=$? at $(el) s"; grep -E "probe|^[a-z+-]+ +(library|tight)" $R/tiles-tight.txt
fi
save; echo "done at $(el) s"
