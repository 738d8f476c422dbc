#!/usr/bin/env bash
# run 156: the CPU products' dispatch on the H200 host's Xeon (issue 10), then the CUDA checks
# of 91aa2eb (test_cuda_queries with FP8 refused, memcheck over it, gem resources).
# Three builds: A = a3f115d (main), B1 = b99b05d (the pool's counters on lines of their own),
# B = this tree (B1 and the tapered split of the products, the library's new default).
#  - dev/cpu/mv_split (B): equal splits of 4, 8, 16 ranges a thread against tapers of 4, 6, 8
#    levels, 60 layers of the 2gb preset's Q8_0 shapes, A B .. B A rounds in one process.
#  - dev/cpu/mv_chain of A, B1, B (processes A B1 B B B1 A): the empty dispatch (the pool) and
#    each kind's tail and busy share (the split).
#  - whole tokens of the 2gb preset, gem profile at contexts 64 and 1024, A B B A A B B A
#    (scripts/abba-model.sh's settings), while time lasts.
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r156; mkdir -p $R
save() { (cd $R && tar czf $OUT/run156.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
CB=$(cat results/h200/run156/commit 2>/dev/null || echo unknown)
echo "B=$CB B1=$(cat build-a156/b1-commit) A=$(cat build-a156/a-commit)" > $R/commits.txt
lscpu > $R/lscpu.txt 2>&1
for X in a b1; do
  mkdir -p /tmp/$X && tar xzf build-a156/$X-tree.tgz -C /tmp/$X && ln -sfn $PWD/.deps /tmp/$X/.deps
  (GEM_GIT_COMMIT=$(cat build-a156/$X-commit) PHASES=build BUILD_TARGETS="gem dev_mv_chain" JOBS=5 \
     bash /tmp/$X/scripts/h200-run.sh /tmp/$X-out > $R/build-$X.txt 2>&1) &
done
GEM_GIT_COMMIT=$CB PHASES=build JOBS=8 BUILD_TARGETS="gem dev_mv_chain dev_mv_split test_cuda_queries" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
wait
for f in build build-a build-b1; do tail -n 1 $R/$f.txt; done; echo "builds done at $(el) s"
B=build-h200
timeout 120 $B/dev/mv_split --threads 16 --layers 60 --rounds 5 --splits 4,8,16,t4,t6,t8 \
  --prefetch 4096 --into 2 > $R/mv_split.txt 2>&1; echo "mv_split rc=$? at $(el) s"
tail -n 8 $R/mv_split.txt; save
i=0
for X in A B1 B B B1 A; do
  i=$((i+1)); D=$B/dev; [ $X = A ] && D=/tmp/a/build-h200/dev; [ $X = B1 ] && D=/tmp/b1/build-h200/dev
  timeout 90 $D/mv_chain --layers 60 --rounds 3 > $R/mv_chain-$i-$X.txt 2>&1
  echo "mv_chain $X rc=$? at $(el) s"; grep -E "^(products|empty|q/k/v|o |gate|down)" $R/mv_chain-$i-$X.txt
  save
done
$B/gem synth --preset 2gb --out /tmp/2gb.gguf > $R/synth-2gb.txt 2>&1; echo "synth rc=$? at $(el) s"
mkdir -p $R/abba-2gb
i=0
for X in A B B A A B B A; do
  i=$((i+1)); [ $(el) -gt 420 ] && { echo "stop before process $i"; break; }
  G=/tmp/a/build-h200/gem; [ $X = B ] && G=$B/gem
  for c in 64 1024; do
    GEM_QUIET=1 timeout 60 $G profile --model /tmp/2gb.gguf --context $c --prompt 16 --reps 3 \
      --samples 4 --threads 0 --out $R/abba-2gb/$X-$i-ctx$c.json > $R/abba-2gb/$X-$i-ctx$c.txt 2>&1
    echo "2gb $X-$i ctx $c rc=$? at $(el) s $(grep -E 'fused +whole token' $R/abba-2gb/$X-$i-ctx$c.txt | head -1)"
  done
  save
done
# the CUDA checks of 91aa2eb
GEM_QUIET=1 timeout 60 $B/test_cuda_queries > $R/test_cuda_queries.txt 2>&1; echo "test_cuda_queries rc=$?"; tail -n 1 $R/test_cuda_queries.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_queries > $R/memcheck-queries.txt 2>&1; echo "memcheck rc=$?"; grep SUMMARY $R/memcheck-queries.txt
timeout 30 $B/gem resources --out $R/resources.json > $R/resources.txt 2>&1; echo "resources rc=$?"; tail -n 5 $R/resources.txt
save; echo "done at $(el) s"
