"""gem: exact long-context decode attention on the caller's KV cache.

One decode step: for every query head h (KV head g = h // (n_q_heads // n_kv_heads))

    out[h] = softmax_t(scale * q[h] . K[g, t]) @ V[g, t]    over the live rows t

with F32 accumulation, a fixed reduction order (the same bits on every call and for any
number of threads) and the cache read in place: gem borrows the caller's arrays (numpy,
torch, JAX, array.array, anything with the buffer protocol or DLPack) and copies nothing.

    import gem, numpy as np
    dec = gem.Decoder()                         # the CPU backend, one thread per core
    out = dec.decode(q, k, v)                   # q (n_q_heads, dk), k/v (n_kv_heads, capacity, d)

K and V are indexed (KV head, token, element) with any non-negative strides and unit stride
along the element: a head-major cache (n_kv_heads, capacity, d) as it is, a token-major one
(capacity, n_kv_heads, d) as its transposed view (`k.transpose(1, 0, 2)`, no copy). Elements
in float32, float16 or bfloat16 (torch's bfloat16 through DLPack, or uint16 bits with
k_dtype="bf16"), or FP8 E4M3 codes (uint8) with a scale per KV head. The package drives libgem's
CPU backend (include/gem/decode.h); docs/python.md in the repository describes it whole.
"""

import array
import ctypes
import math
import threading
import weakref

from . import _capi
from ._arrays import _KIND_NAMES, Borrowed
from ._capi import Closable, GemError, check

__version__ = "0.1.0"
__all__ = ["Decoder", "BoundStep", "KVCache", "KFromV", "GemError", "reference", "Model",
           "Session", "synth", "__version__"]

try:  # numpy is optional: with it the outputs gem allocates are numpy arrays
    import numpy as _np
except ImportError:  # pragma: no cover - exercised where numpy is absent
    _np = None

_STORAGE = {"f32": ("f32",), "f16": ("f16", "u16"), "bf16": ("bf16", "u16"),
            "fp8_e4m3": ("fp8", "u8")}


def _dtype_name(a, given, field):
    """The gem element type of array a: its own float type, or `given` for raw bits."""
    if given is not None:
        if given not in _STORAGE:
            raise ValueError(f"{field}={given!r}: one of {', '.join(_STORAGE)}")
        if a.kind not in _STORAGE[given]:
            raise ValueError(f"{a.name} holds {a.type_name()} elements, which cannot be read as "
                             f"{given} ({field} takes "
                             f"{' or '.join(_KIND_NAMES[x] for x in _STORAGE[given])} arrays)")
        return given
    if a.kind in ("f32", "f16", "bf16"):
        return a.kind
    if a.kind == "fp8":
        return "fp8_e4m3"
    if a.kind == "u16":
        raise ValueError(f"{a.name} holds uint16: say {field}='bf16' or 'f16' for the bits it "
                         "holds")
    if a.kind == "u8":
        raise ValueError(f"{a.name} holds uint8: say {field}='fp8_e4m3' for FP8 E4M3 codes")
    raise ValueError(f"{a.name} holds {a.type_name()} elements; gem reads float32, float16, "
                     "bfloat16 "
                     "and FP8 E4M3 caches")


def _cache_tensor(a, d_name):
    if len(a.shape) != 3:
        raise ValueError(f"{a.name} must be 3-D (n_kv_heads, capacity, {d_name}), not of shape "
                         f"{a.shape}")
    if a.shape[2] > 1 and a.strides[2] != 1:
        raise ValueError(f"{a.name} must have unit stride along its last dimension "
                         f"(strides {a.strides} elements)")
    if 0 in a.shape:
        raise ValueError(f"{a.name} is empty (shape {a.shape})")


def _scales(values, n, field):
    if values is None:
        return None
    vals = [float(x) for x in values]
    if len(vals) != n:
        raise ValueError(f"{field} holds {len(vals)} scales; the cache has {n} KV heads")
    return (ctypes.c_float * n)(*vals)


class KFromV:
    """K rebuilt from V (Gemma 4's full layers, where K = V before the norms):
    K(g, t, i) = RoPE_{pos0 + t}(k_weight * V(g, t))(i), elements j and j + half rotating by
    (pos0 + t) * inv_freq[j] for j < len(inv_freq) (NeoX pairing), the rest passing through.
    The cache then holds V alone: pass it as `v` and no `k`. k_weight: (dk,) float32,
    contiguous; inv_freq: up to `half` finite frequencies >= 0."""

    def __init__(self, k_weight, inv_freq, half, pos0=0):
        self.k_weight = k_weight
        self.inv_freq = [float(x) for x in inv_freq]
        self.half = int(half)
        self.pos0 = int(pos0)

    def __repr__(self):
        return (f"KFromV(n_pairs={len(self.inv_freq)}, half={self.half}, pos0={self.pos0})")


