#!/usr/bin/env bash
# run 171: the plain Q4_0 tile product's lean loop in the library (B, this tree) against main
# before it (A, build-a/a-tree.tgz at build-a/commit). On B: test_cuda_matvec, test_model_cuda,
# compute-sanitizer memcheck over test_cuda_matvec. On A: dev/cuda/tiles_lean (the library's
# kernel before against the lean loop, bit check and ABBA per shape, as run 170). Then the 31B
# dimensions (Q4_0 weights generated on the GPU, F32 caches, the full layers' V alone), whole
# tokens, processes A B B A at 131,072 and A B B A at 8,192 while time lasts.
set -u -o pipefail
T0=$(date +%s); left() { echo $((560 - ($(date +%s) - T0))); }
el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r171; mkdir -p $R/abba
save() { (cd $R && tar czf $OUT/run171.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); CB=$(cat results/h200/run171/commit)
echo "A=$CA B=$CB" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gem dev_tiles_lean" JOBS=6 \
  bash /tmp/a/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build BUILD_TARGETS="gem test_cuda_matvec test_model_cuda" JOBS=10 \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
for f in $R/build-a.txt $R/build-b.txt; do tail -n 1 $f; done
GA=/tmp/a/build-h200/gem; B=build-h200; GB=$B/gem
echo "builds done at $(el) s"
for T in test_cuda_matvec test_model_cuda; do
  GEM_QUIET=1 timeout 60 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$? at $(el) s"; tail -n 1 $R/$T.txt
done
save
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_matvec > $R/memcheck-matvec.txt 2>&1
echo "memcheck rc=$? at $(el) s"; tail -n 2 $R/memcheck-matvec.txt
save
timeout 150 /tmp/a/build-h200/dev/tiles_lean > $R/tiles-lean.txt 2>&1
echo "tiles_lean rc=$? at $(el) s"
grep -E "probe|check|chain|library|lean" $R/tiles-lean.txt | grep -v "^check" | head -40
save
$GB synth --preset 31b --type q4_0 --no-matrices --context-length 262144 --out /tmp/m31.gguf \
  > $R/synth-31b.txt 2>&1
i=0
for spec in A:131072 B:131072 B:131072 A:131072 A:8192 B:8192 B:8192 A:8192; do
  X=${spec%%:*}; C=${spec##*:}; i=$((i+1))
  [ $(left) -lt 40 ] && { echo "stop before process $i: $(left) s left"; break; }
  G=$GA; [ $X = B ] && G=$GB
  timeout 40 $G profile --model /tmp/m31.gguf --backend cuda --random-weights 1 --context $C \
    --reps 1 --samples 5 --bw-mib 4096 --kv-dtype f32 --k-from-v --out $R/abba/$X-$i-$C.json \
    > $R/abba/$X-$i-$C.txt 2>&1
  echo "$X-$i ctx $C rc=$? at $(el) s"
  grep -E "whole token" $R/abba/$X-$i-$C.txt | head -1
  save
done
grep -h -A9 "with every stage timed" $R/abba/B-2-131072.txt
save
echo "done at $(el) s"
