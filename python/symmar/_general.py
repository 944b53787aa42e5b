"""Comm.all_reduce's general path: any buffer kind, dtype overrides, forced algorithms, op avg,
explicit streams. Every check runs before the collective, so a refused call leaves the comm as it
was on every rank that refused it."""
import sys

from . import _buffers
from . import _lib as L
from . import _runtime as R
from ._args import ALGOS, AVG, DTYPE_NAMES, OPS, int_arg, name_arg, op_arg


def dtype_label(code):
    return DTYPE_NAMES.get(code, str(code))


def resolve_input(self, x, algo, dtype, stream):
    """The checks every collective's general path starts with: (algorithm code, stream as an int or
    None, x's Buf on this comm's device)."""
    algov = name_arg(algo, ALGOS, "algo")
    if stream is not None:
        stream = int_arg(stream, "stream", 0)
    if R._torch is None and "torch" in sys.modules:
        R.enable_torch(sys.modules["torch"])
    xb = _buffers.resolve(x, dtype, "x", stream)
    check_device(self, xb, "x")
    return algov, stream, xb


def check_output(x, xb, ob, opv, stream):
    """The checks on the output every collective's general path ends with; returns the stream to
    use (a torch tensor's current stream where none was given)."""
    if not ob.writable:
        raise ValueError("out is read-only")
    if opv == AVG:
        _buffers.check_avg(ob)
    if stream is None and xb.device >= 0 and R._torch is not None and isinstance(x, R._Tensor):
        stream = R._raw_stream(xb.device)
    return stream


def all_reduce(self, x, out, op, algo, dtype, stream):
    """Comm.all_reduce for every call the fast path does not take: checks and explains."""
    opv = op_arg(op)
    algov, stream, xb = resolve_input(self, x, algo, dtype, stream)
    if out is None:
        out = _buffers.allocate_like(x, xb)
        ob = _buffers.resolve(out, dtype, "out", stream)
    elif out is x:
        ob = xb
    else:
        ob = _buffers.resolve(out, dtype, "out", stream)
        check_device(self, ob, "out")
        if ob.code != xb.code:
            raise ValueError("out has dtype %s but x %s" % (dtype_label(ob.code), dtype_label(xb.code)))
        if ob.shape != xb.shape:
            raise ValueError("out has shape %s but x %s" % (ob.shape, xb.shape))
    stream = check_output(x, xb, ob, opv, stream)
    handle = self._live()
    lib_op = OPS["sum"] if opv == AVG else opv
    if algov == ALGOS["auto"]:
        res = R._AR(xb.ptr, ob.ptr, xb.count, xb.code, lib_op, handle, stream or None)
    else:
        res = L.lib().symmarAllReduceAlgo(xb.ptr, ob.ptr, xb.count, xb.code, lib_op, algov, handle, stream or None)
    if res:
        self._fail(res)
    if opv == AVG:
        _buffers.divide(out, ob, self._nranks)
    return out

def check_device(self, buf, what):
    if self._host and buf.device != _buffers.HOST:
        raise ValueError("%s is device memory but this comm uses the host backend (device='cpu')" % what)
    if not self._host:
        if buf.device == _buffers.HOST:
            raise ValueError("%s is host memory: it needs a host-backend comm (device='cpu')" % what)
        if buf.device >= 0 and self._device >= 0 and buf.device != self._device:
            raise ValueError("%s is on cuda:%d but this comm on cuda:%d" % (what, buf.device, self._device))
