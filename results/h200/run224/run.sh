#!/usr/bin/env bash
# run 224 (the Xeon host of an H100 machine; the GPU is not used): does the CPU fused route's
# partition count or tile move it toward issue 11's gate on 16 cores? Each process is one
# `gem bench --backend cpu` of the default fused route (A: P 32, tile 4) against one variant
# (B: P 64, P 128, or P 32 tile 32), A B B A for 7 rounds in the same process, so that the
# host's drift between processes (15-30%, runs 159 and 162) falls on both. Variants and types
# rotate from process to process. summary.py gives, per variant, type and length, the median
# over the processes of each process's median A/B pair ratio (above 1: B faster) and each
# route's median over its own floor.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r224; mkdir -p $R
lscpu > $R/lscpu.txt 2>&1; grep -E "Model name|^CPU\(s\)|^Model:|CPU family" $R/lscpu.txt
save() { (cd $R && tar czf $OUT/run224.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
GEM_GIT_COMMIT=$(cat results/h200/run224/commit) PHASES=build JOBS=16 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1; tail -n 1 $R/build.txt
echo "build done at $(el) s"
ORDER=(p128:f32 t32:bf16 p64:f32 p128:bf16 t32:f32 p64:bf16
       p64:f32 p128:bf16 t32:f32 p64:bf16 p128:f32 t32:bf16
       t32:f32 p64:bf16 p128:f32 t32:bf16 p64:f32 p128:bf16)
n=0
for VT in "${ORDER[@]}"; do
  V=${VT%%:*}; T=${VT##*:}
  case $V in p64) B="--b-partitions 64";; p128) B="--b-partitions 128";;
             t32) B="--b-tile 32";; esac
  [ $(el) -gt ${STOP_S:-440} ] && { echo "stop before process $n at $(el) s"; break; }
  GEM_QUIET=1 timeout 90 build-h200/gem bench --backend cpu --a fused --b fused $B \
    --lengths 65536,131072 --kv-dtype $T --rounds 7 --no-double \
    --out $R/bench-$n-$V-$T.json > $R/bench-$n-$V-$T.txt 2>&1
  echo "process $n ($V $T) rc=$? at $(el) s"
  n=$((n + 1)); save
done
python3 results/h200/run224/summary.py $R/bench-*.json | tee $R/summary.txt; save