class KVCache(Closable):
    """A head-major cache in memory libgem owns, for callers without a cache of their own:
    rows appended as float32 in token order and stored as `k_dtype` / `v_dtype` ("f32",
    "bf16" or "f16", rounded to nearest even). ring=True keeps the last `capacity` rows (a
    sliding window). backend="cuda" keeps it in the memory of the CUDA device current at
    creation, and its appends take device tensors. Pass it to Decoder.decode as `cache=`."""

    def __init__(self, n_kv_heads, dk, capacity, *, dv=None, dtype="f32", k_dtype=None,
                 v_dtype=None, ring=False, backend="cpu"):
        if backend not in ("cpu", "cuda"):
            raise ValueError(f"backend={backend!r}: 'cpu' or 'cuda'")
        k_dtype = k_dtype or dtype
        v_dtype = v_dtype or dtype
        for field, t in (("k_dtype", k_dtype), ("v_dtype", v_dtype)):
            if t not in ("f32", "bf16", "f16"):
                raise ValueError(f"{field}={t!r}: the cache stores f32, bf16 or f16")
        self.backend, self.cuda_device = backend, None
        if backend == "cuda":  # the device it lands on, which appends must come from
            with Decoder(backend="cuda") as probe:
                self.cuda_device = probe.cuda_device
        desc = _capi.KVCacheDesc(backend=_capi.BACKENDS[backend], n_kv_heads=int(n_kv_heads),
                                 dk=int(dk), dv=int(dk if dv is None else dv),
                                 capacity=int(capacity), k_dtype=_capi.DTYPES[k_dtype],
                                 v_dtype=_capi.DTYPES[v_dtype], ring=1 if ring else 0)
        handle = ctypes.c_void_p()
        check("gem_kv_cache_create",
              _capi.lib.gem_kv_cache_create(ctypes.byref(desc), ctypes.byref(handle)))
        self._h = handle
        self.n_kv_heads, self.dk, self.dv = desc.n_kv_heads, desc.dk, desc.dv
        self.capacity, self.k_dtype, self.v_dtype = desc.capacity, k_dtype, v_dtype
        self.ring = bool(ring)
        self._lock = threading.Lock()

    def append(self, k, v, stream=None):
        """Appends n tokens: k (n, n_kv_heads, dk) and v (n, n_kv_heads, dv) float32,
        row-major (as a projection writes them; (n_kv_heads, d) for one token). Raises
        GemError "range" when the rows do not fit a cache that is not a ring. CPU: GemError
        "nonfinite" for NaN, infinity or a value the cache's type cannot hold (nothing is
        written). CUDA: device tensors, the copy queued on `stream` (as for decode); a
        non-finite row is recorded for check()."""
        handle = _stream_handle(stream, self.cuda_device is not None)
        with Borrowed() as b, self._lock:
            ka = b.take(k, "k", cuda_device=self.cuda_device, stream=handle)
            va = b.take(v, "v", cuda_device=self.cuda_device, stream=handle)
            n = None
            for a, d in ((ka, self.dk), (va, self.dv)):
                shape = a.shape if len(a.shape) == 3 else (1,) + a.shape
                if len(shape) != 3 or shape[1:] != (self.n_kv_heads, d):
                    raise ValueError(f"{a.name} must be (n, {self.n_kv_heads}, {d}), not of shape "
                                     f"{a.shape}")
                if a.kind != "f32" or not a.contiguous():
                    raise ValueError(f"{a.name} must be float32 and row-major (it is "
                                     f"{a.type_name()}, "
                                     f"strides {a.strides})")
                if n is not None and shape[0] != n:
                    raise ValueError(f"k holds {n} tokens and v {shape[0]}")
                n = shape[0]
            if n < 1:
                raise ValueError("append takes at least one token")
            check("gem_kv_cache_append",
                  _capi.lib.gem_kv_cache_append(self._handle(), ka.ptr, va.ptr, n, handle or None))

    @property
    def live(self):
        """Rows that take part: min(appended, capacity) for a ring."""
        return int(_capi.lib.gem_kv_cache_live(self._handle()))

    @property
    def appended(self):
        """Rows appended since creation or the last reset (a ring keeps the last capacity)."""
        return int(_capi.lib.gem_kv_cache_appended(self._handle()))

    def reset(self, stream=None):
        """Forgets every row (and the non-finite record)."""
        handle = _stream_handle(stream, self.cuda_device is not None)
        with self._lock:
            check("gem_kv_cache_reset",
                  _capi.lib.gem_kv_cache_reset(self._handle(), handle or None))

    def check(self, stream=None):
        """True when every row appended since creation or the last reset was finite (CUDA:
        waits for `stream`)."""
        handle = _stream_handle(stream, self.cuda_device is not None)
        st = _capi.lib.gem_kv_cache_check(self._handle(), handle or None)
        if st == _capi.GEM_OK:
            return True
        if _capi.lib.gem_status_name(st).decode() == "nonfinite":
            return False
        raise GemError("gem_kv_cache_check", st)

    def _view(self):
        view = _capi.KVView()
        check("gem_kv_cache_view", _capi.lib.gem_kv_cache_view(self._handle(), ctypes.byref(view)))
        return view

    def close(self):
        """Frees the cache's memory; a step bound to it answers "closed" afterwards."""
        if self._h:
            _capi.lib.gem_kv_cache_destroy(self._h)
            self._h = None

    def __repr__(self):
        state = f"live={self.live}" if self._h else "closed"
        return (f"KVCache(n_kv_heads={self.n_kv_heads}, dk={self.dk}, dv={self.dv}, "
                f"capacity={self.capacity}, k_dtype={self.k_dtype!r}, v_dtype={self.v_dtype!r}, "
                f"ring={self.ring}, backend={self.backend!r}, {state})")


