#!/usr/bin/env bash
# run 141: the 31B dimensions (Q4_0 weights generated on the GPU) at 128K with the full layers'
# V alone (--k-from-v, fused route), F32 and BF16 caches: this tree (B: the long K-from-V passes
# without their L2 prefetch, F32 from 20,480 rows) against the tree before them (A,
# build-a/a-tree.tgz at the commit in build-a/commit), processes A B B A for each type while
# time lasts.
set -u -o pipefail
T0=$(date +%s); left() { echo $((480 - ($(date +%s) - T0))); }
R=/tmp/r141; mkdir -p $R/abba
save() { (cd $R && tar czf $OUT/run141.tgz .); }
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
for kv in f32 bf16; do
  i=0
  for X in A B B A; do
    i=$((i+1)); [ $(left) -lt 50 ] && { echo "stop before $kv process $i: $(left) s left"; break; }
    G=$GA; [ $X = B ] && G=$GB
    timeout 60 $G profile $P --kv-dtype $kv --k-from-v --out $R/abba/$kv-$X-$i.json > $R/abba/$kv-$X-$i.txt 2>&1; echo "$kv $X-$i rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "whole token" $R/abba/$kv-$X-$i.txt | head -1
    save
  done
done
grep -h -A9 "with every stage timed" $R/abba/*-B-2.txt
save
