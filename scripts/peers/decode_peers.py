#!/usr/bin/env python3
"""decode_peers.py: one decode step of attention at the shape of Gemma 4's full-attention
layers (32 query heads over 4 KV heads, head dimension 512, batch 1), measured side by side
for gem and its peers on one GPU, in one process, on one set of inputs, with every peer's
output checked against the same float64 reference.

Peers (--peers picks a subset; names as listed):
  gem-bf16, gem-f32     gem_decode (libgem.so through ctypes, --lib), the tuned default route,
                        K/V head-major (4, live, 512), q and output F32
  gem-fp8               the same with FP8 E4M3 K/V (uint8 codes) and a scale per KV head
  torch-bf16, torch-f32 torch: per KV head group, bmm(q, K^T) * scale, softmax, bmm(., V)
  torch-fp8             the FP8 codes widened to BF16 in the call, then as torch-bf16 with
                        the scales applied to the scores and the output
  fi-single             FlashInfer single_decode_with_kv_cache, CUDA cores, BF16, NHD
  fi-single-tc          the same with use_tensor_cores=True
  fi-paged              FlashInfer BatchDecodeWithPagedKVCacheWrapper, one request, BF16, NHD
  fi-single-fp8         fi-single with FP8 E4M3 K/V and its k_scale / v_scale arguments
  fi-paged-fp8          fi-paged with FP8 E4M3 K/V and its k_scale / v_scale arguments
FlashInfer is a peer measured beside gem, never part of it; without it (not importable, or
--no-flashinfer) its rows say so and the rest runs.

Inputs: K and V ~ N(0, 1) rounded to BF16; q ~ N(0, 1) * --q-gain rounded to BF16, so that
every peer reads the same values (the F32 caches are exact copies of the BF16 ones). The FP8
rows read those K and V quantized to E4M3 with one scale per tensor (the largest |x| over
448, rounded to float), the same scale for every head, so gem and FlashInfer read the same
values. The reference is the direct softmax in float64 of those values (for the FP8 rows, of
the E4M3 values times the scale). Timing: per call, a CUDA-event pair on one stream, after
an L2 flush (a read of --flush-mib MiB) and a --lead-us spin
that lets the host queue the call before the GPU reaches it; warm-up first, then
--rounds rounds of --iters calls per peer, the peer order reversed every other round;
median, min and max of all timed calls. The read bandwidth is a torch sum over --bw-gib
GiB of F32, measured in the same process before and after the peers (median of both);
the floor of a peer is its K+V bytes over that bandwidth.

--cpu-check runs the reference, torch and (with --lib) gem's CPU backend on the CPU at
tiny live lengths, in BF16, F32 and FP8, and checks them against each other and against an
independent loop reference: a test of this script's math, of its FP8 quantization and of
its ctypes mirror of gem's structs (the FP8 scales included).

Exit status: 0 when every peer that ran gave a finite output (rows that are unsupported,
unavailable or skipped do not fail), 1 when a peer failed, gave a non-finite output or
(--cpu-check) a check failed, 2 for bad usage or a machine that cannot run it.
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import platform
import struct
import subprocess
import sys
import time

SCHEMA = "gem.peers.v1"
N_Q_HEADS = 32
N_KV_HEADS = 4
HEAD_DIM = 512
GROUP = N_Q_HEADS // N_KV_HEADS


def to_float(x):
    """x rounded to the nearest float (IEEE binary32), as a Python float."""
    return struct.unpack("f", struct.pack("f", x))[0]


# 1/sqrt(512) rounded to float: gem's shape holds a float, so every peer and the reference
# take this value (exact in float and in double)
SCALE = to_float(1.0 / math.sqrt(HEAD_DIM))
FLASHINFER_EXPECTED = "0.7.2"
FI_PEERS = ["fi-single", "fi-single-tc", "fi-paged", "fi-single-fp8", "fi-paged-fp8"]
ALL_PEERS = ["gem-bf16", "gem-f32", "gem-fp8", "torch-bf16", "torch-f32", "torch-fp8"] + FI_PEERS
# the largest finite magnitude of FP8 E4M3 (E4M3FN: no infinities)
FP8_MAX = 448.0
DEFAULT_LIVE = "8192,65536,131072"
CPU_DEFAULT_LIVE = "1,13,300"
PROG = "decode_peers"
DEVICE = "cuda"


class UsageError(Exception):
    pass


def log(msg):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def die(msg, code=2):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


# ---- gem through ctypes: mirrors of include/gem/attn.h and include/gem/decode.h ------------

GEM_OK = 0
GEM_ERR_UNSUPPORTED = 10
GEM_BACKEND_CPU = 0
GEM_BACKEND_CUDA = 1
GEM_DTYPE = {"f32": 0, "bf16": 1, "f16": 2, "fp8": 3}
GEM_ROUTES = {0: "reference", 1: "online", 2: "baseline", 3: "fused"}


class GemDecodeShape(ctypes.Structure):
    _fields_ = [("n_q_heads", ctypes.c_int64), ("n_kv_heads", ctypes.c_int64),
                ("dk", ctypes.c_int64), ("dv", ctypes.c_int64), ("scale", ctypes.c_float)]


class GemKvView(ctypes.Structure):
    _fields_ = [("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("k_dtype", ctypes.c_int), ("v_dtype", ctypes.c_int),
                ("k_head_stride", ctypes.c_int64), ("k_token_stride", ctypes.c_int64),
                ("v_head_stride", ctypes.c_int64), ("v_token_stride", ctypes.c_int64),
                ("live", ctypes.c_int64), ("capacity", ctypes.c_int64),
                ("k_from_v", ctypes.c_void_p),  # NULL: K is read from k
                ("k_scale", ctypes.c_void_p), ("v_scale", ctypes.c_void_p)]  # FP8 only


class GemDecodeConfig(ctypes.Structure):
    _fields_ = [("route", ctypes.c_int), ("partitions", ctypes.c_int64),
                ("tile", ctypes.c_int64)]


class Gem:
    """libgem.so: the decode API and the double reference, nothing else."""

    def __init__(self, path):
        if not os.path.exists(path):
            raise UsageError(f"--lib {path}: no such file")
        try:
            lib = ctypes.CDLL(os.path.abspath(path))
        except OSError as e:
            raise UsageError(f"--lib {path}: cannot load: {e}") from e
        P, I64, SZ = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t
        sigs = {
            "gem_status_str": (ctypes.c_char_p, [ctypes.c_int]),
            "gem_status_name": (ctypes.c_char_p, [ctypes.c_int]),
            "gem_decode_ctx_create": (ctypes.c_int, [ctypes.c_int, I64, ctypes.POINTER(P)]),
            "gem_decode_ctx_destroy": (None, [P]),
            "gem_decode_ctx_describe": (ctypes.c_char_p, [P]),
            "gem_decode_supports": (ctypes.c_int, [P, ctypes.POINTER(GemDecodeShape),
                                                   ctypes.c_int, ctypes.c_int]),
            "gem_decode_config_default": (ctypes.c_int, [P, ctypes.POINTER(GemDecodeShape), I64,
                                                         ctypes.POINTER(GemDecodeConfig)]),
            "gem_decode_workspace_bytes": (ctypes.c_int, [P, ctypes.POINTER(GemDecodeShape), I64,
                                                          P, ctypes.POINTER(SZ)]),
            "gem_decode": (ctypes.c_int, [P, ctypes.POINTER(GemDecodeShape), P,
                                          ctypes.POINTER(GemKvView), P, P, SZ, P, P]),
            "gem_attn_reference_kv": (ctypes.c_int, [ctypes.POINTER(GemDecodeShape), P,
                                                     ctypes.POINTER(GemKvView), P, SZ]),
        }
        for name, (res, args) in sigs.items():
            try:
                f = getattr(lib, name)
            except AttributeError as e:
                raise UsageError(f"--lib {path}: no symbol {name} (not a gem library?)") from e
            f.restype, f.argtypes = res, args
        self.lib, self.path = lib, path
        self.shape = GemDecodeShape(N_Q_HEADS, N_KV_HEADS, HEAD_DIM, HEAD_DIM, SCALE)

    def status(self, st):
        name = self.lib.gem_status_name(st)
        text = self.lib.gem_status_str(st)
        return f"{(name or b'?').decode()}: {(text or b'?').decode()}"

    def ctx(self, backend, threads=0):
        c = ctypes.c_void_p()
        st = self.lib.gem_decode_ctx_create(backend, threads, ctypes.byref(c))
        if st != GEM_OK:
            raise RuntimeError(f"gem_decode_ctx_create: {self.status(st)}")
        return c

    def describe(self, ctx):
        return (self.lib.gem_decode_ctx_describe(ctx) or b"").decode()

    def supports(self, ctx, dtype):
        d = GEM_DTYPE[dtype]
        return self.lib.gem_decode_supports(ctx, ctypes.byref(self.shape), d, d)

    def default_config(self, ctx, live):
        cfg = GemDecodeConfig()
        st = self.lib.gem_decode_config_default(ctx, ctypes.byref(self.shape), live,
                                                ctypes.byref(cfg))
        if st != GEM_OK:
            return None
        return {"route": GEM_ROUTES.get(cfg.route, str(cfg.route)),
                "partitions": cfg.partitions, "tile": cfg.tile}

    def workspace_bytes(self, ctx, live):
        n = ctypes.c_size_t()
        st = self.lib.gem_decode_workspace_bytes(ctx, ctypes.byref(self.shape), live, None,
                                                 ctypes.byref(n))
        if st != GEM_OK:
            raise RuntimeError(f"gem_decode_workspace_bytes: {self.status(st)}")
        return n.value

    @staticmethod
    def head_major_view(k, v, dtype, scales=None):
        """k, v: contiguous (n_kv_heads, live, d) tensors (FP8: uint8 codes); scales: for FP8,
        (k_scale, v_scale) as ctypes float arrays of n_kv_heads, which the caller keeps alive
        as long as the view."""
        live = k.shape[1]
        view = GemKvView(k.data_ptr(), v.data_ptr(), GEM_DTYPE[dtype], GEM_DTYPE[dtype],
                         live * HEAD_DIM, HEAD_DIM, live * HEAD_DIM, HEAD_DIM, live, live)
        if scales is not None:
            view.k_scale, view.v_scale = (ctypes.addressof(a) for a in scales)
        return view

    @staticmethod
    def scales(fp8):
        """(k_scale, v_scale) for every KV head: ctypes float arrays of fp8's two scales."""
        per_head = ctypes.c_float * N_KV_HEADS
        return per_head(*[fp8.k_scale] * N_KV_HEADS), per_head(*[fp8.v_scale] * N_KV_HEADS)

    def decode(self, ctx, q, view, out, ws, ws_bytes, stream):
        return self.lib.gem_decode(ctx, ctypes.byref(self.shape), q.data_ptr(),
                                   ctypes.byref(view), out.data_ptr(),
                                   ws.data_ptr() if ws is not None else None, ws_bytes,
                                   None, stream)

    def reference(self, q, view, out):
        """gem_attn_reference_kv on host tensors: q F32 (32, 512), out float64 (32, 512)."""
        return self.lib.gem_attn_reference_kv(ctypes.byref(self.shape), q.data_ptr(),
                                              ctypes.byref(view), out.data_ptr(), out.numel())


