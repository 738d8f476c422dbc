#!/usr/bin/env bash
# The Python package (python/gem) on this build's libgem and libgemmodel: its tests with the
# standard library alone, and those that need numpy, ml_dtypes, JAX or torch where they are
# installed (CI's package stage installs numpy and ml_dtypes; scripts/python-check.sh). In a
# sanitizer build the runtimes are preloaded into Python, so the libraries' calls from Python
# run under ASan and UBSan too.
# Arguments (from CTest): the gem binary, the source tree.
set -euo pipefail
gem=$1
src=$2
build=$(dirname "$gem")
fail() { echo "test_python: FAIL: $*"; exit 1; }
command -v python3 >/dev/null || fail "python3 not found (scripts/setup.sh installs it)"
for lib in libgem.so libgemmodel.so; do
    [ -e "$build/$lib" ] || fail "no $lib in $build"
done
preload=()
if grep -qE '^GEM_(SANITIZE|FUZZ):BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
    cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" | head -n 1)
    asan=$("${cc:-cc}" -print-file-name=libasan.so)
    ubsan=$("${cc:-cc}" -print-file-name=libubsan.so)
    [ -e "$asan" ] && [ -e "$ubsan" ] || fail "the sanitizer runtimes of $cc were not found"
    # Python's own allocations are not the library's: no leak report at exit
    preload=(env LD_PRELOAD="$asan $ubsan" ASAN_OPTIONS=detect_leaks=0)
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! (cd "$src/python/tests" &&
      "${preload[@]}" env GEM_LIBRARY="$build/libgem.so" PYTHONPATH="$src/python" \
          python3 -m unittest discover -s . -p 'test_*.py' -v) >"$log" 2>&1; then
    cat "$log"
    fail "python -m unittest"
fi
summary=$(grep -E '^(Ran|OK)' "$log" | tr '\n' ' ')
echo "test_python: $summary"
skips=$(grep -oE "skipped '[a-z_]+ is not installed'" "$log" | sort | uniq -c |
        sed -E "s/ *([0-9]+) skipped '([a-z_]+) is not installed'/\1 (\2)/" | tr '\n' ' ' || true)
[ -z "$skips" ] || echo "test_python: skipped, their library not installed for $(command -v python3): $skips"
echo "test_python: pass"
