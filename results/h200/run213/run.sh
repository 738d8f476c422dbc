#!/usr/bin/env bash
# run 213 (any one GPU): the q/k/v step in the tile products' blocks and GeGLU writing the down
# product's scratch (this tree, C): the matrix and decoder tests, then memcheck, racecheck and
# synccheck over `gem generate --backend cuda` on the tiny fixture (file-order rows: the q/k/v
# kernel, the down product's own scratch kernel) and on tile fixtures (both steps in the
# products: Q4_0 with F32 and BF16 caches, K rebuilt from V; the Q4_K_M mix). Also builds, for
# run 214 and before any timing, A (main before both, build-a/m-tree.tgz) and B (the q/k/v step
# alone, build-a/b-tree.tgz).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r213; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run213.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
CA=$(cat build-a/m-commit); CB=$(cat build-a/b-commit); CCOMMIT=$(cat results/h200/run213/commit)
echo "A=$CA B=$CB C=$CCOMMIT" | tee $R/commits.txt
GEM_GIT_COMMIT=$CCOMMIT PHASES=build JOBS=16 \
  BUILD_TARGETS="gem test_model_cuda test_cuda_matvec" bash scripts/h200-run.sh /tmp/c-out \
  > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build C at $(el) s"
G=build-h200/gem
rm -rf /tmp/a /tmp/b && mkdir -p /tmp/a /tmp/b
tar xzf build-a/m-tree.tgz -C /tmp/a && tar xzf build-a/b-tree.tgz -C /tmp/b
(for X in a b; do
  C=$CA; [ $X = b ] && C=$CB
  ln -sfn $PWD/.deps /tmp/$X/.deps
  (cd /tmp/$X && GEM_GIT_COMMIT=$C PHASES=build BUILD_TARGETS="gem" JOBS=8 \
    bash scripts/h200-run.sh /tmp/$X-out > $R/build-$X.txt 2>&1)
done) &
BA=$!
timeout 150 build-h200/test_cuda_matvec --tiles > $R/test-cuda-matvec.txt 2>&1
echo "test_cuda_matvec --tiles rc=$? at $(el) s"; tail -n 1 $R/test-cuda-matvec.txt
grep -i -E "qkv|fail" $R/test-cuda-matvec.txt | head -5
timeout 120 build-h200/test_model_cuda > $R/test-model-cuda.txt 2>&1
echo "test_model_cuda rc=$? at $(el) s"; tail -n 1 $R/test-model-cuda.txt
wait $BA; tail -qn 1 $R/build-a.txt $R/build-b.txt; echo "builds A, B at $(el) s"
$G synth --preset tiny --out /tmp/tiny.gguf > /dev/null
$G synth --preset tiny --type q4_0 --embd 256 --ff 512 --vocab 1024 --out /tmp/tiles.gguf > /dev/null
$G synth --preset tiny --type q4_k_m --embd 256 --ff 512 --vocab 1024 --out /tmp/kmix.gguf \
  > /dev/null
run_san() { # tool, fixture, label, extra options
  local tool=$1 M=$2 L=$3; shift 3
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $G generate --model /tmp/$M.gguf \
    --backend cuda --prompt-tokens 2,3 -n 2 "$@" > $R/sanitizer-$L-$tool.txt 2>&1
  echo "$tool $L rc=$? at $(el) s"; tail -n 1 $R/sanitizer-$L-$tool.txt
}
for tool in memcheck racecheck synccheck; do
  run_san $tool tiny tiny
  run_san $tool tiles tiles
  run_san $tool tiles tiles-bf16-kfv --kv-dtype bf16 --k-from-v
  run_san $tool kmix kmix
  save
done
# the tile fixtures' tokens and top-10 logits from A, B and C
for M in tiles kmix; do
  for X in a b c; do
    Gx=$G; [ $X != c ] && Gx=/tmp/$X/build-h200/gem
    $Gx generate --model /tmp/$M.gguf --backend cuda --prompt-tokens 2,3,5,7 -n 16 \
      --json $R/gen-$M-$X.json > /dev/null 2>&1; echo "generate $M $X rc=$?"
  done
done
save; echo "done at $(el) s"
