#!/usr/bin/env python3
"""Checks the FlashInfer carry folder (FlashInfer is a peer measured beside gem, never part
of it) from the environment the peer script will run in: PYTHONPATH holding the folder's
site/ and FLASHINFER_DISABLE_JIT=1 (`. .peers/env.sh` sets both).

It checks that flashinfer and tvm_ffi import from the carry folder, that flashinfer is the
release the modules were built for, and that every module the peer script calls is found
ahead of time (no compiler) and loads. Then, on a machine with a GPU, it runs each call once
at a small length against a float64 reference; without one (--dry-call), it drives each call
with CPU tensors as far as it goes, which must be into the compiled module (a CUDA error
there is the expected end), never an import, file or JIT error on the way.

usage: check_carry.py [--site DIR] [--dry-call]
"""
import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

EXPECTED = "0.7.2"
results = []


def report(name, ok, detail):
    results.append(ok)
    print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)


def under(path, root):
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root + os.sep)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", help="the carry folder's site/ (default: the first PYTHONPATH "
                    "entry)")
    ap.add_argument("--dry-call", action="store_true",
                    help="without a GPU: drive each call into the compiled modules")
    args = ap.parse_args()
    site = args.site or (os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] or None)
    if not site or not os.path.isdir(site):
        sys.exit("check_carry: no carry folder: give --site or put its site/ first on "
                 "PYTHONPATH")
    import torch  # noqa: PLC0415

    gpu = torch.cuda.is_available()
    if not gpu:
        # which architecture the modules are described for; on a GPU machine it is detected
        os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
    print(f"carry folder {site}; torch {torch.__version__}; "
          f"{'GPU: ' + torch.cuda.get_device_name() if gpu else 'no GPU'}")
    report("FLASHINFER_DISABLE_JIT", os.environ.get("FLASHINFER_DISABLE_JIT") == "1",
           "set to 1: a module missing from the folder fails at once instead of compiling")

    try:
        import tvm_ffi  # noqa: PLC0415
        import flashinfer  # noqa: PLC0415
    except Exception as e:  # noqa: BLE001
        report("import", False, f"{type(e).__name__}: {e}")
        return 1
    report("flashinfer from the carry folder", under(flashinfer.__file__, site),
           os.path.dirname(flashinfer.__file__))
    report("tvm_ffi from the carry folder", under(tvm_ffi.__file__, site),
           os.path.dirname(tvm_ffi.__file__))
    report("flashinfer version", flashinfer.__version__ == EXPECTED,
           f"{flashinfer.__version__} (the modules were built for {EXPECTED})")

    import build_flashinfer_modules as b  # noqa: PLC0415

    try:
        specs = b.module_specs()
    except Exception as e:  # noqa: BLE001
        report("module descriptions", False, f"{type(e).__name__}: {e}")
        return 1
    for what, spec in specs:
        arts = spec.aot_artifacts
        ok = bool(arts) and under(arts[0].path, site)
        report(f"{what}: ahead of time", ok, arts[0].path.name if arts else
               f"{spec.name}.so not under flashinfer/data/aot")
        if not ok:
            continue
        try:
            mod = tvm_ffi.load_module(str(arts[0].path))
            names = ["run", "plan"] if spec.name.startswith("batch_") else ["run"]
            missing = [n for n in names if getattr(mod, n, None) is None]
            report(f"{what}: loads", not missing,
                   "exports " + ", ".join(names) if not missing else f"missing {missing}")
        except Exception as e:  # noqa: BLE001
            report(f"{what}: loads", False, f"{type(e).__name__}: {e}")

    if gpu:
        gpu_calls(torch, flashinfer)
    elif args.dry_call:
        dry_calls(torch, flashinfer)
    bad = results.count(False)
    print(f"check_carry: {len(results) - bad} passed, {bad} failed")
    return 1 if bad else 0


