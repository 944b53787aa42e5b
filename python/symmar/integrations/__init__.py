"""A drop-in allreduce communicator for inference engines (vLLM, SGLang), shaped like their own
symmetric-memory and custom allreduce communicators (docs/engines.md):

    comm = SymmarCommunicator(group, device)          # collective over the group
    if not comm.disabled and comm.should_all_reduce(x):
        y = comm.all_reduce(x)                        # else the engine's own path (NCCL, gloo)

It never raises for a machine it cannot serve (no CUDA, an unknown GPU, a world of one, a comm
that cannot be created): it declines, logs why once, and `disabled` is True on every rank of the
group, so that all ranks fall back together. `should_all_reduce` answers from the comm's plan (the
tables measured for this machine), read once at creation into a range of element counts per dtype,
so that the answer is the same on every rank for the same tensor shape (a rank never takes symmar
while a peer takes the fallback) and the whole path traces under torch.compile(fullgraph=True):
no ctypes call and no Python object made per call, the collective through torch.ops.symmar.
"""
import contextlib
import logging
import os

import torch
import torch.distributed as dist

from .. import ops as _ops
from .. import torch as _symmar_torch  # Comm.from_process_group, torch.ops.symmar, released_by_group
from .._core import Comm

_log = logging.getLogger("symmar")

# Algorithms symmar runs itself. A plan naming nccl or mpi means that the engine's own path is as
# good (symmar's fallback is the same library), so the communicator declines.
_OWN_ALGOS = ("oneshot", "twoshot", "multimem", "lamport")
_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
# The ops' one overload each, looked up once: torch.ops.symmar.all_reduce_(...) resolves the
# namespace, the packet and the overload on every call (about 0.5 us, over a 3-4 us allreduce of
# a decode-size tensor on CPUs). Calls through them trace under torch.compile as the packets do.
# The sums are all_reduce_sum_ and all_reduce_sum, which have no op argument for inductor's code
# to spell as a keyword (about 0.36 us a call, docs/performance/engines-vllm.md).
_ALL_REDUCE_ = torch.ops.symmar.all_reduce_sum_.default
_ALL_REDUCE = torch.ops.symmar.all_reduce_sum.default
_ALL_GATHER = torch.ops.symmar.all_gather.default
_REDUCE_SCATTER = torch.ops.symmar.reduce_scatter_sum.default
# The counts the plan is read at, at creation: 1, then four points an octave up to 2^40 elements,
# each change between two points found exactly by bisection. A change between two points that
# changes back before the next (a row entry narrower than a quarter octave) is not seen: such a
# count then follows its neighbours, which costs speed, never a wrong result (every rank decides
# from the same plan, and symmar serves any count).
_PROBE_COUNTS = sorted({1} | {int(2 ** k * f) for k in range(41) for f in (1.0, 1.25, 1.5, 1.75)})


def _own_span(plan):
    """(lo, hi): the first run of element counts, from the smallest up, that plan(count) gives to
    symmar's own algorithms; None when no probed count is."""
    own = [plan(n) in _OWN_ALGOS for n in _PROBE_COUNTS]
    if True not in own:
        return None
    first = own.index(True)

    def edge(a, b, a_own):  # the last count from a (plan own == a_own) before b (the other)
        while b - a > 1:
            m = (a + b) // 2
            if (plan(m) in _OWN_ALGOS) == a_own:
                a = m
            else:
                b = m
        return a
    lo = _PROBE_COUNTS[0] if first == 0 else edge(_PROBE_COUNTS[first - 1], _PROBE_COUNTS[first], False) + 1
    rest = own[first:]
    if False not in rest:
        return lo, _PROBE_COUNTS[-1]
    last = first + rest.index(False) - 1
    return lo, edge(_PROBE_COUNTS[last], _PROBE_COUNTS[last + 1], True)


