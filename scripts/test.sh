#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (see scripts/setup.sh).
#   scripts/test.sh              release build in build/
#   scripts/test.sh --sanitize   ASan + UBSan build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
dir=build
[ "${1:-}" = --sanitize ] && dir=build-asan
dir=${GEM_BUILD_DIR:-$dir}
jobs=$(nproc 2>/dev/null || echo 2)
GEM_QUIET=1 ctest --test-dir "$dir" --output-on-failure -j "$jobs"
