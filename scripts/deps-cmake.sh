# deps-cmake.sh, sourced (bash): sets CMAKE_EXTRA, the CMake arguments that find jansson and
# OpenSSL. Empty where this machine has their development files (pkg-config knows jansson and
# /usr/include/openssl/sha.h exists) and FORCE_DEPS is unset; else the arguments for the static
# copies in <repository>/.deps/dist (scripts/deps-dist.sh makes them; carry .deps to a device
# machine), through a pkg-config stand-in in /tmp/gemdeps, with LIBRARY_PATH exported. Returns
# 1 (printing why) when neither is there.
#   . scripts/deps-cmake.sh && cmake -S . -B build "${CMAKE_EXTRA[@]}"
CMAKE_EXTRA=()
if [ -z "${FORCE_DEPS:-}" ] && command -v pkg-config >/dev/null && pkg-config --exists jansson &&
    [ -f /usr/include/openssl/sha.h ]; then
    return 0
fi
GEM_DEPS_DIST=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.deps/dist
if [ ! -d "$GEM_DEPS_DIST" ]; then
    echo "deps-cmake: no jansson/OpenSSL development files and no $GEM_DEPS_DIST" >&2
    return 1
fi
echo "deps-cmake: using the carried static jansson/OpenSSL in $GEM_DEPS_DIST"
mkdir -p /tmp/gemdeps
cat >/tmp/gemdeps/pkg-config <<EOF
#!/bin/sh
# answers CMake's pkg-config questions for the carried static jansson
for a in "\$@"; do
  case "\$a" in
    --version) echo 0.29.2; exit 0;;
    --modversion) echo 2.14; exit 0;;
    --variable=prefix) echo "$GEM_DEPS_DIST"; exit 0;;
    --variable=includedir) echo "$GEM_DEPS_DIST/include"; exit 0;;
    --variable=libdir) echo "$GEM_DEPS_DIST/lib"; exit 0;;
    --cflags|--cflags-only-I) echo "-I$GEM_DEPS_DIST/include"; exit 0;;
    --cflags-only-other|--libs-only-other) echo; exit 0;;
    --libs) echo "-L$GEM_DEPS_DIST/lib -ljansson"; exit 0;;
    --libs-only-L) echo "-L$GEM_DEPS_DIST/lib"; exit 0;;
    --libs-only-l) echo "-ljansson"; exit 0;;
    --variable=*) echo; exit 0;;
  esac
done
exit 0
EOF
chmod +x /tmp/gemdeps/pkg-config
CMAKE_EXTRA=(-DPKG_CONFIG_EXECUTABLE=/tmp/gemdeps/pkg-config -DOPENSSL_ROOT_DIR="$GEM_DEPS_DIST"
    -DOPENSSL_USE_STATIC_LIBS=TRUE -DOPENSSL_INCLUDE_DIR="$GEM_DEPS_DIST/include"
    -DOPENSSL_CRYPTO_LIBRARY="$GEM_DEPS_DIST/lib/libcrypto.a"
    -DOPENSSL_SSL_LIBRARY="$GEM_DEPS_DIST/lib/libssl.a"
    -DCMAKE_EXE_LINKER_FLAGS="-L$GEM_DEPS_DIST/lib")
export LIBRARY_PATH=$GEM_DEPS_DIST/lib${LIBRARY_PATH:+:$LIBRARY_PATH}
