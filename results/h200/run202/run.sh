#!/usr/bin/env bash
# run 202: the BF16 pieces as the norm and scratch kernels' template argument (B, this tree)
# against main (A, build-a/a-tree.tgz): test_cuda_matvec, test_model_cuda and memcheck over
# test_cuda_matvec --tiles on B; the 31B dimensions in Q4_0 (F32 caches, K stored): the fused
# route's whole tokens at 8K and 128K, processes A B B A A B B A; then B in BF16 at 8K.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r202; rm -rf $R; mkdir -p $R/abba
save() { (cd $R && tar czf $OUT/run202.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); CB=$(cat results/h200/run202/commit); echo "A=$CA B=$CB" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gem" JOBS=6 \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build JOBS=10 BUILD_TARGETS="gem test_cuda_matvec test_model_cuda" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
for f in $R/build-a.txt $R/build-b.txt; do tail -n 1 $f; done; echo "builds done at $(el) s"
B=build-h200
(for TY in q4_0 bf16; do
  $B/gem synth --preset 31b --type $TY --no-matrices --context-length 262144 \
    --out /tmp/m31-$TY.gguf > $R/synth-$TY.txt 2>&1; echo "synth $TY rc=$? at $(el) s" >> $R/synth-rc.txt
done) &
for T in test_cuda_matvec test_model_cuda; do
  GEM_QUIET=1 timeout 90 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$? at $(el) s"; tail -n 2 $R/$T.txt
done
grep -i "wide\|q4_k\|max |logit" $R/test_model_cuda.txt | tail -8
save
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_matvec --tiles \
  > $R/memcheck-matvec.txt 2>&1
echo "memcheck rc=$? at $(el) s"; tail -n 2 $R/memcheck-matvec.txt
save
while ! grep -q "synth q4_0" $R/synth-rc.txt 2>/dev/null; do sleep 1; done; echo "q4_0 synth at $(el) s"
i=0
for X in A B B A A B B A; do
  i=$((i+1))
  [ $(left) -lt 40 ] && { echo "stop before $X-$i: $(left) s left"; break; }
  G=/tmp/a/build-h200/gem; [ $X = B ] && G=$B/gem
  timeout 40 $G profile --model /tmp/m31-q4_0.gguf --backend cuda --random-weights 1 \
    --context 8192,131072 --reps 1 --samples 7 --bw-mib 4096 --kv-dtype f32 --fused-only \
    > $R/abba/q4_0-$X-$i.txt 2>&1
  echo "q4_0 $X-$i rc=$? at $(el) s"; grep -E "whole token" $R/abba/q4_0-$X-$i.txt
  grep -E "^ +norms" $R/abba/q4_0-$X-$i.txt
  save
done
wait; cat $R/synth-rc.txt
if [ $(left) -gt 40 ]; then
  timeout 40 $B/gem profile --model /tmp/m31-bf16.gguf --backend cuda --random-weights 1 \
    --context 8192 --reps 1 --samples 5 --bw-mib 4096 --kv-dtype f32 --fused-only \
    > $R/bf16-B.txt 2>&1
  echo "bf16 B rc=$? at $(el) s"; grep -E "whole token|^ +norms" $R/bf16-B.txt
fi
save; echo "done at $(el) s"
