"""What the tests build on, with the standard library alone: seeded arrays, 16-bit and FP8
encodings written from their definitions, a DLPack producer of their own (so the DLPack path
is tested without numpy or torch) and a float64 attention in plain Python, independent of
libgem."""

import array
import ctypes
import math
import random
import struct


def floats(rng, n, lo=-1.0, hi=1.0):
    """n seeded values in [lo, hi), each exact in float32."""
    a = array.array("f", (rng.uniform(lo, hi) for _ in range(n)))
    return a


def shaped(buf, shape):
    """A C-contiguous memoryview of buf (an array.array of 'f', 'H', 'B' or 'd') with shape."""
    return memoryview(buf).cast("B").cast(buf.typecode, shape)


def bf16_bits(x):
    """float32 x rounded to bfloat16 (nearest even): the 16 bits."""
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def bf16_value(bits):
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def f16_bits(x):
    return struct.unpack("<H", struct.pack("<e", x))[0]


def f16_value(bits):
    return struct.unpack("<e", struct.pack("<H", bits))[0]


def fp8_e4m3_value(code):
    """OCP FP8 E4M3 (E4M3FN): bias 7, no infinities, S.1111.111 NaN."""
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 7
    if e == 15 and m == 7:
        return math.nan
    if e == 0:
        return sign * m * 2.0 ** -9
    return sign * (1 + m / 8) * 2.0 ** (e - 7)


# ---- a DLPack producer (dlpack.h's DLManagedTensor, declared here independently) ----------
class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_new.restype = ctypes.py_object
_DLTENSOR = b"dltensor"  # the capsule's name must outlive it: a module constant

KDL_CPU, KDL_CUDA = 1, 2
KDL_UINT, KDL_FLOAT, KDL_BFLOAT = 1, 2, 4


class DLPackTensor:
    """The memory of an array.array as a DLPack tensor: shape, element strides (None: leave
    them out, row-major), type (code, bits), device type, byte offset. No buffer protocol, so
    gem must take the DLPack path."""

    def __init__(self, buf, shape, strides, code, bits, device_type=KDL_CPU, byte_offset=0):
        self.buf = buf
        nd = len(shape)
        self._shape = (ctypes.c_int64 * nd)(*shape)
        self._strides = None if strides is None else (ctypes.c_int64 * nd)(*strides)
        self._managed = _Managed()
        t = self._managed.dl_tensor
        t.data = buf.buffer_info()[0]
        t.device = _Device(device_type, 0)
        t.ndim = nd
        t.dtype = _DType(code, bits, 1)
        t.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        if self._strides is not None:
            t.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = byte_offset
        self.exports = 0

    def __dlpack__(self, stream=None):
        self.exports += 1
        return _capsule_new(ctypes.addressof(self._managed), _DLTENSOR, None)

    def __dlpack_device__(self):
        return (self._managed.dl_tensor.device.device_type, 0)


# ---- float64 attention in plain Python ------------------------------------------------------
def attention64(q, kget, vget, n_q_heads, n_kv_heads, dk, dv, live, scale):
    """out[h][j] = sum_t w_t V(g, t, j) / sum_t w_t, w_t = exp(s_t - max s), s_t = scale *
    sum_i q[h*dk + i] K(g, t, i), in float64; kget(g, t, i) and vget(g, t, j) give the
    elements (the values the cache stands for)."""
    group = n_q_heads // n_kv_heads
    out = []
    for h in range(n_q_heads):
        g = h // group
        qh = q[h * dk:(h + 1) * dk]
        s = [scale * math.fsum(qh[i] * kget(g, t, i) for i in range(dk)) for t in range(live)]
        m = max(s)
        w = [math.exp(x - m) for x in s]
        den = math.fsum(w)
        out.append([math.fsum(w[t] * vget(g, t, j) for t in range(live)) / den
                    for j in range(dv)])
    return [x for row in out for x in row]


def flat(x):
    """The elements of a row-major array (numpy's or array.array) as a flat list."""
    m = memoryview(x)
    return m.cast("B").cast(m.format.lstrip("<=@")).tolist()


def nmse(got, want):
    got, want = flat(got), flat(want) if not isinstance(want, list) else want
    num = math.fsum((float(a) - b) ** 2 for a, b in zip(got, want))
    den = math.fsum(b * b for b in want)
    return num / den


def head_major(buf, n_kv_heads, capacity, d):
    """(g, t, i) -> buf[(g*capacity + t)*d + i]"""
    return lambda g, t, i: buf[(g * capacity + t) * d + i]


def seeded(seed):
    return random.Random(seed)
