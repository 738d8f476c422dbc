#!/usr/bin/env bash
# run 155: the CUDA kernel tables by element type after FP8 joined gem_dtype (run 153 found
# gem_cuda_kernel_query failing: the tables had grown an empty FP8 entry and the query wrote
# 16 first passes into 12 slots), and test_decode's CUDA target no longer asked to support FP8;
# test_cuda_queries, test_decode, gem resources, memcheck over test_cuda_queries. Then, while
# time lasts, whole tokens of six layers of the 31B's dimensions in Q8_0 on the CPU, A
# (adce1c0, before the spans) and B, A B B A A B B A (run 154's four were too noisy to read).
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r155; mkdir -p $R/abba-w6
save() { (cd $R && tar czf $OUT/run155.tgz .); }
CB=$(cat results/h200/run155/commit 2>/dev/null || echo unknown); CA=$(cat build-a154/commit)
echo "A=$CA B=$CB" > $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a154/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS=gem JOBS=6 bash /tmp/a/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
GEM_GIT_COMMIT=$CB PHASES=build JOBS=10 BUILD_TARGETS="gem test_cuda_queries test_decode" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(( $(date +%s) - T0 )) s"
B=build-h200
GEM_QUIET=1 timeout 60 $B/test_cuda_queries > $R/test_cuda_queries.txt 2>&1; echo "test_cuda_queries rc=$?"; tail -n 1 $R/test_cuda_queries.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_queries > $R/memcheck-queries.txt 2>&1; echo "memcheck rc=$?"; grep -E "SUMMARY" $R/memcheck-queries.txt
$B/gem resources --backend cuda --out $R/resources.json > $R/resources.txt 2>&1; echo "resources rc=$?"; head -30 $R/resources.txt
save
GEM_QUIET=1 timeout 240 $B/test_decode > $R/test_decode.txt 2>&1; echo "test_decode rc=$? at $(( $(date +%s) - T0 )) s"; grep -c FAIL $R/test_decode.txt; tail -n 1 $R/test_decode.txt
save
wait
tail -n 1 $R/build-a.txt
$B/gem synth --preset 31b --layers 6 --type q8_0 --out /tmp/w6-q8.gguf > $R/synth-w6.txt 2>&1
i=0
for X in A B B A A B B A; do
  i=$((i+1)); [ $(( $(date +%s) - T0 )) -gt 540 ] && { echo "stop before process $i"; break; }
  G=/tmp/a/build-h200/gem; [ $X = B ] && G=$B/gem
  GEM_QUIET=1 timeout 40 $G profile --model /tmp/w6-q8.gguf --context 64 --prompt 16 --reps 3 --samples 4 --out $R/abba-w6/$X-$i-ctx64.json > $R/abba-w6/$X-$i.txt 2>&1
  echo "w6 $X-$i rc=$? at $(( $(date +%s) - T0 )) s $(grep -E 'fused +whole token' $R/abba-w6/$X-$i.txt | head -1)"
  save
done
echo "done at $(( $(date +%s) - T0 )) s"
