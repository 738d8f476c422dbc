#!/usr/bin/env bash
# The AVX2 integer products with their block loop kept as a loop (B: `#pragma GCC unroll 1` on
# the loop over a block's 8 vectors in group_int and group_q4_k) against GCC's full unrolling
# (A), which computed all of a block's vpmaddubsw first and spilled them to the stack (in
# group_q4_k 239 stack operands against 69). dev/mv_int8 of each build, processes A B B A,
# three rounds, per type: one thread (hot: the L2; dram) and both threads (token, 2 layers of
# the 2gb preset's products); then whole tokens of the 2gb preset in Q4_K_M and Q8_0 (`gem
# profile --fused-only`, context 64), processes A B B A. A_GEM, B_GEM, A_DEV, B_DEV: the two
# builds' gem and dev/mv_int8; MODELS: where gem-2gb-T.gguf lie (default /tmp; written if
# missing). Writes here: int8-N-X-T.txt, profile-N-X-T.{json,txt}, lscpu.txt.
set -u -o pipefail
cd "$(dirname "$0")"
M=${MODELS:-/tmp}
lscpu > lscpu.txt
n=0
for R in 1 2 3; do
  for T in q8_0 q4_0 q4_k; do
    for X in A B B A; do
      D=$A_DEV; [ $X = B ] && D=$B_DEV
      $D --threads 2 --rounds 2 --mib 128 --layers 2 --type $T > int8-$n-$X-$T.txt 2>&1
      echo "mv_int8 $n $X $T rc=$?: $(awk '$2 == "int8" && $3 != "/" && NF > 5 {printf "%s %s  ", $1, $(NF-1)}' int8-$n-$X-$T.txt)"
      n=$((n + 1))
    done
  done
done
for T in q4_k_m q8_0; do
  [ -s $M/gem-2gb-$T.gguf ] || $B_GEM synth --preset 2gb --type $T --out $M/gem-2gb-$T.gguf \
    > /dev/null || exit 1
  for X in A B B A; do
    G=$A_GEM; [ $X = B ] && G=$B_GEM
    $G profile --model $M/gem-2gb-$T.gguf --context 64 --prompt 4 --reps 1 --samples 5 \
      --fused-only --out profile-$n-$X-$T.json > profile-$n-$X-$T.txt 2>&1
    echo "process $n ($X $T) rc=$?: $(grep -m1 'whole token' profile-$n-$X-$T.txt)"
    n=$((n + 1))
  done
done
