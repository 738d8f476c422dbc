#!/usr/bin/env bash
# run 83: the host CPU's cores as the threads see them (dev/cpu/core_probe)
set -u -o pipefail
export GEM_GIT_COMMIT=5585eda
R=/tmp/r83; mkdir -p $R
BUILD_TARGETS=dev_core_probe PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -2 $R/runner.txt; rm -f $R/receipts.tar.gz
lscpu -e > $R/lscpu-e.txt 2>&1; cat $R/lscpu-e.txt | head -20
grep -m1 "model name" /proc/cpuinfo; grep -c processor /proc/cpuinfo
timeout 120 build-h200/dev/core_probe --rounds 5 > $R/core-probe.txt 2>&1; echo "rc=$?"; cat $R/core-probe.txt
timeout 60 build-h200/dev/core_probe --rounds 3 --threads 8,9,10,12,14,16 > $R/core-probe-8-16.txt 2>&1; cat $R/core-probe-8-16.txt
(cd $R && tar czf $OUT/run83.tgz .)