# ---- inputs, reference, errors --------------------------------------------------------------

def make_inputs(torch, live, seed, q_gain, device):
    """K, V head-major (4, live, 512) BF16; q (32, 512) F32 holding BF16 values."""
    g = torch.Generator(device=device)
    g.manual_seed(seed * 1000003 + live)
    k = torch.randn((N_KV_HEADS, live, HEAD_DIM), generator=g, device=device).to(torch.bfloat16)
    v = torch.randn((N_KV_HEADS, live, HEAD_DIM), generator=g, device=device).to(torch.bfloat16)
    q = (torch.randn((N_Q_HEADS, HEAD_DIM), generator=g, device=device) * q_gain)
    q = q.to(torch.bfloat16).float()
    return q, k, v


class Fp8Kv:
    """K and V as FP8 E4M3 codes (torch.float8_e4m3fn, shaped as k and v) with one
    scale per tensor, the largest |x| over 448 rounded to float: element values are the
    codes' E4M3 values times the scale. One scale per tensor, because FlashInfer takes one
    per call; gem is given it for every KV head."""

    def __init__(self, torch, k, v):
        self.k_scale, self.k = self.quantize(torch, k)
        self.v_scale, self.v = self.quantize(torch, v)

    @staticmethod
    def quantize(torch, x):
        amax = x.abs().amax().item()
        scale = to_float(amax / FP8_MAX) if amax > 0 else 1.0
        codes = (x.float() / scale).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        return scale, codes


