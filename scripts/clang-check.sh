#!/usr/bin/env bash
# clang-check.sh: gem built with clang (the CPU code; -Werror), the tests whose expected values
# are bits made by the GCC build (a fixture's digest, receipts' output digests, kernels against
# their definitions), and the two libFuzzer harnesses compiled (not run; docs/gates.md and
# docs/model.md run them). Installs clang-14 and libclang-rt-14-dev when they are missing (as
# root, like scripts/setup.sh). Build folders: build-clang, build-clang-fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "") ;;
  -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "clang-check.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
esac

packages=(clang-14 libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "clang-check: these Debian packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
  echo "clang-check: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
CC=$(command -v clang-14 || command -v clang)
jobs=$(nproc 2>/dev/null || echo 2)

echo "clang-check: building with $("$CC" --version | head -1)"
cmake -S . -B build-clang -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$CC" -DGEM_CUDA=OFF \
  >/dev/null
cmake --build build-clang -j"$jobs" >/dev/null
# the expected bits come from GCC builds: the same seeds must give them under clang
(cd build-clang && ctest --output-on-failure \
  -R '^(test_cpu_fused_kernels|test_matvec|test_model_ref|test_analyze_merge)$')

echo "clang-check: the libFuzzer harnesses"
cmake -S . -B build-clang-fuzz -DCMAKE_C_COMPILER="$CC" -DGEM_FUZZ=ON -DGEM_CUDA=OFF \
  -DGEM_WERROR=OFF >/dev/null
cmake --build build-clang-fuzz -j"$jobs" --target fuzz_receipts fuzz_gguf >/dev/null
echo "clang-check: passed"
