#!/usr/bin/env bash
# run 169: the SASS of the library's Q4_0 tile products (src/model/cuda/matvec_tiles.cu), to
# count a chunk's instructions in q4t_kernel's loop.
set -u
W=/tmp/wsass; rm -rf $W; mkdir -p $W
WORK=$W PHASES="build" BUILD_TARGETS="dev_tiles_split" BUDGET_S=300 \
  bash scripts/h200-run.sh $OUT/h200 > /dev/null 2>&1
echo "build rc=$?"
O=$(find build-h200 -name "matvec_tiles.cu.o" | head -1); echo "$O"
cuobjdump -sass "$O" > $OUT/matvec_tiles.sass 2>&1; echo "cuobjdump rc=$?"
grep -n "Function" $OUT/matvec_tiles.sass | head
