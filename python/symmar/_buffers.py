"""What a buffer argument is: its address, element count, dtype, device and writability.

Accepted: NumPy arrays, torch tensors, and any object with __cuda_array_interface__,
__array_interface__, DLPack (__dlpack__ / __dlpack_device__) or the buffer protocol. Nothing is
ever copied: a buffer that is not dense row-major, not in native byte order or of an unsupported
dtype is refused with ValueError (a copy would make out= silently miss the result). Comm.all_reduce
has its own fast path for plain NumPy arrays and torch tensors; this module is the general one.
"""
import ctypes
import sys

from ._args import DTYPE_NAMES, DTYPES, ITEMSIZE, dtype_name

try:
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is a dependency
    _np = None

_BF16 = DTYPES["bfloat16"]
_INT32 = DTYPES["int32"]
# Codes whose op "avg" cannot be divided in place on the host: NumPy has no bfloat16, and an int32
# buffer cannot hold a mean.
_NO_HOST_AVG = (_BF16, _INT32)

HOST = -1
CUDA_UNKNOWN = -3  # a CUDA buffer whose ordinal the interface does not say (__cuda_array_interface__)


class Buf:
    """One resolved buffer. device: HOST, a CUDA ordinal or CUDA_UNKNOWN. keep: what must stay
    alive while the library uses ptr (a DLPack capsule, the object itself)."""

    __slots__ = ("ptr", "count", "code", "device", "writable", "shape", "keep")

    def __init__(self, ptr, count, code, device, writable, shape, keep):
        self.ptr, self.count, self.code, self.device = ptr, count, code, device
        self.writable, self.shape, self.keep = writable, tuple(shape), keep


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _dense(shape, strides, itemsize):
    """strides (in bytes; None = row-major) describe a dense row-major layout of shape."""
    if strides is None or _numel(shape) == 0:
        return True
    expected = itemsize
    for dim, stride in zip(reversed(tuple(shape)), reversed(tuple(strides))):
        if dim != 1 and stride != expected:
            return False
        expected *= dim
    return True


def _code_for(name, itemsize, kind, override, what):
    """A library dtype code for an element type (numpy-style name, itemsize, kind letter), with an
    optional dtype= override (a 2-byte integer read as bf16)."""
    if override is None:
        if name in DTYPES:
            return DTYPES[name]
        if name in ("uint16", "int16"):
            raise ValueError("%s has dtype %s: pass dtype='bfloat16' to read it as bf16" % (what, name))
        raise ValueError("%s has unsupported dtype %s (expected one of %s)" % (what, name, ", ".join(DTYPES)))
    want = dtype_name(override)
    if want == "bfloat16":
        ok = itemsize == 2 and (kind in "ui" or name == "bfloat16")
    else:
        ok = name == want
    if not ok:
        raise ValueError("dtype=%r does not match %s of %s" % (override, what, name))
    return DTYPES[want]


def numpy_buf(x, override, what):
    xd = x.dtype
    if not xd.isnative:
        raise ValueError("%s has non-native byte order %s" % (what, xd))
    code = _code_for(xd.name, xd.itemsize, xd.kind, override, what)
    if not x.flags.c_contiguous:
        raise ValueError("%s must be C-contiguous (use numpy.ascontiguousarray)" % what)
    return Buf(x.ctypes.data, x.size, code, HOST, bool(x.flags.writeable), x.shape, x)


_TORCH_NAMES = {}


def torch_buf(torch, x, override, what):
    if not _TORCH_NAMES:
        _TORCH_NAMES.update({torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                             torch.int32: "int32", torch.float64: "float64", torch.int16: "int16",
                             torch.uint16: "uint16"} if hasattr(torch, "uint16") else
                            {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                             torch.int32: "int32", torch.float64: "float64", torch.int16: "int16"})
    name = _TORCH_NAMES.get(x.dtype, str(x.dtype).replace("torch.", ""))
    kind = "f" if x.is_floating_point() else ("u" if name.startswith("uint") else "i")
    code = _code_for(name, x.element_size(), kind, override, what)
    if not x.is_contiguous():
        raise ValueError("%s must be contiguous (use .contiguous())" % what)
    if x.is_neg() or x.is_conj():
        raise ValueError("%s is a lazily negated/conjugated view: materialise it (.resolve_neg())" % what)
    if x.is_cuda:
        device = x.get_device()
    elif x.device.type == "cpu":
        device = HOST
    else:
        raise ValueError("%s is on %s: symmar takes cpu and cuda tensors" % (what, x.device))
    return Buf(x.data_ptr(), x.numel(), code, device, True, x.shape, x)


def _typestr_buf(iface, override, what, device, obj):
    """__array_interface__ / __cuda_array_interface__ (version 3) dicts."""
    dt = _np.dtype(iface["typestr"])
    if not dt.isnative and dt.itemsize > 1:
        raise ValueError("%s has non-native byte order %s" % (what, iface["typestr"]))
    code = _code_for(dt.name, dt.itemsize, dt.kind, override, what)
    shape = tuple(iface["shape"])
    if not _dense(shape, iface.get("strides"), dt.itemsize):
        raise ValueError("%s is not dense row-major (strides %s)" % (what, iface.get("strides")))
    data = iface.get("data")
    if not isinstance(data, tuple):
        return None  # the data is in a buffer object: the buffer protocol path reads it
    ptr, readonly = data
    return Buf(int(ptr) + int(iface.get("offset", 0) or 0), _numel(shape), code, device, not readonly, shape, obj)


# ---- DLPack ----

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_DL_READ_ONLY, _DL_IS_COPIED = 1, 2
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
# (type code, bits) -> numpy-style name; kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4
_DL_NAMES = {(2, 32): "float32", (2, 16): "float16", (4, 16): "bfloat16", (0, 32): "int32", (2, 64): "float64",
             (0, 16): "int16", (1, 16): "uint16"}

