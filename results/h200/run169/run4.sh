#!/usr/bin/env bash
# run 169, last call: dev/cuda/layer_persistent with the consumers' arithmetic alone beside the rest.
set -u -o pipefail
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
W=/tmp/w169; rm -rf $W; mkdir -p $W
WORK=$W PHASES="build" BUILD_TARGETS="dev_layer_persistent" BUDGET_S=300 \
  bash scripts/h200-run.sh $OUT/h200 > /dev/null 2>&1
echo "h200-run.sh rc=$? at $(el) s"; grep -E "FAIL|fail|error" $OUT/h200/log.txt | tail -8
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 build-h200/dev/layer_persistent --rounds 10 --layers 12 2>&1 | tee $OUT/layer-persistent.txt
echo "layer_persistent rc=$? at $(el) s"
