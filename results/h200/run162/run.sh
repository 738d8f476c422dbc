#!/usr/bin/env bash
# run 162 (right after run 159, same Xeon host): the CPU fused route at 64K and 128K for F32,
# BF16 and F16 K/V, P 32 (the default) against P 64, A B B A in one process, against the
# floor of the read bandwidth measured in the same process (issue 11's CPU gate: F32 <= 1.2x,
# BF16 / F16 <= 1.3x).
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r162; mkdir -p $R
lscpu > $R/lscpu.txt 2>&1; grep -E "Model name|^CPU\(s\)|^Model:|CPU family" $R/lscpu.txt
save() { (cd $R && tar czf $OUT/run162.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
GEM_GIT_COMMIT=$(cat results/h200/run159/commit) PHASES=build JOBS=16 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1; tail -n 1 $R/build.txt
for T in f32 bf16 f16; do
  GEM_QUIET=1 timeout 100 build-h200/gem bench --backend cpu --a fused --a-partitions 32 \
    --b fused --b-partitions 64 --lengths 65536,131072 --kv-dtype $T --rounds 4 \
    --out $R/bench-$T.json > $R/bench-$T.txt 2>&1
  echo "bench $T rc=$? at $(el) s"; grep -E "fused|ratio|floor" $R/bench-$T.txt; save
done
