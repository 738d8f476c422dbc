#!/usr/bin/env bash
# A second set of run.sh's N and D processes, Q8_0 alone: N D D N N D D N (P left out).
#   D_GEM=.../gem N_GEM=.../gem bash results/cpu/model-dispatch/run2.sh
# Writes here: profile2-I-X-q8_0.{json,txt}.
set -u -o pipefail
cd "$(dirname "$0")"
D=${D_GEM:?D_GEM: the build with dispatched products}
N=${N_GEM:?N_GEM: the native build}
M=${MODELS:-/tmp}
i=0
for X in N D D N N D D N; do
  G=$N; [ $X = D ] && G=$D
  $G profile --model $M/gem-2gb-q8_0.gguf --context 64 --prompt 4 --reps 1 --samples 3 \
    --fused-only --out profile2-$i-$X-q8_0.json > profile2-$i-$X-q8_0.txt 2>&1
  echo "process $i ($X q8_0) rc=$?: $(grep -o -m1 'products ([a-z0-9-]*)' profile2-$i-$X-q8_0.txt)" \
    "| $(grep -m1 'whole token' profile2-$i-$X-q8_0.txt)"
  i=$((i + 1))
done
