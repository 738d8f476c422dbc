#!/usr/bin/env bash
# run 189: the Q4_0 tile products' tight loops in the library (B, this tree) against main (A,
# build-a/a-tree.tgz at build-a/commit). On B: test_cuda_matvec, test_model_cuda, and
# compute-sanitizer memcheck, racecheck and synccheck over test_cuda_matvec. Then the 31B
# dimensions (Q4_0 weights generated on the GPU, F32 caches, K stored: the design's setting),
# the fused route's whole tokens, processes A B B A at 131,072 and then at 8,192 while time
# lasts.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r189; rm -rf $R; mkdir -p $R/abba
save() { (cd $R && tar czf $OUT/run189.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); CB=$(cat results/h200/run189/commit)
echo "A=$CA B=$CB" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gem" JOBS=6 \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build BUILD_TARGETS="gem test_cuda_matvec test_model_cuda" JOBS=10 \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
for f in $R/build-a.txt $R/build-b.txt; do tail -n 1 $f; done
GA=/tmp/a/build-h200/gem; B=build-h200; GB=$B/gem
echo "builds done at $(el) s"
for T in test_cuda_matvec test_model_cuda; do
  GEM_QUIET=1 timeout 90 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$? at $(el) s"; tail -n 1 $R/$T.txt
done
save
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/test_cuda_matvec \
    > $R/$tool-matvec.txt 2>&1
  echo "$tool rc=$? at $(el) s"; tail -n 2 $R/$tool-matvec.txt
done
save
$GB synth --preset 31b --type q4_0 --no-matrices --context-length 262144 --out /tmp/m31.gguf \
  > $R/synth-31b.txt 2>&1
i=0
for spec in A:131072 B:131072 B:131072 A:131072 A:8192 B:8192 B:8192 A:8192; do
  X=${spec%%:*}; C=${spec##*:}; i=$((i+1))
  [ $(left) -lt 45 ] && { echo "stop before process $i: $(left) s left"; break; }
  G=$GA; [ $X = B ] && G=$GB
  timeout 45 $G profile --model /tmp/m31.gguf --backend cuda --random-weights 1 --context $C \
    --reps 1 --samples 7 --bw-mib 4096 --kv-dtype f32 --fused-only \
    --out $R/abba/$X-$i-$C.json > $R/abba/$X-$i-$C.txt 2>&1
  echo "$X-$i ctx $C rc=$? at $(el) s"
  grep -E "whole token" $R/abba/$X-$i-$C.txt | head -1
  save
done
grep -h -A9 "with every stage timed" $R/abba/B-2-131072.txt
save
echo "done at $(el) s"