def calls(torch, fi, q, k_nhd, v_nhd, page, device, scales=None):
    """decode_peers.py's calls on one K/V: (name, thunk). scales: (k_scale, v_scale) for FP8
    K/V, whose calls are the two CUDA-core ones with FlashInfer's k_scale and v_scale."""
    scale = 1.0 / math.sqrt(512)
    live = k_nhd.shape[0]
    n_pages = live // page
    sc = {} if scales is None else {"k_scale": scales[0], "v_scale": scales[1]}
    tag = "" if scales is None else ", FP8 K/V"

    def paged():
        ws = torch.empty(128 << 20, dtype=torch.uint8, device=device)
        w = fi.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
        indptr = torch.tensor([0, n_pages], dtype=torch.int32, device=device)
        indices = torch.arange(n_pages, dtype=torch.int32, device=device)
        last = torch.tensor([page], dtype=torch.int32, device=device)
        w.plan(indptr, indices, last, 32, 4, 512, page, pos_encoding_mode="NONE",
               q_data_type=torch.bfloat16, kv_data_type=k_nhd.dtype, sm_scale=scale)
        return w.run(q.view(1, 32, 512), (k_nhd.view(n_pages, page, 4, 512),
                                          v_nhd.view(n_pages, page, 4, 512)), **sc)

    def single(tc):
        return lambda: fi.single_decode_with_kv_cache(
            q, k_nhd, v_nhd, kv_layout="NHD", pos_encoding_mode="NONE", use_tensor_cores=tc,
            sm_scale=scale, **sc)

    out = [(f"single decode, CUDA cores{tag}", single(False))]
    if scales is None:
        out.append(("single decode, tensor cores", single(True)))
    out.append((f"paged batch decode{tag}", paged))
    return out


def inputs(torch, live, device):
    """q (32, 512) BF16; K and V (live, 4, 512) in BF16 and, quantized as decode_peers.py
    does, in FP8 E4M3 with their scales: (q, k, v, k8, v8, (k_scale, v_scale))."""
    from decode_peers import Fp8Kv  # noqa: PLC0415

    g = torch.Generator(device=device)
    g.manual_seed(7)
    q = torch.randn((32, 512), generator=g, device=device).to(torch.bfloat16)
    k = torch.randn((live, 4, 512), generator=g, device=device).to(torch.bfloat16)
    v = torch.randn((live, 4, 512), generator=g, device=device).to(torch.bfloat16)
    f8 = Fp8Kv(torch, k, v)
    return q, k, v, f8.k, f8.v, (f8.k_scale, f8.v_scale)


def all_calls(torch, fi, live, device):
    """Every call of decode_peers.py at one live length: (name, thunk, K, V) with K and V
    the values the call reads, in float64."""
    q, k, v, k8, v8, scales = inputs(torch, live, device)
    out = [(n, t, k.double(), v.double()) for n, t in calls(torch, fi, q, k, v, 16, device)]
    k8d, v8d = k8.double() * scales[0], v8.double() * scales[1]
    out += [(n, t, k8d, v8d) for n, t in calls(torch, fi, q, k8, v8, 16, device, scales)]
    return q, out


def gpu_calls(torch, fi):
    live = 1024
    q, cases = all_calls(torch, fi, live, "cuda")
    qd = q.double().view(4, 8, 512)
    for name, thunk, kd, vd in cases:
        s = torch.einsum("gqd,tgd->gqt", qd, kd) / math.sqrt(512)
        ref = torch.einsum("gqt,tgd->gqd", torch.softmax(s, dim=-1), vd).reshape(32, 512)
        try:
            out = thunk().reshape(32, 512).double()
            torch.cuda.synchronize()
            nmse = ((out - ref) ** 2).sum().item() / (ref ** 2).sum().item()
            report(f"{name}: runs (live {live})", math.isfinite(nmse) and nmse < 1e-4,
                   f"NMSE {nmse:.1e} against float64")
        except Exception as e:  # noqa: BLE001
            report(f"{name}: runs (live {live})", False, f"{type(e).__name__}: {e}")


def dry_calls(torch, fi):
    """Without a GPU: the Python path of each call down to the compiled module."""
    import flashinfer.decode as fd  # noqa: PLC0415

    fd.get_compute_capability = lambda device: (9, 0)  # the H200's; no device to ask
    real_empty = torch.empty

    def empty(*a, **kw):  # pinned host memory needs a driver
        kw.pop("pin_memory", None)
        return real_empty(*a, **kw)
    torch.empty = empty
    try:
        for name, thunk, _, _ in all_calls(torch, fi, 64, "cpu")[1]:
            try:
                thunk()
                report(f"{name}: dry call", False, "returned without a GPU (unexpected)")
            except RuntimeError as e:
                text = str(e).splitlines()[0] if str(e) else type(e).__name__
                compiled = "CUDA" in text or "kDLCUDA" in text or "cuda" in text
                report(f"{name}: dry call", compiled,
                       f"reached the compiled module ({text[:110]})" if compiled else text)
            except Exception as e:  # noqa: BLE001
                report(f"{name}: dry call", False, f"{type(e).__name__}: {e}")
    finally:
        torch.empty = real_empty


if __name__ == "__main__":
    sys.exit(main())