_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dlpack_buf(obj, override, what, stream):
    dev_type, dev_id = (int(v) for v in obj.__dlpack_device__())
    kwargs = {"stream": stream} if dev_type in (_DL_CUDA, _DL_CUDA_MANAGED) and stream is not None else {}
    try:
        capsule = obj.__dlpack__(max_version=(1, 0), **kwargs)
    except TypeError:  # a producer older than DLPack 1.0
        capsule = obj.__dlpack__(**kwargs)
    flags = 0
    # The capsule is not renamed "used_...": its own destructor calls the producer's deleter once
    # the capsule (kept in Buf.keep until the call returns) is collected.
    if _capsule_valid(capsule, b"dltensor_versioned"):
        managed = _DLManagedTensorVersioned.from_address(_capsule_pointer(capsule, b"dltensor_versioned"))
        flags = managed.flags
    elif _capsule_valid(capsule, b"dltensor"):
        managed = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    else:
        raise TypeError("%s.__dlpack__() returned %r, not a DLPack capsule" % (what, capsule))
    t = managed.dl_tensor
    if t.dtype.lanes != 1 or (t.dtype.code, t.dtype.bits) not in _DL_NAMES:
        raise ValueError("%s has an unsupported DLPack dtype (code %d, %d bits, %d lanes)"
                         % (what, t.dtype.code, t.dtype.bits, t.dtype.lanes))
    name = _DL_NAMES[(t.dtype.code, t.dtype.bits)]
    itemsize = t.dtype.bits // 8
    code = _code_for(name, itemsize, {0: "i", 1: "u"}.get(t.dtype.code, "f"), override, what)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = None if not t.strides else tuple(t.strides[i] * itemsize for i in range(t.ndim))
    if not _dense(shape, strides, itemsize):
        raise ValueError("%s is not dense row-major (DLPack strides %s)" % (what, strides))
    if dev_type in (_DL_CPU, _DL_CUDA_HOST):
        device = HOST
    elif dev_type in (_DL_CUDA, _DL_CUDA_MANAGED):
        device = dev_id
    else:
        raise ValueError("%s is on DLPack device type %d: symmar takes host and CUDA memory" % (what, dev_type))
    writable = not (flags & (_DL_READ_ONLY | _DL_IS_COPIED))
    return Buf((t.data or 0) + t.byte_offset, _numel(shape), code, device, writable, shape, (obj, capsule))


def resolve(x, override=None, what="x", stream=None):
    """Any supported buffer -> Buf. TypeError for objects that are not buffers at all."""
    if _np is not None and isinstance(x, _np.ndarray):
        return numpy_buf(x, override, what)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return torch_buf(torch, x, override, what)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        buf = _typestr_buf(cai, override, what, CUDA_UNKNOWN, x)
        if buf is not None:
            return buf
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        return _dlpack_buf(x, override, what, stream)
    iface = getattr(x, "__array_interface__", None)
    if iface is not None:
        buf = _typestr_buf(iface, override, what, HOST, x)
        if buf is not None:
            return buf
    try:
        view = memoryview(x)
    except TypeError:
        raise TypeError("%s must be a NumPy array, a torch tensor or an object with the buffer protocol, "
                        "__array_interface__, __cuda_array_interface__ or __dlpack__; got %s"
                        % (what, type(x).__name__)) from None
    # numpy reads the PEP 3118 format and shares the memory (never copies a buffer-protocol object)
    arr = _np.asarray(view)
    buf = numpy_buf(arr, override, what)
    buf.writable = not view.readonly
    buf.keep = (x, view, arr)
    return buf


def allocate_like(x, buf):
    """A new output for out=None: a NumPy array for NumPy and other host buffers (bf16 as uint16
    bit patterns where NumPy has no bf16), a torch tensor for a tensor."""
    return allocate(x, buf, None)


def allocate(x, buf, shape):
    """As allocate_like, in another shape (None: x's)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if shape is None:
            return torch.empty_like(x, memory_format=torch.contiguous_format)
        return torch.empty(shape, dtype=x.dtype, device=x.device)
    if _np is not None and isinstance(x, _np.ndarray):
        return _np.empty(x.shape if shape is None else shape, x.dtype)
    if buf.device != HOST:
        raise ValueError("pass out= for a device buffer of type %s (symmar allocates only NumPy arrays and torch "
                         "tensors)" % type(x).__name__)
    # bfloat16 as its bit patterns: NumPy has no bfloat16
    return _np.empty(buf.shape if shape is None else shape, "uint16" if buf.code == _BF16 else DTYPE_NAMES[buf.code])


def divide(out, buf, n):
    """out /= n in out's own dtype (op "avg" = a sum, then this)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(out, torch.Tensor):
        out.div_(n)
        return
    if buf.device != HOST or buf.code in _NO_HOST_AVG:
        raise ValueError("op 'avg' needs a float NumPy-readable host buffer or a torch tensor")
    view = _np.frombuffer((ctypes.c_char * (buf.count * ITEMSIZE[buf.code])).from_address(buf.ptr),
                          DTYPE_NAMES[buf.code])
    _np.divide(view, view.dtype.type(n), out=view)


def check_avg(buf):
    """Refuses op 'avg' before any collective where the division could not be done afterwards."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(buf.keep, torch.Tensor):
        if buf.code == _INT32:
            raise ValueError("op 'avg' needs a floating-point tensor")
        return
    if buf.device != HOST or buf.code in _NO_HOST_AVG:
        raise ValueError("op 'avg' needs a float32/float16/float64 host buffer or a torch tensor")
