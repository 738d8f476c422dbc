#!/usr/bin/env bash
# run 220: the sliding-window layers' attention with its merge inside the first pass's thread
# block clusters (dev/cuda/sliding_cluster.cu): validation against the double reference and the
# library's bits (F32, BF16, F16, live 1 .. 4,097), compute-sanitizer (memcheck, racecheck,
# synccheck) over the validation, then single calls and chains of 50 calls at live 256 and
# 1,024, F32 and BF16, A B B A against the library's two kernels.
# Prediction: in the chain the cluster kernel saves 1-2 us a call (50-100 us over a 31B token's
# 50 sliding layers); single calls 0.5-1.5 us.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r220; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run220.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run220/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="dev_sliding_cluster dev_sliding_decode" bash scripts/h200-run.sh /tmp/b-out \
  > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build at $(el) s"
X=$PWD/build-h200/dev/sliding_cluster
[ -x $X ] || { echo "no build"; tail -30 $R/build.txt; save; exit 1; }
timeout 200 $X --lengths 256,1024 --types f32,bf16 --reps 200 --rounds 30 > $R/sliding-cluster.txt 2>&1
echo "sliding_cluster rc=$? at $(el) s"; grep -v "^check" $R/sliding-cluster.txt; grep -c "give its bits" $R/sliding-cluster.txt
save
for T in memcheck racecheck synccheck; do
  MAXL=; [ $T = racecheck ] && MAXL="--check-max 1024" # racecheck at 4,097 rows takes minutes
  timeout 200 compute-sanitizer --tool $T --error-exitcode 9 $X --check-only $MAXL \
    > $R/sanitize-$T.txt 2>&1
  echo "$T rc=$? at $(el) s"; tail -n 2 $R/sanitize-$T.txt
  save
done
echo "done at $(el) s"
