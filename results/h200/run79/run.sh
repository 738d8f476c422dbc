#!/usr/bin/env bash
# run 79: the staged BF16 first pass in the library (a32e5b0 + de92a20)
set -u -o pipefail
export GEM_GIT_COMMIT=de92a20
R=/tmp/r79; mkdir -p $R
pk() { (cd $R && tar czf $OUT/run79.tgz.tmp --exclude=receipts.tar.gz . && mv $OUT/run79.tgz.tmp $OUT/run79.tgz); }
PHASES="build resources" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -5 $R/runner.txt; pk
B=build-h200; G=$B/gem
cd $B && (GEM_QUIET=1 timeout 150 ctest -j4 2>&1 | tail -6 > $R/ctest.txt); cd ..; cat $R/ctest.txt; pk
tar xzf $R/receipts.tar.gz -C $R ./resources-analysis.txt ./resources.json 2>/dev/null; grep -i "verdict\|pass\|fail" $R/resources-analysis.txt | head -3
timeout 60 $G bench --backend cuda --a fused --b fused --calls 8 --kv-dtype bf16 --lengths 8192,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10 --out $R/bench-calls8-bf16.json > $R/bench-calls8-bf16.txt 2>&1; tail -8 $R/bench-calls8-bf16.txt
timeout 60 $G bench --backend cuda --a fused --b fused --kv-dtype bf16 --lengths 8192,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10 --out $R/bench-calls1-bf16.json > $R/bench-calls1-bf16.txt 2>&1; tail -6 $R/bench-calls1-bf16.txt; pk
timeout 80 $B/dev/mma_decode --lengths 8193,65536,131072 --rounds 8 1 2 24 > $R/mma-decode.txt 2>&1; grep -v "scale 1.0" $R/mma-decode.txt | tail -12; pk
for t in memcheck racecheck; do timeout 90 compute-sanitizer --tool $t --error-exitcode 9 $B/test_decode --small > $R/sanitizer-$t.txt 2>&1; echo "$t rc=$?"; tail -2 $R/sanitizer-$t.txt; pk; done
cp $R/receipts.tar.gz $OUT/ 2>/dev/null; true
