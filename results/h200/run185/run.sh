#!/usr/bin/env bash
# run 185: the design's promotion with BF16 caches (K stored), now that the CUDA baseline reads
# them. The 31B dimensions (Q4_0 weights generated on the GPU), `gem profile --kv-dtype bf16` of
# both routes at 8K / 64K / 128K (three interleaved repetitions, five samples, the stage
# profile of the baseline's steps), then `gem analyze promotion` (64K and 128K long, 8K short)
# and `gem analyze ceiling` on those profiles.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r185; mkdir -p $R
save() { (cd $R && tar czf $OUT/run185.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run185/commit) PHASES=build JOBS=16 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
G=build-h200/gem
$G synth --preset 31b --type q4_0 --no-matrices --context-length 262144 --out /tmp/m31.gguf \
  > $R/synth.txt 2>&1
echo "synth rc=$? at $(el) s"
timeout 420 $G profile --model /tmp/m31.gguf --backend cuda --random-weights 1 \
  --context 8192,65536,131072 --kv-dtype bf16 --reps 3 --samples 5 --bw-mib 4096 \
  --out $R/p.json --stage-profile $R/s.json > $R/profile.txt 2>&1
echo "profile rc=$? at $(el) s"; grep -v "^\[" $R/profile.txt | tail -n 30
save
ls $R
$G analyze promotion --long $R/p-ctx65536.json --long $R/p-ctx131072.json \
  --short $R/p-ctx8192.json --out $R/promotion.json > $R/promotion.txt 2>&1
echo "analyze promotion rc=$? at $(el) s"; cat $R/promotion.txt
$G analyze ceiling $R/s-ctx65536.json $R/s-ctx131072.json --kv-dtype bf16 --out $R/ceiling.json \
  > $R/ceiling.txt 2>&1
echo "analyze ceiling rc=$? at $(el) s"; cat $R/ceiling.txt
save; echo "done at $(el) s"
