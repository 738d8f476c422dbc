"""The caller's arrays, borrowed in place: the address, shape and strides of any object that
exports the buffer protocol (numpy arrays, array.array, memoryview) or DLPack (torch, JAX,
CuPy, numpy), never a copy. A borrowed array is held (its buffer or its DLPack capsule) until
the call that reads it has returned."""

import ctypes
import sys

# Py_buffer (the stable ABI's layout) and the two calls of the buffer protocol
_ssize_p = ctypes.POINTER(ctypes.c_ssize_t)


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p),
                ("len", ctypes.c_ssize_t), ("itemsize", ctypes.c_ssize_t),
                ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", _ssize_p), ("strides", _ssize_p),
                ("suboffsets", _ssize_p), ("internal", ctypes.c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None
_PyBUF_WRITABLE = 0x0001
_PyBUF_RECORDS_RO = 0x0004 | 0x0008 | 0x0010  # format, shape, strides

_get_capsule = ctypes.pythonapi.PyCapsule_GetPointer
_get_capsule.argtypes = [ctypes.py_object, ctypes.c_char_p]
_get_capsule.restype = ctypes.c_void_p


# DLPack (dlpack.h, the unversioned DLManagedTensor every producer exports by default)
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_DL_CPU, _DL_CUDA, _DL_CUDA_HOST = 1, 2, 3
_DL_DEVICE_NAMES = {1: "host", 3: "host (CUDA pinned)", 2: "CUDA", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 10: "ROCm", 13: "CUDA managed",
                    14: "oneAPI"}
# (type code, bits) -> element kind: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4,
# kDLFloat8_e4m3fn 10
_DL_KINDS = {(2, 32): "f32", (2, 16): "f16", (4, 16): "bf16", (10, 8): "fp8", (2, 64): "f64",
             (1, 16): "u16", (1, 8): "u8", (0, 16): "i16", (0, 8): "i8", (0, 32): "i32"}
# struct-module format characters (after a byte-order mark) -> element kind
_FORMAT_KINDS = {"f": "f32", "e": "f16", "d": "f64", "H": "u16", "B": "u8", "h": "i16",
                 "b": "i8", "i": "i32"}
# numpy's typestr (after the byte order) -> element kind
_TYPESTR_KINDS = {"f4": "f32", "f2": "f16", "f8": "f64", "u2": "u16", "u1": "u8", "i2": "i16",
                  "i1": "i8", "i4": "i32"}
# numpy dtypes of ml_dtypes by name -> element kind
_ML_DTYPES_KINDS = {"bfloat16": "bf16", "float8_e4m3fn": "fp8"}
_KIND_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "fp8": "float8_e4m3fn",
               "f64": "float64",
               "u16": "uint16", "u8": "uint8", "i16": "int16", "i8": "int8", "i32": "int32"}


class Array:
    """A caller's array in place: `ptr` its first element's address, `shape`, `strides` in
    elements (non-negative), `kind` ("f32", "f16", "bf16", "u16", "u8", ...), `itemsize` in
    bytes, `readonly` (False where the protocol cannot tell)."""

    __slots__ = ("name", "ptr", "shape", "strides", "kind", "itemsize", "readonly")

    def __init__(self, name, ptr, shape, strides, kind, itemsize, readonly):
        self.name, self.ptr, self.shape, self.strides = name, ptr, shape, strides
        self.kind, self.itemsize, self.readonly = kind, itemsize, readonly

    def type_name(self):
        """The element type as numpy would name it ("float32", ...)."""
        return _KIND_NAMES.get(self.kind, self.kind)

    def contiguous(self):
        """Row-major with no gaps (dimensions of size 1 may have any stride)."""
        want = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != want:
                return False
            want *= n
        return True


def _c_strides(shape):
    """The element strides of a row-major array with no gaps."""
    strides, want = [], 1
    for d in reversed(shape):
        strides.insert(0, want)
        want *= d
    return tuple(strides)


