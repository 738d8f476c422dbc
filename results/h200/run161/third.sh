#!/usr/bin/env bash
# run 161, third call: the second call's one failure (the merge of reversed states, once, not
# under memcheck) came from the harness's upload returning before its DMA had landed; with
# the harness waiting after each upload, the states test five times, then memcheck over it.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r161c; mkdir -p $R
save() { (cd $R && tar czf $OUT/run161c.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
GEM_GIT_COMMIT=$(cat results/h200/run161/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gemlib_shared test_decode_states" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
for i in 1 2 3 4 5; do
  timeout 60 build-h200/test_decode_states > $R/test_decode_states-$i.txt 2>&1
  echo "test_decode_states $i rc=$? at $(el) s: $(tail -n 1 $R/test_decode_states-$i.txt)"
done
save
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build-h200/test_decode_states \
  > $R/memcheck-states.txt 2>&1
echo "memcheck test_decode_states rc=$? at $(el) s"; tail -n 2 $R/memcheck-states.txt
save
