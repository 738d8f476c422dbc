#!/usr/bin/env bash
# run 187: the checks run 186 left undone on the CUDA baseline's 64-dim typed value kernels (main
# at results/h200/run187/commit): compute-sanitizer racecheck, synccheck and initcheck over
# test_decode --small; test_decode's default matrix; test_model_cuda; gem run --backend cuda at
# 128K for every cache type. The sanitizers, the matrix and the model test run side by side (they
# check results, not times). On an H200, with time left: the 31B dimensions with BF16 caches,
# both routes, and the promotion.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r187; mkdir -p $R
save() { (cd $R && tar czf $OUT/run187.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CB=$(cat results/h200/run187/commit)
GEM_GIT_COMMIT=$CB PHASES=build JOBS=16 \
  BUILD_TARGETS="gem test_cuda_queries test_decode test_model_cuda" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
B=build-h200
san() {
  timeout $2 compute-sanitizer --tool $1 --error-exitcode 9 $B/test_decode --small \
    > $R/$1-decode.txt 2>&1
  echo "$1 rc=$? at $(el) s"; tail -n 2 $R/$1-decode.txt
}
(san racecheck 330) > $R/racecheck-status.txt 2>&1 &
(san synccheck 160; san initcheck 160) > $R/sync-init-status.txt 2>&1 &
(timeout 420 $B/test_decode > $R/test_decode.txt 2>&1
 echo "test_decode (default matrix) rc=$? at $(el) s"; tail -n 2 $R/test_decode.txt) \
  > $R/test_decode-status.txt 2>&1 &
timeout 90 $B/test_model_cuda > $R/test_model_cuda.txt 2>&1
echo "test_model_cuda rc=$? at $(el) s"; grep -E "baseline|passed" $R/test_model_cuda.txt
for T in f32 bf16 f16 fp8_e4m3; do
  timeout 60 $B/gem run --backend cuda --live 131072 --kv-dtype $T --json $R/run-$T.json \
    > $R/run-$T.txt 2>&1
  echo "gem run $T rc=$? at $(el) s"; tail -n 3 $R/run-$T.txt
done
save
wait
cat $R/racecheck-status.txt $R/sync-init-status.txt $R/test_decode-status.txt
save
left() { echo $(( ${LIMIT_S:-560} - $(el) )); }
if grep -q H200 $R/gpu.txt && [ $(left) -gt 110 ]; then
  $B/gem synth --preset 31b --type q4_0 --no-matrices --context-length 262144 \
    --out /tmp/m31.gguf > $R/synth.txt 2>&1
  timeout $(( $(left) - 10 )) $B/gem profile --model /tmp/m31.gguf --backend cuda \
    --random-weights 1 --context 8192,65536,131072 --kv-dtype bf16 --reps 3 --samples 5 \
    --bw-mib 4096 --out $R/p.json --stage-profile $R/s.json > $R/profile.txt 2>&1
  echo "profile bf16 rc=$? at $(el) s"; grep -E "whole token|per call" $R/profile.txt
  $B/gem analyze promotion --long $R/p-ctx65536.json --long $R/p-ctx131072.json \
    --short $R/p-ctx8192.json --out $R/promotion.json > $R/promotion.txt 2>&1
  echo "analyze promotion rc=$? at $(el) s"; cat $R/promotion.txt
  rm -f /tmp/m31.gguf
else
  echo "31B BF16 profile: not run (card or time)"
fi
save; echo "done at $(el) s"
