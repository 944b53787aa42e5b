"""Module functions (get_unique_id, version, plan) and the adapter of a Python allgather to the
C callback type."""
import ctypes

from . import _lib as L
from ._args import DTYPES, LINKS, dtype_name, int_arg, library_op, name_arg
from ._errors import TIMEOUT, SymmarError, check
from ._gather import CallbackAllGather


def get_unique_id():
    """A fresh rendezvous id (bytes, 128 long). Make it in any one process (a rank's, or a launcher
    parent such as torch.multiprocessing.spawn's) and hand it to every rank; one id per comm."""
    uid = L.UniqueId()
    check(L.lib().symmarGetUniqueId(ctypes.byref(uid)))
    return ctypes.string_at(ctypes.addressof(uid), L.UNIQUE_ID_BYTES)


def version():
    """The loaded library's version as (major, minor, patch)."""
    v = ctypes.c_int()
    check(L.lib().symmarGetVersion(ctypes.byref(v)))
    return (v.value // 10000, v.value // 100 % 100, v.value % 100)


def _algo_name(value):
    return L.lib().symmarAlgoName(value).decode()


def plan(cc=(12, 0), link="pcie", world=4, multicast=False, count=7168, dtype="bfloat16", op="sum"):
    """The pure planner (symmarPlan): the algorithm name symmarAlgoAuto would run for this request
    on the described machine, assuming its usual fallback (NCCL on a GPU, MPI on host memory);
    Comm.plan answers for a real comm, which may lack the fallback."""
    if not isinstance(cc, (tuple, list)) or len(cc) != 2:
        raise TypeError("cc must be a (major, minor) tuple")
    topo = L.Topology()
    topo.cc_major = int_arg(cc[0], "cc major", 0)
    topo.cc_minor = int_arg(cc[1], "cc minor", 0)
    topo.link = name_arg(link, LINKS, "link")
    topo.world_size = int_arg(world, "world", 1)
    if not isinstance(multicast, (bool, int)):
        raise TypeError("multicast must be a bool")
    topo.multicast = 1 if multicast else 0
    algo = ctypes.c_int()
    check(L.lib().symmarPlan(ctypes.byref(topo), int_arg(count, "count", 0), DTYPES[dtype_name(dtype)],
                             library_op(op), ctypes.byref(algo)))
    return _algo_name(algo.value)


class _AllGather(CallbackAllGather):
    """Adapts a Python allgather(bytes) -> list[bytes] to symmarAllGatherFn. Kept alive (with its
    CFUNCTYPE) for the comm's lifetime: the library calls it for collective memory calls too."""

    def __init__(self, fn, nranks):
        super().__init__()
        self.fn = fn
        self.nranks = nranks

    def _gather(self, send, recv, nbytes):
        parts = list(self.fn(ctypes.string_at(send, nbytes)))
        if len(parts) != self.nranks:
            raise ValueError("allgather returned %d parts for %d ranks" % (len(parts), self.nranks))
        for i, part in enumerate(parts):
            part = bytes(part)
            if len(part) != nbytes:
                raise ValueError("allgather part %d has %d bytes, expected %d" % (i, len(part), nbytes))
            ctypes.memmove(recv + i * nbytes, part, nbytes)


def _raise_gather_failure(res, gather):
    """A failed creation through an allgather: the callback's exception is the cause; a callback
    that gave up on its own deadline (TimeoutError) makes it a symmarTimeout."""
    try:
        check(res)
    except SymmarError as e:
        err = gather.error if gather is not None else None
        if isinstance(err, TimeoutError):
            raise SymmarError(TIMEOUT, "bootstrap: %s" % err) from err
        if err is not None:
            raise e from err
        raise
