#!/usr/bin/env bash
# run 225: dev/cuda/sliding_cluster after its two timing loops became one (time_rounds, 15a284c),
# which compiled but had not run on a GPU. The same command as run 221's P 8 case; prediction:
# every check gives the bits again, and the chain figures land within 2% of run 221's (F32 /
# BF16 ms a call: the library 0.01638 / 0.01236, the two kernels at P 8 0.01797 / 0.01502, the
# cluster kernel 0.01826 / 0.01539).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r225; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run225.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run225/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="dev_sliding_cluster" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build at $(el) s"
X=$PWD/build-h200/dev/sliding_cluster
[ -x $X ] || { echo "no build"; tail -30 $R/build.txt; save; exit 1; }
timeout 120 $X --cluster-p 8 --lengths 1024 --types f32,bf16 --reps 200 --rounds 30 \
  > $R/sliding-cluster-p8.txt 2>&1
echo "cluster-p 8 rc=$? at $(el) s"; grep -v "^check" $R/sliding-cluster-p8.txt
grep -c "give the bits" $R/sliding-cluster-p8.txt
save; echo "done at $(el) s"
