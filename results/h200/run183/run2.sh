#!/usr/bin/env bash
# run 183, second call (the first call's build kept): on an H200, the peers
# (scripts/peers/decode_peers.py: gem's F32, BF16 and FP8 rows beside FlashInfer 0.7.2's and
# torch's at 8K, 64K and 128K) with the FP8 pass kept FP8 in shared memory; then
# test_decode's default matrix (the CUDA baseline's BF16, F16 and FP8 cases at 8,192 rows
# among it).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r183b; mkdir -p $R
save() { (cd $R && tar czf $OUT/run183b.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
B=build-h200
GEM_GIT_COMMIT=$(cat results/h200/run183/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gemlib_shared test_decode" bash scripts/h200-run.sh /tmp/b-out \
  > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build at $(el) s"
if grep -q H200 $R/gpu.txt; then # run 180 has the peers on an H100
  (. .peers/env.sh; PYTHONUNBUFFERED=1 timeout 200 python3 scripts/peers/decode_peers.py \
    --lib $B/libgem.so --out $R/peers.json > $R/peers.txt 2>&1)
  echo "peers rc=$? at $(el) s"; tail -n 45 $R/peers.txt
  save
fi
timeout $(( 560 - $(el) )) $B/test_decode > $R/test_decode.txt 2>&1
echo "test_decode (default matrix) rc=$? at $(el) s"; tail -n 2 $R/test_decode.txt
save; echo "done at $(el) s"
