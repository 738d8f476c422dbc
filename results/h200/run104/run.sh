#!/usr/bin/env bash
# run 104: dev/cuda/kfv_mma version 14 (version 4 at three blocks an SM, 85 registers) beside
# version 4, at 64 and at 99 partitions
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r104; mkdir -p $R
BUILD_TARGETS=dev_kfv_mma PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run104.tgz .); }
timeout 60 $K --rounds 1 --partitions 99 --lengths 1,13,4097,8193 4 14 > $R/small.txt 2>&1; echo "small rc=$?"; grep -E "nmse|INVALID" $R/small.txt | sed 's/against.*//' | tr '\n' ';'; echo
for P in 64 99 132; do
  timeout 150 $K --rounds 10 --partitions $P 4 14 > $R/bf16-p$P.txt 2>&1; echo "P $P rc=$?"; grep -vE "nmse|^live|^K rebuilt" $R/bf16-p$P.txt
  save
done
