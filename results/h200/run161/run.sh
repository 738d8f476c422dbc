#!/usr/bin/env bash
# run 161 (from a checkout of the branch attn-states, which holds python-cuda): the Python
# package's CUDA backend on the H200, through torch's tensors (python/tests/test_cuda.py), the
# decode API's workspace allocator on CUDA (test_decode allocates every case's workspace with
# it; test_decode_bad_input its refusals), and the attention states (test_decode_states:
# gem_decode_state / gem_decode_merge / gem_decode_across against gem_decode and the double
# reference), and dev/cuda/across_gpus (one GPU here: two pieces on it, the split's cost beside
# one call). About 8 minutes: the build (libgem, the three tests, the dev program), the C tests,
# across_gpus, the Python tests on this build's libgem, then as time allows memcheck over the
# states test and over the Python CUDA tests.
set -u -o pipefail
T0=$(date +%s)
SRC=$PWD
R=/tmp/r161; mkdir -p $R
save() { (cd $R && tar czf $OUT/run161.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
GEM_GIT_COMMIT=$(cat results/h200/run161/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gemlib_shared gemmodel_shared test_decode test_decode_bad_input test_decode_states dev_across_gpus" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
for t in test_decode_states test_decode_bad_input test_decode; do
  timeout 200 build-h200/$t > $R/$t.txt 2>&1
  echo "$t rc=$? at $(el) s: $(tail -n 1 $R/$t.txt)"
done
timeout 120 build-h200/dev/across_gpus --lengths 8192,131072 --rounds 3 --calls 10 \
  > $R/across_gpus.txt 2>&1
echo "across_gpus rc=$? at $(el) s"; cat $R/across_gpus.txt
save
python3 -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)' \
  > $R/python.txt 2>&1
cat $R/python.txt
(cd python/tests && GEM_LIBRARY=$SRC/build-h200/libgem.so PYTHONPATH=$SRC/python \
  PYTHONUNBUFFERED=1 timeout 240 python3 -m unittest -v test_cuda test_decode test_numpy \
  test_interop test_model) > $R/unittest.txt 2>&1
echo "unittest rc=$? at $(el) s"; grep -E "^(Ran|OK|FAILED)|skipped|Error" $R/unittest.txt | head -20
save
[ $(el) -gt 440 ] && { echo "no time for memcheck"; exit 0; }
timeout $(( 520 - $(el) )) compute-sanitizer --tool memcheck --error-exitcode 9 \
  build-h200/test_decode_states > $R/memcheck-states.txt 2>&1
echo "memcheck test_decode_states rc=$? at $(el) s"; tail -n 3 $R/memcheck-states.txt
save
[ $(el) -gt 480 ] && { echo "no time for memcheck of the Python tests"; exit 0; }
(cd python/tests && GEM_LIBRARY=$SRC/build-h200/libgem.so PYTHONPATH=$SRC/python \
  timeout $(( 560 - $(el) )) compute-sanitizer --tool memcheck --target-processes all \
  python3 -m unittest test_cuda) > $R/memcheck.txt 2>&1
echo "memcheck rc=$? at $(el) s"; tail -n 4 $R/memcheck.txt
save