def reference_f64(torch, q, k, v, k_scale=1.0, v_scale=1.0):
    """Direct softmax in float64, one KV head group at a time: (32, 512) float64. The K and V
    values are k * k_scale and v * v_scale (exact in double for FP8 codes and a float scale)."""
    out = torch.empty((N_Q_HEADS, HEAD_DIM), dtype=torch.float64, device=q.device)
    qd = q.double().view(N_KV_HEADS, GROUP, HEAD_DIM)
    for g in range(N_KV_HEADS):
        kg = k[g].double() * k_scale
        s = (qd[g] @ kg.t()) * SCALE
        del kg
        w = torch.exp(s - s.amax(dim=-1, keepdim=True))
        vg = v[g].double() * v_scale
        out[g * GROUP:(g + 1) * GROUP] = (w @ vg) / w.sum(dim=-1, keepdim=True)
        del vg, w, s
    return out


def reference_loops(q, k, v, k_scale=1.0, v_scale=1.0):
    """An independent reference: plain Python loops over floats (tiny lengths only)."""
    qf = q.double().tolist()
    kf = [[[x * k_scale for x in row] for row in head] for head in k.double().tolist()]
    vf = [[[x * v_scale for x in row] for row in head] for head in v.double().tolist()]
    live = len(kf[0])
    out = []
    for h in range(N_Q_HEADS):
        g = h // GROUP
        s = [SCALE * math.fsum(a * b for a, b in zip(qf[h], kf[g][t])) for t in range(live)]
        m = max(s)
        w = [math.exp(x - m) for x in s]
        den = math.fsum(w)
        out.append([math.fsum(w[t] * vf[g][t][i] for t in range(live)) / den
                    for i in range(HEAD_DIM)])
    return out


