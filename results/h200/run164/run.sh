#!/usr/bin/env bash
# run 164 (Xeon host): issue 11's CPU gate (fused route, F32 <= 1.2x the floor, BF16 / F16 <=
# 1.3x, at 64K and 128K, all cores) as medians over many processes, since single processes
# on this host move 15-30% (runs 159 and 162). Each process is one `gem bench` of the default
# fused route against itself (A and B alike, so every sample counts), its floor from the read
# bandwidth it measured itself; the types rotate from pass to pass so that a drift of the host
# falls on every type. scripts/cpu-gate-medians.py reads the records.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r164; mkdir -p $R
lscpu > $R/lscpu.txt 2>&1; grep -E "Model name|^CPU\(s\)|^Model:|CPU family" $R/lscpu.txt
save() { (cd $R && tar czf $OUT/run164.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
GEM_GIT_COMMIT=$(cat results/h200/run164/commit) PHASES=build JOBS=16 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1; tail -n 1 $R/build.txt
echo "build done at $(el) s"
ORDER=(f32 bf16 f16 bf16 f16 f32 f16 f32 bf16 f32 bf16 f16 bf16 f16 f32 f16 f32 bf16)
n=0
for T in "${ORDER[@]}"; do
  [ $(el) -gt 400 ] && { echo "stop before process $n at $(el) s"; break; }
  GEM_QUIET=1 timeout $(( 480 - $(el) )) build-h200/gem bench --backend cpu --a fused \
    --b fused --lengths 65536,131072 --kv-dtype $T --rounds 3 \
    --out $R/bench-$n-$T.json > $R/bench-$n-$T.txt 2>&1
  echo "process $n ($T) rc=$? at $(el) s: $(grep -E 'x floor|^[0-9]' $R/bench-$n-$T.txt | \
    awk '/^[0-9]/ {printf "%s %s  ", $1, $NF}')"
  n=$((n + 1)); save
done
python3 scripts/cpu-gate-medians.py $R/bench-*.json | tee $R/medians.txt; save
