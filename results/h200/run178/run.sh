#!/usr/bin/env bash
# run 178: (1) Xeon host: dev/cpu/libs_abba, whole tokens of the 2gb preset (60 layers, Q8_0) of
# main before the items' steps (A, 8147f0a, build-a/a-tree.tgz) against this tree (B) in one
# process, A B B A a round, contexts 64 and 1,024, three processes; then gem profile of B at
# context 64 for its stages. (2) Only on an H200: whole 31B tokens (Q4_0 weights, F32 K+V, the
# fused route alone) of 143533c (before the lean Q4_0 loop, build-a/a2-tree.tgz) against this
# tree, processes A B B A at 131,072.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r178; mkdir -p $R/abba31
save() { (cd $R && tar czf $OUT/run178.tgz .); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
lscpu > $R/lscpu.txt 2>&1; grep -E "Model name|^CPU\(s\)" $R/lscpu.txt
H200=0; grep -q H200 $R/gpu.txt && H200=1
CA=$(cat build-a/commit); CA2=$(cat build-a/commit2); CB=$(cat results/h200/run178/commit)
echo "A=$CA A2=$CA2 B=$CB h200=$H200" | tee $R/commits.txt
mkdir -p /tmp/a && tar xzf build-a/a-tree.tgz -C /tmp/a && ln -sfn $PWD/.deps /tmp/a/.deps
(GEM_GIT_COMMIT=$CA PHASES=build BUILD_TARGETS="gemmodel_shared" JOBS=5 \
  bash /tmp/a/scripts/h200-run.sh /tmp/a-out > $R/build-a.txt 2>&1) &
if [ $H200 = 1 ]; then
  mkdir -p /tmp/a2 && tar xzf build-a/a2-tree.tgz -C /tmp/a2 && ln -sfn $PWD/.deps /tmp/a2/.deps
  (GEM_GIT_COMMIT=$CA2 PHASES=build BUILD_TARGETS="gem" JOBS=5 \
    bash /tmp/a2/scripts/h200-run.sh /tmp/a2-out > $R/build-a2.txt 2>&1) &
fi
GEM_GIT_COMMIT=$CB PHASES=build BUILD_TARGETS="gem gemmodel_shared dev_libs_abba" JOBS=6 \
  bash scripts/h200-run.sh /tmp/b-out > $R/build-b.txt 2>&1
wait
for f in $R/build-*.txt; do tail -n 1 $f; done
echo "builds done at $(el) s"
B=build-h200
$B/gem synth --preset 2gb --out /tmp/synth-2gb.gguf > $R/synth-2gb.txt 2>&1
echo "synth rc=$? at $(el) s"
for i in 1 2 3; do
  timeout 90 $B/dev/libs_abba --a /tmp/a/build-h200/libgemmodel.so --b $B/libgemmodel.so \
    --model /tmp/synth-2gb.gguf --contexts 64,1024 --rounds 40 > $R/libs_abba-$i.txt 2>&1
  echo "libs_abba $i rc=$? at $(el) s"; grep -vE "^ *$" $R/libs_abba-$i.txt | tail -n 12
  save
done
GEM_QUIET=1 timeout 60 $B/gem profile --model /tmp/synth-2gb.gguf --context 64 --prompt 16 \
  --reps 3 --samples 4 --threads 0 --out $R/profile-2gb-ctx64.json > $R/profile-2gb-ctx64.txt 2>&1
echo "profile rc=$? at $(el) s"; tail -n 14 $R/profile-2gb-ctx64.txt
save
if [ $H200 = 1 ]; then
  $B/gem synth --preset 31b --type q4_0 --no-matrices --context-length 262144 \
    --out /tmp/m31.gguf > $R/synth-31b.txt 2>&1
  i=0
  for X in A B B A A B B A; do
    i=$((i+1)); [ $(el) -gt 520 ] && { echo "stop before process $i at $(el) s"; break; }
    G=/tmp/a2/build-h200/gem; [ $X = B ] && G=$B/gem
    timeout 45 $G profile --model /tmp/m31.gguf --backend cuda --random-weights 1 \
      --context 131072 --reps 1 --samples 5 --bw-mib 4096 --kv-dtype f32 --fused-only \
      --out $R/abba31/$X-$i.json > $R/abba31/$X-$i.txt 2>&1
    echo "$X-$i rc=$? at $(el) s: $(grep -E 'whole token' $R/abba31/$X-$i.txt | head -1)"
    save
  done
fi
save; echo "done at $(el) s"
