"""Comm.all_reduce_add_rms_norm: the fused allreduce + residual add + RMSNorm (+ FP8 E4M3 output)
that ends a decoder block in tensor parallelism (symmarAllReduceAddRmsNorm). Every check runs
before the collective, so a refused call leaves the comm as it was."""
import ctypes
import math
import numbers
import sys

from . import _buffers
from . import _general
from . import _lib as L
from . import _runtime as R
from ._args import ALGOS, DTYPES, int_arg, name_arg
from ._general import dtype_label

try:
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is a dependency
    _np = None

FUSED_DTYPES = tuple(DTYPES[n] for n in ("float32", "float16", "bfloat16"))
FUSED_ALGOS = {n: ALGOS[n] for n in ("auto", "oneshot", "twoshot", "lamport")}
_TORCH_BYTE_NAMES = ("uint8", "float8_e4m3fn")


def _float_arg(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s must be a number, not %s" % (what, type(value).__name__))
    return float(value)


def _fp8_buf(q, what="fp8_out"):
    """A writable, dense one-byte buffer: a uint8 NumPy array, or a uint8/float8_e4m3fn tensor."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(q, torch.Tensor):
        name = str(q.dtype).replace("torch.", "")
        if name not in _TORCH_BYTE_NAMES:
            raise ValueError("%s has dtype %s (expected uint8 or float8_e4m3fn)" % (what, name))
        if not q.is_contiguous():
            raise ValueError("%s must be contiguous (use .contiguous())" % what)
        device = q.get_device() if q.is_cuda else _buffers.HOST
        return _buffers.Buf(q.data_ptr(), q.numel(), -1, device, True, q.shape, q)
    if _np is not None and isinstance(q, _np.ndarray):
        if q.dtype != _np.uint8:
            raise ValueError("%s has dtype %s (expected uint8: the E4M3 bit patterns)" % (what, q.dtype))
        if not q.flags.c_contiguous:
            raise ValueError("%s must be C-contiguous (use numpy.ascontiguousarray)" % what)
        return _buffers.Buf(q.ctypes.data, q.size, -1, _buffers.HOST, bool(q.flags.writeable), q.shape, q)
    raise TypeError("%s must be a uint8 NumPy array or a uint8/float8_e4m3fn torch tensor, not %s"
                    % (what, type(q).__name__))


def _fp8_like(x, xb):
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return torch.empty(tuple(x.shape), dtype=torch.uint8, device=x.device)
    if xb.device != _buffers.HOST:
        raise ValueError("pass fp8_out= for a device buffer of type %s" % type(x).__name__)
    return _np.empty(xb.shape, _np.uint8)


def _like(self, buf, xb, what, dtype, stream):
    """Resolves an output or residual: x's dtype and shape, x's device kind."""
    b = _buffers.resolve(buf, dtype, what, stream)
    _general.check_device(self, b, what)
    if b.code != xb.code:
        raise ValueError("%s has dtype %s but x %s" % (what, dtype_label(b.code), dtype_label(xb.code)))
    if b.shape != xb.shape:
        raise ValueError("%s has shape %s but x %s" % (what, b.shape, xb.shape))
    return b


def all_reduce_add_rms_norm(self, x, gamma, eps=1e-6, residual=None, residual_out=None, norm_out=None,
                            fp8_out=None, fp8_scale=None, algo="auto", dtype=None, stream=None):
    """Fused allreduce + residual add + RMSNorm across the ranks, one collective call:

        residual_out = allreduce_sum(x) + residual                 (residual None: + 0)
        norm_out     = residual_out * rsqrt(mean(residual_out**2, last axis) + eps) * gamma
        fp8          = E4M3(norm / fp8_scale)                       (only with fp8_scale)

    x: this rank's partial output [tokens, hidden] (any leading shape; the last axis is hidden),
    float32, float16 or bfloat16 (a NumPy uint16 array holds bf16 bits: pass dtype="bfloat16").
    gamma: [hidden] of the same dtype. The sum and the row statistics are fp32; every rank gets
    the same bits. residual_out and norm_out: None (new arrays/tensors like x) or buffers like x;
    residual_out may be x or residual (in place), norm_out may be x or residual but not
    residual_out. fp8_scale > 0 asks for the FP8 output (fp8_out: None for a new uint8 array/tensor
    like x, or a uint8 / torch.float8_e4m3fn buffer of x's shape): codes rounded to nearest even,
    saturated at +-448. algo: "auto", "oneshot", "twoshot" or "lamport" (GPU comms with peer access,
    rows of whole 16-byte vectors, at most 256 KiB a call). stream: as in all_reduce.

    Returns (residual_out, norm_out), or (residual_out, norm_out, fp8) with fp8_scale.
    """
    algov = name_arg(algo, ALGOS, "algo")
    if algov not in FUSED_ALGOS.values():
        raise ValueError("the fused call runs algo 'auto', 'oneshot', 'twoshot' or 'lamport', not %r" % algo)
    eps = _float_arg(eps, "eps")
    if not (eps >= 0 and math.isfinite(eps)):
        raise ValueError("eps must be finite and >= 0, got %r" % eps)
    if fp8_scale is None:
        if fp8_out is not None:
            raise ValueError("fp8_out needs fp8_scale (the per-tensor scale the norm is divided by)")
    else:
        fp8_scale = _float_arg(fp8_scale, "fp8_scale")
        if not (fp8_scale > 0 and math.isfinite(fp8_scale)):
            raise ValueError("fp8_scale must be finite and > 0, got %r" % fp8_scale)
    if stream is not None:
        stream = int_arg(stream, "stream", 0)
    if R._torch is None and "torch" in sys.modules:
        R.enable_torch(sys.modules["torch"])

    xb = _buffers.resolve(x, dtype, "x", stream)
    _general.check_device(self, xb, "x")
    if xb.code not in FUSED_DTYPES:
        raise ValueError("x has dtype %s: the fused norm takes float32, float16 and bfloat16" % dtype_label(xb.code))
    if len(xb.shape) < 1:
        raise ValueError("x must have a hidden axis ([tokens, hidden]), got shape %s" % (xb.shape,))
    hidden = int(xb.shape[-1])
    tokens = 1
    for d in xb.shape[:-1]:
        tokens *= int(d)
    if hidden == 0 and tokens:
        raise ValueError("x has shape %s: hidden (the last axis) is 0" % (xb.shape,))

    gb = _buffers.resolve(gamma, dtype, "gamma", stream)
    _general.check_device(self, gb, "gamma")
    if gb.code != xb.code:
        raise ValueError("gamma has dtype %s but x %s" % (dtype_label(gb.code), dtype_label(xb.code)))
    if tuple(gb.shape) != (hidden,):
        raise ValueError("gamma has shape %s but x's hidden axis is %d: expected (%d,)" % (gb.shape, hidden, hidden))

    rb = _like(self, residual, xb, "residual", dtype, stream) if residual is not None else None
    if residual_out is not None and norm_out is not None and residual_out is norm_out:
        raise ValueError("norm_out must not be residual_out (they may be x or residual, one each)")
    outs = []
    for out, what in ((residual_out, "residual_out"), (norm_out, "norm_out")):
        if out is None:
            out = _buffers.allocate_like(x, xb)
            ob = _buffers.resolve(out, dtype, what, stream)
        elif out is x:
            ob = xb
        elif residual is not None and out is residual:
            ob = rb
        else:
            ob = _like(self, out, xb, what, dtype, stream)
        if not ob.writable:
            raise ValueError("%s is read-only" % what)
        outs.append((out, ob))
    (res_out, rob), (nrm_out, nob) = outs

    qb = None
    if fp8_scale is not None:
        if fp8_out is None:
            fp8_out = _fp8_like(x, xb)
        qb = _fp8_buf(fp8_out)
        _general.check_device(self, qb, "fp8_out")
        if tuple(qb.shape) != tuple(xb.shape):
            raise ValueError("fp8_out has shape %s but x %s" % (tuple(qb.shape), xb.shape))
        if not qb.writable:
            raise ValueError("fp8_out is read-only")

    if stream is None and xb.device >= 0 and R._torch is not None and isinstance(x, R._Tensor):
        stream = R._raw_stream(xb.device)
    args = L.AddRmsNormArgs(xb.ptr, rb.ptr if rb else None, rob.ptr, nob.ptr, gb.ptr, qb.ptr if qb else None,
                            fp8_scale or 0.0, eps, tokens, hidden, xb.code)
    handle = self._live()
    lib = L.lib()
    if algov == ALGOS["auto"]:
        res = lib.symmarAllReduceAddRmsNorm(ctypes.byref(args), handle, stream or None)
    else:
        res = lib.symmarAllReduceAddRmsNormAlgo(ctypes.byref(args), algov, handle, stream or None)
    if res:
        self._fail(res)
    return (res_out, nrm_out) if qb is None else (res_out, nrm_out, fp8_out)
