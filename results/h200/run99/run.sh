#!/usr/bin/env bash
# run 99: dev/cuda/kfv_mma version 9 (version 4 with fewer instructions a tile) beside 4 and the
# library's passes; then the CPU route again at 64K and 128K with gem bench's K/V rotation over
# four times the host's last-level cache (b704fd5), F32, BF16 and F16, 16 threads
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r99; mkdir -p $R
BUILD_TARGETS="dev_kfv_mma gem" PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run99.tgz .); }
timeout 60 $K --rounds 1 --lengths 1,13,4097,8193 4 9 > $R/small.txt 2>&1; echo "small rc=$?"; grep -E "nmse|INVALID" $R/small.txt | sed 's/against.*//' | tr '\n' ';'; echo
timeout 60 $K --rounds 1 --lengths 8193 --pos0 1000000 4 9 > $R/pos.txt 2>&1; echo "pos rc=$?"; grep -E "nmse|INVALID" $R/pos.txt | sed 's/against.*//' | tr '\n' ';'; echo
save
timeout 150 $K --rounds 10 1 2 4 9 > $R/bf16.txt 2>&1; echo "bf16 rc=$?"; grep -vE "nmse" $R/bf16.txt
save
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $K 9 --rounds 1 --lengths 13,4097 > $R/memcheck-9.txt 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck-9.txt
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $K 9 --rounds 1 --lengths 4097 > $R/racecheck-9.txt 2>&1; echo "racecheck rc=$?"; tail -1 $R/racecheck-9.txt
save
lscpu > $R/cpu-host.txt; grep -H . /sys/devices/system/cpu/cpu0/cache/index*/size /sys/devices/system/cpu/cpu0/cache/index*/type > $R/cpu-caches.txt 2>&1
for t in bf16 f16 f32; do
  timeout 120 build-h200/gem bench --backend cpu --kv-dtype $t --a fused --b fused --lengths 65536,131072 --rounds 5 \
      --bw-mib 4096 --out $R/cpu-bench-$t.json > $R/cpu-bench-$t.txt 2>&1; echo "$t rc=$?"
  grep -E "loading|read bandwidth|^(65536|131072)|floor" $R/cpu-bench-$t.txt
  save
done
