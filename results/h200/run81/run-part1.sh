#!/usr/bin/env bash
# run 81, part 1: the F16 first passes on the staged body in the library (0a93b83 + 08c07c1)
set -u -o pipefail
export GEM_GIT_COMMIT=08c07c1
R=/tmp/r81; mkdir -p $R
pk() { (cd $R && tar czf $OUT/run81a.tgz.tmp --exclude=receipts.tar.gz . && mv $OUT/run81a.tgz.tmp $OUT/run81a.tgz); }
PHASES="build resources" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -8 $R/runner.txt; pk
B=build-h200; G=$B/gem
tar xzf $R/receipts.tar.gz -C $R ./resources-analysis.txt ./resources.json ./build.txt 2>/dev/null; grep -i "verdict\|pass\|fail" $R/resources-analysis.txt | head -3; grep -i "spill" $R/build.txt | grep -i "gem_fused" | head
cd $B && (GEM_QUIET=1 timeout 150 ctest -j4 2>&1 | tail -6 > $R/ctest.txt); cd ..; cat $R/ctest.txt; pk
for t in f16 bf16; do
timeout 60 $G bench --backend cuda --a fused --b fused --calls 8 --kv-dtype $t --lengths 8192,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10 --out $R/bench-calls8-$t.json > $R/bench-calls8-$t.txt 2>&1; tail -8 $R/bench-calls8-$t.txt
done
timeout 60 $G bench --backend cuda --a fused --b fused --kv-dtype f16 --lengths 8192,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10 --out $R/bench-calls1-f16.json > $R/bench-calls1-f16.txt 2>&1; tail -6 $R/bench-calls1-f16.txt; pk
for t in memcheck racecheck; do timeout 100 compute-sanitizer --tool $t --error-exitcode 9 $B/test_decode --small > $R/sanitizer-$t.txt 2>&1; echo "$t rc=$?"; tail -2 $R/sanitizer-$t.txt; pk; done
# the CPU variants for part 2: the old kernels (a), pairs alone (p), pairs and the shuffle (ps)
for v in a p ps; do
  case $v in a) f="-DCPU_BF16_SHUFFLE=0 -DCPU_SCORE_PAIRS=0";; p) f="-DCPU_BF16_SHUFFLE=0";; ps) f="";; esac
  (cmake -S . -B $B -DCMAKE_C_FLAGS="$f" >/dev/null && cmake --build $B -j16 --target gem >/dev/null && cp $B/gem /tmp/gem-$v) || echo "variant $v build failed"
done; ls -la /tmp/gem-*; cmp $B/gem /tmp/gem-ps && echo "the build is ps"
