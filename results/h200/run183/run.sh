#!/usr/bin/env bash
# run 183, first call: the library's FP8 first passes on dev/cuda/fp8_decode version 5's body
# (the codes kept FP8 in shared memory, 32-token tiles) and the CUDA baseline reading BF16, F16
# and FP8 E4M3 caches (its score and value kernels widen each piece as they load it).
# test_cuda_queries; gem resources (gem.resources.v9) and its analysis; gem bench --backend
# cuda, FP8, fused against fused at 8K / 64K / 128K; gem run --backend cuda for every cache
# type; gem bench of the baseline against the fused route for BF16 and FP8; the F32 baseline of
# main (A, build-a/a-tree.tgz) against this tree's (B), processes A B B A. compute-sanitizer
# memcheck, then racecheck, over test_decode --small run first, after the resources.
# run2.sh runs test_decode's default matrix.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r183; mkdir -p $R
save() { (cd $R && tar czf $OUT/run183.tgz .); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit 2>/dev/null); CB=$(cat results/h200/run183/commit)
AB=0; [ -f build-a/a-tree.tgz ] && AB=1 # the F32 baseline's A B B A when main's tree came along
if [ $AB = 1 ]; then
  mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
  (cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build JOBS=6 BUILD_TARGETS="gem" \
    bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
fi
GEM_GIT_COMMIT=$CB PHASES=build JOBS=12 \
  BUILD_TARGETS="gem test_cuda_queries test_decode" bash scripts/h200-run.sh /tmp/b-out \
  > $R/build.txt 2>&1
wait
[ $AB = 1 ] && tail -n 1 $R/build-a.txt; tail -n 1 $R/build.txt; echo "builds done at $(el) s"
A=/tmp/a/build-h200/gem; B=build-h200
timeout 30 $B/test_cuda_queries > $R/test_cuda_queries.txt 2>&1
echo "test_cuda_queries rc=$? at $(el) s"; tail -n 2 $R/test_cuda_queries.txt
timeout 30 $B/gem resources --out $R/resources.json --bandwidth-bytes 1073741824 --reps 5 \
  > $R/resources.txt 2>&1
echo "resources rc=$? at $(el) s"
$B/gem analyze resources $R/resources.json --out $R/resources-analysis.json \
  > $R/resources-analysis.txt 2>&1
echo "analyze resources rc=$? at $(el) s"; tail -n 2 $R/resources-analysis.txt
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_decode --small \
  > $R/memcheck-decode.txt 2>&1
echo "memcheck rc=$? at $(el) s"; tail -n 2 $R/memcheck-decode.txt
save
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_decode --small \
  > $R/racecheck-decode.txt 2>&1
echo "racecheck rc=$? at $(el) s"; tail -n 2 $R/racecheck-decode.txt
save
GEM_QUIET=1 timeout 40 $B/gem bench --backend cuda --a fused --b fused \
  --lengths 8192,65536,131072 --kv-dtype fp8_e4m3 --rounds 6 --bw-reps 3 \
  --out $R/bench-fp8_e4m3.json > $R/bench-fp8_e4m3.txt 2>&1
echo "bench fp8 rc=$? at $(el) s"; grep -E "^[0-9]+ |read bandwidth" $R/bench-fp8_e4m3.txt
save
for T in f32 bf16 f16 fp8_e4m3; do
  timeout 40 $B/gem run --backend cuda --live 131072 --kv-dtype $T --json $R/run-$T.json \
    > $R/run-$T.txt 2>&1
  echo "gem run $T rc=$? at $(el) s"; tail -n 3 $R/run-$T.txt
done
for T in bf16 fp8_e4m3; do
  GEM_QUIET=1 timeout 40 $B/gem bench --backend cuda --a baseline --b fused \
    --lengths 8192,65536,131072 --kv-dtype $T --rounds 4 --bw-reps 3 \
    --out $R/bench-baseline-fused-$T.json > $R/bench-baseline-fused-$T.txt 2>&1
  echo "bench baseline/fused $T rc=$? at $(el) s"
  grep -E "^[0-9]+ |read bandwidth" $R/bench-baseline-fused-$T.txt
done
save
n=0
for X in $([ $AB = 1 ] && echo A B B A); do
  G=$([ $X = A ] && echo $A || echo $B/gem)
  GEM_QUIET=1 timeout 40 $G bench --backend cuda --a baseline --b fused \
    --lengths 8192,131072 --rounds 4 --bw-reps 3 --out $R/abba-$n-$X.json \
    > $R/abba-$n-$X.txt 2>&1
  echo "abba $n $X rc=$? at $(el) s"; grep -E "^[0-9]+ " $R/abba-$n-$X.txt
  n=$((n + 1))
done
save
save; echo "done at $(el) s"
