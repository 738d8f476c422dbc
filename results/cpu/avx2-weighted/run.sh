#!/usr/bin/env bash
# The baseline route's value stage on AVX2: the portable weighted rows (A, the tree in
# a-commit) against the AVX2 block of 8 heads x 32 columns (B, b-commit). `gem bench` of the
# baseline against the fused route at 64K on all cores, F32 then BF16, one process a build in
# the order A B B A per type. A_GEM, B_GEM: the two builds' gem. Writes here:
# bench-N-X-T.{json,txt}, lscpu.txt.
set -u -o pipefail
cd "$(dirname "$0")"
lscpu > lscpu.txt
n=0
for T in f32 bf16; do
  for X in A B B A; do
    G=$A_GEM; [ $X = B ] && G=$B_GEM
    GEM_QUIET=1 $G bench --backend cpu --a baseline --b fused --lengths 65536 --kv-dtype $T \
      --rounds 3 --no-double --out bench-$n-$X-$T.json > bench-$n-$X-$T.txt 2>&1
    echo "process $n ($X $T) rc=$?: $(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^(baseline|fused)_p/) printf "%s %s ms  ", $i, $(i + 2)}' \
      bench-$n-$X-$T.txt)"
    n=$((n + 1))
  done
done