def same_bits(torch, a, b):
    """Whether two outputs hold the same bits (NaN payloads and signed zeros included)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    view = {torch.bfloat16: torch.int16, torch.float16: torch.int16,
            torch.float32: torch.int32}.get(a.dtype)
    if view is None:
        return bool(torch.equal(a, b))
    return bool(torch.equal(a.contiguous().view(view), b.contiguous().view(view)))


def errors(torch, out, ref):
    """(finite, nmse, max_abs) of out against the float64 reference."""
    o = out.reshape(N_Q_HEADS, HEAD_DIM).to(device=ref.device, dtype=torch.float64)
    finite = bool(torch.isfinite(o).all().item())
    if not finite:
        return False, None, None
    d = o - ref
    nmse = (d * d).sum().item() / max((ref * ref).sum().item(), 1e-300)
    return True, nmse, d.abs().max().item()


def quantization_nmse(torch, codes, scale, x):
    """sum((codes * scale - x)^2) / sum(x^2), in float32 with float64 sums."""
    d = codes.float().mul_(scale).sub_(x.float())
    num = d.square_().sum(dtype=torch.float64).item()
    return num / max(x.float().square().sum(dtype=torch.float64).item(), 1e-300)


def fp8_inputs(torch, q, k, v, ref):
    """The FP8 K/V of one live length, their float64 reference and, for the receipt, the
    scales, the quantization's NMSE per tensor, the NMSE of that reference rounded to BF16 and
    its NMSE against the reference of the BF16 K/V."""
    fp8 = Fp8Kv(torch, k, v)
    ref8 = reference_f64(torch, q, fp8.k, fp8.v, fp8.k_scale, fp8.v_scale)
    info = {"k_scale": fp8.k_scale, "v_scale": fp8.v_scale,
            "quantization_nmse": {"k": quantization_nmse(torch, fp8.k, fp8.k_scale, k),
                                  "v": quantization_nmse(torch, fp8.v, fp8.v_scale, v)},
            "ref_bf16_rounding_nmse": errors(torch, ref8.to(torch.bfloat16), ref8)[1],
            "ref_vs_bf16_kv_ref_nmse": errors(torch, ref8, ref)[1]}
    return fp8, ref8, info


# ---- peers ---------------------------------------------------------------------------------

class Peer:
    """One row: a name, what it reads, and a callable that queues one decode step on the
    current stream and returns the output tensor."""

    def __init__(self, name, kv_dtype, what, kv_bytes):
        self.name, self.kv_dtype, self.what, self.kv_bytes = name, kv_dtype, what, kv_bytes
        self.fn = None
        self.status, self.message = "ok", None
        self.times, self.host_us = [], []
        self.result = {}
        self.first = self.last = None

    def fail(self, status, message):
        self.status, self.message, self.fn = status, message, None


KV_DTYPE_BYTES = {"f32": 4, "bf16": 2, "fp8": 1}


def kv_bytes(live, dtype):
    return 2 * N_KV_HEADS * live * HEAD_DIM * KV_DTYPE_BYTES[dtype]


def torch_peer(torch, name, dtype, q, k, v, fp8=None):
    if dtype == "fp8":
        return torch_fp8_peer(torch, name, q, fp8)
    p = Peer(name, dtype, "bmm(q, K^T) * scale, softmax, bmm(., V) per KV head group "
             f"({dtype} tensors, head-major K/V)", kv_bytes(k.shape[1], dtype))
    t = torch.bfloat16 if dtype == "bf16" else torch.float32
    qg = q.to(t).view(N_KV_HEADS, GROUP, HEAD_DIM)
    kk, vv = k.to(t), v.to(t)
    kt = kk.transpose(1, 2)

    def fn():
        s = torch.bmm(qg, kt)
        s.mul_(SCALE)
        return torch.bmm(torch.softmax(s, dim=-1), vv).view(N_Q_HEADS, HEAD_DIM)
    p.fn = fn
    return p


def torch_fp8_peer(torch, name, q, fp8):
    """The FP8 codes widened to BF16 (exact) in every call, the scores scaled by
    (float)(scale * k_scale) and the output by v_scale, as gem applies them."""
    live = fp8.k.shape[1]
    p = Peer(name, "fp8", "per KV head group: K, V codes to bf16 (in the call), "
             "bmm(q, K^T) * (scale * k_scale), softmax, bmm(., V) * v_scale (bf16 tensors, "
             "head-major K/V)", kv_bytes(live, "fp8"))
    qg = q.to(torch.bfloat16).view(N_KV_HEADS, GROUP, HEAD_DIM)
    k8, v8, v_scale = fp8.k, fp8.v, fp8.v_scale
    score_scale = to_float(SCALE * fp8.k_scale)

    def fn():
        s = torch.bmm(qg, k8.to(torch.bfloat16).transpose(1, 2))
        s.mul_(score_scale)
        o = torch.bmm(torch.softmax(s, dim=-1), v8.to(torch.bfloat16))
        return o.mul_(v_scale).view(N_Q_HEADS, HEAD_DIM)
    p.fn = fn
    return p


def gem_peer(torch, gem, ctx, name, dtype, q, k, v, stream_handle, fp8=None):
    live = k.shape[1]
    what = ("FP8 E4M3 K/V (uint8 codes), k_scale / v_scale per KV head" if dtype == "fp8"
            else f"{dtype} K/V")
    p = Peer(name, dtype, "gem_decode, default config (NULL), head-major (4, live, 512) "
             f"{what}, F32 q and output", kv_bytes(live, dtype))
    if gem is None:
        p.fail("skipped", "no --lib given")
        return p
    st = gem.supports(ctx, dtype)
    if st != GEM_OK:
        p.fail("unsupported" if st == GEM_ERR_UNSUPPORTED else "error",
               f"gem_decode_supports: {gem.status(st)}")
        return p
    if dtype == "fp8":
        kk, vv = fp8.k.view(torch.uint8), fp8.v.view(torch.uint8)
        scales = gem.scales(fp8)
    else:
        t = torch.bfloat16 if dtype == "bf16" else torch.float32
        kk, vv = k.to(t).contiguous(), v.to(t).contiguous()
        scales = None
    view = gem.head_major_view(kk, vv, dtype, scales)
    try:
        ws_bytes = gem.workspace_bytes(ctx, live)
    except RuntimeError as e:
        p.fail("error", str(e))
        return p
    ws = torch.empty(max(ws_bytes, 64), dtype=torch.uint8, device=q.device)
    out = torch.empty((N_Q_HEADS, HEAD_DIM), dtype=torch.float32, device=q.device)
    qq = q.contiguous()
    p.result["config"] = gem.default_config(ctx, live)
    p.result["workspace_bytes"] = ws_bytes
    keep = (kk, vv, ws, qq, view, scales)  # alive as long as the closure

    def fn():
        st = gem.decode(ctx, qq, view, out, ws, ws_bytes, stream_handle)
        if st != GEM_OK:
            raise PeerError("unsupported" if st == GEM_ERR_UNSUPPORTED else "error",
                            f"gem_decode: {gem.status(st)}")
        return out
    fn.keep = keep
    p.fn = fn
    return p


class PeerError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def flashinfer_peers(torch, fi, fi_error, names, q, k, v, fp8, page_size):
    """fi-single, fi-single-tc, fi-paged on NHD copies of the same K/V; fi-single-fp8 and
    fi-paged-fp8 on NHD copies of fp8's codes, with its scales as k_scale and v_scale."""
    live = k.shape[1]
    kb, kb8 = kv_bytes(live, "bf16"), kv_bytes(live, "fp8")
    paged = (f"FlashInfer BatchDecodeWithPagedKVCacheWrapper, one request, page size "
             f"{page_size}, NHD (pages, {page_size}, 4, 512)")
    fp8_kv = "FP8 E4M3 K/V, k_scale and v_scale per call, BF16 q/out"
    rows = {
        "fi-single": Peer("fi-single", "bf16", "FlashInfer single_decode_with_kv_cache, CUDA "
                          "cores, NHD (live, 4, 512), BF16 q/K/V/out", kb),
        "fi-single-tc": Peer("fi-single-tc", "bf16", "FlashInfer single_decode_with_kv_cache, "
                             "use_tensor_cores=True, NHD, BF16", kb),
        "fi-paged": Peer("fi-paged", "bf16", f"{paged}, BF16", kb),
        "fi-single-fp8": Peer("fi-single-fp8", "fp8", "FlashInfer single_decode_with_kv_cache, "
                              f"CUDA cores, NHD (live, 4, 512), {fp8_kv}", kb8),
        "fi-paged-fp8": Peer("fi-paged-fp8", "fp8", f"{paged}, {fp8_kv}", kb8),
    }
    peers = [rows[n] for n in FI_PEERS if n in names]
    if fi is None:
        for p in peers:
            p.fail("skipped" if fi_error == "--no-flashinfer" else "unavailable", fi_error)
        return peers
    qb = q.to(torch.bfloat16).contiguous()
    nhd = {}  # kv dtype -> (K, V) as (live, 4, 512), made once

    def nhd_cache(dtype):
        if dtype not in nhd:
            src = (fp8.k, fp8.v) if dtype == "fp8" else (k, v)
            nhd[dtype] = tuple(x.transpose(0, 1).contiguous() for x in src)
        return nhd[dtype]

    for p in peers:
        try:
            k_nhd, v_nhd = nhd_cache(p.kv_dtype)
            # FlashInfer folds k_scale into sm_scale and multiplies the output by v_scale
            sc = ({"k_scale": fp8.k_scale, "v_scale": fp8.v_scale} if p.kv_dtype == "fp8"
                  else {})
            if p.name.startswith("fi-single"):
                tc = p.name == "fi-single-tc"

                def fn(tc=tc, k_nhd=k_nhd, v_nhd=v_nhd, sc=sc):
                    return fi.single_decode_with_kv_cache(
                        qb, k_nhd, v_nhd, kv_layout="NHD", pos_encoding_mode="NONE",
                        use_tensor_cores=tc, sm_scale=SCALE, **sc)
                p.fn = fn
            else:
                n_pages = (live + page_size - 1) // page_size
                rows_needed = n_pages * page_size
                if rows_needed == live:
                    kp = k_nhd.view(n_pages, page_size, N_KV_HEADS, HEAD_DIM)
                    vp = v_nhd.view(n_pages, page_size, N_KV_HEADS, HEAD_DIM)
                else:
                    kp = torch.zeros((n_pages, page_size, N_KV_HEADS, HEAD_DIM),
                                     dtype=k_nhd.dtype, device=q.device)
                    vp = torch.zeros_like(kp)
                    kp.view(-1, N_KV_HEADS, HEAD_DIM)[:live] = k_nhd
                    vp.view(-1, N_KV_HEADS, HEAD_DIM)[:live] = v_nhd
                dev = q.device
                indptr = torch.tensor([0, n_pages], dtype=torch.int32, device=dev)
                indices = torch.arange(n_pages, dtype=torch.int32, device=dev)
                last = torch.tensor([live - (n_pages - 1) * page_size], dtype=torch.int32,
                                    device=dev)
                ws = torch.empty(128 << 20, dtype=torch.uint8, device=dev)
                w = fi.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
                w.plan(indptr, indices, last, N_Q_HEADS, N_KV_HEADS, HEAD_DIM, page_size,
                       pos_encoding_mode="NONE", q_data_type=torch.bfloat16,
                       kv_data_type=k_nhd.dtype, sm_scale=SCALE)
                p.result["resolved_backend"] = getattr(w, "resolved_backend", None)
                q3 = qb.view(1, N_Q_HEADS, HEAD_DIM)
                o3 = torch.empty_like(q3)

                def fn(w=w, kp=kp, vp=vp, q3=q3, o3=o3, sc=sc):
                    return w.run(q3, (kp, vp), out=o3, **sc)
                fn.keep = (ws, indptr, indices, last)
                p.fn = fn
        except Exception as e:  # noqa: BLE001 - a failing peer is reported, not hidden
            p.fail("error", one_line(e))
    return peers


