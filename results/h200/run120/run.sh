#!/usr/bin/env bash
# run 120: the 31B dimensions (Q4_0 weights generated on the GPU) at 128K with BF16 caches:
#   1. the full layers' V alone (--k-from-v, fused route): the library of this tree (B, the
#      long BF16 K-from-V pass) against the tree before it (A, build-a/a-tree.tgz at the commit
#      in build-a/commit: the staged pass at every length), processes A B B A;
#   2. this tree with BF16 caches holding K and V (fused and baseline) and with the default F32
#      caches, one process each, beside them.
set -u -o pipefail
T0=$(date +%s); left() { echo $((390 - ($(date +%s) - T0))); }
R=/tmp/r120; mkdir -p $R/abba
save() { (cd $R && tar czf $OUT/run120.tgz .); }
CA=$(cat build-a/commit); CB=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "A=$CA B=$CB" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS=gem JOBS=8 bash /tmp/a/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1 &
GEM_GIT_COMMIT=$CB PHASES=build BUILD_TARGETS=gem JOBS=8 bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
tail -1 $R/build-a.txt $R/build-b.txt
GA=/tmp/a/build-h200/gem; GB=build-h200/gem
echo "build done at $(( $(date +%s) - T0 )) s"
$GB synth --preset 31b --type q4_0 --no-matrices --context-length 262144 --out /tmp/m31.gguf > $R/synth-31b.txt 2>&1
P="--model /tmp/m31.gguf --backend cuda --random-weights 1 --context 131072 --reps 1 --samples 5 --bw-mib 4096"
i=0
for X in A B B A; do
  i=$((i+1)); [ $(left) -lt 60 ] && { echo "stop before process $i: $(left) s left"; break; }
  G=$GA; [ $X = B ] && G=$GB
  timeout 60 $G profile $P --kv-dtype bf16 --k-from-v --out $R/abba/$X-$i.json > $R/abba/$X-$i.txt 2>&1; echo "kfv $X-$i rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "whole token|KV caches" $R/abba/$X-$i.txt
  save
done
for kv in bf16 f32; do
  [ $(left) -lt 40 ] && break
  timeout 60 $GB profile $P --kv-dtype $kv --out $R/kv-$kv.json > $R/kv-$kv.txt 2>&1; echo "kv $kv rc=$?"; grep -E "whole token|KV caches" $R/kv-$kv.txt
  save
done
