#!/usr/bin/env bash
# run 108: the CUDA decoder with the norm kernels writing the next product's x scratch (B, this
# tree) against the tree before (A, build-a/a-tree.tgz at the commit in build-a/commit, made
# here by `git archive bb771dc | gzip > build-a/a-tree.tgz` and carried with .deps):
#   1. both built; B's test_cuda_matvec and test_model_cuda;
#   2. the same bits: model-diff (fused and baseline routes) on 6 layers of the 31B dimensions
#      in Q4_0 (weights generated on the GPU), A and B, logits digests compared; B's CPU-vs-CUDA
#      records on the tiny Q4_0 model whose products tile;
#   3. whole tokens of the 31B dimensions (Q4_0), processes A B B A, 8K and 128K (gem profile);
#   4. memcheck of B's test_model_cuda.
set -u -o pipefail
T0=$(date +%s); left() { echo $((560 - ($(date +%s) - T0))); }
R=/tmp/r108; mkdir -p $R/abba
save() { (cd $R && tar czf $OUT/run108.tgz .); }
CA=$(cat build-a/commit); CB=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "A=$CA B=$CB" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS=gem JOBS=8 bash /tmp/a/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1 &
GEM_GIT_COMMIT=$CB PHASES=build BUILD_TARGETS="gem test_cuda_matvec test_model_cuda" JOBS=8 bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
tail -2 $R/build-a.txt $R/build-b.txt; cp /tmp/b-out/build.txt $R/build-b-log.txt 2>/dev/null
GA=/tmp/a/build-h200/gem; GB=build-h200/gem
echo "build done at $(( $(date +%s) - T0 )) s"
timeout 120 build-h200/test_cuda_matvec > $R/test-cuda-matvec.txt 2>&1; echo "test_cuda_matvec rc=$?"; tail -1 $R/test-cuda-matvec.txt
timeout 150 build-h200/test_model_cuda > $R/test-model-cuda.txt 2>&1; echo "test_model_cuda rc=$?"; tail -1 $R/test-model-cuda.txt
save
$GB synth --preset 31b --type q4_0 --no-matrices --layers 6 --context-length 8192 --out /tmp/m6.gguf > $R/synth-m6.txt 2>&1
for X in A B; do
  G=$GA; [ $X = B ] && G=$GB
  timeout 90 $G model-diff --model /tmp/m6.gguf --backend cuda --random-weights 1 --fill 64 --contexts 300,1100 --steps 8 --out $R/md6-$X > $R/md6-$X.txt 2>&1; echo "model-diff m6 $X rc=$?"
done
for f in $R/md6-A/*.json; do b=$R/md6-B/$(basename $f); python3 - "$f" "$b" <<'PY'
import json,sys,re
def shas(p):
    s=open(p).read(); return sorted(re.findall(r'"logits_sha256(?:_repeat)?":\s*"([0-9a-f]+)"', s))
a,b=shas(sys.argv[1]),shas(sys.argv[2])
print(sys.argv[1].split('/')[-1], "digests", len(a), "A == B" if a==b and a else "DIFFER", )
PY
done | tee $R/same-bits.txt
$GB synth --preset tiny --type q4_0 --embd 256 --ff 512 --vocab 1024 --out /tmp/tiles.gguf > /dev/null 2>&1
timeout 90 $GB model-diff --model /tmp/tiles.gguf --compare backends --contexts 30,31,64 --steps 8 --out $R/md-tiles-backends > $R/md-tiles-backends.txt 2>&1; echo "model-diff tiles backends rc=$?"; tail -2 $R/md-tiles-backends.txt
save
$GB synth --preset 31b --type q4_0 --no-matrices --context-length 262144 --out /tmp/m31.gguf > $R/synth-31b.txt 2>&1
i=0
for X in A B B A A B B A; do
  i=$((i+1)); [ $(left) -lt 150 ] && { echo "stop before process $i: $(left) s left"; break; }
  G=$GA; [ $X = B ] && G=$GB
  timeout 140 $G profile --model /tmp/m31.gguf --backend cuda --random-weights 1 --context 8192,131072 \
      --reps 1 --samples 5 --bw-mib 4096 --out $R/abba/$X-$i.json > $R/abba/$X-$i.txt 2>&1; echo "profile $X-$i rc=$? at $(( $(date +%s) - T0 )) s"
  save
done
python3 scripts/abba-stages.py $R/abba > $R/abba/stages.txt 2>&1; cat $R/abba/stages.txt
save
if [ $(left) -gt 60 ]; then
  timeout $(( $(left) - 15 )) compute-sanitizer --tool memcheck --error-exitcode 9 build-h200/test_model_cuda > $R/memcheck-test-model-cuda.txt 2>&1; echo "memcheck rc=$?"; tail -2 $R/memcheck-test-model-cuda.txt
fi
save