class _Call:
    """The C arguments of one step, built from the caller's arrays (borrowed by `b`)."""

    def __init__(self, b, q, k, v, cache, scale, live, k_dtype, v_dtype, k_scale, v_scale,
                 k_from_v, bound=False, cuda_device=None, stream=0):
        self.cuda_device, self.stream = cuda_device, stream

        def take(obj, name, writable=False):
            return b.take(obj, name, writable, cuda_device, stream)
        self.take = take
        qa = take(q, "q")
        if len(qa.shape) != 2 or qa.kind != "f32" or not qa.contiguous():
            raise ValueError(f"q must be a row-major float32 (n_q_heads, dk) array (it is "
                             f"{qa.type_name()} of shape {qa.shape}, strides {qa.strides})")
        n_q_heads, dk = qa.shape
        self.q = qa
        self.keep = []
        if cache is not None:
            if any(x is not None for x in (k, v, live, k_dtype, v_dtype, k_scale, v_scale,
                                           k_from_v)):
                raise ValueError("with cache=, pass no k, v, live, dtypes, scales or k_from_v: "
                                 "the cache describes itself")
            if cache.backend != ("cpu" if cuda_device is None else "cuda"):
                raise ValueError(f"the cache is in {cache.backend} memory and the Decoder runs "
                                 f"on the {'CPU' if cuda_device is None else 'GPU'}")
            if cache.live >= 1:
                self.view = cache._view()
            elif bound:  # a bound step reads the cache's view at each call
                self.view = _capi.KVView()
            else:
                raise ValueError("the cache holds no rows yet")
            n_kv_heads, kd, dv = cache.n_kv_heads, cache.dk, cache.dv
            self.keep.append(cache)
        else:
            if v is None:
                raise ValueError("decode needs v (and k, unless k_from_v rebuilds it)")
            va = take(v, "v")
            _cache_tensor(va, "dv")
            n_kv_heads, capacity, dv = va.shape
            v_t = _dtype_name(va, v_dtype, "v_dtype")
            view = _capi.KVView(v=va.ptr, v_dtype=_capi.DTYPES[v_t],
                                v_head_stride=va.strides[0], v_token_stride=va.strides[1],
                                capacity=capacity)
            if k_from_v is not None:
                if k is not None:
                    raise ValueError("with k_from_v the cache holds V alone: pass no k")
                if k_scale is not None:
                    raise ValueError("with k_from_v, K takes V's scales: pass no k_scale")
                if k_dtype is not None and k_dtype != v_t:
                    raise ValueError("with k_from_v, K has V's type")
                kd = dv
                view.k_dtype = view.v_dtype
                wa = take(k_from_v.k_weight, "k_from_v.k_weight")
                if wa.shape != (dv,) or wa.kind != "f32" or not wa.contiguous():
                    raise ValueError(f"k_from_v.k_weight must be a contiguous float32 ({dv},) "
                                     f"array (it is {wa.type_name()} of shape {wa.shape})")
                freqs = (ctypes.c_double * max(1, len(k_from_v.inv_freq)))(*k_from_v.inv_freq)
                kfv = _capi.KFromV(k_weight=wa.ptr, inv_freq=freqs,
                                   n_pairs=len(k_from_v.inv_freq), half=k_from_v.half,
                                   pos0=k_from_v.pos0)
                self.keep += [freqs, kfv]
                view.k_from_v = ctypes.pointer(kfv)
            else:
                if k is None:
                    raise ValueError("decode needs k (or k_from_v, which rebuilds K from v)")
                ka = take(k, "k")
                _cache_tensor(ka, "dk")
                if ka.shape[:2] != (n_kv_heads, capacity):
                    raise ValueError(f"k is {ka.shape} and v {va.shape}: they need the same KV "
                                     "heads and capacity")
                kd = ka.shape[2]
                view.k = ka.ptr
                view.k_dtype = _capi.DTYPES[_dtype_name(ka, k_dtype, "k_dtype")]
                view.k_head_stride, view.k_token_stride = ka.strides[0], ka.strides[1]
            live = capacity if live is None else int(live)
            if not 1 <= live <= capacity:
                raise ValueError(f"live={live}: between 1 and the cache's capacity {capacity}")
            view.live = live
            for field, values, which in (("k_scale", k_scale, "k"), ("v_scale", v_scale, "v")):
                arr = _scales(values, n_kv_heads, field)
                if arr is not None:
                    self.keep.append(arr)
                    setattr(view, field, ctypes.cast(arr, ctypes.POINTER(ctypes.c_float)))
            self.view = view
        if kd != dk:
            raise ValueError(f"q has {dk} elements a head and K {kd}")
        if n_kv_heads < 1 or n_q_heads % n_kv_heads:
            raise ValueError(f"{n_q_heads} query heads cannot share {n_kv_heads} KV heads evenly")
        scale = 1.0 / math.sqrt(dk) if scale is None else float(scale)
        if not math.isfinite(scale):
            raise ValueError(f"scale={scale}: a finite number")
        self.shape = _capi.DecodeShape(n_q_heads=n_q_heads, n_kv_heads=n_kv_heads, dk=dk, dv=dv,
                                       scale=scale)
        self.n_out = n_q_heads * dv

    def output(self, b, out, kind, code):
        """The caller's out (checked), or a new (n_q_heads, dv) array of `kind` ("f32", "f64")
        in host memory."""
        n_q_heads, dv = self.shape.n_q_heads, self.shape.dv
        if out is None and self.cuda_device is not None:
            raise ValueError(f"on CUDA pass out=: a float32 ({n_q_heads}, {dv}) tensor on GPU "
                             f"{self.cuda_device} (gem allocates no device arrays)")
        if out is None:
            if _np is not None:
                out = _np.empty((n_q_heads, dv),
                                dtype=_np.float32 if kind == "f32" else _np.float64)
            else:
                out = array.array(code, bytes(self.n_out * (4 if kind == "f32" else 8)))
        oa = self.take(out, "out", writable=True)
        if (oa.kind != kind or not oa.contiguous()
                or oa.shape not in ((n_q_heads, dv), (self.n_out,))):
            want = "float32" if kind == "f32" else "float64"
            raise ValueError(f"out must be a writable row-major {want} array of shape "
                             f"({n_q_heads}, {dv}) or ({self.n_out},) (it is {oa.type_name()} of "
                             f"shape {oa.shape})")
        return out, oa


