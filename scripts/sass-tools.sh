#!/usr/bin/env bash
# Puts cuobjdump and nvdisasm (NVIDIA's wheels on PyPI, nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm) under .tools/sass/bin (ignored by git, not carried to the device), for
# reading the SASS of what this machine builds: the toolkit here has nvcc and ptxas but neither
# of them. Prints the directory to put on PATH. Usage: scripts/sass-tools.sh; then e.g.
#   cuobjdump -xelf all build/dev/kfv_mma && nvdisasm -c kfv_mma.sm_90a.cubin
set -eu -o pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
D=$SRC/.tools/sass
mkdir -p "$D/bin" "$D/wheels"
for pkg in nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm; do
    tool=${pkg#nvidia-cuda-}
    if [ ! -x "$D/bin/$tool" ]; then
        python3 -m pip download --quiet --no-deps --dest "$D/wheels" "$pkg"
        whl=$(ls -t "$D/wheels"/$(echo "$pkg" | tr - _)-*.whl | head -1)
        rm -rf "$D/unpack" && python3 -m zipfile -e "$whl" "$D/unpack"
        found=$(find "$D/unpack" -type f -name "$tool" | head -1)
        [ -n "$found" ] || { echo "sass-tools: no $tool in $whl" >&2; exit 1; }
        install -m 755 "$found" "$D/bin/$tool"
        rm -rf "$D/unpack"
    fi
    "$D/bin/$tool" --version | tail -1 | sed "s|^|$tool: |"
done
echo "$D/bin"
