#!/usr/bin/env python3
"""Builds, ahead of time, the FlashInfer JIT modules that decode_peers.py calls.

FlashInfer is a peer measured beside gem, never part of it. This script runs on a
machine with nvcc and no GPU, inside a virtual environment holding the FlashInfer
release named below (and torch). It asks FlashInfer's own JIT for exactly the
modules that the peer script's calls load on an H200 (sm_90a), lets FlashInfer
choose the compiler flags, and copies each built library to

    OUT/<module>/<module>.so

which is the layout of FlashInfer's packaged ahead-of-time directory
(flashinfer/data/aot/), where it looks before it compiles anything.

usage: build_flashinfer_modules.py OUT [--list] [--jobs N]
"""
import argparse
import os
import shutil
import sys
import time

FLASHINFER_VERSION = "0.7.2"
HEAD_DIM = 512


def module_specs():
    """The modules the peer script loads: BF16 q and out, BF16 or FP8 E4M3 K/V, head dim
    512, no RoPE, no sliding window, no logit soft cap, int32 page indices."""
    import torch
    from flashinfer.jit.attention import modules as m

    bf16, e4m3, d = torch.bfloat16, torch.float8_e4m3fn, HEAD_DIM
    return [
        # single_decode_with_kv_cache(use_tensor_cores=False): the CUDA-core decode kernel
        ("single decode, CUDA cores",
         m.gen_single_decode_module(bf16, bf16, bf16, d, d, 0, False, False)),
        # single_decode_with_kv_cache(use_tensor_cores=True): the FA2 single prefill kernel
        ("single decode, tensor cores (fa2 single prefill)",
         m.gen_single_prefill_module("fa2", bf16, bf16, bf16, d, d, 0, False, False, False)),
        # BatchDecodeWithPagedKVCacheWrapper(use_tensor_cores=False).plan/run
        ("paged batch decode, CUDA cores",
         m.gen_batch_decode_module(bf16, bf16, bf16, torch.int32, d, d, 0, False, False)),
        # the same two CUDA-core kernels with FP8 E4M3 K/V (k_scale, v_scale per call)
        ("single decode, CUDA cores, FP8 K/V",
         m.gen_single_decode_module(bf16, e4m3, bf16, d, d, 0, False, False)),
        ("paged batch decode, CUDA cores, FP8 K/V",
         m.gen_batch_decode_module(bf16, e4m3, bf16, torch.int32, d, d, 0, False, False)),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="directory that receives <module>/<module>.so")
    ap.add_argument("--list", action="store_true", help="print the module names and exit")
    ap.add_argument("--verbose", action="store_true", help="show the compiler commands")
    args = ap.parse_args()

    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
    try:
        import flashinfer
    except Exception as e:  # noqa: BLE001
        sys.exit(f"build_flashinfer_modules: cannot import flashinfer: {e}")
    if flashinfer.__version__ != FLASHINFER_VERSION:
        sys.exit(f"build_flashinfer_modules: flashinfer {flashinfer.__version__} found, "
                 f"{FLASHINFER_VERSION} expected")
    specs = module_specs()
    if args.list:
        for what, spec in specs:
            print(f"{spec.name}\t{what}")
        return 0
    os.makedirs(args.out, exist_ok=True)
    for what, spec in specs:
        t0 = time.time()
        print(f"building {spec.name} ({what}) ...", file=sys.stderr, flush=True)
        spec.build(verbose=args.verbose)
        src = spec.jit_library_path
        if not src.exists():
            sys.exit(f"build_flashinfer_modules: {src} missing after the build")
        dst_dir = os.path.join(args.out, spec.name)
        os.makedirs(dst_dir, exist_ok=True)
        shutil.copy2(src, os.path.join(dst_dir, spec.name + ".so"))
        print(f"  {time.time() - t0:.0f} s, {src.stat().st_size / 2**20:.1f} MiB",
              file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
