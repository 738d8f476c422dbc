#!/usr/bin/env bash
# The fused route on an AVX2 machine without AVX-512: the portable kernels (A, the tree named
# in a-commit) against the AVX2 kernels (B, b-commit), each `gem bench --backend cpu` of the
# default fused route against itself at 64K, one process a build in the order A B B A per KV
# type, F32 then BF16, on all cores; then `fused_parts` of each build (one thread, the item's
# kernels with their rows in L2). A_GEM, B_GEM: the two builds' gem; A_DEV, B_DEV: their
# dev/fused_parts. Writes here: bench-N-X-T.{json,txt}, parts-X-T.txt, lscpu.txt.
set -u -o pipefail
cd "$(dirname "$0")"
lscpu > lscpu.txt
n=0
for T in f32 bf16; do
  for X in A B B A; do
    G=$A_GEM; [ $X = B ] && G=$B_GEM
    GEM_QUIET=1 $G bench --backend cpu --a fused --b fused --lengths 65536 --kv-dtype $T \
      --rounds 2 --no-double --out bench-$n-$X-$T.json > bench-$n-$X-$T.txt 2>&1
    echo "process $n ($X $T) rc=$?: $(awk '/fused_p32_t4/ {print $3, $NF; exit}' bench-$n-$X-$T.txt)"
    n=$((n + 1))
  done
done
for T in f32 bf16; do
  for X in A B; do
    D=$A_DEV; [ $X = B ] && D=$B_DEV
    $D --dtype $T --threads 1 > parts-$X-$T.txt 2>&1
    echo "fused_parts $X $T: $(awk '/ (score|value|item) / {printf "%s %s  ", $2, $3}' parts-$X-$T.txt)"
  done
done
