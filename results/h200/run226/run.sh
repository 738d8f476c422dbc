#!/usr/bin/env bash
# run 226 (an H100 machine's Xeon host; the tree of branch cpu-avx2-matvec): run 225 again
# without its GPU part, which ran, after its CPU part found two build faults: the AVX2 build
# lacked the carried jansson (now through h200-run.sh's pkg-config shim), and the host's GCC
# failed test_cpu_fused_kernels on -Wstringop-overflow (its offsets now size_t).
# Order: the builds, every test, then mv_int8 (part 2), then fused_parts and the benches of
# part 1 while STOP_S allows.
# 1. The CPU's AVX2 kernels on an Intel processor: the tree built with -march=x86-64-v3 (AVX2,
#    FMA, F16C, no AVX-512) holds test_cpu_fused_kernels and test_cpu_routes (the rule's bits);
#    the native build (AVX-512) holds test_cpu_fused_kernels. Then fused_parts of both on 1 and
#    16 threads, and `gem bench` of the default fused route at 64K and 128K, F32 and BF16,
#    processes N V V N (N native AVX-512, V the AVX2 build), 16 threads.
#    Prediction: the same bits; on 16 threads the AVX2 item 1.3-1.7x the AVX-512 one; F32 time
#    within 1.15x of AVX-512's (closer to memory), BF16 1.3-1.6x.
# 2. The decoder's AVX2 products (matvec.c, vpmaddubsw and vpmaddwd for the packed types) on
#    the same processor: test_matvec and test_model on the x86-64-v3 build, test_matvec on a
#    -march=skylake-avx512 build (AVX-512F rows, no VNNI: the AVX2 integer products) and on the
#    native one (VNNI); then dev/mv_int8 of N and V: one thread (L2 and DRAM), and 16 (the 2gb
#    preset's products). Prediction: the definition's bits everywhere; one thread in the L2 the
#    AVX2 products at 0.35-0.5 of VNNI's GB/s; 16 threads Q8_0 0.8-1.0 (memory bound), Q4_K
#    0.5-0.8.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r226; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run226.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $R/gpu.txt
lscpu > $R/lscpu.txt; grep -E "Model name|^CPU\(s\)|^Model:" $R/lscpu.txt
C=$(cat results/h200/run226/commit)
GEM_GIT_COMMIT=$C PHASES=build JOBS=16 \
  BUILD_TARGETS="gem test_cpu_fused_kernels dev_fused_parts test_matvec dev_mv_int8" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt
# whatever of those targets builds when one does not (make -k)
cmake --build build-h200 -j16 --target gem test_cpu_fused_kernels \
  dev_fused_parts test_matvec dev_mv_int8 -- -k >> $R/build.txt 2>&1
echo "native build rc=$? at $(el) s"
# the CPU-only builds take the carried static jansson and OpenSSL through h200-run.sh's
# pkg-config shim, as its build did
D=$PWD/.deps/dist; DEPS=()
[ -x /tmp/gemdeps/pkg-config ] && DEPS=(-DPKG_CONFIG_EXECUTABLE=/tmp/gemdeps/pkg-config
  -DOPENSSL_ROOT_DIR="$D" -DOPENSSL_USE_STATIC_LIBS=TRUE -DOPENSSL_INCLUDE_DIR="$D/include"
  -DOPENSSL_CRYPTO_LIBRARY="$D/lib/libcrypto.a" -DOPENSSL_SSL_LIBRARY="$D/lib/libssl.a"
  -DCMAKE_EXE_LINKER_FLAGS="-L$D/lib")
cpu_build() { # build folder, -march, targets
  local B=$1 A=$2; shift 2
  LIBRARY_PATH=$D/lib cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DGEM_CUDA=OFF -DGEM_NATIVE=OFF \
    -DCMAKE_C_FLAGS="-march=$A" "${DEPS[@]}" > $R/build-$A.txt 2>&1 &&
  LIBRARY_PATH=$D/lib cmake --build $B -j8 --target "$@" -- -k >> $R/build-$A.txt 2>&1
  echo "$A build rc=$?" >> $R/build-$A.txt
}
cpu_build /tmp/build-avx2 x86-64-v3 gem test_cpu_fused_kernels test_cpu_routes dev_fused_parts \
  test_matvec test_model dev_mv_int8 &
BV=$!
cpu_build /tmp/build-skx skylake-avx512 test_matvec &
BS=$!
wait $BV; tail -n 1 $R/build-x86-64-v3.txt; wait $BS; tail -n 1 $R/build-skylake-avx512.txt
grep -h -B2 -A6 " error" $R/build*.txt | head -30
echo "builds at $(el) s"
save
N=$PWD/build-h200; V=/tmp/build-avx2
for T in "$V/test_cpu_fused_kernels" "$V/test_cpu_routes" "$N/test_cpu_fused_kernels" \
  "$V/test_matvec" "$V/test_model" /tmp/build-skx/test_matvec "$N/test_matvec"; do
  timeout 200 $T > $R/$(basename $(dirname $T))-$(basename $T).txt 2>&1
  echo "$T rc=$? at $(el) s: $(tail -n 1 $R/$(basename $(dirname $T))-$(basename $T).txt)"
done
save
for TY in q8_0 q4_k q4_0 q6_k; do
  for B in N V; do
    D=$N/dev/mv_int8; [ $B = V ] && D=$V/dev/mv_int8
    [ $(el) -gt ${STOP_S:-480} ] && { echo "stop before mv_int8 at $(el) s"; break 2; }
    timeout 60 $D --threads 16 --rounds 3 --mib 256 --layers 4 --type $TY > $R/int8-$B-$TY.txt 2>&1
    echo "mv_int8 $B $TY rc=$?: $(awk '$2 == "int8" && $3 != "/" && NF > 5 {printf "%s %s GB/s  ", $1, $(NF-1)}' \
      $R/int8-$B-$TY.txt)"
  done
done
save
for B in N V; do
  [ $(el) -gt ${STOP_S:-480} ] && { echo "stop before fused_parts at $(el) s"; break; }
  D=$N/dev/fused_parts; [ $B = V ] && D=$V/dev/fused_parts
  for DT in f32 bf16; do
    timeout 60 $D --dtype $DT --threads 1,16 > $R/parts-$B-$DT.txt 2>&1
    echo "fused_parts $B $DT rc=$?: $(grep -E '^ +(1|16) +(score|value|item) ' $R/parts-$B-$DT.txt \
      | awk '{printf "%s %s %s  ", $1, $2, $3}')"
  done
done
save
n=0
for DT in f32 bf16; do
  for B in N V V N; do
    G=$N/gem; [ $B = V ] && G=$V/gem
    [ $(el) -gt ${STOP_S:-480} ] && { echo "stop before bench $n at $(el) s"; break 2; }
    GEM_QUIET=1 timeout 60 $G bench --backend cpu --a fused --b fused --lengths 65536,131072 \
      --kv-dtype $DT --rounds 3 --no-double --out $R/bench-$n-$B-$DT.json \
      > $R/bench-$n-$B-$DT.txt 2>&1
    echo "bench $n ($B $DT) rc=$? at $(el) s: $(awk '/fused_p32_t4/ {printf "%s %s  ", $4, $NF}' \
      $R/bench-$n-$B-$DT.txt)"
    n=$((n + 1)); save
  done
done
save; echo "done at $(el) s"
