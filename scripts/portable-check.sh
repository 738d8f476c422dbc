#!/usr/bin/env bash
# portable-check.sh: the CPU backend's portable C path, built without -march=native (so the
# AVX-512 and AVX2 kernels are compiled out) by clang-14 (which has no _Float16 there, so the
# tests round to F16 by their own arithmetic), and the tests that hold the kernels, the routes
# and the products to their definitions bit for bit; then a build for other machines
# (GEM_NATIVE=OFF: the kernels built for AVX-512, AVX2 and portable, the model's products also
# for AVX-512 with VNNI, chosen at run time), whose kernel and product tests run every build
# the processor runs, each checked by name: the AVX2 kernels and products wherever the
# processor has AVX2, FMA and F16C (the native build of scripts/test.sh runs the widest ones
# again). Needs clang-14 (scripts/clang-check.sh installs it). Build folders: build-portable,
# build-dispatch.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "") ;;
  -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "portable-check.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
esac
CC=$(command -v clang-14 || command -v clang || true)
if [ -z "$CC" ]; then
  echo "portable-check: clang-14 not found (scripts/clang-check.sh installs it)" >&2
  exit 1
fi
jobs=$(nproc 2>/dev/null || echo 2)
tests=(test_core test_online test_cpu_fused_kernels test_cpu_routes test_matvec)
echo "portable-check: building the portable CPU path with $("$CC" --version | head -1)"
cmake -S . -B build-portable -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$CC" \
  -DGEM_CUDA=OFF -DGEM_NATIVE=OFF -DGEM_CPU_DISPATCH=OFF >/dev/null
cmake --build build-portable -j"$jobs" --target "${tests[@]}" >/dev/null
(cd build-portable && ctest --output-on-failure -R "^($(IFS='|'; echo "${tests[*]}"))\$")
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
echo "portable-check: building the kernels for other machines (GEM_NATIVE=OFF, chosen at run time)"
cmake -S . -B build-dispatch -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$CC" \
  -DGEM_CUDA=OFF -DGEM_NATIVE=OFF -DGEM_CPU_DISPATCH=ON >/dev/null
cmake --build build-dispatch -j"$jobs" --target "${tests[@]}" >/dev/null
isas=(portable)
[[ " $flags " == *" avx2 "* && " $flags " == *" fma "* && " $flags " == *" f16c "* ]] &&
  isas+=(avx2)
[[ " ${isas[*]} " == *" avx2 "* && " $flags " == *" avx512f "* && " $flags " == *" avx512dq "* &&
   " $flags " == *" avx512bw "* && " $flags " == *" avx512vl "* ]] && isas+=(avx512)
# ran_every TEST WHAT: TEST (of build-dispatch) printed "TEST: <isa> WHAT" for every isa in isas
ran_every() {
  local out isa
  out=$(build-dispatch/"$1")
  for isa in "${isas[@]}"; do
    if [[ $'\n'"$out"$'\n' != *$'\n'"$1: $isa $2"$'\n'* ]]; then
      echo "portable-check: the build for other machines did not run its $isa $2" >&2
      exit 1
    fi
  done
  echo "portable-check: the $2 for other machines run as ${isas[*]}"
}
# the kernel and product tests run every build the processor runs, each naming it
ran_every test_cpu_fused_kernels kernels
[[ " ${isas[*]} " == *" avx512 "* && " $flags " == *" avx512_vnni "* ]] && isas+=(avx512-vnni)
ran_every test_matvec products
# and the other tests once (ran_every has run these two, a failure stopping the script)
rest=(test_core test_online test_cpu_routes)
(cd build-dispatch && ctest --output-on-failure -R "^($(IFS='|'; echo "${rest[*]}"))\$")
echo "portable-check: passed"
