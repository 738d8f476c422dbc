#!/usr/bin/env bash
# run 163 (main after run 161): the states test (gem_decode_state, gem_decode_merge,
# gem_decode_across and their kernels) under compute-sanitizer's four tools, as
# scripts/h200-run.sh's sanitize phase runs test_decode --small; test_decode's default
# matrix beside them.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r163; mkdir -p $R
save() { (cd $R && tar czf $OUT/run163.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader > $R/gpu.txt 2>&1; cat $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run163/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gemlib_shared test_decode_states test_decode" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
# test_decode's default matrix (CPU and CUDA targets, about 280 s) beside the sanitizers
( timeout $(( 480 - $(el) )) build-h200/test_decode > $R/test_decode.txt 2>&1
  echo "test_decode rc=$? at $(el) s" >> $R/test_decode.txt ) &
TD=$!
for tool in memcheck racecheck synccheck initcheck; do
  timeout $(( 400 - $(el) )) compute-sanitizer --tool $tool --error-exitcode 9 \
    build-h200/test_decode_states > $R/sanitizer-states-$tool.txt 2>&1
  echo "$tool rc=$? at $(el) s: $(grep -E 'ERROR SUMMARY|passed' $R/sanitizer-states-$tool.txt | tr '\n' ' ')"
  save
done
wait $TD; tail -n 3 $R/test_decode.txt; save
