#!/usr/bin/env bash
# run 180: FP8 E4M3 K/V on the CUDA fused route (the staged F16 tensor-core pass, codes widened
# as they are staged). test_cuda_queries; gem resources (gem.resources.v8) and its analysis;
# gem bench --backend cuda, fused against fused, FP8 then BF16 at 8K, 64K and 128K; the peers
# (scripts/peers/decode_peers.py with the FP8 rows:
# gem-fp8, torch-fp8, FlashInfer 0.7.2's single and paged decode on FP8 K/V) at the same
# lengths; compute-sanitizer memcheck over test_decode --small (FP8 cases among the others).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r180; mkdir -p $R
save() { (cd $R && tar czf $OUT/run180.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run180/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem gemlib_shared test_cuda_queries test_decode" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
B=build-h200
timeout 60 $B/test_cuda_queries > $R/test_cuda_queries.txt 2>&1
echo "test_cuda_queries rc=$? at $(el) s"; tail -n 3 $R/test_cuda_queries.txt
timeout 120 $B/gem resources --out $R/resources.json --bandwidth-bytes 4294967296 --reps 20 \
  > $R/resources.txt 2>&1
echo "resources rc=$? at $(el) s"
$B/gem analyze resources $R/resources.json --out $R/resources-analysis.json \
  > $R/resources-analysis.txt 2>&1
echo "analyze resources rc=$? at $(el) s"; tail -n 3 $R/resources-analysis.txt
for T in fp8_e4m3 bf16; do
  GEM_QUIET=1 timeout 90 $B/gem bench --backend cuda --a fused --b fused \
    --lengths 8192,65536,131072 --kv-dtype $T --rounds 10 --out $R/bench-$T.json \
    > $R/bench-$T.txt 2>&1
  echo "bench $T rc=$? at $(el) s"; grep -vE "^\s*$" $R/bench-$T.txt | tail -n 14
  save
done
(. .peers/env.sh; PYTHONUNBUFFERED=1 timeout 200 python3 scripts/peers/decode_peers.py \
  --lib $B/libgem.so --out $R/peers.json > $R/peers.txt 2>&1)
echo "peers rc=$? at $(el) s"; tail -n 45 $R/peers.txt
save
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_decode --small \
  > $R/memcheck-decode.txt 2>&1
echo "memcheck rc=$? at $(el) s"; tail -n 3 $R/memcheck-decode.txt
save; echo "done at $(el) s"
