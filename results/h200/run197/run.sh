#!/usr/bin/env bash
# run 197: the merged tree (Q6_K tiles, GeGLU as the plain products' warps, one plain kernel
# for the super-block tiles): test_cuda_matvec, test_model_cuda, synccheck and initcheck over
# test_cuda_matvec --tiles (memcheck and racecheck ran in run 194 on the same kernels' SASS),
# then the design's promotion in Q4_0 (the 31B dimensions, F32 caches, K stored; both routes at
# 8K / 64K / 128K, three interleaved repetitions) with `gem analyze promotion` and `ceiling`.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r197; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run197.tgz --exclude='*.gguf' .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run197/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem test_cuda_matvec test_model_cuda" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
B=build-h200
$B/gem synth --preset 31b --type q4_0 --no-matrices --context-length 262144 \
  --out /tmp/m31.gguf > $R/synth.txt 2>&1 &
for T in test_cuda_matvec test_model_cuda; do
  GEM_QUIET=1 timeout 90 $B/$T > $R/$T.txt 2>&1; echo "$T rc=$? at $(el) s"; tail -n 2 $R/$T.txt
done
for tool in synccheck initcheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/test_cuda_matvec --tiles \
    > $R/$tool-matvec.txt 2>&1
  echo "$tool rc=$? at $(el) s"; tail -n 2 $R/$tool-matvec.txt
done
save
wait; echo "synth done at $(el) s"
D=$R/q4_0; mkdir -p $D
timeout 200 $B/gem profile --model /tmp/m31.gguf --backend cuda --random-weights 1 \
  --context 8192,65536,131072 --kv-dtype f32 --reps 3 --samples 5 --bw-mib 4096 \
  --out $D/p.json --stage-profile $D/s.json > $D/profile.txt 2>&1
echo "profile rc=$? at $(el) s"; grep -v "^\[" $D/profile.txt | grep -E "gem profile|whole token"
$B/gem analyze promotion --long $D/p-ctx65536.json --long $D/p-ctx131072.json \
  --short $D/p-ctx8192.json --out $D/promotion.json > $D/promotion.txt 2>&1
echo "analyze promotion rc=$?"; cat $D/promotion.txt
$B/gem analyze ceiling $D/s-ctx65536.json $D/s-ctx131072.json --out $D/ceiling.json \
  > $D/ceiling.txt 2>&1
echo "analyze ceiling rc=$?"; cat $D/ceiling.txt
save; echo "done at $(el) s"
