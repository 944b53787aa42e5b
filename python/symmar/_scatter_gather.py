"""Comm.reduce_scatter and Comm.all_gather: the whole buffer holds nranks blocks along its first
dimension (torch's reduce_scatter_tensor / all_gather_into_tensor layout), the per-rank buffer one.
Every check runs before the collective, as for all_reduce."""
from . import _buffers
from . import _lib as L
from ._args import ALGOS, AVG, OPS, op_arg
from ._general import check_device, check_output, dtype_label, resolve_input


def _shape(shape, nranks, scatter):
    """The per-rank shape of a whole buffer (scatter) or the whole shape of a per-rank one."""
    if not shape:
        if scatter:
            raise ValueError("reduce_scatter: x must have a first dimension of nranks blocks, not be a scalar")
        return (nranks,)
    if scatter:
        if shape[0] % nranks:
            raise ValueError("reduce_scatter: x's first dimension (%d) must divide into %d ranks' blocks"
                             % (shape[0], nranks))
        return (shape[0] // nranks,) + tuple(shape[1:])
    return (shape[0] * nranks,) + tuple(shape[1:])


def _run(self, x, out, op, algo, dtype, stream, scatter):
    fn = "reduce_scatter" if scatter else "all_gather"
    opv = op_arg(op) if scatter else OPS["sum"]
    algov, stream, xb = resolve_input(self, x, algo, dtype, stream)
    n = self._nranks
    out_shape = _shape(xb.shape, n, scatter)
    block = xb.count // n if scatter else xb.count
    want = block if scatter else xb.count * n
    if out is None:
        out = _buffers.allocate(x, xb, out_shape)
    ob = _buffers.resolve(out, dtype, "out", stream)
    check_device(self, ob, "out")
    if ob.code != xb.code:
        raise ValueError("%s: out has dtype %s but x %s" % (fn, dtype_label(ob.code), dtype_label(xb.code)))
    if ob.count != want:
        raise ValueError("%s: out has %d elements; %d ranks need %d" % (fn, ob.count, n, want))
    stream = check_output(x, xb, ob, opv, stream)
    handle = self._live()
    lib = L.lib()
    lib_op = OPS["sum"] if opv == AVG else opv
    if scatter:
        if algov == ALGOS["auto"]:
            res = lib.symmarReduceScatter(xb.ptr, ob.ptr, block, xb.code, lib_op, handle, stream or None)
        else:
            res = lib.symmarReduceScatterAlgo(xb.ptr, ob.ptr, block, xb.code, lib_op, algov, handle, stream or None)
    elif algov == ALGOS["auto"]:
        res = lib.symmarAllGather(xb.ptr, ob.ptr, block, xb.code, handle, stream or None)
    else:
        res = lib.symmarAllGatherAlgo(xb.ptr, ob.ptr, block, xb.code, algov, handle, stream or None)
    if res:
        self._fail(res)
    if opv == AVG:
        _buffers.divide(out, ob, n)
    return out


def reduce_scatter(self, x, out=None, op="sum", algo="auto", dtype=None, stream=None):
    """Reduces x across the ranks and returns this rank's block of the result (out, or a new
    array/tensor). x holds nranks blocks along its first dimension (shape[0] divisible by nranks);
    rank r receives the reduction of block r, shaped like one block. out may be x's own block
    (x[r * m:(r + 1) * m]): in place. op, algo, dtype, stream as for all_reduce."""
    return _run(self, x, out, op, algo, dtype, stream, True)


def all_gather(self, x, out=None, algo="auto", dtype=None, stream=None):
    """Gathers every rank's x into one array/tensor (out, or a new one): rank r's x lands as block r
    along the first dimension (a scalar x gives shape (nranks,)). x may be out's own block: in
    place. algo, dtype, stream as for all_reduce."""
    return _run(self, x, out, "sum", algo, dtype, stream, False)
