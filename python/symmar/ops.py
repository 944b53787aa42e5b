"""symmar's collectives as torch custom ops, so that torch.compile(fullgraph=True) traces through them
(imported by symmar.torch; importing either registers the ops):

    h = symmar.ops.handle(comm)                        # an int that names the comm inside a graph
    torch.ops.symmar.all_reduce_(x, h)                 # in place; op="sum"|"max"|"min"|"avg"
    torch.ops.symmar.all_reduce_sum_(x, h)             # in place, the sum: no op argument
    y = torch.ops.symmar.all_reduce(x, h, "max")       # out of place
    res, norm = torch.ops.symmar.all_reduce_add_rms_norm(x, gamma, residual, h, 1e-6)
    torch.ops.symmar.all_reduce_add_rms_norm_(x, residual, gamma, h, 1e-6)  # residual, x = res, norm
    y = torch.ops.symmar.reduce_scatter(x, h)          # this rank's block (dim 0 split in nranks)
    y = torch.ops.symmar.reduce_scatter_sum(x, h)      # the same, the sum: no op argument
    y = torch.ops.symmar.all_gather(x, h)              # every rank's x, stacked along dim 0
    took = torch.ops.symmar.try_all_reduce_(x, h)      # in place where set_taken_spans allows; a bool
                                                       # (libsymmar_torch only; eager callers only)

A graph cannot hold a Comm object, so the ops take an int handle and look the comm up here. The
registry holds comms weakly: a handle never keeps a comm alive, and a handle whose comm was
collected raises ValueError. A closed comm raises the binding's own SymmarError (comm is closed).
The ops call Comm.all_reduce_ / all_reduce / all_reduce_add_rms_norm, so every check on the
tensors stays in the binding; the fake implementations give shapes and dtypes only.

Where the build made libsymmar_torch (a Python with torch at build time), every op has a compiled
kernel: a dense tensor of a symmar dtype on the comm's device, op sum/max/min, goes to
symmarAllReduce, symmarAllGather or symmarReduceScatter without entering Python, and
all_reduce_add_rms_norm's and all_reduce_add_rms_norm_'s dense float32/float16/bfloat16 operands
(algo "auto") to symmarAllReduceAddRmsNorm; every other call goes on to the Python kernels below. SYMMAR_TORCH_OPS=python keeps the Python kernels. ops.compiled says which.
"""
import ctypes
import itertools
import logging
import os
import threading
import weakref

try:
    import torch
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("symmar.ops needs PyTorch (pip install torch)") from e

from . import _args
from . import _core
from . import _lib as L

_log = logging.getLogger("symmar")

_lock = threading.Lock()  # ranks may be threads of one process, each registering its comm
_next = itertools.count(1)  # 0 is never a handle: a zeroed int does not name a comm by accident
_comms = {}  # handle -> weakref to the Comm
_handles = weakref.WeakKeyDictionary()  # Comm -> its handle, so handle(comm) is stable


def handle(comm):
    """The int that names comm in torch.ops.symmar calls (the same int on every call for one comm).
    Registering does not keep the comm alive."""
    if not isinstance(comm, _core.Comm):
        raise TypeError("handle() takes a symmar.Comm, not %s" % type(comm).__name__)
    with _lock:
        h = _handles.get(comm)
        if h is None:
            h = next(_next)

            def forget(_ref, h=h):
                with _lock:
                    _comms.pop(h, None)

            _comms[h] = weakref.ref(comm, forget)
            _handles[comm] = h
            if _compiled is not None and not comm.closed:
                _compiled.symmarTorchBindComm(h, comm.handle, comm._device)
                _core.on_close(comm, lambda h=h: _compiled.symmarTorchUnbindComm(h))
        return h


def comm_of(h):
    """The Comm registered under handle h; ValueError for a handle that names none (never made by
    handle(), or its comm was garbage-collected)."""
    ref = _comms.get(h)
    comm = ref() if ref is not None else None
    if comm is None:
        raise ValueError("symmar op: no comm has handle %r (make one with symmar.ops.handle(comm) and keep the "
                         "comm alive while graphs use it)" % (h,))
    return comm


def _built_against(folder):
    """The torch version libsymmar_torch in folder was built against (its .torch-version file beside
    it), or None where the file is missing or unreadable."""
    try:
        with open(os.path.join(folder, "libsymmar_torch.torch-version")) as f:
            return f.read().strip() or None
    except OSError:
        return None


