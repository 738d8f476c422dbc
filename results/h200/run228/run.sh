#!/usr/bin/env bash
# run 228 (the Xeon host of any device machine; CPU only): the model's products in a build for
# other machines (GEM_NATIVE=OFF: src/model/matvec_kernels.c built for AVX-512 with VNNI,
# AVX-512, AVX2 and portable, one chosen at run time) on a processor with AVX512_VNNI, where
# its two AVX-512 builds run for the first time (the development guest has AVX2 alone).
# 1. D (GEM_NATIVE=OFF) runs test_matvec, which checks every build the processor runs, and
#    test_model; N (GEM_NATIVE=ON) runs test_matvec. Prediction: every check passes, D runs
#    "avx512-vnni", "avx512", "avx2" and "portable products", and names avx512-vnni first.
# 2. Whole tokens of the 2gb preset in Q8_0 (`gem profile --fused-only`, context 64, 16
#    threads), processes N D D N N D D N. Prediction: D's medians within the spread of N's (the
#    same source for the products; generic tuning outside them).
#   STOP_S=<seconds> bash results/h200/run228/run.sh   (device call; carry .deps)
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r228; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run228.tgz .); }
lscpu > $R/lscpu.txt; grep -E "Model name|^CPU\(s\)|^Model:" $R/lscpu.txt
grep -o -w "avx512_vnni" $R/lscpu.txt | head -1
cp results/h200/run228/commit $R/commit # the tree sent (the device copy's .git is not it)
. scripts/deps-cmake.sh || exit 2 # CMAKE_EXTRA: jansson and OpenSSL
build() { # folder, GEM_NATIVE
  cmake -S . -B $1 -DCMAKE_BUILD_TYPE=Release -DGEM_CUDA=OFF -DGEM_NATIVE=$2 "${CMAKE_EXTRA[@]}" \
    > $R/build-$2.txt 2>&1 &&
  cmake --build $1 -j8 --target gem test_matvec test_model >> $R/build-$2.txt 2>&1
  echo "GEM_NATIVE=$2 build rc=$?" | tee -a $R/build-$2.txt
}
rm -rf /tmp/b-n /tmp/b-d # a warm machine may hold another tree's
build /tmp/b-n ON & BN=$!
build /tmp/b-d OFF & BD=$!
wait $BN; wait $BD; echo "builds at $(el) s"; grep -h -A5 " error" $R/build-*.txt | head -20
for X in d n; do
  /tmp/b-$X/test_matvec > $R/$X-matvec.txt 2>&1
  echo "$X test_matvec rc=$?: $(grep -o '[a-z0-9-]* products' $R/$X-matvec.txt | tr '\n' ' ')|" \
    "$(tail -1 $R/$X-matvec.txt)"
done
/tmp/b-d/test_model > $R/d-model.txt 2>&1; echo "d test_model rc=$?: $(tail -1 $R/d-model.txt)"
echo "tests at $(el) s"; save
M=/tmp/gem-2gb-q8_0.gguf
/tmp/b-n/gem synth --preset 2gb --type q8_0 --out $M > $R/synth.txt 2>&1
echo "synth rc=$? at $(el) s"
i=0
for X in N D D N N D D N; do
  [ $(el) -lt ${STOP_S:-400} ] || { echo "stopped at $(el) s"; break; }
  G=/tmp/b-n/gem; [ $X = D ] && G=/tmp/b-d/gem
  $G profile --model $M --context 64 --prompt 4 --reps 1 --samples 5 --fused-only \
    --out $R/profile-$i-$X.json > $R/profile-$i-$X.txt 2>&1
  echo "$i $X rc=$? $(grep -o -m1 'products ([a-z0-9-]*)' $R/profile-$i-$X.txt)" \
    "$(grep -m1 'whole token' $R/profile-$i-$X.txt)"
  i=$((i + 1))
done
echo "done at $(el) s"; save
