#!/usr/bin/env bash
# run 153: the long F32 K-from-V pass with its prologue's loads first and its angles before the
# launch wait (branch kfv-prologue-hoist): dev/cuda/kfv_timeline versions 1-4, 6, 7 at one wave
# (33 partitions); the four sanitizers over the library's pass (kfv_timeline versions 1 and 2,
# --check-only, at 100, 12,293 and 20,480 rows); test_cuda_queries and test_decode; gem bench
# --k-from-v (F32); dev/cuda/fp8_decode (the FP8 candidate) and norm_prefetch --graph --bounds
# (a 31B layer chain from CUDA graphs, and without its norm kernels) while time lasts; then the 31B
# dimensions at 128K with F32 V alone, A B B A, A = build-a (6998c02: 64 partitions, the
# prologue before) against this tree, while time lasts.
set -u -o pipefail
T0=$(date +%s); left() { echo $((570 - ($(date +%s) - T0))); }
R=/tmp/r153; mkdir -p $R/abba
save() { (cd $R && tar czf $OUT/run153.tgz .); }
CA=$(cat build-a/commit); CB=$(cat results/h200/run153/commit)
echo "A=$CA B=$CB" > $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS=gem JOBS=6 bash /tmp/a/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build JOBS=12 \
  BUILD_TARGETS="gem dev_kfv_timeline dev_fp8_decode dev_norm_prefetch test_decode test_cuda_queries" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(( $(date +%s) - T0 )) s"
B=build-h200; TL=$B/dev/kfv_timeline
timeout 120 $TL --rounds 10 --lengths 12288,20480,32768,65536,131072 --partitions 33 --versions 1,3,4,6,7 > $R/timeline.txt 2>&1; echo "timeline rc=$? at $(( $(date +%s) - T0 )) s"
grep -E "median|stamps|per SM|cycles|INVALID|FAILED|checked" $R/timeline.txt | grep -E "131072|65536|INVALID|FAILED|checked"
save
for T in memcheck racecheck synccheck initcheck; do
  timeout 100 compute-sanitizer --tool $T --error-exitcode 9 $TL --check-only --versions 1,2 --partitions 33 --lengths 100,12293,20480 > $R/$T-f32-long.txt 2>&1; echo "$T rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "SUMMARY|INVALID|checked" $R/$T-f32-long.txt | tail -2
  save
done
for T in test_cuda_queries test_decode; do
  GEM_QUIET=1 timeout 90 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$? at $(( $(date +%s) - T0 )) s"; tail -n 1 $R/$T.txt
done
save
timeout 60 $B/gem bench --backend cuda --a fused --b fused --k-from-v --kv-dtype f32 --lengths 12288,16384,32768,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10 --out $R/bench-kfv-f32.json > $R/bench-kfv-f32.txt 2>&1; echo "bench f32 rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "^[0-9 ]|A/B" $R/bench-kfv-f32.txt | grep -v "host time\|nominal"
save
if [ $(left) -gt 260 ]; then
  timeout 90 $B/dev/fp8_decode --lengths 8192,65536,131072 --rounds 10 > $R/fp8_decode.txt 2>&1; echo "fp8_decode rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "v[0-9] " $R/fp8_decode.txt | grep -v nmse
  save
fi
if [ $(left) -gt 220 ]; then
  timeout 75 $B/dev/norm_prefetch --graph --bounds --rounds 10 > $R/norm_prefetch-graph.txt 2>&1; echo "norm_prefetch --graph rc=$? at $(( $(date +%s) - T0 )) s"; tail -8 $R/norm_prefetch-graph.txt
  save
fi
wait
tail -1 $R/build-a.txt
GA=/tmp/a/build-h200/gem; GB=$B/gem
$GB synth --preset 31b --type q4_0 --no-matrices --context-length 262144 --out /tmp/m31.gguf > $R/synth-31b.txt 2>&1
P="--model /tmp/m31.gguf --backend cuda --random-weights 1 --context 131072 --reps 1 --samples 5 --bw-mib 4096"
i=0
for X in A B B A; do
  i=$((i+1)); [ $(left) -lt 45 ] && { echo "stop before process $i: $(left) s left"; break; }
  G=$GA; [ $X = B ] && G=$GB
  timeout 60 $G profile $P --kv-dtype f32 --k-from-v --out $R/abba/f32-$X-$i.json > $R/abba/f32-$X-$i.txt 2>&1; echo "f32 $X-$i rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "whole token" $R/abba/f32-$X-$i.txt | head -1
  save
done
echo "done at $(( $(date +%s) - T0 )) s"