def one_line(e):
    text = f"{type(e).__name__}: {e}".strip().replace("\n", " ")
    return text if len(text) <= 400 else text[:397] + "..."


# ---- timing --------------------------------------------------------------------------------

def median(xs):
    s = sorted(xs)
    n = len(s)
    return None if n == 0 else (s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2]))


class Timer:
    def __init__(self, torch, flush_mib, lead_us):
        self.torch = torch
        self.flush = (torch.empty(flush_mib << 18, dtype=torch.float32, device=DEVICE)
                      .fill_(1.0) if flush_mib > 0 else None)
        self.lead_us = lead_us
        self.cycles_per_us = self._calibrate() if lead_us > 0 else 0.0

    def _calibrate(self):
        torch = self.torch
        n = 2_000_000
        torch.cuda._sleep(n)  # noqa: SLF001 - torch's own spin kernel
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(n)  # noqa: SLF001
        e.record()
        torch.cuda.synchronize()
        return n / max(s.elapsed_time(e) * 1000.0, 1e-3)

    def once(self, fn):
        """One timed call: flush, lead, event, fn, event. Returns (start, end, out, host_us)."""
        torch = self.torch
        if self.flush is not None:
            self.flush.sum()
        if self.lead_us > 0:
            torch.cuda._sleep(int(self.lead_us * self.cycles_per_us))  # noqa: SLF001
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        s.record()
        out = fn()
        e.record()
        host_us = (time.perf_counter() - t0) * 1e6
        return s, e, out, host_us


def read_bandwidth(torch, gib, reps):
    n = int(gib * (1 << 30)) // 4
    x = torch.empty(n, dtype=torch.float32, device=DEVICE).fill_(1.0)
    x.sum()
    torch.cuda.synchronize()
    ms = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        x.sum()
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e))
    del x
    torch.cuda.empty_cache()
    nbytes = n * 4
    return {"bytes": nbytes, "samples_ms": ms, "median_ms": median(ms),
            "median_gbs": nbytes / (median(ms) * 1e6), "best_gbs": nbytes / (min(ms) * 1e6)}


# ---- the GPU run ---------------------------------------------------------------------------

def git_commit():
    c = os.environ.get("GEM_GIT_COMMIT")
    if c:
        return c
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        return subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def import_flashinfer(args):
    if args.no_flashinfer:
        return None, None, "--no-flashinfer"
    try:
        import flashinfer  # noqa: PLC0415 - a peer, imported only when measured
    except Exception as e:  # noqa: BLE001
        msg = f"flashinfer not importable ({one_line(e)}); see scripts/peers/README.md"
        return None, None, msg
    return flashinfer, getattr(flashinfer, "__version__", "?"), None


def fmt(x, spec):
    """format(x, spec), or '-' padded to the spec's width."""
    if x is None:
        width = "".join(ch for ch in spec.split(".")[0] if ch.isdigit())
        return "-".rjust(int(width) if width else 1)
    return format(x, spec)


def print_table(entry, bw_gbs):
    live = entry["live"]
    print(f"\nlive {live}: floor {entry['floor_ms']['bf16']:.4f} ms (BF16 K/V, "
          f"{entry['kv_bytes']['bf16'] / 2**20:.0f} MiB), {entry['floor_ms']['f32']:.4f} ms "
          f"(F32, {entry['kv_bytes']['f32'] / 2**20:.0f} MiB) at {bw_gbs:.0f} GB/s; rounding "
          f"the reference to BF16 alone gives NMSE {entry['ref_bf16_rounding_nmse']:.1e}")
    f8 = entry["fp8"]
    if f8 is not None:
        print(f"  FP8 K/V: floor {entry['floor_ms']['fp8']:.4f} ms "
              f"({entry['kv_bytes']['fp8'] / 2**20:.0f} MiB); k_scale {f8['k_scale']:.6g}, "
              f"v_scale {f8['v_scale']:.6g}; quantization NMSE {f8['quantization_nmse']['k']:.1e}"
              f" (K), {f8['quantization_nmse']['v']:.1e} (V); the FP8 rows are checked against "
              f"the reference of the E4M3 values (NMSE {f8['ref_vs_bf16_kv_ref_nmse']:.1e} from "
              f"the BF16 one; rounded to BF16 {f8['ref_bf16_rounding_nmse']:.1e})")
    print(f"  {'peer':<13} {'KV':<4} {'median ms':>10} {'min ms':>9} {'max ms':>9} "
          f"{'GB/s':>7} {'of read':>8} {'NMSE':>9} {'max abs':>9}  status")
    for r in entry["peers"]:
        frac = "-".rjust(8) if r.get("fraction") is None else f"{100.0 * r['fraction']:7.1f}%"
        status = r["status"] + (f" ({r['message']})" if r.get("message") else "")
        print(f"  {r['peer']:<13} {r['kv_dtype']:<4} {fmt(r.get('median_ms'), '10.4f')} "
              f"{fmt(r.get('min_ms'), '9.4f')} {fmt(r.get('max_ms'), '9.4f')} "
              f"{fmt(r.get('gbs'), '7.0f')} {frac} {fmt(r.get('nmse'), '9.1e')} "
              f"{fmt(r.get('max_abs'), '9.1e')}  {status}")
    sys.stdout.flush()


