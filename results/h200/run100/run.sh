#!/usr/bin/env bash
# run 100: the staged passes with their softmax, V update and partial write shared (one helper
# each): the decode matrix's small cases, gem bench of the BF16 and F16 passes (K from V, and
# stored K+V) at 64K and 128K, compute-sanitizer memcheck and racecheck over the small cases
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
X=/tmp/x100; mkdir -p $X
save() { (cd $X && tar czf $OUT/run100.tgz .); }
BUILD_TARGETS="gem test_decode" PHASES="build" bash scripts/h200-run.sh $X > $X/runner.txt 2>&1; tail -1 $X/runner.txt; rm -f $X/receipts.tar.gz
build-h200/test_decode --small > $X/test-decode-small.txt 2>&1; echo "test_decode --small rc=$?"; tail -1 $X/test-decode-small.txt
save
for t in bf16 f16; do
  for kind in kfv kv; do
    extra=""; [ $kind = kfv ] && extra="--k-from-v"
    timeout 60 build-h200/gem bench --backend cuda --kv-dtype $t --a fused --b fused $extra --lengths 65536,131072 \
        --rounds 10 --bw-mib 4096 --bw-reps 5 --out $X/bench-$kind-$t.json > $X/bench-$kind-$t.txt 2>&1; echo "$kind $t rc=$?"
    grep -E "read bandwidth|^ +(65536|131072)|fused_p" $X/bench-$kind-$t.txt | head -6
    save
  done
  if [ $t = bf16 ]; then
    for tool in memcheck racecheck; do
      timeout 70 compute-sanitizer --tool $tool --error-exitcode 9 build-h200/test_decode --small > $X/sanitizer-$tool.txt 2>&1
      echo "$tool rc=$?"; tail -2 $X/sanitizer-$tool.txt; save
    done
  fi
done
