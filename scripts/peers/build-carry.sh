#!/usr/bin/env bash
# build-carry.sh [DEST]: builds the FlashInfer carry folder DEST (default: .peers at the
# repository root) on a machine with network, nvcc 13 and no GPU, for a GPU machine without
# network. FlashInfer is a peer measured beside gem, never part of it: nothing of it enters
# the repository or the build.
#
# Steps (in PEERS_WORK, default /tmp/gem-peers-build, outside the repository):
#   1. a Python 3.12 virtual environment (the GPU machine's Python) with torch 2.11.0 (its
#      torch), the wheels of flashinfer-python 0.7.2 and apache-tvm-ffi 0.1.15.post2 without
#      their other dependencies, and the small packages FlashInfer imports that the GPU
#      machine already has;
#   2. build_flashinfer_modules.py: FlashInfer's own JIT builds, for sm_90a, exactly the
#      modules decode_peers.py calls;
#   3. build_carry.py: DEST/site (the trimmed flashinfer package with the modules under
#      flashinfer/data/aot, tvm_ffi) and DEST/env.sh;
#   4. check_carry.py --dry-call from DEST, with a Python that has neither package.
#
# Environment: PYTHON312 (a python3.12; default: found on PATH or under pyenv),
# PEERS_WORK, CUDA_HOME (default /usr/local/cuda), FLASHINFER_NVCC_THREADS.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/scripts/peers
DEST=${1:-$ROOT/.peers}
WORK=${PEERS_WORK:-/tmp/gem-peers-build}
FI_VERSION=0.7.2
TVM_FFI_VERSION=0.1.15.post2
TORCH_VERSION=2.11.0
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$CUDA_HOME/bin:$PATH

die() { echo "build-carry: $*" >&2; exit 1; }
command -v nvcc >/dev/null || die "nvcc not found (CUDA_HOME=$CUDA_HOME)"
nvcc --version | grep -q "release 13\." || die "nvcc 13 expected: $(nvcc --version | tail -1)"

is312() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; }
PY=${PYTHON312:-}
if [ -n "$PY" ]; then
    is312 "$PY" || die "PYTHON312=$PY is not a working Python 3.12"
else
    for c in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12; do
        if is312 "$c"; then PY=$(command -v "$c"); break; fi
    done
fi
[ -n "$PY" ] || die "no working python3.12 found (set PYTHON312)"

mkdir -p "$WORK"
echo "== [1/4] virtual environments in $WORK"
if [ ! -x "$WORK/venv/bin/python" ]; then
    "$PY" -m venv "$WORK/venv"
    "$WORK/venv/bin/python" -m pip install -q --upgrade pip
fi
VPY=$WORK/venv/bin/python
# packages FlashInfer imports that the GPU machine already has (its image's list)
DEVICE_HAS=(numpy packaging requests tqdm filelock jinja2 nvidia-ml-py typing-extensions ninja einops
    click tabulate)
"$VPY" -m pip install -q "torch==$TORCH_VERSION" "${DEVICE_HAS[@]}"
mkdir -p "$WORK/wheels"
"$VPY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$WORK/wheels" \
    "flashinfer-python==$FI_VERSION" "apache-tvm-ffi==$TVM_FFI_VERSION"
"$VPY" -m pip install -q --no-deps "$WORK"/wheels/flashinfer_python-$FI_VERSION-*.whl \
    "$WORK"/wheels/apache_tvm_ffi-$TVM_FFI_VERSION-*.whl
# a second environment like the GPU machine's: torch and the same small packages, no
# flashinfer, no tvm_ffi (for the check of step 4)
if [ ! -x "$WORK/venv-check/bin/python" ]; then
    "$PY" -m venv "$WORK/venv-check"
fi
"$WORK/venv-check/bin/python" -m pip install -q "torch==$TORCH_VERSION" "${DEVICE_HAS[@]}"

echo "== [2/4] FlashInfer's modules for sm_90a (nvcc: $(nvcc --version | tail -1))"
rm -rf "$WORK/aot"
FLASHINFER_WORKSPACE_BASE=$WORK/jit FLASHINFER_CUDA_ARCH_LIST=9.0a \
    "$VPY" "$HERE/build_flashinfer_modules.py" "$WORK/aot"

echo "== [3/4] the carry folder $DEST"
mkdir -p "$DEST"
"$VPY" "$HERE/build_carry.py" "$DEST/site" --aot "$WORK/aot"

echo "== [4/4] check from the carry folder"
(
    # shellcheck disable=SC1091
    . "$DEST/env.sh"
    "$WORK/venv-check/bin/python" "$HERE/check_carry.py" --site "$DEST/site" --dry-call
)
du -sh --apparent-size "$DEST"
