"""libgem through ctypes: the library, its structures and the signatures of the functions the
package calls (include/gem/attn.h and include/gem/decode.h; the fields below are theirs, in
their order)."""

import ctypes
import glob
import os


GEM_OK = 0

# gem_dtype, gem_route, gem_backend (attn.h)
DTYPES = {"f32": 0, "bf16": 1, "f16": 2, "fp8_e4m3": 3}
ROUTES = {"baseline": 2, "fused": 3}
ROUTE_NAMES = {2: "baseline", 3: "fused"}
BACKENDS = {"cpu": 0, "cuda": 1}

WORKSPACE_ALIGN = 64  # GEM_DECODE_WORKSPACE_ALIGN


class DecodeShape(ctypes.Structure):
    _fields_ = [("n_q_heads", ctypes.c_int64), ("n_kv_heads", ctypes.c_int64),
                ("dk", ctypes.c_int64), ("dv", ctypes.c_int64), ("scale", ctypes.c_float)]


class KFromV(ctypes.Structure):
    _fields_ = [("k_weight", ctypes.c_void_p), ("inv_freq", ctypes.POINTER(ctypes.c_double)),
                ("n_pairs", ctypes.c_int64), ("half", ctypes.c_int64), ("pos0", ctypes.c_int64)]


class KVView(ctypes.Structure):
    _fields_ = [("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("k_dtype", ctypes.c_int), ("v_dtype", ctypes.c_int),
                ("k_head_stride", ctypes.c_int64), ("k_token_stride", ctypes.c_int64),
                ("v_head_stride", ctypes.c_int64), ("v_token_stride", ctypes.c_int64),
                ("live", ctypes.c_int64), ("capacity", ctypes.c_int64),
                ("k_from_v", ctypes.POINTER(KFromV)),
                ("k_scale", ctypes.POINTER(ctypes.c_float)),
                ("v_scale", ctypes.POINTER(ctypes.c_float))]


class DecodeConfig(ctypes.Structure):
    _fields_ = [("route", ctypes.c_int), ("partitions", ctypes.c_int64), ("tile", ctypes.c_int64)]


class KVCacheDesc(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("n_kv_heads", ctypes.c_int64),
                ("dk", ctypes.c_int64), ("dv", ctypes.c_int64), ("capacity", ctypes.c_int64),
                ("k_dtype", ctypes.c_int), ("v_dtype", ctypes.c_int), ("ring", ctypes.c_int)]


def _library_path():
    """GEM_LIBRARY when set (a libgem.so of a build tree), else the libgem.so installed with
    the package."""
    path = os.environ.get("GEM_LIBRARY")
    if path:
        if not os.path.isfile(path):
            raise ImportError(f"gem: GEM_LIBRARY={path!r} is not a file")
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "libgem.so*")))
    if not found:
        raise ImportError(
            f"gem: no libgem.so in {here}: install the package with `pip install .` from the "
            "repository root, or set GEM_LIBRARY to the libgem.so of a build")
    return found[0]


def _declare(lib):
    P = ctypes.POINTER
    vp = ctypes.c_void_p
    sigs = {
        "gem_status_str": (ctypes.c_char_p, [ctypes.c_int]),
        "gem_status_name": (ctypes.c_char_p, [ctypes.c_int]),
        "gem_decode_ctx_create": (ctypes.c_int, [ctypes.c_int, ctypes.c_int64, P(vp)]),
        "gem_decode_ctx_destroy": (None, [vp]),
        "gem_decode_ctx_threads": (ctypes.c_int64, [vp]),
        "gem_decode_ctx_device": (ctypes.c_int, [vp]),
        "gem_decode_workspace_alloc": (ctypes.c_int, [vp, ctypes.c_size_t, P(vp)]),
        "gem_decode_workspace_free": (None, [vp, vp]),
        "gem_decode_ctx_describe": (ctypes.c_char_p, [vp]),
        "gem_decode_config_for_view": (ctypes.c_int,
                                       [vp, P(DecodeShape), P(KVView), P(DecodeConfig)]),
        "gem_decode_workspace_bytes": (ctypes.c_int, [vp, P(DecodeShape), ctypes.c_int64,
                                                      P(DecodeConfig), P(ctypes.c_size_t)]),
        "gem_decode": (ctypes.c_int, [vp, P(DecodeShape), vp, P(KVView), vp, vp, ctypes.c_size_t,
                                      P(DecodeConfig), vp]),
        "gem_decode_check_finite": (ctypes.c_int, [vp, P(DecodeShape), vp, P(KVView), vp]),
        "gem_decode_state": (ctypes.c_int, [vp, P(DecodeShape), vp, P(KVView), vp, vp,
                                            ctypes.c_size_t, P(DecodeConfig), vp]),
        "gem_decode_merge": (ctypes.c_int, [vp, P(DecodeShape), vp, ctypes.c_int64, vp, vp]),
        "gem_attn_reference_kv": (ctypes.c_int, [P(DecodeShape), vp, P(KVView), vp,
                                                 ctypes.c_size_t]),
        "gem_kv_cache_create": (ctypes.c_int, [P(KVCacheDesc), P(vp)]),
        "gem_kv_cache_destroy": (None, [vp]),
        "gem_kv_cache_append": (ctypes.c_int, [vp, vp, vp, ctypes.c_int64, vp]),
        "gem_kv_cache_view": (ctypes.c_int, [vp, P(KVView)]),
        "gem_kv_cache_live": (ctypes.c_int64, [vp]),
        "gem_kv_cache_appended": (ctypes.c_int64, [vp]),
        "gem_kv_cache_reset": (ctypes.c_int, [vp, vp]),
        "gem_kv_cache_check": (ctypes.c_int, [vp, vp]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


lib = ctypes.CDLL(_library_path())
_declare(lib)
_model_lib = None


def model_lib():
    """libgemmodel.so (the Gemma 4 model harness), from the directory libgem.so came from;
    loaded on first use."""
    global _model_lib
    if _model_lib is None:
        path = os.path.join(os.path.dirname(lib._name), "libgemmodel.so")
        if not os.path.isfile(path):
            raise ImportError(f"gem: no libgemmodel.so beside {lib._name} (the model harness is "
                              "built with libgem: pip install ., or a CMake build's directory)")
        _model_lib = ctypes.CDLL(path)
    return _model_lib


def status_text(code):
    """libgem's one-line description of a status."""
    return lib.gem_status_str(int(code)).decode()


class GemError(RuntimeError):
    """A status other than GEM_OK from libgem. `status` is its stable name ("shape",
    "align", "overlap", ...: gem_status_name), `code` its number; the message says which call
    failed and why: the call's own line where it writes one (the model's loader), else libgem's
    description of the status."""

    def __init__(self, call, code, detail=None):
        self.code = int(code)
        self.status = lib.gem_status_name(self.code).decode()
        why = detail or status_text(self.code)
        super().__init__(f"{call}: {why} ({self.status})")


class Closable:
    """A context manager whose exit, and whose collection, call close(); `_h` is the libgem
    handle, None once closed."""

    def _handle(self):
        if not self._h:
            raise ValueError(f"the {type(self).__name__} is closed")
        return self._h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # half made, or the interpreter is shutting down and libgem is gone
            pass


def check(call, code, detail=None):
    if code != GEM_OK:
        raise GemError(call, code, detail)
