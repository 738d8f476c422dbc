#!/usr/bin/env bash
# FP8 E4M3 rows on the AVX2 kernels: A = the tree in a-commit (FP8 rows portable on AVX2),
# B = the tree in b-commit (FP8 rows on the AVX2 kernels). One `gem bench` process a build,
# A B B A: both routes with FP8 E4M3 K and V at 64K, 3 rounds; then B alone with BF16 at 64K
# for the same sitting's reference.
#   A_GEM=.../gem B_GEM=.../gem bash results/cpu/avx2-fp8/run.sh
set -u
cd "$(dirname "$0")"
A=${A_GEM:?A_GEM: the A build gem}; B=${B_GEM:?B_GEM: the B build gem}
lscpu > lscpu.txt
i=0
for X in A B B A; do
  G=$A; [ $X = B ] && G=$B
  $G bench --kv-dtype fp8_e4m3 --lengths 65536 --rounds 3 --seed 1 \
    --out bench-$i-$X-fp8.json > bench-$i-$X-fp8.txt 2>&1
  echo "$i $X fp8 rc=$?"; grep -E "^ *[0-9]* +(baseline|fused)_p|A/B" bench-$i-$X-fp8.txt
  i=$((i + 1))
done
$B bench --kv-dtype bf16 --lengths 65536 --rounds 3 --seed 1 \
  --out bench-$i-B-bf16.json > bench-$i-B-bf16.txt 2>&1
echo "$i B bf16 rc=$?"; grep -E "^ *[0-9]* +(baseline|fused)_p|A/B" bench-$i-B-bf16.txt
