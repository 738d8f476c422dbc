#!/usr/bin/env bash
# run 186: the baseline's BF16 / F16 / FP8 value kernels in 64-dim tiles (two pieces a lane, so a
# block reads 128 bytes of a 16-bit row as the F32 kernel does; the F32 kernels' SASS unchanged).
# A = the typed kernels of run 184 (32-dim tiles, build-a/a-tree.tgz), B = this tree.
# test_cuda_queries; gem resources and its analysis; memcheck over test_decode --small; gem
# bench of the baseline against the fused route, BF16, processes A B B A, and FP8 and F16 on B;
# the 31B dimensions with BF16 caches, both routes, and the promotion on B;
# racecheck over test_decode --small, then test_decode's default matrix (its time limit what
# is left of the call).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r186; mkdir -p $R
save() { (cd $R && tar czf $OUT/run186.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); CB=$(cat results/h200/run186/commit)
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build JOBS=5 BUILD_TARGETS="gem" \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build JOBS=11 BUILD_TARGETS="gem test_cuda_queries test_decode" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
wait
tail -n 1 $R/build-a.txt; tail -n 1 $R/build.txt; echo "builds done at $(el) s"
A=/tmp/a/build-h200/gem; B=build-h200
timeout 30 $B/test_cuda_queries > $R/test_cuda_queries.txt 2>&1
echo "test_cuda_queries rc=$? at $(el) s"; tail -n 1 $R/test_cuda_queries.txt
timeout 30 $B/gem resources --out $R/resources.json > $R/resources.txt 2>&1
echo "resources rc=$? at $(el) s"; grep -E "value|verdict" $R/resources.txt
$B/gem analyze resources $R/resources.json --out $R/resources-analysis.json \
  > $R/resources-analysis.txt 2>&1
echo "analyze resources rc=$? at $(el) s"; tail -n 1 $R/resources-analysis.txt
san() {
  timeout 120 compute-sanitizer --tool $1 --error-exitcode 9 $B/test_decode --small \
    > $R/$1-decode.txt 2>&1
  echo "$1 rc=$? at $(el) s"; tail -n 2 $R/$1-decode.txt
  save
}
san memcheck
n=0
for X in A B B A; do
  G=$([ $X = A ] && echo $A || echo $B/gem)
  GEM_QUIET=1 timeout 40 $G bench --backend cuda --a baseline --b fused --kv-dtype bf16 \
    --lengths 8192,65536,131072 --rounds 4 --bw-reps 3 --out $R/abba-$n-$X.json \
    > $R/abba-$n-$X.txt 2>&1
  echo "abba bf16 $n $X rc=$? at $(el) s"; grep -E "^[0-9]+ " $R/abba-$n-$X.txt
  n=$((n + 1))
done
for T in f16 fp8_e4m3; do
  GEM_QUIET=1 timeout 40 $B/gem bench --backend cuda --a baseline --b fused --kv-dtype $T \
    --lengths 8192,65536,131072 --rounds 4 --bw-reps 3 --out $R/bench-$T.json \
    > $R/bench-$T.txt 2>&1
  echo "bench $T rc=$? at $(el) s"; grep -E "^[0-9]+ " $R/bench-$T.txt
done
save
$B/gem synth --preset 31b --type q4_0 --no-matrices --context-length 262144 --out /tmp/m31.gguf \
  > $R/synth.txt 2>&1
timeout 120 $B/gem profile --model /tmp/m31.gguf --backend cuda --random-weights 1 \
  --context 8192,65536,131072 --kv-dtype bf16 --reps 3 --samples 5 --bw-mib 4096 \
  --out $R/p.json --stage-profile $R/s.json > $R/profile.txt 2>&1
echo "profile rc=$? at $(el) s"; grep -E "whole token|per call" $R/profile.txt
$B/gem analyze promotion --long $R/p-ctx65536.json --long $R/p-ctx131072.json \
  --short $R/p-ctx8192.json --out $R/promotion.json > $R/promotion.txt 2>&1
echo "analyze promotion rc=$? at $(el) s"; cat $R/promotion.txt
rm -f /tmp/m31.gguf
save
left() { echo $(( ${LIMIT_S:-520} - $(el) )); } # what is left of the call
if [ $(left) -gt 100 ]; then san racecheck; else echo "racecheck: not run, $(left) s left"; fi
if [ $(left) -gt 60 ]; then
  timeout $(left) $B/test_decode > $R/test_decode.txt 2>&1
  echo "test_decode (default matrix) rc=$? at $(el) s"; tail -n 2 $R/test_decode.txt
else
  echo "test_decode: not run, $(left) s left"
fi
save; echo "done at $(el) s"