def run_gpu(args):
    import torch  # noqa: PLC0415

    gem = Gem(args.lib) if args.lib else None
    if not torch.cuda.is_available():
        die("no CUDA device visible to torch (use --cpu-check on a machine without a GPU)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(DEVICE)
    props = torch.cuda.get_device_properties(dev)
    names = args.peers
    fi, fi_version, fi_error = (None, None, "not requested")
    if any(n.startswith("fi-") for n in names):
        fi, fi_version, fi_error = import_flashinfer(args)
        if fi is None:
            log(f"FlashInfer rows skipped: {fi_error}")
        else:
            log(f"flashinfer {fi_version} from {os.path.dirname(fi.__file__)}")
            if fi_version != FLASHINFER_EXPECTED:
                log(f"note: flashinfer {fi_version}, the kit was built for "
                    f"{FLASHINFER_EXPECTED}")
            if os.environ.get("FLASHINFER_DISABLE_JIT") != "1":
                log("note: FLASHINFER_DISABLE_JIT is not 1: a module missing from the carry "
                    "folder would start a compile (. .peers/env.sh sets it)")
    # every peer queues on torch's current stream (FlashInfer takes it from torch, gem is
    # given its handle), and the events are recorded on it
    stream = torch.cuda.current_stream()
    ctx = None
    gem_desc = None
    if gem is not None and any(n.startswith("gem-") for n in names):
        try:
            ctx = gem.ctx(GEM_BACKEND_CUDA)
            gem_desc = gem.describe(ctx)
            log(f"gem: {gem_desc}")
        except RuntimeError as e:
            die(f"--lib {args.lib}: {e}", 2)

    log(f"read bandwidth: torch sum over {args.bw_gib:g} GiB, {args.bw_reps} reps")
    bw_before = read_bandwidth(torch, args.bw_gib, args.bw_reps)
    log(f"  {bw_before['median_gbs']:.0f} GB/s (median), best {bw_before['best_gbs']:.0f}")
    timer = Timer(torch, args.flush_mib, args.lead_us)

    receipt = {
        "schema": SCHEMA,
        "tool": "scripts/peers/decode_peers.py",
        "command": [os.path.basename(sys.executable)] + sys.argv,
        "git_commit": git_commit(),
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"),
        "host": platform.node(),
        "device": {"name": props.name, "capability": f"{props.major}.{props.minor}",
                   "sm_count": props.multi_processor_count,
                   "memory_bytes": props.total_memory,
                   "l2_bytes": getattr(props, "L2_cache_size", None)},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "torch_cuda": torch.version.cuda, "flashinfer": fi_version,
                     "gem_lib": os.path.abspath(args.lib) if args.lib else None,
                     "gem_context": gem_desc},
        "shape": {"n_q_heads": N_Q_HEADS, "n_kv_heads": N_KV_HEADS, "head_dim": HEAD_DIM,
                  "batch": 1, "scale": SCALE},
        "method": {
            "inputs": "K, V ~ N(0,1) rounded to bf16; q ~ N(0,1) * q_gain rounded to bf16; "
                      "f32 caches are exact copies; every peer reads the same values",
            "fp8_inputs": "the bf16 K and V quantized to fp8 e4m3 (e4m3fn) with one scale per "
                          "tensor, max |x| / 448 rounded to float, the same for every KV head "
                          "(gem's k_scale / v_scale, FlashInfer's k_scale / v_scale); every "
                          "fp8 peer reads the same codes",
            "reference": "float64 direct softmax (torch on the device) of the same values; "
                         "for the fp8 peers, of the e4m3 values times the scales",
            "nmse": "sum((out - ref)^2) / sum(ref^2) over the 32 x 512 outputs",
            "timer": "torch.cuda.Event pair around one call, on torch's current stream, "
                     "after an L2 flush read and a lead spin; median/min/max of all timed "
                     "calls",
            "seed": args.seed, "q_gain": args.q_gain, "warmup": args.warmup,
            "iters_per_round": args.iters, "rounds": args.rounds,
            "l2_flush_bytes": args.flush_mib << 20, "lead_us": args.lead_us,
            "page_size": args.page_size, "allow_tf32": False,
            "bf16_reduced_precision_reduction":
                torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        },
        "flashinfer_status": "ok" if fi is not None else fi_error,
        "bandwidth": None,
        "lives": [],
    }

    want_fp8 = any(n.endswith("-fp8") for n in names)
    failed = False
    for live in args.live:
        log(f"[live {live}] inputs and float64 reference")
        q, k, v = make_inputs(torch, live, args.seed, args.q_gain, dev)
        ref = reference_f64(torch, q, k, v)
        ref_rounding = errors(torch, ref.to(torch.bfloat16), ref)[1]
        fp8, ref8, fp8_info = (fp8_inputs(torch, q, k, v, ref) if want_fp8
                               else (None, None, None))
        peers = []
        for n in names:
            if n.startswith("torch-"):
                peers.append(torch_peer(torch, n, n.split("-")[1], q, k, v, fp8))
            elif n.startswith("gem-"):
                peers.append(gem_peer(torch, gem, ctx, n, n.split("-")[1], q, k, v,
                                      stream.cuda_stream, fp8))
        fi_names = [n for n in names if n.startswith("fi-")]
        if fi_names:
            peers.extend(flashinfer_peers(torch, fi, fi_error, fi_names, q, k, v, fp8,
                                          args.page_size))
        peers.sort(key=lambda p: names.index(p.name))
        # correctness call and warm-up
        for p in peers:
            if p.fn is None:
                continue
            try:
                out = p.fn()
                torch.cuda.synchronize()
                p.first = out.detach().clone()
                finite, nmse, max_abs = errors(torch, p.first, ref8 if p.kv_dtype == "fp8"
                                               else ref)
                p.result.update({"finite": finite, "nmse": nmse, "max_abs": max_abs})
                if not finite:
                    p.status, p.message = "nonfinite", "output holds NaN or infinity"
                for _ in range(args.warmup):
                    p.fn()
                torch.cuda.synchronize()
            except PeerError as e:
                p.fail(e.status, str(e))
            except Exception as e:  # noqa: BLE001
                p.fail("error", one_line(e))
                torch.cuda.synchronize()
        # timed rounds, the order reversed every other round
        live_peers = [p for p in peers if p.fn is not None]
        for rnd in range(args.rounds):
            order = live_peers if rnd % 2 == 0 else list(reversed(live_peers))
            for p in order:
                if p.fn is None:
                    continue
                try:
                    pending = [timer.once(p.fn) for _ in range(args.iters)]
                    torch.cuda.synchronize()
                    p.times.extend(s.elapsed_time(e) for s, e, _, _ in pending)
                    p.host_us.extend(h for _, _, _, h in pending)
                    p.last = pending[-1][2]
                except Exception as e:  # noqa: BLE001
                    p.fail("error", f"while timing: {one_line(e)}")
                    p.times = []
                    torch.cuda.synchronize()
        rows = []
        for p in peers:
            r = {"peer": p.name, "kv_dtype": p.kv_dtype, "what": p.what, "status": p.status,
                 "message": p.message, "kv_bytes": p.kv_bytes}
            r.update(p.result)
            if p.times:
                r.update({"median_ms": median(p.times), "min_ms": min(p.times),
                          "max_ms": max(p.times), "samples": len(p.times),
                          "samples_ms": [round(t, 6) for t in p.times],
                          "host_us_median": median(p.host_us)})
                r["gbs"] = p.kv_bytes / (r["median_ms"] * 1e6)
                if p.last is not None and p.first is not None:
                    r["repeat_bitwise"] = same_bits(torch, p.last, p.first)
                if r["host_us_median"] > args.lead_us:
                    r["note"] = (f"host time per call ({r['host_us_median']:.0f} us) exceeds "
                                 f"the lead ({args.lead_us:g} us): a call may reach the GPU "
                                 "late, inside its timed interval; raise --lead-us")
            if p.status in ("error", "nonfinite"):
                failed = True
            rows.append(r)
            log(f"[live {live}] {p.name}: {p.status}"
                + (f", {r['median_ms']:.4f} ms" if r.get("median_ms") is not None else "")
                + (f", NMSE {r['nmse']:.1e}" if r.get("nmse") is not None else "")
                + (f" ({p.message})" if p.message else ""))
        entry = {"live": live, "kv_bytes": {d: kv_bytes(live, d) for d in KV_DTYPE_BYTES},
                 "ref_bf16_rounding_nmse": ref_rounding, "fp8": fp8_info, "peers": rows}
        receipt["lives"].append(entry)
        for p in peers:
            p.fn, p.first, p.last = None, None, None
        del q, k, v, ref, fp8, ref8, peers
        torch.cuda.empty_cache()

    bw_after = read_bandwidth(torch, args.bw_gib, args.bw_reps)
    samples = bw_before["samples_ms"] + bw_after["samples_ms"]
    bw_ms = median(samples)
    bw_gbs = bw_before["bytes"] / (bw_ms * 1e6)
    receipt["bandwidth"] = {"method": f"torch.sum over {args.bw_gib:g} GiB of float32, "
                                      "median of the reps before and after the peers",
                            "bytes": bw_before["bytes"], "median_ms": bw_ms,
                            "median_gbs": bw_gbs, "before": bw_before, "after": bw_after}
    for entry in receipt["lives"]:
        entry["floor_ms"] = {d: n / (bw_gbs * 1e6) for d, n in entry["kv_bytes"].items()}
        for r in entry["peers"]:
            if r.get("gbs") is not None:
                r["fraction"] = r["gbs"] / bw_gbs
                r["floor_ms"] = r["kv_bytes"] / (bw_gbs * 1e6)
        print_table(entry, bw_gbs)
    print(f"\nread bandwidth {bw_gbs:.0f} GB/s (before {bw_before['median_gbs']:.0f}, after "
          f"{bw_after['median_gbs']:.0f}); {props.name}; torch {torch.__version__}; "
          f"flashinfer {fi_version or '-'}")
    receipt["result"] = "fail" if failed else "ok"
    write_receipt(args.out, receipt)
    if ctx is not None:
        gem.lib.gem_decode_ctx_destroy(ctx)
    return 1 if failed else 0