class _Workspace:
    """Memory from the context's allocator (gem_decode_workspace_alloc: host memory, or device
    memory of the context's GPU), grown on demand; freeing it on CUDA waits for the device."""

    def __init__(self, dec):
        self.dec, self.ptr, self.bytes = dec, None, 0

    def ensure(self, need):
        if need > self.bytes:
            self.release()
            p = ctypes.c_void_p()
            check("gem_decode_workspace_alloc", _capi.lib.gem_decode_workspace_alloc(
                self.dec._handle(), max(1, need), ctypes.byref(p)))
            self.ptr, self.bytes = p.value, need
        return self.ptr, self.bytes

    def release(self):
        if self.ptr:
            _capi.lib.gem_decode_workspace_free(self.dec._h, self.ptr)
            self.ptr, self.bytes = None, 0


def _stream_handle(stream, cuda):
    """The cudaStream_t of `stream` as an int: None (0, the legacy default stream), an int, or
    an object with `cuda_stream` (torch.cuda.Stream) or `ptr` (cupy.cuda.Stream)."""
    if stream is None:
        return 0
    if not cuda:
        raise ValueError("stream= is for a CUDA Decoder; on the CPU a step runs on the "
                         "Decoder's threads and returns when out is written")
    handle = stream
    if not isinstance(handle, int):
        handle = getattr(stream, "cuda_stream", getattr(stream, "ptr", None))
    if not isinstance(handle, int) or handle < 0:
        raise TypeError(f"stream={stream!r}: a cudaStream_t as an int, or a torch or CuPy "
                        "stream")
    return handle


