#!/usr/bin/env bash
# The kernels for other machines against the native build on one AVX2 machine: N = a build with
# GEM_NATIVE=ON (-march=native, the one file for this processor), D = GEM_NATIVE=OFF with
# GEM_CPU_DISPATCH (the three builds of the kernels, the AVX2 one chosen here). One `gem bench`
# of the fused route against itself a process, F32 then BF16 at 64K, 5 rounds; N D D N twice.
#   N_GEM=.../gem D_GEM=.../gem bash results/cpu/dispatch/run.sh
set -u
cd "$(dirname "$0")"
N=${N_GEM:?N_GEM: the native build gem}; D=${D_GEM:?D_GEM: the dispatch build gem}
lscpu > lscpu.txt
i=0
for X in N D D N N D D N; do
  G=$N; [ $X = D ] && G=$D
  for T in f32 bf16; do
    $G bench --a fused --b fused --kv-dtype $T --lengths 65536 --rounds 5 \
      --out bench-$i-$X-$T.json > bench-$i-$X-$T.txt 2>&1
    echo "$i $X $T $(grep -o '[a-z0-9]* kernels' bench-$i-$X-$T.txt | head -1)" \
      "$(grep -E 'fused_p32_t4' bench-$i-$X-$T.txt | tail -1 | awk '{print $3}') ms"
  done
  i=$((i + 1))
done
