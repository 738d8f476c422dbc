#!/usr/bin/env bash
# run 172: dev/cuda/kfv_timeline version 8 (the long F32 K-from-V pass with a KV head's tiles
# dealt round robin over its blocks' pairs) against version 6 (the library's body, contiguous
# partitions) and version 1 (gem_decode), one wave of 33 partitions, with the blocks' stamps;
# then compute-sanitizer racecheck and memcheck over version 8 at small lengths.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r172; mkdir -p $R
save() { (cd $R && tar czf $OUT/run172.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run172/commit) PHASES=build BUILD_TARGETS="dev_kfv_timeline" \
  JOBS=16 bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
TL=build-h200/dev/kfv_timeline
timeout 200 $TL --rounds 10 --lengths 20480,65536,131072 --partitions 33 --versions 1,6,8 \
  > $R/timeline.txt 2>&1
echo "timeline rc=$? at $(el) s"
grep -E "median|stamps|per SM|INVALID|FAILED|checked|nmse" $R/timeline.txt
save
for T in racecheck memcheck; do
  timeout 100 compute-sanitizer --tool $T --error-exitcode 9 $TL --check-only --versions 8 \
    --partitions 33,7 --lengths 100,4100,20480 > $R/$T-v8.txt 2>&1
  echo "$T rc=$? at $(el) s"; grep -E "SUMMARY|INVALID|checked" $R/$T-v8.txt | tail -2
  save
done
echo "done at $(el) s"
