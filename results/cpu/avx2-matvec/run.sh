#!/usr/bin/env bash
# The decoder's matrix-vector products on an AVX2 machine without AVX-512: the portable
# products (A, the tree named in a-commit) against the AVX2 ones (B, b-commit). Whole tokens
# of the 2gb preset (60 layers, hidden 1,024, `gem synth --preset 2gb`) in Q8_0, Q4_K_M and
# BF16, each `gem profile --fused-only` at context 64, one process a build in the order A B B
# A per type, on all cores; then `dev/mv_int8` of each build (one thread, a matrix in the L2,
# and a stream from DRAM) for the four packed types. A_GEM, B_GEM: the two builds' gem;
# A_DEV, B_DEV: their dev/mv_int8; MODELS: where the models are written (default /tmp).
# Writes here: profile-N-X-T.{json,txt}, int8-X-T.txt, lscpu.txt.
set -u -o pipefail
cd "$(dirname "$0")"
M=${MODELS:-/tmp}
lscpu > lscpu.txt
for T in q8_0 q4_k_m bf16; do
  [ -s $M/gem-2gb-$T.gguf ] || $B_GEM synth --preset 2gb --type $T --out $M/gem-2gb-$T.gguf \
    > /dev/null || exit 1
done
n=0
for T in q8_0 q4_k_m bf16; do
  for X in A B B A; do
    G=$A_GEM; [ $X = B ] && G=$B_GEM
    $G profile --model $M/gem-2gb-$T.gguf --context 64 --prompt 4 --reps 1 --samples 3 \
      --fused-only --out profile-$n-$X-$T.json > profile-$n-$X-$T.txt 2>&1
    echo "process $n ($X $T) rc=$?: $(grep -m1 'whole token' profile-$n-$X-$T.txt)"
    n=$((n + 1))
  done
done
for T in q8_0 q4_0 q4_k q6_k; do
  for X in A B; do
    D=$A_DEV; [ $X = B ] && D=$B_DEV
    $D --threads 1 --rounds 4 --mib 128 --layers 2 --type $T > int8-$X-$T.txt 2>&1
    echo "mv_int8 $X $T: $(awk '$2 == "int8" && $3 != "/" && ($1 == "hot" || $1 == "dram") {printf "%s %s GB/s  ", $1, $(NF-1)}' int8-$X-$T.txt)"
  done
done
