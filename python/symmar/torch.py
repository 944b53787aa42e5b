"""symmar for torch.distributed engines (imported only where PyTorch is installed).

    import torch.distributed as dist, symmar.torch
    comm = symmar.torch.from_process_group(group, device="cpu")   # or symmar.Comm.from_process_group
    comm.all_reduce_(tensor, op=dist.ReduceOp.SUM)                 # in place; MAX, MIN, AVG too
    torch.ops.symmar.all_reduce_(tensor, symmar.ops.handle(comm))  # the same as a custom op (torch.compile)

The comm is bootstrapped through the group's own allgather (no extra port or rendezvous), bounded
by the comm's timeout. CPU tensors need device="cpu" (the host backend); CUDA tensors a GPU comm,
on which calls are enqueued on torch.cuda.current_stream() and can be captured in a CUDA graph.
"""
import collections
import ctypes
import datetime
import time

try:
    import torch
    import torch.distributed as dist
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("symmar.torch needs PyTorch with torch.distributed (pip install torch)") from e

from . import _core
from . import _lib as L
from . import _runtime
from ._args import config, effective_timeout_ms
from ._gather import CallbackAllGather

_runtime.enable_torch(torch)
from . import ops  # noqa: E402,F401  registers torch.ops.symmar.* (custom ops for torch.compile)

# Collectives that gave up on their deadline are still owned by the process group's worker
# thread: their tensors must stay valid until it lets go (for the process's life, at worst).
_abandoned = []

# The group's worker thread lets go of a collective's tensors a moment after the wait returns, and
# letting go of a tensor that Python also holds takes the interpreter's lock. In a process that
# exits right after (the worker starved of CPU meanwhile, as on a loaded 2-core machine), that
# falls in the interpreter's shutdown, where the worker thread is ended inside a destructor and
# torch aborts the process ("terminate called without an active exception"). So symmar's own
# collectives over a group (the bootstrap's allgathers, a communicator's agreements) return only
# once the worker has let go of their tensors, a bounded wait (released_by_group); the tensors of one
# it still holds then are kept referenced.
_RELEASE_WAIT_S = 1.0
_held_after_wait = collections.deque(maxlen=64)


def hold_after_wait(*tensors):
    """Keeps the tensors of a completed group collective referenced (see _held_after_wait)."""
    _held_after_wait.append(tensors)


def released_by_group(*tensors):
    """Waits until no one but Python holds the tensors of a completed group collective (its Work
    object dropped first), at most _RELEASE_WAIT_S. CPU tensors only (the worker that lets go late is
    gloo's); the others, and any the worker still holds then, are held instead (hold_after_wait)."""
    if all(t.device.type == "cpu" for t in tensors) and hasattr(torch.Tensor, "_use_count"):
        deadline = time.monotonic() + _RELEASE_WAIT_S
        while any(t._use_count() > 1 for t in tensors):
            if time.monotonic() > deadline:
                break
            time.sleep(0.0002)
        else:
            return
    hold_after_wait(*tensors)


class _GroupAllGather(CallbackAllGather):
    """symmarAllGatherFn over a torch.distributed group, bounded by timeout_ms: a rank that never
    makes the matching call costs a TimeoutError (symmarTimeout), not the group's own timeout."""

    def __init__(self, group, nranks, device, timeout_ms):
        self.group = group
        self.nranks = nranks
        self.device = device
        self.timeout = datetime.timedelta(milliseconds=timeout_ms)
        self.timeout_ms = timeout_ms
        super().__init__()

    def _gather(self, send, recv, nbytes):
        mine = torch.frombuffer(bytearray(ctypes.string_at(send, nbytes)), dtype=torch.uint8).to(self.device)
        parts = [torch.empty(nbytes, dtype=torch.uint8, device=self.device) for _ in range(self.nranks)]
        work = dist.all_gather(parts, mine, group=self.group, async_op=True)
        try:
            done = work.wait(timeout=self.timeout)
        except RuntimeError as e:  # torch reports an expired wait as an error
            if "timed out" not in str(e).lower() and "timeout" not in str(e).lower():
                raise
            done = False
        if done is False:
            _abandoned.append((work, mine, parts))
            raise TimeoutError("the process group's allgather did not complete within %d ms (does every rank of "
                               "the group create the comm?)" % self.timeout_ms)
        del work  # it holds the tensors too
        for i, part in enumerate(parts):
            host = part.cpu()
            ctypes.memmove(recv + i * nbytes, host.data_ptr(), nbytes)
        released_by_group(mine, *parts)


def _gather_device(group):
    """Where the bootstrap's tensors live: CPU for a gloo (or mpi) group, the current GPU otherwise."""
    backend = str(dist.get_backend(group)).lower()
    if "gloo" in backend or backend == "mpi":
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device())


def from_process_group(group=None, device=None, timeout_ms=None, staging_bytes=None, table_file=None):
    """A symmar comm over the ranks of a torch.distributed group (default: the world), in the
    group's rank order. Collective over the group, like every later mem_alloc/free. device: "cpu"
    for CPU tensors (host backend), or a CUDA device ("cuda", "cuda:N", N, torch.device); None:
    the current CUDA device where CUDA is available, else "cpu". timeout_ms bounds every wait,
    the group's allgathers included."""
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("torch.distributed is not initialized: call torch.distributed.init_process_group first")
    group = dist.group.WORLD if group is None else group
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError("this process is not a member of the group")
    nranks = dist.get_world_size(group)
    if device is None:
        device = torch.cuda.current_device() if torch.cuda.is_available() else "cpu"
    elif isinstance(device, str) and device == "cuda":
        device = torch.cuda.current_device()
    timeout_ms = effective_timeout_ms(timeout_ms)
    cfg = config(device, timeout_ms, staging_bytes, table_file)
    gather = _GroupAllGather(group, nranks, _gather_device(group), timeout_ms)
    return _core.Comm._from_c_allgather(nranks, rank, gather, cfg)


def reduce_op(op):
    """The symmar op name for a torch.distributed.ReduceOp (SUM, MAX, MIN, AVG); ValueError otherwise."""
    from ._args import OPS, op_arg
    value = op_arg(op)
    return next(k for k, v in OPS.items() if v == value)
