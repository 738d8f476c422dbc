#!/usr/bin/env bash
# Sets up and builds gem: installs the Debian packages the build needs (only
# those missing, with apt-get, as root), configures with CMake and builds.
#
#   scripts/setup.sh              release build in build/ (CUDA backend too when nvcc is found)
#   scripts/setup.sh --sanitize   ASan + UBSan build in build-asan/ (CPU backend)
#
# Environment: GEM_BUILD_DIR overrides the build directory; GEM_REQUIRE_CUDA=1
# makes a missing nvcc an error instead of a CPU-only build.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=release
case "${1:-}" in
  "") ;;
  --sanitize) mode=sanitize ;;
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
esac

packages=(build-essential cmake pkg-config libjansson-dev libssl-dev python3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: these Debian packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# nvcc is often installed outside PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
if [ "${GEM_REQUIRE_CUDA:-0}" = 1 ] && ! command -v nvcc >/dev/null 2>&1 && [ -z "${CUDACXX:-}" ]; then
  echo "setup: GEM_REQUIRE_CUDA=1 but nvcc was not found" >&2
  exit 1
fi

jobs=$(nproc 2>/dev/null || echo 2)
if [ "$mode" = sanitize ]; then
  dir=${GEM_BUILD_DIR:-build-asan}
  # -O1, as the AddressSanitizer documentation advises: the same checks at a
  # few times the speed of -O0 (the analyzer tests rerun the merge check);
  # a Debug build keeps assert() on.
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DGEM_SANITIZE=ON \
    -DGEM_CUDA=OFF >/dev/null
else
  dir=${GEM_BUILD_DIR:-build}
  require=OFF
  [ "${GEM_REQUIRE_CUDA:-0}" = 1 ] && require=ON
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DGEM_REQUIRE_CUDA=$require >/dev/null
fi
echo "setup: building in $dir ($mode)" >&2
log="$dir/build.log"
if ! cmake --build "$dir" -j "$jobs" >"$log" 2>&1; then
  cat "$log" >&2
  echo "setup: the build failed (log: $log)" >&2
  exit 1
fi
echo "setup: ready ($dir/gem)" >&2
