#!/usr/bin/env bash
# The installed library works for a user: `cmake --install` into a fresh prefix puts the
# headers, libgem (shared and static) and gem.pc there; examples/decode_loop.c builds with
# nothing but `pkg-config --cflags --libs gem` (and with --static against libgem.a), and runs
# a 48-step decode loop that agrees with its own double-precision reference.
# Arguments (from CTest): the gem binary, the source tree.
set -euo pipefail
gem=$1
src=$2
build=$(dirname "$gem")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_install: FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; fail "cmake --install"; }
pcdir=$(find "$tmp/prefix" -name gem.pc -printf '%h\n' | head -n 1)
[ -n "$pcdir" ] || fail "no gem.pc installed"
for f in include/gem/attn.h include/gem/decode.h include/gem/cuda.h include/gem/cpu.h bin/gem; do
    [ -e "$tmp/prefix/$f" ] || fail "$f not installed"
done
# the evidence library's headers are not part of the installed API
[ ! -e "$tmp/prefix/include/gem/receipt.h" ] || fail "receipt.h installed"
export PKG_CONFIG_PATH=$pcdir
libdir=$(pkg-config --variable=libdir gem) || fail "pkg-config --variable=libdir gem"
cflags=$(pkg-config --cflags gem) || fail "pkg-config --cflags gem"
libs=$(pkg-config --libs gem) || fail "pkg-config --libs gem"
extra=()
cc=cc
# a sanitizer build's library (GEM_SANITIZE, or GEM_FUZZ's instrumented one) needs the same
# runtime in the program, from the compiler that instrumented it
if grep -qE '^GEM_(SANITIZE|FUZZ):BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
    extra=(-fsanitize=address,undefined)
    built_with=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" | head -n 1)
    [ -n "$built_with" ] && cc=$built_with
fi
"$cc" -std=c11 -O2 "${extra[@]}" "$src/examples/decode_loop.c" $cflags $libs -lm \
    -o "$tmp/decode_loop" 2>"$tmp/cc.log" || { cat "$tmp/cc.log"; fail "building the example (shared)"; }
LD_LIBRARY_PATH=$libdir "$tmp/decode_loop" 48 >"$tmp/run.log" 2>&1 ||
    { cat "$tmp/run.log"; fail "the example (shared libgem)"; }
grep -q "48 steps, worst NMSE .*: agree" "$tmp/run.log" || { cat "$tmp/run.log"; fail "output"; }
# the shared library, not a copy of the static one, was used
if command -v ldd >/dev/null; then
    deps=$(LD_LIBRARY_PATH=$libdir ldd "$tmp/decode_loop") # whole, so no grep -q cuts the pipe
    grep -q "libgem.so" <<<"$deps" || fail "not linked to libgem.so"
fi
# the shared library exports the functions the installed headers declare, and nothing else
so=$(find "$libdir" -name 'libgem.so*' -type f | head -n 1)
if command -v nm >/dev/null && [ -n "$so" ]; then
    exported=$(nm -D --defined-only "$so" | awk 'NF == 3 { print $3 }' | sort -u)
    public=$(cat "$tmp"/prefix/include/gem/{attn,decode,cpu,cuda}.h | sed 's|/\*.*\*/||' |
             grep -oE '^[a-z0-9_ ]*[ *]gem_[a-z0-9_]+\(' | sed -E 's/.*(gem_[a-z0-9_]+)\($/\1/' |
             sort -u)
    [ -n "$public" ] || fail "no function declarations found in the installed headers"
    unexpected=$(comm -13 <(echo "$public") <(echo "$exported") | head -n 5 | tr '\n' ' ')
    [ -z "$unexpected" ] || fail "libgem.so exports names its headers do not declare: $unexpected"
    missing=$(comm -23 <(echo "$public") <(echo "$exported") | tr '\n' ' ')
    [ -z "$missing" ] || fail "libgem.so lacks functions its headers declare: $missing"
fi
# static: libgem.a and the private libraries gem.pc lists
static_libs=$(pkg-config --static --libs gem | sed 's/-lgem/-Wl,-Bstatic -lgem -Wl,-Bdynamic/')
"$cc" -std=c11 -O2 "${extra[@]}" "$src/examples/decode_loop.c" $cflags $static_libs -lm \
    -o "$tmp/decode_loop_static" 2>"$tmp/cc2.log" || { cat "$tmp/cc2.log"; fail "building the example (static)"; }
"$tmp/decode_loop_static" 16 >"$tmp/run2.log" 2>&1 || { cat "$tmp/run2.log"; fail "the example (static libgem)"; }
grep -q "16 steps, worst NMSE .*: agree" "$tmp/run2.log" || { cat "$tmp/run2.log"; fail "static output"; }
echo "test_install: installed into a fresh prefix; the example ran shared and static: pass"
