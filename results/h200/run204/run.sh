#!/usr/bin/env bash
# run 204: the embedding row from Q4_K and Q6_K tiles a thread per element (B, this tree) against
# main (A, build-a/a-tree.tgz): test_cuda_matvec and memcheck over test_cuda_matvec --tiles on
# B; the 31B dimensions in the Q4_K_M mix (F32 caches, K stored): the fused route's whole tokens
# at 8K, processes A B B A A B B A, their stage views' embedding.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r204; rm -rf $R; mkdir -p $R/abba
save() { (cd $R && tar czf $OUT/run204.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); CB=$(cat results/h200/run204/commit); echo "A=$CA B=$CB" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gem" JOBS=6 \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build JOBS=10 BUILD_TARGETS="gem test_cuda_matvec" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
for f in $R/build-a.txt $R/build-b.txt; do tail -n 1 $f; done; echo "builds done at $(el) s"
B=build-h200
($B/gem synth --preset 31b --type q4_k_m --no-matrices --context-length 262144 \
  --out /tmp/m31-q4_k_m.gguf > $R/synth-q4_k_m.txt 2>&1; echo "synth rc=$? at $(el) s" > $R/synth-rc.txt) &
GEM_QUIET=1 timeout 90 $B/test_cuda_matvec > $R/test_cuda_matvec.txt 2>&1
echo "test_cuda_matvec rc=$? at $(el) s"; tail -n 1 $R/test_cuda_matvec.txt
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_matvec --tiles \
  > $R/memcheck-matvec.txt 2>&1
echo "memcheck rc=$? at $(el) s"; tail -n 2 $R/memcheck-matvec.txt
save
wait; cat $R/synth-rc.txt
i=0
for X in A B B A A B B A; do
  i=$((i+1))
  [ $(left) -lt 30 ] && { echo "stop before $X-$i: $(left) s left"; break; }
  G=/tmp/a/build-h200/gem; [ $X = B ] && G=$B/gem
  timeout 30 $G profile --model /tmp/m31-q4_k_m.gguf --backend cuda --random-weights 1 \
    --context 8192 --reps 1 --samples 7 --bw-mib 4096 --kv-dtype f32 --fused-only \
    > $R/abba/q4_k_m-$X-$i.txt 2>&1
  echo "q4_k_m $X-$i rc=$? at $(el) s $(grep -E 'whole token' $R/abba/q4_k_m-$X-$i.txt)"
  grep -E "^ +embedding" $R/abba/q4_k_m-$X-$i.txt
  save
done
save; echo "done at $(el) s"
