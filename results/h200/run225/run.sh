#!/usr/bin/env bash
# run 225 (an H100 machine and its Xeon host; the tree of branch cpu-avx2-matvec):
# 1. dev/cuda/sliding_cluster after its two timing loops became one (time_rounds, 15a284c),
#    which compiled but had not run on a GPU: run 221's P 8 case again. Prediction: every check
#    gives the bits, and the chain figures land within 2% of run 221's (F32 / BF16 ms a call:
#    the library 0.01638 / 0.01236, two kernels at P 8 0.01797 / 0.01502, the cluster kernel
#    0.01826 / 0.01539).
# 2. The CPU's AVX2 kernels on an Intel processor: the tree built with -march=x86-64-v3 (AVX2,
#    FMA, F16C, no AVX-512) holds test_cpu_fused_kernels and test_cpu_routes (the rule's bits);
#    the native build (AVX-512, its object code main's) holds test_cpu_fused_kernels. Then
#    fused_parts of both on 1 and 16 threads, and `gem bench` of the default fused route at 64K
#    and 128K, F32 and BF16, processes N V V N (N native AVX-512, V the AVX2 build), 16 threads.
#    Prediction: the same bits; on 16 threads the AVX2 item 1.3-1.7x the AVX-512 one; F32 time
#    within 1.15x of AVX-512's (closer to memory), BF16 1.3-1.6x.
# 3. The decoder's AVX2 products (matvec.c, vpmaddubsw and vpmaddwd for the packed types) on
#    the same processor: test_matvec and test_model on the x86-64-v3 build, test_matvec on a
#    -march=skylake-avx512 build (AVX-512F rows, no VNNI: the AVX2 integer products) and on the
#    native one (VNNI); then dev/mv_int8 of N and V: one thread (L2 and DRAM), and 16 (the 2gb
#    preset's products). Prediction: the definition's bits everywhere; one thread in the L2 the
#    AVX2 products at 0.35-0.5 of VNNI's GB/s; 16 threads Q8_0 0.8-1.0 (memory bound), Q4_K
#    0.5-0.8.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r225; rm -rf $R; mkdir -p $R
save() { (cd $R && tar czf $OUT/run225.tgz .); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader \
  | tee $R/gpu.txt
lscpu > $R/lscpu.txt; grep -E "Model name|^CPU\(s\)|^Model:" $R/lscpu.txt
C=$(cat results/h200/run225/commit)
GEM_GIT_COMMIT=$C PHASES=build JOBS=16 \
  BUILD_TARGETS="dev_sliding_cluster gem test_cpu_fused_kernels dev_fused_parts test_matvec dev_mv_int8" \
  bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1 &
BN=$!
(cmake -S . -B /tmp/build-avx2 -DCMAKE_BUILD_TYPE=Release -DGEM_CUDA=OFF -DGEM_NATIVE=OFF \
   -DCMAKE_C_FLAGS="-march=x86-64-v3" > $R/build-avx2.txt 2>&1 &&
 cmake --build /tmp/build-avx2 -j8 --target gem test_cpu_fused_kernels test_cpu_routes \
   dev_fused_parts test_matvec test_model dev_mv_int8 >> $R/build-avx2.txt 2>&1
 echo "avx2 build rc=$?" >> $R/build-avx2.txt) &
BV=$!
(cmake -S . -B /tmp/build-skx -DCMAKE_BUILD_TYPE=Release -DGEM_CUDA=OFF -DGEM_NATIVE=OFF \
   -DCMAKE_C_FLAGS="-march=skylake-avx512" > $R/build-skx.txt 2>&1 &&
 cmake --build /tmp/build-skx -j4 --target test_matvec >> $R/build-skx.txt 2>&1
 echo "skylake-avx512 build rc=$?" >> $R/build-skx.txt) &
BS=$!
wait $BN; tail -n 1 $R/build.txt; wait $BV; tail -n 1 $R/build-avx2.txt; wait $BS
tail -n 1 $R/build-skx.txt; echo "builds at $(el) s"
X=$PWD/build-h200/dev/sliding_cluster
if [ -x $X ]; then
  timeout 120 $X --cluster-p 8 --lengths 1024 --types f32,bf16 --reps 200 --rounds 30 \
    > $R/sliding-cluster-p8.txt 2>&1
  echo "cluster-p 8 rc=$? at $(el) s"; grep -v "^check" $R/sliding-cluster-p8.txt
  grep -c "give the bits" $R/sliding-cluster-p8.txt
else echo "no sliding_cluster build"; tail -20 $R/build.txt; fi
save
N=$PWD/build-h200; V=/tmp/build-avx2
for T in "$V/test_cpu_fused_kernels" "$V/test_cpu_routes" "$N/test_cpu_fused_kernels" \
  "$V/test_matvec" "$V/test_model" /tmp/build-skx/test_matvec "$N/test_matvec"; do
  timeout 200 $T > $R/$(basename $(dirname $T))-$(basename $T).txt 2>&1
  echo "$T rc=$? at $(el) s: $(tail -n 1 $R/$(basename $(dirname $T))-$(basename $T).txt)"
done
save
for B in N V; do
  D=$N/dev/fused_parts; [ $B = V ] && D=$V/dev/fused_parts
  for DT in f32 bf16; do
    timeout 60 $D --dtype $DT --threads 1,16 > $R/parts-$B-$DT.txt 2>&1
    echo "fused_parts $B $DT rc=$?: $(grep -E '^ +(1|16) +(score|value|item) ' $R/parts-$B-$DT.txt \
      | awk '{printf "%s %s %s  ", $1, $2, $3}')"
  done
done
save
for TY in q8_0 q4_k q4_0 q6_k; do
  for B in N V; do
    D=$N/dev/mv_int8; [ $B = V ] && D=$V/dev/mv_int8
    [ $(el) -gt ${STOP_S:-480} ] && { echo "stop before mv_int8 at $(el) s"; break 2; }
    timeout 60 $D --threads 16 --rounds 3 --mib 256 --layers 4 --type $TY > $R/int8-$B-$TY.txt 2>&1
    echo "mv_int8 $B $TY rc=$?: $(awk '$2 == "int8" && NF > 5 {printf "%s %s GB/s  ", $1, $(NF-1)}' \
      $R/int8-$B-$TY.txt)"
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