class Decoder(Closable):
    """A decode context. backend="cpu" (the default): a pool of `threads` worker threads (0:
    one per online core); a step returns when out is written. backend="cuda": the CUDA device
    current on the calling thread (threads must be 0); arrays are device tensors passed through
    DLPack and a step is queued on `stream` without waiting. One call at a time runs on a
    context (concurrent calls from several Python threads wait their turn); the GIL is
    released while libgem runs."""

    def __init__(self, threads=0, backend="cpu"):
        if backend not in ("cpu", "cuda"):
            raise ValueError(f"backend={backend!r}: 'cpu' or 'cuda'")
        handle = ctypes.c_void_p()
        check("gem_decode_ctx_create", _capi.lib.gem_decode_ctx_create(
            _capi.BACKENDS[backend], int(threads), ctypes.byref(handle)))
        self._h = handle
        self.backend = backend
        self.cuda_device = (int(_capi.lib.gem_decode_ctx_device(handle))
                            if backend == "cuda" else None)
        self._lock = threading.Lock()
        self._ws = {}  # stream -> _Workspace: steps on one stream are ordered, others are not
        self._steps = weakref.WeakSet()

    def _where(self, stream):
        return {"cuda_device": self.cuda_device,
                "stream": _stream_handle(stream, self.cuda_device is not None)}

    @property
    def threads(self):
        """The pool's worker threads."""
        return int(_capi.lib.gem_decode_ctx_threads(self._handle()))

    @property
    def description(self):
        """One line: the processor, the threads and the kernels ("avx512" or "portable")."""
        return _capi.lib.gem_decode_ctx_describe(self._handle()).decode()

    def _config(self, route, partitions, tile):
        if route is None and not partitions and not tile:
            return None
        name = route or "fused"
        if name not in _capi.ROUTES:
            raise ValueError(f"route={route!r}: 'fused' or 'baseline' (None: the tuned default)")
        return _capi.DecodeConfig(route=_capi.ROUTES[name], partitions=int(partitions),
                                  tile=int(tile))

    def _workspace_bytes(self, shape, live, cfg):
        """gem_decode_workspace_bytes: what a step at `live` rows needs (non-decreasing in live)."""
        need = ctypes.c_size_t()
        check("gem_decode_workspace_bytes", _capi.lib.gem_decode_workspace_bytes(
            self._handle(), ctypes.byref(shape), live, ctypes.byref(cfg) if cfg else None,
            ctypes.byref(need)))
        return need.value

    def _workspace(self, call, cfg):
        ws = self._ws.get(call.stream)
        if ws is None:
            ws = self._ws[call.stream] = _Workspace(self)
        return ws.ensure(self._workspace_bytes(call.shape, call.view.live, cfg))

    def decode(self, q, k=None, v=None, *, scale=None, live=None, out=None, cache=None,
               route=None, partitions=0, tile=0, k_dtype=None, v_dtype=None, k_scale=None,
               v_scale=None, k_from_v=None, stream=None):
        """One decode step; returns out (n_q_heads, dv) float32.

        q        (n_q_heads, dk) float32, row-major
        k, v     (n_kv_heads, capacity, dk / dv) in place, any non-negative strides with unit
                 stride along the last dimension; k and v may be the same array
        scale    the scores' factor; None: 1 / sqrt(dk) (Gemma 4 takes 1.0)
        live     rows [0, live) take part (None: all capacity rows)
        out      where to write (a row-major float32 array of n_q_heads * dv elements); None:
                 a new numpy array (array.array('f') without numpy)
        cache    a KVCache instead of k, v and live
        route    None (the tuned default for the shape and live length), "fused" or
                 "baseline"; partitions and tile (0: the tuned value) are used as given or
                 refused, never adjusted
        k_dtype, v_dtype   for arrays of raw bits: "bf16" or "f16" (uint16), "fp8_e4m3" (uint8)
        k_scale, v_scale   FP8 E4M3 tensors' scale per KV head (n_kv_heads floats)
        k_from_v a KFromV: K rebuilt from V, the cache holding V alone
        stream   CUDA: where the step is queued (None: the legacy default stream; an int
                 cudaStream_t, a torch.cuda.Stream or a cupy.cuda.Stream); the arrays' producers
                 are asked (DLPack) to make them ready on it, and out is valid once the stream
                 reaches the step. out is required on CUDA.

        Raises ValueError / TypeError for arrays of the wrong shape, type or kind, and
        GemError for what libgem refuses (status "align", "overlap", "param", "nonfinite" for
        a NaN or infinity behind a score, "score" for a score that overflows float, ...);
        out is then not (or only partly) written."""
        with Borrowed() as b:
            call = _Call(b, q, k, v, cache, scale, live, k_dtype, v_dtype, k_scale, v_scale,
                         k_from_v, **self._where(stream))
            out, oa = call.output(b, out, "f32", "f")
            cfg = self._config(route, partitions, tile)
            with self._lock:
                ws, ws_bytes = self._workspace(call, cfg)
                check("gem_decode", _capi.lib.gem_decode(
                    self._handle(), ctypes.byref(call.shape), call.q.ptr, ctypes.byref(call.view),
                    oa.ptr, ws, ws_bytes, ctypes.byref(cfg) if cfg else None,
                    call.stream or None))
        return out

    def state(self, q, k=None, v=None, *, out=None, scale=None, live=None, cache=None,
              partitions=0, tile=0, k_dtype=None, v_dtype=None, k_scale=None, v_scale=None,
              k_from_v=None, stream=None):
        """The attention state of one piece of a cache (gem_decode_state): decode's arguments
        and checks (the fused route), stopping before the division. Returns out, a float32
        array of n_q_heads * (dv + 2) elements: m (n_q_heads), the largest scaled score of the
        piece's rows; s (n_q_heads), the sum of e^(score - m); o (n_q_heads, dv), the sum of
        e^(score - m) V (times V's scale for FP8). `merge` combines the states of pieces into
        the attention over all their rows: a cache in pages, a shared prefix, a long context
        split across GPUs (each GPU its piece, the states copied to one). out: any writable
        contiguous float32 array of that many elements (required on CUDA); None: a new one.
        With K rebuilt from V, the piece's KFromV has pos0 = the position of its first row."""
        with Borrowed() as b:
            call = _Call(b, q, k, v, cache, scale, live, k_dtype, v_dtype, k_scale, v_scale,
                         k_from_v, **self._where(stream))
            n = call.shape.n_q_heads * (call.shape.dv + 2)
            if out is None and call.cuda_device is not None:
                raise ValueError(f"on CUDA pass out=: a float32 tensor of {n} elements on GPU "
                                 f"{call.cuda_device} (gem allocates no device arrays)")
            if out is None:
                out = (_np.empty(n, dtype=_np.float32) if _np is not None
                       else array.array("f", bytes(4 * n)))
            oa = call.take(out, "out", writable=True)
            if oa.kind != "f32" or not oa.contiguous() or math.prod(oa.shape) != n:
                raise ValueError(f"out must be a writable contiguous float32 array of "
                                 f"n_q_heads * (dv + 2) = {n} elements (it is {oa.type_name()} "
                                 f"of shape {oa.shape})")
            cfg = self._config("fused", partitions, tile)
            with self._lock:
                ws, ws_bytes = self._workspace(call, cfg)
                check("gem_decode_state", _capi.lib.gem_decode_state(
                    self._handle(), ctypes.byref(call.shape), call.q.ptr, ctypes.byref(call.view),
                    oa.ptr, ws, ws_bytes, ctypes.byref(cfg), call.stream or None))
        return out

    def merge(self, states, n_q_heads, *, out=None, stream=None):
        """The attention over the union of pieces from their states (gem_decode_merge): states
        is a contiguous float32 array (n, n_q_heads * (dv + 2)) (or one state, 1-D), merged in
        index order; returns out (n_q_heads, dv) float32 (required on CUDA; None: a new array).
        An empty piece's state is m = -inf, s = 0, o = 0. The merge of the one state of a whole
        cache is decode's output, bit for bit. CPU: GemError "state" for an invalid state."""
        n_q_heads = int(n_q_heads)
        cuda = self.cuda_device is not None
        where = self._where(stream)
        with Borrowed() as b:
            sa = b.take(states, "states", False, where["cuda_device"], where["stream"])
            if sa.kind != "f32" or not sa.contiguous() or len(sa.shape) not in (1, 2):
                raise ValueError(f"states must be a contiguous float32 array of one or two "
                                 f"dimensions (it is {sa.type_name()} of shape {sa.shape})")
            n, per = (1, sa.shape[0]) if len(sa.shape) == 1 else sa.shape
            if n_q_heads < 1 or n < 1 or per % n_q_heads or per // n_q_heads < 3:
                raise ValueError(f"states of shape {sa.shape} do not hold states of {n_q_heads} "
                                 "query heads (each n_q_heads * (dv + 2) floats, dv >= 1)")
            dv = per // n_q_heads - 2
            if out is None and cuda:
                raise ValueError(f"on CUDA pass out=: a float32 ({n_q_heads}, {dv}) tensor on "
                                 f"GPU {self.cuda_device} (gem allocates no device arrays)")
            if out is None:
                out = (_np.empty((n_q_heads, dv), dtype=_np.float32) if _np is not None
                       else array.array("f", bytes(4 * n_q_heads * dv)))
            oa = b.take(out, "out", True, where["cuda_device"], where["stream"])
            if (oa.kind != "f32" or not oa.contiguous()
                    or oa.shape not in ((n_q_heads, dv), (n_q_heads * dv,))):
                raise ValueError(f"out must be a writable row-major float32 array of shape "
                                 f"({n_q_heads}, {dv}) (it is {oa.type_name()} of shape "
                                 f"{oa.shape})")
            shape = _capi.DecodeShape(n_q_heads=n_q_heads, n_kv_heads=1, dk=1, dv=dv, scale=1.0)
            with self._lock:
                check("gem_decode_merge", _capi.lib.gem_decode_merge(
                    self._handle(), ctypes.byref(shape), sa.ptr, n, oa.ptr,
                    where["stream"] or None))
        return out

    def bind(self, q, k=None, v=None, *, out=None, scale=None, cache=None, route=None,
             partitions=0, tile=0, k_dtype=None, v_dtype=None, k_scale=None, v_scale=None,
             k_from_v=None, stream=None):
        """A decode step bound to these arrays, for a decode loop: the arrays are borrowed once
        (and held until the step is closed), the C arguments and a workspace for the whole
        capacity are built once, and each call `step(live)` runs gem_decode on what the arrays
        hold then, writing out. Arguments as for decode (no live: each call gives it; with
        cache=, the cache's live rows at the call; on CUDA every step is queued on `stream`,
        with a workspace of its own). About 0.5 us a call of Python against 16 for decode
        (docs/python.md). Close it (or use `with`) to let the arrays go."""
        step = BoundStep(self, q, k, v, out, scale, cache, route, partitions, tile, k_dtype,
                         v_dtype, k_scale, v_scale, k_from_v, stream)
        self._steps.add(step)
        return step

    def plan(self, q, k=None, v=None, *, cache=None, live=None, k_dtype=None, v_dtype=None,
             k_scale=None, v_scale=None, k_from_v=None, stream=None):
        """What decode runs with route=None for these arrays: {"route", "partitions", "tile",
        "workspace_bytes"}."""
        with Borrowed() as b:
            call = _Call(b, q, k, v, cache, None, live, k_dtype, v_dtype, k_scale, v_scale,
                         k_from_v, **self._where(stream))
            cfg = _capi.DecodeConfig()
            check("gem_decode_config_for_view", _capi.lib.gem_decode_config_for_view(
                self._handle(), ctypes.byref(call.shape), ctypes.byref(call.view),
                ctypes.byref(cfg)))
            need = self._workspace_bytes(call.shape, call.view.live, None)
        return {"route": _capi.ROUTE_NAMES.get(cfg.route, str(cfg.route)),
                "partitions": int(cfg.partitions), "tile": int(cfg.tile),
                "workspace_bytes": need}

    def check_finite(self, q, k=None, v=None, *, cache=None, live=None, k_dtype=None,
                     v_dtype=None, k_scale=None, v_scale=None, k_from_v=None, stream=None):
        """True when q and the live rows of K and V hold no NaN or infinity (the scan decode
        leaves out, since it would read the cache twice). CUDA: runs on `stream` and waits."""
        with Borrowed() as b:
            call = _Call(b, q, k, v, cache, None, live, k_dtype, v_dtype, k_scale, v_scale,
                         k_from_v, **self._where(stream))
            st = _capi.lib.gem_decode_check_finite(self._handle(), ctypes.byref(call.shape),
                                                   call.q.ptr, ctypes.byref(call.view),
                                                   call.stream or None)
        if st == _capi.GEM_OK:
            return True
        if _capi.lib.gem_status_name(st).decode() == "nonfinite":
            return False
        raise GemError("gem_decode_check_finite", st)

    def close(self):
        """Closes the steps bound to it, frees the workspaces (on CUDA after the device's
        queued work), joins the worker threads; the context cannot be used afterwards."""
        if self._h:
            for step in list(self._steps):
                step.close()
            for ws in self._ws.values():
                ws.release()
            self._ws.clear()
            _capi.lib.gem_decode_ctx_destroy(self._h)
            self._h = None

    def __repr__(self):
        return f"Decoder({self.description!r})" if self._h else "Decoder(closed)"


