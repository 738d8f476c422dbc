#!/usr/bin/env bash
# Fills .deps/dist/{include,lib} with static jansson and OpenSSL from this machine's Debian
# packages (libjansson-dev, libssl-dev), for scripts/h200-run.sh on a device machine that lacks
# them: carry .deps with the tree. Installs the two packages when they are missing.
set -eu -o pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
D=$SRC/.deps/dist
ARCH=$(gcc -dumpmachine)
if ! dpkg -s libjansson-dev libssl-dev >/dev/null 2>&1; then
    apt-get install -y libjansson-dev libssl-dev
fi
rm -rf "$D"
mkdir -p "$D/include/openssl" "$D/lib"
cp /usr/include/jansson.h /usr/include/jansson_config.h "$D/include/"
cp -r /usr/include/openssl/. "$D/include/openssl/"
# the architecture-specific OpenSSL headers live beside the others in the carried tree
cp -r "/usr/include/$ARCH/openssl/." "$D/include/openssl/"
for l in libjansson.a libcrypto.a libssl.a; do cp "/usr/lib/$ARCH/$l" "$D/lib/"; done
echo "$D: $(du -sh "$D" | cut -f1)"