def write_receipt(path, receipt):
    if not path:
        return
    d = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(d, exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(receipt, f, indent=1, sort_keys=False, allow_nan=False)
            f.write("\n")
        os.replace(tmp, path)
    except (OSError, ValueError) as e:
        die(f"--out {path}: cannot write the receipt: {e}", 1)
    log(f"receipt: {path}")


# ---- the CPU check -------------------------------------------------------------------------

def run_cpu_check(args):
    import torch  # noqa: PLC0415

    torch.manual_seed(args.seed)
    gem = Gem(args.lib) if args.lib else None
    ctx = gem.ctx(GEM_BACKEND_CPU, 1) if gem is not None else None
    checks = []

    def check(name, ok, detail):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}")

    # the ctypes mirror of the C structs: sizes and offsets as a C compiler lays them out
    check("struct gem_decode_shape", ctypes.sizeof(GemDecodeShape) == 40,
          f"{ctypes.sizeof(GemDecodeShape)} bytes (C: 4 x int64 + float, padded to 40)")
    layout = (ctypes.sizeof(GemKvView), GemKvView.live.offset, GemKvView.k_scale.offset,
              GemKvView.v_scale.offset)
    check("struct gem_kv_view", layout == (96, 56, 80, 88),
          "%d bytes, live, k_scale, v_scale at %d, %d, %d (C: 96; 56, 80, 88)" % layout)
    lives = args.live
    receipt = {"schema": SCHEMA, "tool": "scripts/peers/decode_peers.py", "mode": "cpu-check",
               "command": [os.path.basename(sys.executable)] + sys.argv,
               "versions": {"python": platform.python_version(), "torch": torch.__version__,
                            "gem_lib": os.path.abspath(args.lib) if args.lib else None,
                            "gem_context": gem.describe(ctx) if ctx else None},
               "lives": []}
    if gem is not None:
        print(f"gem CPU context: {gem.describe(ctx)}")
    for live in lives:
        print(f"live {live}:")
        q, k, v = make_inputs(torch, live, args.seed, args.q_gain, torch.device("cpu"))
        ref = reference_f64(torch, q, k, v)
        fp8, ref8, fp8_info = fp8_inputs(torch, q, k, v, ref)
        rows = []
        for x, scale, name in ((fp8.k, fp8.k_scale, "K"), (fp8.v, fp8.v_scale, "V")):
            amax = x.float().abs().max().item()
            err = fp8_info["quantization_nmse"][name.lower()]
            # E4M3 rounds a normal value within 2^-4 of itself
            check(f"FP8 {name} codes (live {live})", amax == FP8_MAX and err <= 2.0 ** -8,
                  f"largest |code| {amax:g} (448), quantization NMSE {err:.1e} (<= 2^-8), "
                  f"scale {scale:.6g}")
        if live <= 64:
            for kind, want, inputs in (
                    ("", ref, (q, k, v)),
                    ("FP8 ", ref8, (q, fp8.k, fp8.v, fp8.k_scale, fp8.v_scale))):
                loops = torch.tensor(reference_loops(*inputs), dtype=torch.float64)
                _, nmse, mx = errors(torch, loops, want)
                check(f"{kind}reference vs independent loops (live {live})", nmse < 1e-26,
                      f"NMSE {nmse:.1e}, max abs {mx:.1e}")
        if gem is not None:
            # the views' tensors and scales are alive during the calls
            kk, vv = k.float().contiguous(), v.float().contiguous()
            k8, v8, scales = fp8.k.view(torch.uint8), fp8.v.view(torch.uint8), gem.scales(fp8)
            for kind, want, view in (
                    ("", ref, gem.head_major_view(kk, vv, "f32")),
                    ("FP8 ", ref8, gem.head_major_view(k8, v8, "fp8", scales))):
                cref = torch.empty((N_Q_HEADS, HEAD_DIM), dtype=torch.float64)
                st = gem.reference(q.contiguous(), view, cref)
                if st != GEM_OK:
                    check(f"{kind}gem_attn_reference_kv (live {live})", False, gem.status(st))
                    continue
                _, nmse, mx = errors(torch, cref, want)
                check(f"{kind}reference vs gem_attn_reference_kv (live {live})", nmse < 1e-26,
                      f"NMSE {nmse:.1e}, max abs {mx:.1e}")
        for n in args.peers:
            if n.startswith("fi-"):
                continue
            dtype = n.split("-")[1]
            if n.startswith("torch-"):
                p = torch_peer(torch, n, dtype, q, k, v, fp8)
            else:
                p = gem_peer(torch, gem, ctx, n, dtype, q, k, v, None, fp8)
            r = {"peer": n, "kv_dtype": dtype, "status": p.status, "message": p.message}
            if p.fn is not None:
                try:
                    out = p.fn()
                    finite, nmse, mx = errors(torch, out, ref8 if dtype == "fp8" else ref)
                    again = p.fn().clone() if n.startswith("gem-") else None
                    r.update({"finite": finite, "nmse": nmse, "max_abs": mx})
                    bound = 1e-10 if (n.startswith("gem-") or dtype == "f32") else 1e-3
                    ok = finite and nmse is not None and nmse <= bound
                    check(f"{n} (live {live})", ok,
                          f"NMSE {fmt(nmse, '.1e')} (<= {bound:g}), max abs {fmt(mx, '.1e')}")
                    if again is not None:
                        check(f"{n} bitwise repeat (live {live})", same_bits(torch, again, out),
                              "two calls, the same bits")
                except PeerError as e:
                    r.update({"status": e.status, "message": str(e)})
                    print(f"  ---- {n} (live {live}): {e.status}: {e}")
            else:
                print(f"  ---- {n} (live {live}): {p.status}: {p.message}")
            rows.append(r)
        receipt["lives"].append({"live": live, "fp8": fp8_info, "peers": rows})
    bad = [c for c in checks if not c["ok"]]
    receipt["checks"] = checks
    receipt["result"] = "fail" if bad else "ok"
    print(f"cpu-check: {len(checks) - len(bad)} passed, {len(bad)} failed")
    if args.out:
        write_receipt(args.out, receipt)
    if ctx is not None:
        gem.lib.gem_decode_ctx_destroy(ctx)
    return 1 if bad else 0