class BoundStep(Closable):
    """Decoder.bind's result: call it with the live length for one step (returns out)."""

    def __init__(self, dec, q, k, v, out, scale, cache, route, partitions, tile, k_dtype,
                 v_dtype, k_scale, v_scale, k_from_v, stream):
        self._b = Borrowed()
        self._ws = _Workspace(dec)
        self._open = False
        try:
            call = _Call(self._b, q, k, v, cache, scale, None, k_dtype, v_dtype, k_scale,
                         v_scale, k_from_v, bound=True, **dec._where(stream))
            self.out, oa = call.output(self._b, out, "f32", "f")
            self._cfg = dec._config(route, partitions, tile)
            self.capacity = cache.capacity if cache is not None else call.view.capacity
            ws, need = self._ws.ensure(dec._workspace_bytes(call.shape, self.capacity,
                                                            self._cfg))
        except BaseException:
            self._ws.release()
            self._b.__exit__(None, None, None)
            raise
        self._dec, self._call, self._cache = dec, call, cache
        self._args = [dec._handle(), ctypes.byref(call.shape), call.q.ptr,
                      ctypes.byref(call.view), oa.ptr, ws, need,
                      ctypes.byref(self._cfg) if self._cfg else None, call.stream or None]
        self._open = True

    def __call__(self, live=None):
        """One step over rows [0, live) (None: all capacity rows; with a cache, its live rows;
        a cache takes no live). Returns out."""
        if not self._open:
            raise ValueError("the bound step is closed")
        view = self._call.view
        if self._cache is not None:
            if live is not None:
                raise ValueError("a step bound to a cache takes its live rows from the cache")
            if self._cache.live < 1:
                raise ValueError("the cache holds no rows yet")
            check("gem_kv_cache_view",
                  _capi.lib.gem_kv_cache_view(self._cache._handle(), ctypes.byref(view)))
        elif live is None:
            view.live = self.capacity
        elif 1 <= live <= self.capacity:
            view.live = live
        else:
            raise ValueError(f"live={live}: between 1 and the cache's capacity {self.capacity}")
        with self._dec._lock:
            self._dec._handle()
            check("gem_decode", _capi.lib.gem_decode(*self._args))
        return self.out

    def close(self):
        """Lets the arrays go (their buffers and DLPack capsules) and frees the workspace (on
        CUDA after the device's queued work)."""
        if self._open:
            self._open = False
            self._ws.release()
            self._b.__exit__(None, None, None)


def reference(q, k=None, v=None, *, scale=None, live=None, out=None, cache=None, k_dtype=None,
              v_dtype=None, k_scale=None, v_scale=None, k_from_v=None):
    """The double-precision direct softmax over the same arrays (gem_attn_reference_kv, the
    oracle of every route): (n_q_heads, dv) float64, a new numpy array (array.array('d')
    without numpy) or `out`. Single-threaded and slow; for checking."""
    with Borrowed() as b:
        call = _Call(b, q, k, v, cache, scale, live, k_dtype, v_dtype, k_scale, v_scale,
                     k_from_v)
        out, oa = call.output(b, out, "f64", "d")
        check("gem_attn_reference_kv", _capi.lib.gem_attn_reference_kv(
            ctypes.byref(call.shape), call.q.ptr, ctypes.byref(call.view), oa.ptr, call.n_out))
    return out


from .model import Model, Session, synth  # noqa: E402 (the model harness, libgemmodel.so)
