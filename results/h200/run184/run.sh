#!/usr/bin/env bash
# run 184, first call: the CUDA baseline reading BF16, F16 and FP8 E4M3 caches through score and
# value kernels of their own (the F32 kernels kept). test_cuda_queries; gem resources
# (gem.resources.v10) and its analysis; compute-sanitizer memcheck, racecheck, synccheck and
# initcheck over test_decode --small (the baseline's typed cases at 13 rows among it);
# test_model_cuda (the baseline for every session cache type); gem run --backend cuda at 128K
# for every cache type; gem bench of the baseline against the fused route for BF16, F16 and FP8;
# the F32 baseline of main (A, build-a/a-tree.tgz) against this tree's (B), processes A B B A.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r184; mkdir -p $R
save() { (cd $R && tar czf $OUT/run184.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); CB=$(cat results/h200/run184/commit)
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build JOBS=5 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build JOBS=11 \
  BUILD_TARGETS="gem test_cuda_queries test_decode test_model_cuda" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
wait
tail -n 1 $R/build-a.txt; tail -n 1 $R/build.txt; echo "builds done at $(el) s"
A=/tmp/a/build-h200/gem; B=build-h200
timeout 30 $B/test_cuda_queries > $R/test_cuda_queries.txt 2>&1
echo "test_cuda_queries rc=$? at $(el) s"; tail -n 2 $R/test_cuda_queries.txt
timeout 30 $B/gem resources --out $R/resources.json > $R/resources.txt 2>&1
echo "resources rc=$? at $(el) s"; grep -E "baseline|verdict" $R/resources.txt
$B/gem analyze resources $R/resources.json --out $R/resources-analysis.json \
  > $R/resources-analysis.txt 2>&1
echo "analyze resources rc=$? at $(el) s"; tail -n 2 $R/resources-analysis.txt
save
for tool in memcheck racecheck synccheck initcheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/test_decode --small \
    > $R/$tool-decode.txt 2>&1
  echo "$tool rc=$? at $(el) s"; tail -n 2 $R/$tool-decode.txt
  save
done
timeout 60 $B/test_model_cuda > $R/test_model_cuda.txt 2>&1
echo "test_model_cuda rc=$? at $(el) s"; grep -E "baseline|passed" $R/test_model_cuda.txt
for T in f32 bf16 f16 fp8_e4m3; do
  timeout 40 $B/gem run --backend cuda --live 131072 --kv-dtype $T --json $R/run-$T.json \
    > $R/run-$T.txt 2>&1
  echo "gem run $T rc=$? at $(el) s"; tail -n 4 $R/run-$T.txt
done
save
for T in bf16 f16 fp8_e4m3; do
  GEM_QUIET=1 timeout 40 $B/gem bench --backend cuda --a baseline --b fused \
    --lengths 8192,65536,131072 --kv-dtype $T --rounds 4 --bw-reps 3 \
    --out $R/bench-baseline-fused-$T.json > $R/bench-baseline-fused-$T.txt 2>&1
  echo "bench baseline/fused $T rc=$? at $(el) s"
  grep -E "^[0-9]+ |read bandwidth" $R/bench-baseline-fused-$T.txt
done
save
n=0
for X in A B B A; do
  G=$([ $X = A ] && echo $A || echo $B/gem)
  GEM_QUIET=1 timeout 40 $G bench --backend cuda --a baseline --b fused \
    --lengths 8192,131072 --rounds 4 --bw-reps 3 --out $R/abba-$n-$X.json \
    > $R/abba-$n-$X.txt 2>&1
  echo "abba $n $X rc=$? at $(el) s"; grep -E "^[0-9]+ " $R/abba-$n-$X.txt
  n=$((n + 1))
done
save; echo "done at $(el) s"