# ---- arguments -----------------------------------------------------------------------------

def parse_lives(text):
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        mult = 1
        if part.endswith("k"):
            mult, part = 1024, part[:-1]
        try:
            n = int(part) * mult
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a live length: {part!r}") from None
        if n < 1 or n > (1 << 24):
            raise argparse.ArgumentTypeError(f"live {n} outside 1 .. {1 << 24}")
        out.append(n)
    if not out:
        raise argparse.ArgumentTypeError("no live length given")
    return out


def parse_peers(text):
    names = [p.strip() for p in text.split(",") if p.strip()]
    for n in names:
        if n not in ALL_PEERS:
            raise argparse.ArgumentTypeError(f"unknown peer {n!r} (known: {', '.join(ALL_PEERS)})")
    if not names:
        raise argparse.ArgumentTypeError("no peer given")
    return list(dict.fromkeys(names))


def positive(kind):
    def f(text):
        try:
            x = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if x <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0: {text}")
        return x
    return f


def non_negative(kind):
    def f(text):
        try:
            x = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if x < 0:
            raise argparse.ArgumentTypeError(f"must be >= 0: {text}")
        return x
    return f


class Parser(argparse.ArgumentParser):
    def error(self, message):
        die(f"{message} (see --help)", 2)


def build_parser():
    ap = Parser(prog="decode_peers.py", description=__doc__.split("\n\n")[0],
                epilog="See scripts/peers/README.md for the FlashInfer carry folder and the "
                       "device command.", formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", metavar="PATH", help="libgem.so with the CUDA backend (the "
                    "gem rows are skipped without it)")
    ap.add_argument("--out", metavar="PATH", help="JSON receipt (schema gem.peers.v1); "
                    "required unless --cpu-check")
    ap.add_argument("--live", type=parse_lives, default=None, metavar="N,N,...",
                    help=f"live lengths, 'k' = 1024 (default {DEFAULT_LIVE}; "
                         f"--cpu-check: {CPU_DEFAULT_LIVE})")
    ap.add_argument("--peers", type=parse_peers, default=list(ALL_PEERS), metavar="P,P,...",
                    help=f"peers to run (default all: {','.join(ALL_PEERS)})")
    ap.add_argument("--no-flashinfer", action="store_true",
                    help="skip the FlashInfer rows (reported as skipped)")
    ap.add_argument("--warmup", type=non_negative(int), default=10, metavar="N",
                    help="untimed calls per peer and live length (default 10)")
    ap.add_argument("--iters", type=positive(int), default=20, metavar="N",
                    help="timed calls per peer per round (default 20)")
    ap.add_argument("--rounds", type=positive(int), default=5, metavar="N",
                    help="rounds over the peers, order reversed every other one (default 5)")
    ap.add_argument("--page-size", type=positive(int), default=16, metavar="N",
                    help="FlashInfer paged KV page size in tokens (default 16)")
    ap.add_argument("--bw-gib", type=positive(float), default=4.0, metavar="GIB",
                    help="size of the read-bandwidth sum, at least 4 (default 4)")
    ap.add_argument("--bw-reps", type=positive(int), default=10, metavar="N",
                    help="timed sums before and after the peers (default 10)")
    ap.add_argument("--flush-mib", type=non_negative(int), default=256, metavar="MIB",
                    help="L2 flush read before each timed call, 0 = none (default 256)")
    ap.add_argument("--lead-us", type=non_negative(float), default=200.0, metavar="US",
                    help="GPU spin queued before each timed call (default 200)")
    ap.add_argument("--q-gain", type=positive(float), default=1.0, metavar="G",
                    help="q ~ N(0,1) * G: larger is a more peaked softmax (default 1)")
    ap.add_argument("--seed", type=non_negative(int), default=1, metavar="N",
                    help="input seed (default 1)")
    ap.add_argument("--cpu-check", action="store_true",
                    help="no GPU: reference, torch and gem's CPU backend at tiny lengths")
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.live is None:
        args.live = parse_lives(CPU_DEFAULT_LIVE if args.cpu_check else DEFAULT_LIVE)
    try:
        import torch  # noqa: F401, PLC0415
    except Exception as e:  # noqa: BLE001
        die(f"torch is not importable: {one_line(e)}", 2)
    try:
        if args.cpu_check:
            if max(args.live) > 4096:
                die("--cpu-check takes live lengths up to 4096", 2)
            return run_cpu_check(args)
        if not args.out:
            die("--out PATH is required (the JSON receipt)", 2)
        if args.bw_gib < 4:
            die("--bw-gib must be at least 4 (the sum must dwarf the L2)", 2)
        return run_gpu(args)
    except UsageError as e:
        die(str(e), 2)


if __name__ == "__main__":
    sys.exit(main())
