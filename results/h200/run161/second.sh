#!/usr/bin/env bash
# run 161, second call (the branch attn-states after the first call's findings): the states
# test with an empty state after the others on CUDA, the package's messages for host arrays
# given to a CUDA Decoder and JAX's arrays put on its CPU device; the Python tests,
# test_decode's small matrix (every kernel's path; the default matrix takes about 280 s on the
# H200, the first call's 200 s cut it, and the device time left is short), then as time allows
# memcheck over the states test and the Python CUDA tests.
set -u -o pipefail
T0=$(date +%s)
SRC=$PWD
R=/tmp/r161b; mkdir -p $R
save() { (cd $R && tar czf $OUT/run161b.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
GEM_GIT_COMMIT=$(cat results/h200/run161/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gemlib_shared gemmodel_shared test_decode test_decode_bad_input test_decode_states" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
timeout 60 build-h200/test_decode_states > $R/test_decode_states.txt 2>&1
echo "test_decode_states rc=$? at $(el) s: $(tail -n 1 $R/test_decode_states.txt)"
(cd python/tests && GEM_LIBRARY=$SRC/build-h200/libgem.so PYTHONPATH=$SRC/python \
  PYTHONUNBUFFERED=1 timeout 120 python3 -m unittest -v test_cuda test_decode test_numpy \
  test_interop test_model) > $R/unittest.txt 2>&1
echo "unittest rc=$? at $(el) s"; grep -E "^(Ran|OK|FAILED)|skipped|Error|FAIL" $R/unittest.txt | head -20
save
GEM_QUIET=1 timeout 200 build-h200/test_decode --small > $R/test_decode.txt 2>&1
echo "test_decode rc=$? at $(el) s: $(tail -n 1 $R/test_decode.txt)"
save
[ $(el) -gt 400 ] && { echo "no time for memcheck"; exit 0; }
timeout $(( 560 - $(el) )) compute-sanitizer --tool memcheck --error-exitcode 9 \
  build-h200/test_decode_states > $R/memcheck-states.txt 2>&1
echo "memcheck test_decode_states rc=$? at $(el) s"; tail -n 2 $R/memcheck-states.txt
save
[ $(el) -gt 540 ] && { echo "no time for memcheck of the Python tests"; exit 0; }
(cd python/tests && GEM_LIBRARY=$SRC/build-h200/libgem.so PYTHONPATH=$SRC/python \
  timeout $(( 590 - $(el) )) compute-sanitizer --tool memcheck --target-processes all \
  python3 -m unittest test_cuda) > $R/memcheck.txt 2>&1
echo "memcheck rc=$? at $(el) s"; tail -n 3 $R/memcheck.txt
save
