#!/usr/bin/env bash
# run 196: dev/cuda/geglu_split built on run 194's A tree (build-a/a-tree.tgz, 804cae1), whose
# gem_dmv_geglu is still the GeGLU kernels that give each warp a share of both matrices: their
# chained time at the 31B gate/up shape against the split version's (run 194 built the program
# on B, where the library's GeGLU is the split version itself).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r196; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run196.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/commit); echo "A=$CA" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(cd /tmp/a && GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="dev_geglu_split" JOBS=16 \
  bash scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1)
tail -n 1 $R/build-a.txt; echo "build done at $(el) s"
for i in 1 2; do
  timeout 120 /tmp/a/build-h200/dev/geglu_split > $R/geglu-split-$i.txt 2>&1
  echo "geglu_split $i rc=$? at $(el) s"
  grep -E "FAILED|probe:|^q[46]_[0k] " $R/geglu-split-$i.txt; grep -c " ok$" $R/geglu-split-$i.txt
  save
done
save; echo "done at $(el) s"