def _load_compiled(folder=None):
    """libsymmar_torch from folder (default: beside the loaded libsymmar), or None (not built, not
    wanted, or built against another torch: then the Python kernels serve, and the reason is logged
    once). It is loaded only under the torch it was built against: torch's C++ ABI changes between
    releases, and a library built for another one can load and then corrupt memory."""
    if os.environ.get("SYMMAR_TORCH_OPS", "compiled") == "python":
        return None
    folder = os.path.dirname(L.library_path()) if folder is None else folder
    path = os.path.join(folder, "libsymmar_torch.so")
    if not folder or not os.path.exists(path):
        return None
    built = _built_against(folder)
    if built != torch.__version__:
        _log.warning("symmar: %s was built against torch %s, this process runs torch %s: torch.ops.symmar uses "
                     "its Python kernels (rebuild symmar against this torch for the compiled ones)",
                     path, built or "(unknown: no libsymmar_torch.torch-version beside it)", torch.__version__)
        return None
    try:
        torch.ops.load_library(path)  # registers the CPU and CUDA kernels of the compiled ops
        compiled = ctypes.CDLL(path)
    except (OSError, RuntimeError) as e:
        _log.warning("symmar: %s does not load (%s); torch.ops.symmar uses its Python kernels", path, e)
        return None
    compiled.symmarTorchBindComm.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64]
    compiled.symmarTorchBindComm.restype = None
    compiled.symmarTorchUnbindComm.argtypes = [ctypes.c_int64]
    compiled.symmarTorchUnbindComm.restype = None
    compiled.symmarTorchSetSpan.argtypes = [ctypes.c_int64] * 4
    compiled.symmarTorchSetSpan.restype = None
    return compiled


# The ops are defined with Library.define and kernels for the CPU and CUDA keys, not with
# torch.library.custom_op: custom_op wraps every call in Python-level autograd and version-counter
# handling, about 25 us per eager call here against under 5 us for this route
# (python/benchmarks/op_overhead.py), several times the allreduce of a small tensor. There is no
# autograd kernel: a backward through an op gets torch's "not registered" warning and no gradient.
# The schemas spell `int comm`, so dynamo keeps the handle as a constant of the graph.
_lib = torch.library.Library("symmar", "FRAGMENT")
_increment_version = torch.autograd.graph.increment_version
_compiled = _load_compiled()
compiled = _compiled is not None  # whether the allreduce and gather ops run libsymmar_torch's kernels


def _op(schema, kernel, fake, has_compiled_kernel=False):
    name = schema[:schema.index("(")]
    _lib.define(schema)
    if (has_compiled_kernel and _compiled is not None and
            torch._C._dispatch_has_kernel_for_dispatch_key("symmar::" + name, "CPU")):
        # The compiled kernel hands the calls it does not take to this one, under a private name.
        # (A libsymmar_torch older than an op has no kernel for it: the Python one serves it then.)
        name = "_py_" + name
        _lib.define(name + schema[schema.index("("):])
    for key in ("CPU", "CUDA"):
        _lib.impl(name, kernel, key)
    torch.library.register_fake("symmar::" + schema[:schema.index("(")], fake, lib=_lib)


def _all_reduce_(x, comm, op="sum"):
    """In place: x holds the allreduce across the comm's ranks (Comm.all_reduce_)."""
    comm_of(comm).all_reduce_(x, op=op)
    # What torch's own in-place ops do: autograd then refuses a backward that saved x's old value.
    _increment_version(x)


def _all_reduce_sum_(x, comm):
    """all_reduce_ with op "sum", an op without the op argument: inductor's generated code spells
    every argument that has a default as a keyword, and a keyword costs about 0.36 us a call in
    torch's argument parsing (docs/performance/engines-vllm.md). The plugins' traced path calls it."""
    _all_reduce_(x, comm)


def _all_reduce(x, comm, op="sum"):
    """A new contiguous tensor with the allreduce of x (Comm.all_reduce); x is only read."""
    # A functional op may copy its input: a strided x (which the binding refuses) is made dense
    # here, and the result is contiguous either way, as the fake says.
    return comm_of(comm).all_reduce(x.contiguous(), op=op)


def _all_reduce_sum(x, comm):
    """all_reduce with op "sum" and no op argument, as all_reduce_sum_ is to all_reduce_: the
    plugins' out-of-place path."""
    return _all_reduce(x, comm)


def _all_reduce_add_rms_norm(x, gamma, residual, comm, eps=1e-6, algo="auto"):
    """(residual_out, norm_out) = (allreduce_sum(x) + residual, RMSNorm(residual_out) * gamma), both
    new contiguous tensors like x (Comm.all_reduce_add_rms_norm without fp8)."""
    dense = [t.contiguous() if t is not None else None for t in (x, gamma, residual)]
    res_out, norm_out = comm_of(comm).all_reduce_add_rms_norm(dense[0], dense[1], eps=eps, residual=dense[2],
                                                              algo=algo)
    return res_out, norm_out


def _all_reduce_add_rms_norm_(x, residual, gamma, comm, eps=1e-6):
    """In place, as the engines' fused_add_rms_norm: residual = allreduce_sum(x) + residual, then
    x = RMSNorm(residual) * gamma. Strided operands go through dense copies."""
    c = comm_of(comm)
    if x.is_contiguous() and residual.is_contiguous():
        c.all_reduce_add_rms_norm(x, gamma.contiguous(), eps=eps, residual=residual, residual_out=residual, norm_out=x)
    else:
        res_out, norm_out = c.all_reduce_add_rms_norm(x.contiguous(), gamma.contiguous(), eps=eps,
                                                      residual=residual.contiguous())
        residual.copy_(res_out)
        x.copy_(norm_out)
    _increment_version(x)
    _increment_version(residual)


