#!/usr/bin/env bash
# run 183: the library's FP8 first passes on dev/cuda/fp8_decode version 5's body (the codes kept
# FP8 in shared memory, 32-token tiles). test_cuda_queries; gem resources (gem.resources.v9) and
# its analysis; gem bench --backend cuda, FP8, fused against fused at 8K / 64K / 128K;
# compute-sanitizer memcheck, then racecheck, over test_decode --small (FP8 cases among them);
# test_decode's default matrix.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r183; mkdir -p $R
save() { (cd $R && tar czf $OUT/run183.tgz .); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run183/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem test_cuda_queries test_decode" bash scripts/h200-run.sh /tmp/b-out \
  > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
B=build-h200
timeout 30 $B/test_cuda_queries > $R/test_cuda_queries.txt 2>&1
echo "test_cuda_queries rc=$? at $(el) s"; tail -n 2 $R/test_cuda_queries.txt
timeout 30 $B/gem resources --out $R/resources.json --bandwidth-bytes 1073741824 --reps 5 \
  > $R/resources.txt 2>&1
echo "resources rc=$? at $(el) s"
$B/gem analyze resources $R/resources.json --out $R/resources-analysis.json \
  > $R/resources-analysis.txt 2>&1
echo "analyze resources rc=$? at $(el) s"; tail -n 2 $R/resources-analysis.txt
GEM_QUIET=1 timeout 40 $B/gem bench --backend cuda --a fused --b fused \
  --lengths 8192,65536,131072 --kv-dtype fp8_e4m3 --rounds 6 --bw-reps 3 \
  --out $R/bench-fp8_e4m3.json > $R/bench-fp8_e4m3.txt 2>&1
echo "bench fp8 rc=$? at $(el) s"; grep -E "^[0-9]+ |read bandwidth" $R/bench-fp8_e4m3.txt
save
timeout 30 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_decode --small \
  > $R/memcheck-decode.txt 2>&1
echo "memcheck rc=$? at $(el) s"; tail -n 2 $R/memcheck-decode.txt
save
timeout 80 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_decode --small \
  > $R/racecheck-decode.txt 2>&1
echo "racecheck rc=$? at $(el) s"; tail -n 2 $R/racecheck-decode.txt
save
timeout 330 $B/test_decode > $R/test_decode.txt 2>&1
echo "test_decode (default matrix) rc=$? at $(el) s"; tail -n 2 $R/test_decode.txt
save; echo "done at $(el) s"
