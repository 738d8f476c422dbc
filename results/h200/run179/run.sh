#!/usr/bin/env bash
# run 179: dev/cuda/fp8_decode versions 0-4 (version 3: the staged F16 tensor-core pass with the
# E4M3 codes widened to F16 as they are staged; 4: two tiles of loads in flight), checked
# against the double reference of each cache, then timed A B .. B A at 8K, 64K, 128K.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r179; mkdir -p $R
save() { (cd $R && tar czf $OUT/run179.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run179/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="dev_fp8_decode" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
timeout 200 build-h200/dev/fp8_decode --rounds 10 > $R/fp8_decode.txt 2>&1
echo "fp8_decode rc=$? at $(el) s"; cat $R/fp8_decode.txt
save
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 build-h200/dev/fp8_decode \
  --lengths 100,4097 --rounds 1 3 4 > $R/memcheck.txt 2>&1
echo "memcheck rc=$? at $(el) s"; tail -n 3 $R/memcheck.txt
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 build-h200/dev/fp8_decode \
  --lengths 100,4097 --rounds 1 3 4 > $R/racecheck.txt 2>&1
echo "racecheck rc=$? at $(el) s"; tail -n 3 $R/racecheck.txt
save; echo "done at $(el) s"