def _takes(ranges, cpu, cuda_index, inp):
    """Whether a communicator with these spans (a dtype's (lo, hi) element counts) takes the
    tensor inp: one of its dtypes, on its device (`cpu`, else CUDA device `cuda_index`), dense,
    its count in the span. The one home of the check should_all_reduce and the takers make; it
    reads the tensor's cheapest attributes (`is_cpu`, `get_device()`: `inp.device` alone costs
    about 0.6 us), as it runs before every allreduce an engine makes."""
    span = ranges.get(inp.dtype)
    if span is None or not (inp.is_cpu if cpu else inp.is_cuda and inp.get_device() == cuda_index):
        return False
    return span[0] <= inp.numel() <= span[1] and inp.is_contiguous()


def _device(device):
    """A torch.device from an engine's device argument (int, str or torch.device)."""
    if isinstance(device, torch.device):
        return device
    if isinstance(device, int):
        return torch.device("cuda", device)
    return torch.device(device)


class SymmarCommunicator:
    """Allreduce (and the fused allreduce + residual add + RMSNorm) through symmar for one group.

    group: a torch.distributed process group (gloo or NCCL; engines pass their CPU group). device:
    where the tensors live: "cpu" (the host backend, for CPU inference), or a CUDA device (int,
    "cuda:N", torch.device). max_bytes: an optional cap on the tensors taken, as the engines' own
    communicators have; the plan decides below it. timeout_ms and table_file go to the comm.
    """

    def __init__(self, group, device, max_bytes=None, timeout_ms=None, table_file=None):
        self.group = group
        self.disabled = True
        self.disabled_reason = None
        self.comm = None
        self._spans = {}  # torch dtype -> (lo, hi) element counts the plan gives symmar, from creation
        self._ranges = {}  # the same with max_bytes applied: what should_all_reduce reads (one dict
        # for the communicator's life, updated in place: the takers made at creation hold it)
        self._op_handle = 0  # the comm's name in torch.ops.symmar calls
        self._cpu, self._cuda_index = True, -1  # the device, as should_all_reduce compares it
        self._max_bytes = max_bytes
        self.host_threads = 1  # the threads a host collective's large steps split over (_use_engine_threads)
        self.world_size = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.device = None
        why = self._local_reason(device)
        # Agree before creating: a rank that declines alone would leave its peers in the comm's
        # bootstrap, and ranks that disagree on `disabled` would take different collectives.
        if self._all_agree(why is None):
            try:
                self.comm = Comm.from_process_group(group, device=self._comm_device(), timeout_ms=timeout_ms,
                                                    table_file=table_file)
            except Exception as e:  # noqa: BLE001  any failure is a decline, never an engine crash
                why = "creating the symmar comm failed: %s" % e
            if not self._all_agree(self.comm is not None):
                why = why or "a peer rank could not create the symmar comm"
                self._close_comm()
        else:
            why = why or "a peer rank declined"
        if why is None:
            self._cpu = self.device.type == "cpu"
            self._cuda_index = -1 if self._cpu else self.device.index
            self._read_plan()
            self.host_threads = self._use_engine_threads()
            self.disabled = False
            _log.info("symmar communicator enabled: %s%s", self.comm.describe().split(";")[0],
                      "; large steps on torch's %d threads" % self.host_threads if self.host_threads > 1 else "")
        else:
            self._decline(why)
        # The one-frame check and call (_taker); declined, they take nothing: the ranges stay empty.
        self.try_all_reduce_ = self._taker(in_place=True)
        self.try_all_reduce = self._taker(in_place=False)

    # -- creation --

    def _local_reason(self, device):
        """Why this rank cannot use symmar for `device`, or None."""
        if self.world_size < 2:
            return "a world of %d rank needs no allreduce" % self.world_size
        try:
            self.device = _device(device)
        except (TypeError, ValueError, RuntimeError) as e:
            return "device %r: %s" % (device, e)
        if self.device.type == "cpu":
            return None
        if self.device.type != "cuda":
            return "device type %s is not served (cpu or cuda)" % self.device.type
        if not torch.cuda.is_available():
            return "CUDA is not available to torch"
        if self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        return None

    def _comm_device(self):
        return "cpu" if self.device.type == "cpu" else self.device.index

    def _all_agree(self, ok):
        """True when `ok` holds on every rank of the group (one MIN allreduce over the group)."""
        on = "cuda" if dist.get_backend(self.group) == "nccl" else "cpu"
        flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=on)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self.group)
        _symmar_torch.released_by_group(flag)
        return bool(flag.item())

    def _decline(self, why):
        self.disabled = True
        self.disabled_reason = why
        _log.warning("symmar communicator disabled (the engine's own allreduce serves): %s", why)

    def _close_comm(self):
        if self.comm is not None:
            self.comm.close()
            self.comm = None

    def _use_engine_threads(self):
        """On CPU, splits large collectives' steps over torch's intra-op threads, as the engines' own
        CPU allreduces split theirs over their OpenMP threads (which the engine bound to the worker's
        cores): where torch has several threads, the group's ranks times those threads fit the
        machine's CPUs, libsymmar_torch is loaded, and SYMMAR_HOST_THREADS does not say otherwise.
        Each rank's own choice: the results are the same bits either way. Returns the threads."""
        threads = min(torch.get_num_threads(), 64)
        if (not self._cpu or threads < 2 or "SYMMAR_HOST_THREADS" in os.environ or not _ops.compiled
                or threads * self.world_size > (os.cpu_count() or 1)):
            return 1
        try:
            self.comm.set_host_threads(threads, pool="torch")
        except Exception as e:  # noqa: BLE001  (a comm spanning hosts): its steps stay on this thread
            _log.info("symmar: large steps stay on the calling thread: %s", e)
            return 1
        return threads

    def _read_plan(self):
        """The counts symmar takes per dtype, from the comm's plan (the same on every rank), and its
        name for torch.ops.symmar."""
        for dtype, name in _DTYPES.items():
            span = _own_span(lambda n, name=name: self.comm.plan(n, name, "sum"))
            if span is not None:
                self._spans[dtype] = span
        self._op_handle = _ops.handle(self.comm)
        self._apply_max_bytes()

    def _apply_max_bytes(self):
        self._ranges.clear()
        for dtype, (lo, hi) in self._spans.items():
            if self._max_bytes is not None:
                hi = min(hi, self._max_bytes // (torch.finfo(dtype).bits // 8))
            if lo <= hi:
                self._ranges[dtype] = (lo, hi)
        if self._op_handle:  # the compiled try_all_reduce_ takes the same counts
            _ops.set_taken_spans(self._op_handle, {_DTYPES[d]: span for d, span in self._ranges.items()})

    @property
    def max_bytes(self):
        """The most bytes of a tensor taken (None: the plan alone decides)."""
        return self._max_bytes

    @max_bytes.setter
    def max_bytes(self, value):
        self._max_bytes = value
        self._apply_max_bytes()

    # -- what it takes --

    def should_all_reduce(self, inp):
        """Whether symmar takes this tensor: enabled, a float32/float16/bfloat16 dense tensor on
        the comm's device, within max_bytes, and planned to a symmar algorithm for its size. Reads
        only values made at creation: traceable, and the same answer on every rank."""
        if self.disabled or not isinstance(inp, torch.Tensor):
            return False
        return _takes(self._ranges, self._cpu, self._cuda_index, inp)

    def _taker(self, in_place):
        """try_all_reduce_ (in_place) or try_all_reduce for this communicator's device, made at
        creation as instance attributes (a call makes no bound method): f(inp) does what
        should_all_reduce(inp) and then all_reduce_taken_(inp) (or all_reduce_taken(inp)) do, in one
        frame, and returns the sum (inp itself in place, else a new tensor), or None where symmar
        does not take inp. An engine's hook calls one on every allreduce, where the two-step form's
        extra calls and lookups cost about half a microsecond on CPUs (docs/engines.md). inp must
        be a tensor."""
        ranges, handle = self._ranges, self._op_handle
        op = _ALL_REDUCE_ if in_place else _ALL_REDUCE
        cpu, cuda_index = self._cpu, self._cuda_index
        # In place and eager, libsymmar_torch's try_all_reduce_ makes the same check in C++ (about
        # 0.4 us less a call); a trace takes the Python check, which it resolves at compile time.
        try_op = _ops.TRY_ALL_REDUCE_ if in_place else None
        is_compiling = torch.compiler.is_compiling

        def take(inp):
            if try_op is not None and not is_compiling():
                return inp if try_op(inp, handle) else None
            if not _takes(ranges, cpu, cuda_index, inp):
                return None
            if in_place:
                op(inp, handle)
                return inp
            return op(inp, handle)
        return take

    # The engines' names for the same question (vLLM's SymmMemCommunicator and CustomAllreduce,
    # SGLang's TorchSymmMemCommunicator).
    should_use_symm_mem = should_all_reduce
    should_custom_ar = should_all_reduce
    should_torch_symm_mem_allreduce = should_all_reduce

    def _on_device(self, t):
        return t.is_cpu if self._cpu else t.is_cuda and t.get_device() == self._cuda_index

    # -- collectives --

    def all_reduce(self, inp, out=None):
        """The sum over the group, in `out` (a new tensor like `inp` when None); None when
        should_all_reduce(inp) is False, for the caller to take its own path. CUDA tensors run on
        torch.cuda.current_stream(), so the call can be captured in a CUDA graph."""
        if not self.should_all_reduce(inp):
            return None
        if out is None:
            return self.all_reduce_taken(inp)
        return self.comm.all_reduce(inp, out=out)

    def all_reduce_taken(self, inp):
        """all_reduce(inp) into a new tensor for a tensor should_all_reduce(inp) just took: the
        check is not made twice (an engine's hook that asked it already, as symmar's plugins do)."""
        return _ALL_REDUCE(inp, self._op_handle)

    def all_reduce_(self, inp):
        """In place: inp holds the sum over the group and is returned (an engine's in-place
        allreduce, as vLLM's CPU shared-memory one); None when should_all_reduce(inp) is False.
        Through torch.ops.symmar.all_reduce_sum_, so a compiled graph calls it without Python."""
        if not self.should_all_reduce(inp):
            return None
        return self.all_reduce_taken_(inp)

    def all_reduce_taken_(self, inp):
        """all_reduce_ for a tensor should_all_reduce(inp) just took: the check is not made twice
        (an engine's hook that asked it already, as symmar's plugins do)."""
        _ALL_REDUCE_(inp, self._op_handle)
        return inp

    def custom_all_reduce(self, inp):
        """all_reduce under the custom-allreduce name: a new tensor, or None when declined."""
        return self.all_reduce(inp)

    def all_reduce_add_rms_norm(self, inp, residual, weight, eps=1e-6):
        """The fused end of a decoder block: r = allreduce_sum(inp) + residual, then
        RMSNorm(r) * weight over the last axis. Returns (normed, r), the order of an engine's
        RMSNorm(x, residual), as new tensors; None when declined (then allreduce, add and norm
        separately). weight is [hidden] of inp's dtype; residual has inp's shape and dtype."""
        if not self.should_all_reduce(inp) or inp.dim() < 1:
            return None
        for t in (residual, weight):
            if not isinstance(t, torch.Tensor) or t.dtype != inp.dtype or not self._on_device(t):
                return None
        if residual.shape != inp.shape or weight.shape != inp.shape[-1:]:
            return None
        residual_out, normed = self.comm.all_reduce_add_rms_norm(inp, weight, eps=eps, residual=residual)
        return normed, residual_out

    def reduce_scatter(self, inp, out=None, dim=0):
        """This rank's block of the sum over the group of inp, split along dim into world_size
        blocks (the engines' reduce_scatter(input, dim)), in out (dim 0 only) or a new contiguous
        tensor. None when declined (takes_reduce_scatter). Along another dim the input is reduced
        with that dim moved first, then moved back."""
        if not self.takes_reduce_scatter(inp, dim) or (out is not None and dim % inp.dim() != 0):
            return None
        dim %= inp.dim()
        if out is not None:
            return self.comm.reduce_scatter(inp, out=out)
        if dim == 0:
            return _REDUCE_SCATTER(inp, self._op_handle)
        return _REDUCE_SCATTER(inp.movedim(dim, 0).contiguous(), self._op_handle).movedim(0, dim).contiguous()

    def takes_reduce_scatter(self, inp, dim=0):
        """Whether reduce_scatter(inp, dim=dim) runs through symmar: as takes_all_gather, and dim's
        size splits into world_size blocks."""
        if not isinstance(inp, torch.Tensor) or not -inp.dim() <= dim < inp.dim():
            return False
        return inp.shape[dim] % self.world_size == 0 and self._takes_gather(inp, inp.numel())

    def all_gather(self, inp, out=None, dim=0):
        """Every rank's inp concatenated in rank order along dim (the engines' all_gather(input,
        dim); dim 0: blocks one after another), in out (dim 0 only) or a new tensor;
        None when declined (takes_all_gather). Along another dim the ranks' blocks are gathered
        along dim 0, then put side by side along dim: one copy at most, none where the dims before
        dim are all of size 1 (the logits of one token), as vLLM's own CPU path does it."""
        if not self.takes_all_gather(inp, dim) or (out is not None and dim % inp.dim() != 0):
            return None
        dim %= inp.dim()
        gathered = self.comm.all_gather(inp, out=out) if out is not None else _ALL_GATHER(inp, self._op_handle)
        if dim == 0:
            return gathered
        shape = tuple(inp.shape)
        joined = shape[:dim] + (self.world_size * shape[dim],) + shape[dim + 1:]
        if all(n == 1 for n in shape[:dim]):  # the blocks already lie side by side: one view op
            return gathered.view(joined)
        return gathered.view((self.world_size,) + shape).movedim(0, dim).reshape(joined)

    def takes_all_gather(self, inp, dim=0):
        """Whether all_gather(inp, dim=dim) runs through symmar: enabled on a host comm (no symmar
        GPU kernel has the gathers yet: NCCL serves them, as the engine's own path does), a dense
        float32/float16/bfloat16 tensor on the comm's device with dim in range, the gathered
        tensor within max_bytes. The same answer on every rank for the same shape."""
        if not isinstance(inp, torch.Tensor) or not -inp.dim() <= dim < inp.dim():
            return False
        return self._takes_gather(inp, inp.numel() * self.world_size)

    def gather(self, inp, dst=0, dim=0):
        """Every rank's inp concatenated along dim on rank dst (the engines' gather(input, dst,
        dim)), None on the other ranks; call it only where takes_all_gather(inp, dim) holds (every
        rank takes part: an all-gather whose result only dst keeps)."""
        out = self.all_gather(inp, dim=dim)
        return out if self.rank == dst else None

    def _takes_gather(self, inp, gathered_numel):
        if self.disabled or not isinstance(inp, torch.Tensor) or not self.comm._host:
            return False
        if _DTYPES.get(inp.dtype) is None or inp.numel() == 0 or not inp.is_contiguous() or not self._on_device(inp):
            return False
        return self.max_bytes is None or gathered_numel * inp.element_size() <= self.max_bytes

    @contextlib.contextmanager
    def capture(self):
        """The context an engine wraps CUDA graph capture in. symmar's kernels are capturable as
        they are (the call enqueues on the current stream and keeps no host state per call); run
        each captured size once before capture (docs/integration.md)."""
        yield

    def close(self):
        """Releases the comm (collective over the group, as its creation was). Idempotent."""
        self._ranges.clear()  # the takers take nothing from now on
        self._close_comm()
        self.disabled = True
        self.disabled_reason = self.disabled_reason or "closed"

    def __repr__(self):
        state = "disabled (%s)" % self.disabled_reason if self.disabled else "enabled"
        return "SymmarCommunicator(world_size=%d, rank=%d, device=%s, %s)" % (
            self.world_size, self.rank, self.device, state)
