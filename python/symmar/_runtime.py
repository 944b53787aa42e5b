"""State filled on first use and shared by every all_reduce path: the bound symmarAllReduce and the
torch tables (dtype codes, ReduceOp values, the current-stream getter).

It imports only _lib and _args, so _core, _general, _fused and symmar.torch can all import it.
Comm.all_reduce's fast path reads this state as globals of _core, not as attributes of this
module: _core registers with watch() and copies the state whenever it is filled.
"""
from . import _lib as L
from ._args import AVG, DTYPES, OP_CONVERTERS, OPS

_AR = None  # symmarAllReduce, bound once the library is loaded
_AR_ALGO = None  # symmarAllReduceAlgo, bound with it
_torch = None  # set by enable_torch() once torch is in use
_Tensor = None
_RedOpType = None
_raw_stream = None
_TORCH_CODES = {}  # filled in place: holders of these dicts see the entries without a refresh
_TORCH_OPS = {}
_watchers = []


def watch(fn):
    """Calls fn() now and after every change to the state above."""
    _watchers.append(fn)
    fn()


def _changed():
    for fn in _watchers:
        fn()


def bind():
    """symmarAllReduce, loading the library on the first call (and symmarAllReduceAlgo with it)."""
    global _AR, _AR_ALGO
    if _AR is None:
        _AR_ALGO = L.lib().symmarAllReduceAlgo
        _AR = L.lib().symmarAllReduce
        _changed()
    return _AR


def enable_torch(torch):
    """Fills the torch fast-path tables (called on the first tensor, and by symmar.torch)."""
    global _torch, _Tensor, _RedOpType, _raw_stream
    if _torch is not None:
        return
    # Every DTYPES name is also the name of a torch dtype (torch.float32, ..., torch.bfloat16).
    _TORCH_CODES.update({getattr(torch, name): code for name, code in DTYPES.items()})
    get_raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # skips building a Stream object
    _raw_stream = get_raw if get_raw is not None else (lambda i: torch.cuda.current_stream(i).cuda_stream)
    try:
        import torch.distributed as dist
        red = dist.ReduceOp
        # ReduceOp.SUM etc. are RedOpType members; a ReduceOp instance compares equal to them.
        table = {red.SUM: OPS["sum"], red.MAX: OPS["max"], red.MIN: OPS["min"], red.AVG: AVG}
        _TORCH_OPS.update({k: v for k, v in table.items() if v != AVG})
        _RedOpType = type(red.SUM)

        def convert(op):
            for k, v in table.items():
                if op == k:
                    return v
            return None

        OP_CONVERTERS[_RedOpType] = convert
        OP_CONVERTERS[red] = convert
    except (ImportError, AttributeError):  # torch built without distributed
        pass
    _Tensor = torch.Tensor
    _torch = torch
    _changed()
