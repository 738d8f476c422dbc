#!/usr/bin/env bash
# The model's products in a build for other machines, on one AVX2 machine: P = a GEM_NATIVE=OFF
# build before the products were dispatched (the attention kernels chosen at run time, the
# products portable C), D = a GEM_NATIVE=OFF build with them dispatched (matvec_kernels.c built
# four times, the AVX2 build chosen here), N = a native build of the same tree as D
# (-march=native). Whole tokens of the 2gb preset (60 layers, hidden 1,024) in Q8_0 and Q4_K_M,
# `gem profile --fused-only` at context 64, 3 steps a process; per type the processes
# P N D D N N D D N P. MODELS: where the 2gb models are (default /tmp; written if missing).
#   P_GEM=.../gem D_GEM=.../gem N_GEM=.../gem bash results/cpu/model-dispatch/run.sh
# Writes here: profile-I-X-T.{json,txt}, lscpu.txt.
set -u -o pipefail
cd "$(dirname "$0")"
P=${P_GEM:?P_GEM: the build with portable products}
D=${D_GEM:?D_GEM: the build with dispatched products}
N=${N_GEM:?N_GEM: the native build}
M=${MODELS:-/tmp}
lscpu > lscpu.txt
for T in q8_0 q4_k_m; do
  [ -s $M/gem-2gb-$T.gguf ] || $N synth --preset 2gb --type $T --out $M/gem-2gb-$T.gguf \
    > /dev/null || exit 1
done
i=0
for T in q8_0 q4_k_m; do
  for X in P N D D N N D D N P; do
    G=$N; [ $X = D ] && G=$D; [ $X = P ] && G=$P
    $G profile --model $M/gem-2gb-$T.gguf --context 64 --prompt 4 --reps 1 --samples 3 \
      --fused-only --out profile-$i-$X-$T.json > profile-$i-$X-$T.txt 2>&1
    echo "process $i ($X $T) rc=$?: $(grep -o -m1 'products ([a-z0-9-]*)' profile-$i-$X-$T.txt)" \
      "| $(grep -m1 'whole token' profile-$i-$X-$T.txt)"
    i=$((i + 1))
  done
done
