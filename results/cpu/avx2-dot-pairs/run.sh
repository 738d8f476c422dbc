#!/usr/bin/env bash
# The AVX2 scores two K rows at a time: A = the tree in a-commit, B = branch
# cpu-avx2-dot-pairs (b-commit). dev/fused_parts of each build, one thread, 64 tokens of F32
# rows (in the L2), 7 rounds a process, processes A B B A four times.
#   A_DIR=.../build-a B_DIR=.../build-b bash results/cpu/avx2-dot-pairs/run.sh
set -u
cd "$(dirname "$0")"
A=${A_DIR:?A_DIR: the A build folder}; B=${B_DIR:?B_DIR: the B build folder}
for r in 1 2 3 4; do
  for X in A B B A; do
    G=$A; [ $X = B ] && G=$B
    echo "== round $r $X"
    $G/dev/fused_parts --dtype f32 --threads 1 --tokens 64 --rounds 7 2>&1
  done
done > parts.txt
grep -E "^== |  (score|value|item) " parts.txt | awk '/^==/ {x = $4; next} {print x, $2, $3}' \
  | sort | awk '{v[$1" "$2] = v[$1" "$2] " " $3} END {for (k in v) print k ":" v[k]}' | sort
