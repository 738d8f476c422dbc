#!/usr/bin/env python3
"""What the Python package adds to a decode step: gem.Decoder.decode, and a step bound once
(Decoder.bind), against the same gem_decode call made bare through ctypes (the arguments built
once, outside the timing), on the same arrays, in A B C C B A blocks.

    python scripts/python-overhead.py [--lives 1,1024,8192] [--rounds 5] [--out FILE.json]

(with the package installed, or PYTHONPATH=python GEM_LIBRARY=build/libgem.so). Prints one
line per length and writes the samples and medians as JSON when --out is given."""

import argparse
import ctypes
import json
import platform
import statistics
import sys
import time

import numpy as np

import gem
from gem import _capi


def bare_call(dec, q, k, v, out, scale):
    """gem_decode's arguments for these arrays, built once (the tuned default config)."""
    n_q, dk = q.shape
    n_kv, cap, dv = v.shape
    shape = _capi.DecodeShape(n_q_heads=n_q, n_kv_heads=n_kv, dk=dk, dv=dv, scale=scale)
    view = _capi.KVView(k=k.ctypes.data, v=v.ctypes.data, k_head_stride=cap * dk,
                        k_token_stride=dk, v_head_stride=cap * dv, v_token_stride=dv, live=cap,
                        capacity=cap)
    need = ctypes.c_size_t()
    _capi.check("gem_decode_workspace_bytes", _capi.lib.gem_decode_workspace_bytes(
        dec._handle(), ctypes.byref(shape), cap, None, ctypes.byref(need)))
    ws = ctypes.create_string_buffer(need.value + _capi.WORKSPACE_ALIGN)
    base = ctypes.addressof(ws)
    base += (-base) % _capi.WORKSPACE_ALIGN
    args = (dec._handle(), ctypes.byref(shape), q.ctypes.data, ctypes.byref(view),
            out.ctypes.data, base, need.value, None, None)
    keep = (shape, view, ws)

    def call():
        _capi.check("gem_decode", _capi.lib.gem_decode(*args))
    call.keep = keep
    return call


def per_call_us(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lives", default="1,1024,8192")
    ap.add_argument("--rounds", type=int, default=5, help="A B B A rounds per length")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out")
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    report = {"machine": platform.processor() or platform.machine(),
              "python": sys.version.split()[0], "rounds": a.rounds, "lengths": []}
    with gem.Decoder(threads=a.threads) as dec:
        report["decoder"] = dec.description
        print(f"python-overhead: {dec.description}, Python {report['python']}")
        for live in [int(x) for x in a.lives.split(",")]:
            # live 1: a tiny head (the package's cost alone); else Gemma 4's full layer
            n_q, n_kv, d = (1, 1, 16) if live == 1 else (32, 4, 512)
            q = rng.standard_normal((n_q, d), dtype=np.float32)
            k = rng.standard_normal((n_kv, live, d), dtype=np.float32)
            v = rng.standard_normal((n_kv, live, d), dtype=np.float32)
            out = np.empty((n_q, d), dtype=np.float32)
            bare = bare_call(dec, q, k, v, out, 1.0)

            def pkg():
                dec.decode(q, k, v, out=out, scale=1.0)
            bound = dec.bind(q, k, v, out=out, scale=1.0)
            first = None
            for fn in (bare, pkg, bound):
                fn()
                if first is None:
                    first = out.tobytes()
                elif out.tobytes() != first:
                    sys.exit("python-overhead: the package's output differs from the bare call's")
            calls = max(20, int(200000 / (live * n_kv)))
            for fn in (bare, pkg, bound):  # warm
                per_call_us(fn, calls)
            s = {"bare": [], "decode": [], "bound": []}
            for _ in range(a.rounds):
                for name in ("bare", "decode", "bound", "bound", "decode", "bare"):
                    s[name].append(per_call_us({"bare": bare, "decode": pkg,
                                                "bound": bound}[name], calls))
            bound.close()
            med = {name: statistics.median(x) for name, x in s.items()}
            row = {"live": live, "n_q_heads": n_q, "n_kv_heads": n_kv, "d": d, "calls": calls,
                   "samples_us": s, "median_us": med,
                   "added_us": {n: med[n] - med["bare"] for n in ("decode", "bound")}}
            report["lengths"].append(row)
            text = ", ".join(f"{n} {med[n]:.2f} us [{min(s[n]):.2f}-{max(s[n]):.2f}]"
                             + ("" if n == "bare" else f" {med[n] - med['bare']:+.2f}")
                             for n in ("bare", "decode", "bound"))
            print(f"live {live:6d} ({n_q}/{n_kv} heads, d {d}): {text}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
