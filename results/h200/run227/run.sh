#!/usr/bin/env bash
# run 227 (the Xeon host of any device machine; CPU only): the build for other machines
# (GEM_NATIVE=OFF, whose GEM_CPU_DISPATCH builds src/cpu_kernels.c for AVX-512, AVX2 and
# portable C and picks one at run time) on an AVX-512 processor, where its AVX-512 build runs
# for the first time (the AMD EPYC development guest has AVX2 alone).
# 1. D (GEM_NATIVE=OFF) runs test_cpu_fused_kernels and test_cpu_routes under GEM_CPU_ISA=
#    avx512, avx2 and portable, each run's kernels checked by name; N (GEM_NATIVE=ON) runs
#    test_cpu_fused_kernels. Prediction: every check passes, D names avx512 with no GEM_CPU_ISA.
# 2. `gem bench` of the fused route against itself, F32 and BF16 at 64K, 16 threads, processes
#    N D D N N D D N. Prediction: D's medians within the processes' spread of N's (the same
#    kernels; -mtune generic against native, one call through a table).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r227; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run227.tgz .); }
lscpu > $R/lscpu.txt; grep -E "Model name|^CPU\(s\)|^Model:|avx512f" -o $R/lscpu.txt | sort -u
cp results/h200/run227/commit $R/commit # the tree sent (the device copy's .git is not it)
# jansson and OpenSSL: the carried static ones (.deps/dist) through a pkg-config stand-in, as
# scripts/h200-run.sh does, where the host lacks their development files
EXTRA=()
if ! { command -v pkg-config >/dev/null && pkg-config --exists jansson; } ||
   [ ! -f /usr/include/openssl/sha.h ]; then
  D=$PWD/.deps/dist; mkdir -p /tmp/gemdeps
  printf '%s\n' '#!/bin/sh' 'for a in "$@"; do case "$a" in' \
    '--version) echo 0.29.2; exit 0;; --modversion) echo 2.14; exit 0;;' \
    "--variable=prefix) echo $D; exit 0;; --variable=includedir) echo $D/include; exit 0;;" \
    "--variable=libdir) echo $D/lib; exit 0;; --cflags|--cflags-only-I) echo -I$D/include; exit 0;;" \
    '--cflags-only-other|--libs-only-other) echo; exit 0;;' \
    "--libs) echo -L$D/lib -ljansson; exit 0;; --libs-only-L) echo -L$D/lib; exit 0;;" \
    '--libs-only-l) echo -ljansson; exit 0;; --variable=*) echo; exit 0;;' 'esac; done' 'exit 0' \
    > /tmp/gemdeps/pkg-config
  chmod +x /tmp/gemdeps/pkg-config
  EXTRA=(-DPKG_CONFIG_EXECUTABLE=/tmp/gemdeps/pkg-config -DOPENSSL_ROOT_DIR="$D"
    -DOPENSSL_USE_STATIC_LIBS=TRUE -DOPENSSL_INCLUDE_DIR="$D/include"
    -DOPENSSL_CRYPTO_LIBRARY="$D/lib/libcrypto.a" -DOPENSSL_SSL_LIBRARY="$D/lib/libssl.a"
    -DCMAKE_EXE_LINKER_FLAGS="-L$D/lib")
  export LIBRARY_PATH=$D/lib
fi
build() { # folder, GEM_NATIVE
  cmake -S . -B $1 -DCMAKE_BUILD_TYPE=Release -DGEM_CUDA=OFF -DGEM_NATIVE=$2 "${EXTRA[@]}" \
    > $R/build-$2.txt 2>&1 &&
  cmake --build $1 -j8 --target gem test_cpu_fused_kernels test_cpu_routes >> $R/build-$2.txt 2>&1
  echo "GEM_NATIVE=$2 build rc=$?" | tee -a $R/build-$2.txt
}
build /tmp/b-n ON & BN=$!
build /tmp/b-d OFF & BD=$!
wait $BN; wait $BD; echo "builds at $(el) s"; grep -h -A5 " error" $R/build-*.txt | head -20
grep -h "GEM_CPU_DISPATCH\|dispatch" /tmp/b-d/CMakeCache.txt | head -3 > $R/dispatch-cache.txt
for I in "" avx512 avx2 portable; do
  GEM_CPU_ISA=$I /tmp/b-d/test_cpu_fused_kernels > $R/d-kernels-${I:-default}.txt 2>&1
  echo "D GEM_CPU_ISA=${I:-(unset)} test_cpu_fused_kernels rc=$?: $(head -1 $R/d-kernels-${I:-default}.txt) | $(tail -1 $R/d-kernels-${I:-default}.txt)"
  [ -n "$I" ] || continue
  GEM_CPU_ISA=$I /tmp/b-d/test_cpu_routes > $R/d-routes-$I.txt 2>&1
  echo "D GEM_CPU_ISA=$I test_cpu_routes rc=$?: $(tail -1 $R/d-routes-$I.txt)"
done
/tmp/b-n/test_cpu_fused_kernels > $R/n-kernels.txt 2>&1
echo "N test_cpu_fused_kernels rc=$?: $(head -1 $R/n-kernels.txt) | $(tail -1 $R/n-kernels.txt)"
echo "tests at $(el) s"; save
i=0
for X in N D D N N D D N; do
  [ $(el) -lt ${STOP_S:-400} ] || { echo "stopped at $(el) s"; break; }
  G=/tmp/b-n/gem; [ $X = D ] && G=/tmp/b-d/gem
  for T in f32 bf16; do
    $G bench --a fused --b fused --kv-dtype $T --lengths 65536 --rounds 5 \
      --out $R/bench-$i-$X-$T.json > $R/bench-$i-$X-$T.txt 2>&1
    echo "$i $X $T rc=$? $(grep -o '[a-z0-9]* kernels' $R/bench-$i-$X-$T.txt | head -1)" \
      "$(grep -E 'fused_p32_t4' $R/bench-$i-$X-$T.txt | tail -1 | awk '{print $3, $8}')"
  done
  i=$((i + 1))
done
echo "done at $(el) s"; save