def _byte_strides_to_elements(name, byte_strides, itemsize):
    out = []
    for s in byte_strides:
        if s < 0:
            raise ValueError(f"{name} has a negative stride; pass a view with non-negative "
                             "strides")
        if s % itemsize:
            raise ValueError(f"{name} has a stride of {s} bytes, not a multiple of its "
                             f"{itemsize}-byte elements")
        out.append(s // itemsize)
    return tuple(out)


def _from_array_interface(obj, ai, name, writable):
    """numpy's array interface (version 3): the quickest of the three ways (a dict, no C
    calls); the array itself is held by the caller's reference for the call."""
    ptr, readonly = ai["data"]
    if writable and readonly:
        raise ValueError(f"{name} is read-only; gem writes its output there")
    typestr = ai["typestr"]
    order, code = typestr[0], typestr[1:]
    if order == ">" or (order == "<" and sys.byteorder != "little"):
        raise ValueError(f"{name} holds big-endian elements; gem reads the machine's order")
    kind = _TYPESTR_KINDS.get(code)
    if kind is None:  # ml_dtypes' types (JAX's numpy arrays) are void in the array interface
        kind = _ML_DTYPES_KINDS.get(getattr(getattr(obj, "dtype", None), "name", None),
                                    f"typestr {typestr!r}")
    itemsize = int(code[1:]) if code[1:].isdigit() else 1
    shape = tuple(ai["shape"])
    strides = ai.get("strides")
    strides = (_c_strides(shape) if strides is None
               else _byte_strides_to_elements(name, strides, itemsize))
    return Array(name, ptr or 0, shape, strides, kind, itemsize, bool(readonly))


class Borrowed:
    """Arrays held for one call (or a bound step's life): `take` borrows one, leaving the
    `with` block lets them all go."""

    def __init__(self):
        self._buffers = []
        self._capsules = []
        self._objects = []  # the arrays themselves, alive while borrowed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for b in self._buffers:
            _release_buffer(ctypes.byref(b))
        self._buffers.clear()
        self._capsules.clear()  # an unconsumed capsule's destructor calls the deleter
        self._objects.clear()
        return False

    def take(self, obj, name, writable=False, cuda_device=None, stream=None):
        """The Array of obj. Host memory (cuda_device None): numpy's array interface, else the
        buffer protocol, else DLPack. Device memory (cuda_device, the ordinal of the CUDA
        device the caller runs on): DLPack, the producer asked to make obj ready on `stream`
        (a cudaStream_t as an int, 0 for the legacy default stream). TypeError when obj has
        none of these, ValueError when it is in the wrong memory or cannot be written."""
        self._objects.append(obj)
        if cuda_device is not None:
            return self._take_device(obj, name, cuda_device, stream)
        ai = getattr(obj, "__array_interface__", None)
        if ai is not None and isinstance(ai.get("data"), tuple) and ai.get("mask") is None:
            return _from_array_interface(obj, ai, name, writable)
        try:
            memoryview(obj).release()
            has_buffer = True
        except (TypeError, BufferError):  # none, or none for this element type (JAX's bf16)
            has_buffer = False
        if has_buffer:
            return self._take_buffer(obj, name, writable)
        if hasattr(obj, "__dlpack__"):
            return self._take_dlpack(obj, name)
        raise TypeError(f"{name}: a {type(obj).__name__} is neither a buffer (numpy, array.array, "
                        "memoryview) nor a DLPack tensor (torch, JAX, CuPy)")

    def _take_buffer(self, obj, name, writable):
        b = _PyBuffer()
        try:
            flags = _PyBUF_RECORDS_RO | (_PyBUF_WRITABLE if writable else 0)
            _get_buffer(obj, ctypes.byref(b), flags)
        except BufferError as e:
            if writable:
                raise ValueError(f"{name} is read-only; gem writes its output there") from e
            raise ValueError(f"{name}: {e}") from e
        self._buffers.append(b)
        fmt = (b.format or b"B").decode()
        order = fmt[0] if fmt[:1] in "@=<>!" else "@"
        code = fmt[1:] if fmt[:1] in "@=<>!" else fmt
        if order in ">!" or (order == "<" and sys.byteorder != "little"):
            raise ValueError(f"{name} holds big-endian elements; gem reads the machine's order")
        kind = _FORMAT_KINDS.get(code, f"format {fmt!r}")
        shape = tuple(b.shape[i] for i in range(b.ndim)) if b.ndim else ()
        if b.strides:
            strides = _byte_strides_to_elements(name, [b.strides[i] for i in range(b.ndim)],
                                                b.itemsize)
        else:
            strides = _c_strides(shape)
        if b.suboffsets:
            raise ValueError(f"{name} is an indirect (suboffset) buffer")
        return Array(name, b.buf or 0, shape, strides, kind, b.itemsize, bool(b.readonly))

    def _take_device(self, obj, name, ordinal, stream):
        if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
            raise ValueError(f"{name} is in host memory (a {type(obj).__name__}); a CUDA Decoder "
                             "reads device memory: pass a DLPack tensor on the GPU (torch, CuPy, "
                             "JAX)")
        dev_type, dev_id = (int(x) for x in obj.__dlpack_device__())
        if (dev_type, dev_id) != (_DL_CUDA, ordinal):
            where = _DL_DEVICE_NAMES.get(dev_type, f"DLPack device type {dev_type}")
            raise ValueError(f"{name} is in {where} memory (device {dev_id}); this Decoder runs on "
                             f"CUDA device {ordinal}")
        # DLPack's stream argument on CUDA: None for the legacy default stream, else the handle
        return self._take_dlpack(obj, name, (_DL_CUDA,), stream=stream or None)

    def _take_dlpack(self, obj, name, memory=(_DL_CPU, _DL_CUDA_HOST), stream=None):
        if hasattr(obj, "__dlpack_device__") and memory != (_DL_CUDA,):
            dev_type, dev_id = obj.__dlpack_device__()
            if int(dev_type) not in memory:
                where = _DL_DEVICE_NAMES.get(int(dev_type), f"DLPack device type {int(dev_type)}")
                raise ValueError(f"{name} is in {where} memory (device {int(dev_id)}); a CPU "
                                 "Decoder reads host memory (Decoder(backend='cuda') reads the "
                                 "GPU's)")
        capsule = obj.__dlpack__() if stream is None else obj.__dlpack__(stream=stream)
        self._capsules.append(capsule)
        addr = _get_capsule(capsule, b"dltensor")
        t = _DLManagedTensor.from_address(addr).dl_tensor
        if t.device.device_type not in memory:
            raise ValueError(f"{name} is not in the memory this Decoder reads (DLPack device "
                             f"type {t.device.device_type})")
        if t.dtype.lanes != 1:
            raise ValueError(f"{name} has vector elements ({t.dtype.lanes} lanes)")
        kind = _DL_KINDS.get((t.dtype.code, t.dtype.bits),
                             f"DLPack type code {t.dtype.code} of {t.dtype.bits} bits")
        itemsize = max(1, t.dtype.bits // 8)
        shape = tuple(int(t.shape[i]) for i in range(t.ndim))
        if t.strides:
            strides = tuple(int(t.strides[i]) for i in range(t.ndim))
            if any(s < 0 for s in strides):
                raise ValueError(f"{name} has a negative stride; pass a view with non-negative "
                                 "strides")
        else:  # a producer may leave them out for a row-major tensor
            strides = _c_strides(shape)
        ptr = (t.data or 0) + t.byte_offset
        return Array(name, ptr, shape, strides, kind, itemsize, False)
