#!/usr/bin/env bash
# run 168, second call: the whole gate from one build in one call, since the resource receipt
# binds the gem binary that wrote it (build-h200/gem under the root) and the first call's
# analysis found that the CUDA fused route cannot write the design's operator records
# (fused P 32 tile 4: CUDA's kernel takes tile 8). So: the build, gem resources, the 31B model
# differentials on CUDA (phases resources and model31), the five operator differentials of the
# design's geometry on this host's CPU (gem diff --backend cpu --partitions 32 --tile 4
# --ref-partitions 16) and, beside them and outside the gate, the CUDA production route's
# (gem diff --backend cuda, fused P 64 tile 8), then gem analyze correctness.
set -u -o pipefail
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
W=/tmp/w168g; rm -rf $W; mkdir -p $W/rec
export GEM_GIT_COMMIT=$(cat results/h200/run168/commit)
WORK=$W PHASES="build resources model31" BUILD_TARGETS="gem dev_fused_decode" BUDGET_S=500 \
  bash scripts/h200-run.sh $OUT/h200 > /dev/null 2>&1
echo "h200-run.sh rc=$? at $(el) s"; grep -E "^== |FAIL|fail" $OUT/h200/log.txt | tail -8
G=build-h200/gem
$G diff --backend cpu --partitions 32 --tile 4 --ref-partitions 16 --out $W/rec/diff-cpu \
  > $W/rec/diff-cpu.txt 2>&1
echo "gem diff cpu rc=$? at $(el) s"; tail -n 1 $W/rec/diff-cpu.txt
$G diff --backend cuda --out $W/rec/diff-cuda > $W/rec/diff-cuda.txt 2>&1
echo "gem diff cuda rc=$? at $(el) s"; tail -n 1 $W/rec/diff-cuda.txt
M=$W/rec/model-diff-31b-q4_0
D() { ls $W/rec/diff-cpu/*live$1-*.json | head -1; }
MD() { ls $M/*ctx$1-*.json | head -1; }
$G analyze correctness --merge results/cpu/merge-check.json \
  --merge-analysis results/cpu/merge-boundary-analysis.json \
  --resources $W/rec/resources.json --resources-analysis $W/rec/resources-analysis.json \
  --diff $(D 8191) --diff $(D 8192) --diff $(D 8193) --diff $(D 65536) --diff $(D 131072) \
  --model $(MD 8191) --model $(MD 8192) --model $(MD 8193) --root . \
  --out $W/rec/correctness-analysis.json > $W/rec/correctness.txt 2>&1
echo "analyze correctness rc=$? at $(el) s"; cat $W/rec/correctness.txt
sha256sum $G > $W/rec/gem.sha256
(cd $W/rec && tar czf $OUT/run168-gate.tgz .)
echo "end at $(el) s"
