#!/usr/bin/env bash
# run 159: the CPU fused route's partitions at 128K on the Xeon (issue 11: F32 within
# 1.2x of the floor, BF16 1.3x, not met). 4 KV heads x 32 partitions = 128 equal items for 16
# threads; 64 partitions halve an item. gem bench, fused P 32 (A, the default) against fused P
# 64 (B), A B B A in one process, F32 then BF16.
set -u -o pipefail
T0=$(date +%s)
lscpu > /tmp/lscpu159.txt 2>&1; mkdir -p /tmp/r159; cp /tmp/lscpu159.txt /tmp/r159/lscpu.txt; grep -E "Model name|^CPU\(s\)" /tmp/lscpu159.txt
R=/tmp/r159; mkdir -p $R
save() { (cd $R && tar czf $OUT/run159.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
GEM_GIT_COMMIT=$(cat results/h200/run159/commit) PHASES=build JOBS=16 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1; tail -n 1 $R/build.txt; echo "build done at $(el) s"
for T in f32 bf16; do
  [ $(el) -gt 120 ] && { echo "stop before $T"; break; }
  GEM_QUIET=1 timeout $(( 190 - $(el) )) build-h200/gem bench --backend cpu --a fused --a-partitions 32 \
    --b fused --b-partitions 64 --lengths 131072 --kv-dtype $T --rounds 4 \
    --out $R/bench-$T-p32-vs-p64.json > $R/bench-$T-p32-vs-p64.txt 2>&1
  echo "bench $T rc=$? at $(el) s"; tail -n 12 $R/bench-$T-p32-vs-p64.txt; save
done
