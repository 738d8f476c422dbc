#!/usr/bin/env bash
# run 221: run 220's cluster kernels at fewer partitions, where every cluster is resident at
# once (run 220 on an H100: 14 of the 16 clusters of 16 blocks, so two ran in a second wave and
# the kernel lost 3.4-6.2 us a call). `sliding_cluster --cluster-p 8` and `--cluster-p 12` at
# live 1,024, F32 and BF16: the library at its default P 16 against its two kernels and the
# cluster kernels at P 8 / 12, validated first (the cluster kernels' bits against the two
# kernels' at the same P), then memcheck over the P 8 validation.
# Prediction: at P 8 the first pass loses 1.5-3 us a call to P 16 (fewer rows in flight), more
# than the merge's 1-2 us saves: cluster / lib 1.00-1.10 in the chain; P 12 in between.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r221; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run221.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run221/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="dev_sliding_cluster" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build at $(el) s"
X=$PWD/build-h200/dev/sliding_cluster
[ -x $X ] || { echo "no build"; tail -30 $R/build.txt; save; exit 1; }
for PC in 8 12; do
  timeout 120 $X --cluster-p $PC --lengths 1024 --types f32,bf16 --reps 200 --rounds 30 \
    > $R/sliding-cluster-p$PC.txt 2>&1
  echo "cluster-p $PC rc=$? at $(el) s"; grep -v "^check" $R/sliding-cluster-p$PC.txt
  grep -c "give the bits" $R/sliding-cluster-p$PC.txt
  save
done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $X --check-only --cluster-p 8 \
  > $R/sanitize-memcheck-p8.txt 2>&1
echo "memcheck rc=$? at $(el) s"; tail -n 1 $R/sanitize-memcheck-p8.txt
save; echo "done at $(el) s"
