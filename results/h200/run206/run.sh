#!/usr/bin/env bash
# run 206, on an H200 (the call asks for one: the 31B dimensions in BF16 with F32 caches at
# 128K hold 61.4 GB of weights and 23 GB of caches, more than an H100's 80 GB): on this tree
# (B), the design's promotion on the 31B dimensions in Q4_0 and in BF16 (both routes at 8K /
# 64K / 128K, three interleaved repetitions, stage profiles) with `gem analyze promotion` and
# `ceiling`; then, while time lasts, whole Q4_0 tokens at 8K and 128K in processes B T T B B T T
# B: T = the tight Q4_0 loop of branch tiles-tight-warp (build-a/t-tree.tgz; its tree before
# runs 207-208's norm kernels, so T against B is the loop and those kernels together). T's build
# runs before any timing, so that no timed token shares the host's cores.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r206; rm -rf $R; mkdir -p $R/ab
save() { (cd $R && tar czf $OUT/run206.tgz --exclude='*.gguf' .); }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $R/gpu.txt
case "$GPU" in *H200*) ;; *) echo "not an H200 ($GPU): nothing to run"; save; exit 0;; esac
# T needs build-a/t-tree.tgz and build-a/t-commit carried with the tree; without them the
# promotion runs alone
HAS_T=0; [ -s build-a/t-tree.tgz ] && [ -s build-a/t-commit ] && HAS_T=1
CT=$( [ $HAS_T = 1 ] && cat build-a/t-commit || echo none); CB=$(cat results/h200/run206/commit)
echo "T=$CT B=$CB" | tee $R/commits.txt
GEM_GIT_COMMIT=$CB PHASES=build JOBS=14 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
tail -n 1 $R/build-b.txt; echo "build B at $(el) s"
B=$PWD/build-h200/gem
(for TY in q4_0 bf16; do
  [ -s /tmp/m31-$TY.gguf ] || $B synth --preset 31b --type $TY --no-matrices \
    --context-length 262144 --out /tmp/m31-$TY.gguf > $R/synth-$TY.txt 2>&1
  echo "synth $TY rc=$? at $(el) s" >> $R/synth-rc.txt
done) &
SYN=$!
TS=t; [ $HAS_T = 1 ] || TS=
for X in $TS; do
  C=$CT
  (mkdir -p /tmp/$X && tar xzf build-a/$X-tree.tgz -C /tmp/$X && ln -sfn $PWD/.deps /tmp/$X/.deps &&
    cd /tmp/$X && GEM_GIT_COMMIT=$C PHASES=build BUILD_TARGETS="gem" JOBS=14 \
    bash scripts/h200-run.sh /tmp/$X-out > $R/build-$X.txt 2>&1) &
  BLD="${BLD:-} $!"
done
[ -n "${BLD:-}" ] && { wait $BLD; tail -n 1 $R/build-t.txt; }; echo "builds done at $(el) s"
promote() { # weight type, timeout s
  local TY=$1 D=$R/$1; mkdir -p $D
  timeout $2 $B profile --model /tmp/m31-$TY.gguf --backend cuda --random-weights 1 \
    --context 8192,65536,131072 --kv-dtype f32 --reps 3 --samples 5 --bw-mib 4096 --greedy 16 \
    --out $D/p.json --stage-profile $D/s.json > $D/profile.txt 2>&1
  echo "profile $TY rc=$? at $(el) s"; grep -v "^\[" $D/profile.txt | grep -E "gem profile|whole token|greedy"
  $B analyze promotion --long $D/p-ctx65536.json --long $D/p-ctx131072.json \
    --short $D/p-ctx8192.json --out $D/promotion.json > $D/promotion.txt 2>&1
  echo "analyze promotion $TY rc=$?"; cat $D/promotion.txt
  $B analyze ceiling $D/s-ctx65536.json $D/s-ctx131072.json --out $D/ceiling.json \
    > $D/ceiling.txt 2>&1
  echo "analyze ceiling $TY rc=$?"; cat $D/ceiling.txt
  save
}
while ! grep -q "synth q4_0" $R/synth-rc.txt 2>/dev/null; do sleep 1; done; echo "q4_0 synth at $(el) s"
promote q4_0 150
wait $SYN; cat $R/synth-rc.txt
promote bf16 $(( $(left) - 60 > 240 ? 240 : $(left) - 60 ))
i=0
ORDER="B T T B B T T B"; [ $HAS_T = 1 ] || ORDER=
for X in $ORDER; do
  i=$((i+1))
  [ $(left) -lt 25 ] && { echo "stop before $X-$i: $(left) s left"; break; }
  G=$B; [ $X != B ] && G=/tmp/${X,,}/build-h200/gem
  timeout 40 $G profile --model /tmp/m31-q4_0.gguf --backend cuda --random-weights 1 \
    --context 8192,131072 --reps 1 --samples 7 --bw-mib 4096 --kv-dtype f32 --fused-only \
    > $R/ab/q4_0-$X-$i.txt 2>&1
  echo "ab $X-$i rc=$? at $(el) s"; grep -E "whole token|norms" $R/ab/q4_0-$X-$i.txt
  save
done
save; echo "done at $(el) s"
