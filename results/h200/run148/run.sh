#!/usr/bin/env bash
# run 148: where the long F32 K-from-V pass's fixed time goes (dev/cuda/kfv_timeline): every
# block of the library's body (and of a copy with more stamps, and of the copy with the
# prologue's loads before the first copy) stamps the global timer; lengths 20K-128K, 33 and 64
# partitions; gem_decode at each.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r148; mkdir -p $R
save() { (cd $R && tar czf $OUT/run148.tgz .); }
GEM_GIT_COMMIT=$(cat build-a/commit 2>/dev/null || echo unknown) PHASES=build BUILD_TARGETS="dev_kfv_timeline" JOBS=16 bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 2 $R/build.txt; echo "build done at $(( $(date +%s) - T0 )) s"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
timeout 300 build-h200/dev/kfv_timeline --rounds 10 --lengths 20480,24576,32768,65536,98304,131072 --partitions 33,64 > $R/timeline.txt 2>&1
echo "rc=$? at $(( $(date +%s) - T0 )) s"
cat $R/timeline.txt
save
