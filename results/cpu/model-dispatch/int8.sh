#!/usr/bin/env bash
# The products' arithmetic alone: dev/mv_int8 of the native build (N) and the build for other
# machines (D), one thread, for Q8_0 and Q4_K, processes N D D N per type; "hot" is a matrix
# in the L2 (the best of its calls), "dram" a stream of 128 MiB.
#   N_DEV=.../dev/mv_int8 D_DEV=.../dev/mv_int8 bash results/cpu/model-dispatch/int8.sh
set -u -o pipefail
cd "$(dirname "$0")"
N=${N_DEV:?N_DEV: the native build dev/mv_int8}; D=${D_DEV:?D_DEV: dev/mv_int8 of the build for other machines}
gbs() { # the int8 lines' GB/s, hot and dram
  awk '$2 == "int8" && $3 != "/" && ($1 == "hot" || $1 == "dram") {
    printf "%s %s GB/s  ", $1, $(NF - 1) }' "$1"
}
i=0
for T in q8_0 q4_k; do
  for X in N D D N; do
    B=$N; [ $X = D ] && B=$D
    $B --threads 1 --rounds 4 --mib 128 --layers 2 --type $T > int8-$i-$X-$T.txt 2>&1
    rc=$?
    echo "int8 $i $X $T rc=$rc: $(gbs int8-$i-$X-$T.txt)"
    i=$((i + 1))
  done
done
