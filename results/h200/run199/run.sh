#!/usr/bin/env bash
# run 199: BF16 tiles (B, this tree) against main (A, build-a/a-tree.tgz, BF16 on the F32
# kernel). dev/cuda/tiles_bf16 (checks, then per launch and chained, the variants in order then
# reversed, against the F32 kernel and cuBLAS); on B test_cuda_matvec, test_model_cuda,
# memcheck and racecheck over test_cuda_matvec --tiles. The 31B dimensions in BF16 (62 GB of
# weights generated on the GPU, F32 caches, K stored): the fused route's whole tokens at 8,192,
# processes A B B A (no records: the receipts' digest of the 62 GB file would take most of
# each process); then Q8_0's promotion on B if time is left.
set -u -o pipefail
T0=$(date +%s); left() { echo $((${LIMIT_S:-570} - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r199; rm -rf $R; mkdir -p $R/abba
save() { (cd $R && tar czf $OUT/run199.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); CB=$(cat results/h200/run199/commit); echo "A=$CA B=$CB" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gem" JOBS=6 \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build JOBS=10 \
  BUILD_TARGETS="gem test_cuda_matvec test_model_cuda dev_tiles_bf16" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
for f in $R/build-a.txt $R/build-b.txt; do tail -n 1 $f; done; echo "builds done at $(el) s"
B=build-h200
($B/gem synth --preset 31b --type bf16 --no-matrices --context-length 262144 \
  --out /tmp/m31-bf16.gguf > $R/synth-bf16.txt 2>&1; echo "synth bf16 rc=$?" > $R/synth-rc.txt) &
timeout 150 $B/dev/tiles_bf16 > $R/tiles-bf16.txt 2>&1; echo "tiles_bf16 rc=$? at $(el) s"
grep -E "FAILED|probe:|^(k|q|o-swa|o-full|gate|down|head) " $R/tiles-bf16.txt
grep -c " ok$" $R/tiles-bf16.txt
save
for T in test_cuda_matvec test_model_cuda; do
  GEM_QUIET=1 timeout 90 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$? at $(el) s"; tail -n 2 $R/$T.txt
done
save
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/test_cuda_matvec --tiles \
    > $R/$tool-matvec.txt 2>&1
  echo "$tool rc=$? at $(el) s"; tail -n 2 $R/$tool-matvec.txt
done
save
wait; cat $R/synth-rc.txt; echo "synth done at $(el) s"
i=0
for X in A B B A; do
  i=$((i+1))
  [ $(left) -lt 60 ] && { echo "stop before $X-$i: $(left) s left"; break; }
  G=/tmp/a/build-h200/gem; [ $X = B ] && G=$B/gem
  timeout 60 $G profile --model /tmp/m31-bf16.gguf --backend cuda --random-weights 1 \
    --context 8192 --reps 1 --samples 5 --bw-mib 4096 --kv-dtype f32 --fused-only \
    > $R/abba/bf16-$X-$i.txt 2>&1
  echo "bf16 $X-$i rc=$? at $(el) s $(grep -E 'whole token' $R/abba/bf16-$X-$i.txt | head -1)"
  grep -A9 "with every stage timed" $R/abba/bf16-$X-$i.txt | grep -E "projections|mlp|logits"
  save
done
save; echo "done at $(el) s"