def _reduce_scatter(x, comm, op="sum"):
    """This rank's block of the reduction of x (nranks blocks along dim 0; Comm.reduce_scatter)."""
    return comm_of(comm).reduce_scatter(x.contiguous(), op=op)


def _reduce_scatter_sum(x, comm):
    """reduce_scatter with op "sum" and no op argument, as all_reduce_sum is to all_reduce: inductor's
    code then calls it without a keyword."""
    return _reduce_scatter(x, comm)


def _all_gather(x, comm):
    """Every rank's x as blocks along dim 0 of a new tensor (Comm.all_gather)."""
    return comm_of(comm).all_gather(x.contiguous())


def _gathered_shape(x, comm, scatter):
    n = comm_of(comm).nranks
    if scatter:
        return (x.shape[0] // n,) + tuple(x.shape[1:])
    return (x.shape[0] * n,) + tuple(x.shape[1:]) if x.dim() else (n,)


def _raise_failure(x, comm, code):
    """The compiled kernels' error path: raises the binding's SymmarError for a failed collective."""
    comm_of(comm)._fail(code)
    raise RuntimeError("symmar op: the collective failed with code %d" % code)


def _empty(x):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


_op('all_reduce_(Tensor(a!) x, int comm, str op="sum") -> ()', _all_reduce_, lambda x, comm, op="sum": None,
    has_compiled_kernel=True)
_op('all_reduce_sum_(Tensor(a!) x, int comm) -> ()', _all_reduce_sum_, lambda x, comm: None,
    has_compiled_kernel=True)
_op('all_reduce(Tensor x, int comm, str op="sum") -> Tensor', _all_reduce, lambda x, comm, op="sum": _empty(x),
    has_compiled_kernel=True)
_op('all_reduce_sum(Tensor x, int comm) -> Tensor', _all_reduce_sum, lambda x, comm: _empty(x),
    has_compiled_kernel=True)
_op('all_reduce_add_rms_norm(Tensor x, Tensor gamma, Tensor? residual, int comm, float eps=1e-06, '
    'str algo="auto") -> (Tensor, Tensor)', _all_reduce_add_rms_norm,
    lambda x, gamma, residual, comm, eps=1e-6, algo="auto": (_empty(x), _empty(x)), has_compiled_kernel=True)
_op('all_reduce_add_rms_norm_(Tensor(a!) x, Tensor(b!) residual, Tensor gamma, int comm, float eps=1e-06) -> ()',
    _all_reduce_add_rms_norm_, lambda x, residual, gamma, comm, eps=1e-6: None, has_compiled_kernel=True)
_op('reduce_scatter(Tensor x, int comm, str op="sum") -> Tensor', _reduce_scatter,
    lambda x, comm, op="sum": x.new_empty(_gathered_shape(x, comm, True)), has_compiled_kernel=True)
_op('reduce_scatter_sum(Tensor x, int comm) -> Tensor', _reduce_scatter_sum,
    lambda x, comm: x.new_empty(_gathered_shape(x, comm, True)), has_compiled_kernel=True)
_op('all_gather(Tensor x, int comm) -> Tensor', _all_gather,
    lambda x, comm: x.new_empty(_gathered_shape(x, comm, False)), has_compiled_kernel=True)
if _compiled is not None:
    _lib.define("_raise_failure(Tensor x, int comm, int code) -> ()")
    for _key in ("CPU", "CUDA"):
        _lib.impl("_raise_failure", _raise_failure, _key)
    # Only the compiled kernel: a bool that depends on the tensor does not trace, and eager callers
    # without this library make the check in Python (SymmarCommunicator._taker).
    _lib.define("try_all_reduce_(Tensor(a!) x, int comm) -> bool")

# torch.ops.symmar.try_all_reduce_(x, h): where the span set for x's dtype (set_taken_spans) holds
# x's element count, x is contiguous and on the comm's device, x becomes the sum across the comm
# (op "sum") and True comes back; otherwise False, and x is untouched. None without libsymmar_torch.
TRY_ALL_REDUCE_ = torch.ops.symmar.try_all_reduce_.default if _compiled is not None else None


def set_taken_spans(h, spans):
    """Sets what try_all_reduce_ takes on the comm named h: spans maps a dtype name ("float32",
    "float16", "bfloat16", ...) to the (lo, hi) element counts it takes; every other dtype, none.
    Nothing to do without libsymmar_torch."""
    if _compiled is None:
        return
    for name, code in _args.DTYPES.items():
        lo, hi = spans.get(name, (1, 0))
        _compiled.symmarTorchSetSpan(h, code, lo, hi)
