#!/usr/bin/env bash
# run 168 (one H100 or H200): the design's correctness gate on real device receipts of this
# tree, where it had run with stand-ins (results/cpu/model/README.md) since the committed
# resource receipt stopped matching its sources: gem resources (+ its analysis and the design
# candidate's receipt), the 31B model differentials at 8,191 / 8,192 / 8,193 and the whole-token
# profile at 8K / 64K / 128K (scripts/h200-run.sh phases resources and model31), the five
# operator differentials (gem diff --backend cuda, the design's routes), then gem analyze
# correctness over all of it with the committed CPU merge gate.
set -u -o pipefail
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
W=/tmp/w168; rm -rf $W; mkdir -p $W/rec
export GEM_GIT_COMMIT=$(cat results/h200/run168/commit)
WORK=$W PHASES="build resources model31" BUILD_TARGETS="gem dev_fused_decode" BUDGET_S=500 \
  bash scripts/h200-run.sh $OUT/h200 > /dev/null 2>&1
echo "h200-run.sh rc=$? at $(el) s"; grep -E "^== |FAIL|fail" $OUT/h200/log.txt | tail -12
G=build-h200/gem
$G diff --backend cuda --out $W/rec/diff > $W/rec/diff.txt 2>&1
echo "gem diff rc=$? at $(el) s"; tail -n 3 $W/rec/diff.txt
M=$W/rec/model-diff-31b-q4_0
ls $W/rec/diff $M > $W/rec/ls.txt 2>&1
D() { ls $W/rec/diff/*live$1-*.json | head -1; }
MD() { ls $M/*ctx$1-*.json | head -1; }
$G analyze correctness --merge results/cpu/merge-check.json \
  --merge-analysis results/cpu/merge-boundary-analysis.json \
  --resources $W/rec/resources.json --resources-analysis $W/rec/resources-analysis.json \
  --diff $(D 8191) --diff $(D 8192) --diff $(D 8193) --diff $(D 65536) --diff $(D 131072) \
  --model $(MD 8191) --model $(MD 8192) --model $(MD 8193) --root . \
  --out $W/rec/correctness-analysis.json > $W/rec/correctness.txt 2>&1
echo "analyze correctness rc=$? at $(el) s"; cat $W/rec/correctness.txt
(cd $W/rec && tar czf $OUT/run168.tgz .)
echo "end at $(el) s"
