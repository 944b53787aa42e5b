"""Comm, plan and version: the Python face of the symmar C ABI (include/symmar/symmar.h).

Comm.all_reduce has a fast path for the common call (a dense NumPy array or torch tensor, op by
name or torch ReduceOp, algo "auto" or a forced algorithm by its lower-case name, no dtype
override): a few attribute reads and one ctypes call. Anything else takes the general path
(_buffers.resolve), which checks and explains.
"""
import ctypes
import weakref

from . import _buffers
from . import _fused
from . import _general
from . import _lib as L
from . import _runtime as R
from . import _scatter_gather
from ._api import _AllGather, _algo_name, _raise_gather_failure
from ._args import ALGOS, AVG, DTYPES, LINK_NAMES, OPS, config, dtype_name, int_arg, library_op, name_arg
from ._errors import check, closed_error, result_name
from ._symmetric import Owner, SymmetricBuffer

try:
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is a dependency
    _np = None

# ---- fast-path tables, filled once ----
_addressof = ctypes.addressof
_from_buffer = ctypes.c_char.from_buffer  # needs a writable, C-contiguous buffer: both checks at once
_ndarray = _np.ndarray if _np is not None else None
_np_empty = _np.empty if _np is not None else None
_NP_CODES = {_np.dtype(n): DTYPES[n] for n in ("float32", "float16", "int32", "float64")} if _np is not None else {}
# The library's own ops: "avg" is not one, so it misses here and takes the general path.
_STR_OPS = {name: value for name, value in OPS.items() if value != AVG}
# Forced algorithms by their exact names (other spellings take the general path, which explains).
_FORCED_ALGOS = {name: value for name, value in ALGOS.items() if name != "auto"}
# The bound library function and the torch tables live in _runtime (shared with the general and
# fused paths); the fast path reads them as globals of this module, refreshed by _runtime.watch.
_TORCH_CODES = R._TORCH_CODES
_TORCH_OPS = R._TORCH_OPS
_AR = None
_AR_ALGO = None
_torch = None
_Tensor = None
_RedOpType = None
_raw_stream = None


def _refresh():
    global _AR, _AR_ALGO, _torch, _Tensor, _RedOpType, _raw_stream
    _AR = R._AR
    _AR_ALGO = R._AR_ALGO
    _torch = R._torch
    _raw_stream = R._raw_stream
    _RedOpType = R._RedOpType
    _Tensor = R._Tensor  # last: a tensor takes the fast path only once _Tensor is set


R.watch(_refresh)


def on_close(comm, hook):
    """Calls hook() when comm closes (close(), or its collection), before its library comm can be
    destroyed."""
    comm.__dict__.setdefault("_close_hooks", []).append(hook)


class Comm:
    """A symmar communicator: one rank of an intra-node allreduce group.

    Comm(nranks, rank, uid, device="auto") joins the group named by uid (from get_unique_id);
    every rank must construct it concurrently. device: "cpu" (host backend), "auto" (the current
    CUDA device, else the host backend) or a CUDA ordinal. Other constructors: from_allgather,
    init_all, from_process_group (torch), from_mpi (mpi4py).
    """

    def __init__(self, nranks, rank, uid, device="auto", timeout_ms=None, staging_bytes=None, table_file=None):
        nranks = int_arg(nranks, "nranks", 1)
        rank = int_arg(rank, "rank", 0)
        if not isinstance(uid, (bytes, bytearray, memoryview)):
            raise TypeError("uid must be bytes from symmar.get_unique_id(), not %s" % type(uid).__name__)
        uid = bytes(uid)
        if len(uid) != L.UNIQUE_ID_BYTES:
            raise ValueError("uid must be %d bytes, got %d" % (L.UNIQUE_ID_BYTES, len(uid)))
        cfg = config(device, timeout_ms, staging_bytes, table_file)
        cid = L.UniqueId()
        ctypes.memmove(ctypes.addressof(cid), uid, L.UNIQUE_ID_BYTES)
        handle = ctypes.c_void_p()
        check(L.lib().symmarCommInitRank(ctypes.byref(handle), nranks, cid, rank, ctypes.byref(cfg)))
        self._adopt(handle.value, None, cfg.device)

    @classmethod
    def _wrap(cls, handle, keepalive=None, device=L.DEVICE_AUTO):
        self = cls.__new__(cls)
        self._adopt(handle, keepalive, device)
        return self

    def _adopt(self, handle, keepalive, device):
        self._owner = Owner(handle, keepalive)
        self._handle = handle
        self._buffers = weakref.WeakSet()
        R.bind()
        r, n = ctypes.c_int(), ctypes.c_int()
        lib = L.lib()
        check(lib.symmarCommRank(handle, ctypes.byref(r)), handle)
        check(lib.symmarCommCount(handle, ctypes.byref(n)), handle)
        self._rank, self._nranks = r.value, n.value
        self._host = self.topology["link"] == "host"
        self._device = -1
        if not self._host:
            # The GPU comm's device: the ordinal asked for, else (auto) the current CUDA device.
            if device >= 0:
                self._device = device
            else:
                try:
                    import torch
                    self._device = torch.cuda.current_device()
                except ImportError:  # no torch: the ordinal of foreign device buffers goes unchecked
                    self._device = _buffers.CUDA_UNKNOWN

    @classmethod
    def from_allgather(cls, nranks, rank, allgather, device="auto", timeout_ms=None, staging_bytes=None,
                       table_file=None):
        """Creates the comm through the engine's own allgather: allgather(bytes) must return a list of
        nranks bytes objects (rank order). It is kept and called again (collectively) by mem_alloc and
        SymmetricBuffer.free for as long as the comm lives. The library waits for it without a bound
        (timeout_ms bounds symmar's own waits): a callback that can block must bound itself and raise
        TimeoutError (reported as symmarTimeout). from_process_group and from_mpi do that."""
        nranks = int_arg(nranks, "nranks", 1)
        rank = int_arg(rank, "rank", 0)
        if not callable(allgather):
            raise TypeError("allgather must be callable: allgather(bytes) -> list of bytes")
        cfg = config(device, timeout_ms, staging_bytes, table_file)
        return cls._from_c_allgather(nranks, rank, _AllGather(allgather, nranks), cfg)

    @classmethod
    def _from_c_allgather(cls, nranks, rank, gather, cfg):
        """gather: an object with .c_fn (a symmarAllGatherFn) and .error (the exception it caught)."""
        handle = ctypes.c_void_p()
        res = L.lib().symmarCommInitExternal(ctypes.byref(handle), nranks, rank, gather.c_fn, None, ctypes.byref(cfg))
        if res != 0:
            _raise_gather_failure(res, gather)
        return cls._wrap(handle.value, gather, cfg.device)

    @classmethod
    def from_process_group(cls, group=None, device=None, **kwargs):
        """torch.distributed: see symmar.torch.from_process_group."""
        from . import torch as symmar_torch
        return symmar_torch.from_process_group(group, device, **kwargs)

    @classmethod
    def from_mpi(cls, mpi_comm=None, **kwargs):
        """mpi4py: see symmar.mpi.from_mpi."""
        from . import mpi as symmar_mpi
        return symmar_mpi.from_mpi(mpi_comm, **kwargs)

    @classmethod
    def init_all(cls, nranks, devices=None, timeout_ms=None, staging_bytes=None, table_file=None):
        """nranks comms in this process (symmarCommInitAll). devices: None (config default, "auto"),
        or one entry per rank ("cpu", "auto" or an ordinal; may repeat). On the host backend each
        comm's collectives must then be called from its own thread, concurrently."""
        nranks = int_arg(nranks, "nranks", 1)
        from ._args import device_arg
        cfg = config("auto", timeout_ms, staging_bytes, table_file)
        devs = None
        if devices is not None:
            if isinstance(devices, (str, bytes)) or not hasattr(devices, "__len__"):
                raise TypeError("devices must be a list with one device per rank")
            if len(devices) != nranks:
                raise ValueError("devices has %d entries for %d ranks" % (len(devices), nranks))
            devs = (ctypes.c_int * nranks)(*[device_arg(d) for d in devices])
        handles = (ctypes.c_void_p * nranks)()
        check(L.lib().symmarCommInitAll(handles, nranks, devs, ctypes.byref(cfg)))
        return [cls._wrap(h, None, devs[i] if devs is not None else L.DEVICE_AUTO) for i, h in enumerate(handles)]

    # -- properties --

    @property
    def rank(self):
        return self._rank

    @property
    def nranks(self):
        return self._nranks

    @property
    def handle(self):
        """The symmarComm_t as an int, for passing to other C code (0 after close)."""
        return self._handle or 0

    @property
    def closed(self):
        return not self._handle

    def _live(self):
        if not self._handle:
            raise closed_error()
        return self._handle

    @property
    def topology(self):
        """dict: cc_major, cc_minor, link ("nvswitch"|"nvlink"|"pcie"|"pcie-nop2p"|"host"|"unknown"), world_size, multicast."""
        handle = self._live()
        t = L.Topology()
        check(L.lib().symmarCommTopology(handle, ctypes.byref(t)), handle)
        return {"cc_major": t.cc_major, "cc_minor": t.cc_minor, "link": LINK_NAMES.get(t.link, "unknown"),
                "world_size": t.world_size, "multicast": bool(t.multicast)}

    def describe(self):
        """One line on the backend, topology and table row in use (symmarCommDescribe); row entries
        this comm cannot run (say mpi without an MPI fallback) are marked as such."""
        handle = self._live()
        buf = ctypes.create_string_buffer(1024)
        check(L.lib().symmarCommDescribe(handle, buf, len(buf)), handle)
        return buf.value.decode(errors="replace")

    def async_error(self):
        """None, or the name of the error that failed the comm asynchronously (symmarCommGetAsyncError)."""
        handle = self._live()
        err = ctypes.c_int()
        check(L.lib().symmarCommGetAsyncError(handle, ctypes.byref(err)), handle)
        return None if err.value == 0 else result_name(err.value)

    def adopt_nccl(self, nccl_comm):
        """Uses the engine's ncclComm_t (an int address) as this comm's fallback; not owned."""
        handle = self._live()
        check(L.lib().symmarCommAdoptNccl(handle, int_arg(nccl_comm, "nccl_comm", 1)), handle)

    def set_host_threads(self, threads, pool=None):
        """The threads this rank splits a host comm's large steps over (the two-shot allreduce's, the
        reduce-scatter's, the all-gather's, the fused norm's; symmarCommSetHostThreads;
        SYMMAR_HOST_THREADS sets it at creation): 1, this thread alone; pool None, threads - 1 helper
        threads of the comm's own, which inherit this thread's CPU affinity; pool "torch", torch's
        intra-op threads (needs libsymmar_torch), as engines' CPU allreduces use their OpenMP
        threads. Each rank chooses for itself: the results are the same bits."""
        handle = self._live()
        threads = int_arg(threads, "threads", 1)
        if threads > 64:
            raise ValueError("threads must be 1..64, got %d" % threads)
        run = None
        if pool == "torch":
            from . import ops
            if not ops.compiled:
                raise ValueError("pool='torch' needs libsymmar_torch built against this torch (torch.ops.symmar "
                                 "runs its Python kernels here)")
            run = ctypes.cast(ops._compiled.symmarTorchParallelFor, ctypes.c_void_p).value
        elif pool is not None:
            raise ValueError("pool must be None (the comm's own threads) or 'torch', not %r" % (pool,))
        check(L.lib().symmarCommSetHostThreads(handle, threads, run, None), handle)

    def plan(self, count, dtype="bfloat16", op="sum"):
        """The algorithm name this comm would run for count elements (symmarCommPlan): its own
        topology, tables and fallbacks."""
        handle = self._live()
        algo = ctypes.c_int()
        check(L.lib().symmarCommPlan(handle, int_arg(count, "count", 0), DTYPES[dtype_name(dtype)],
                                     library_op(op), ctypes.byref(algo)), handle)
        return _algo_name(algo.value)

    # -- symmetric memory --

    def mem_alloc(self, nbytes):
        """Collective: nbytes of symmetric memory (same offset on every rank; inputs in it are read
        by peers without a copy). Returns a SymmetricBuffer; view it with .numpy() or .torch()."""
        handle = self._live()
        nbytes = int_arg(nbytes, "nbytes", 1)
        ptr = ctypes.c_void_p()
        check(L.lib().symmarMemAlloc(handle, nbytes, ctypes.byref(ptr)), handle)
        buf = SymmetricBuffer(self, self._owner, ptr.value, nbytes, self._host)
        self._buffers.add(buf)
        return buf

    # -- the collective --

    def all_reduce(self, x, out=None, op="sum", algo="auto", dtype=None, stream=None):
        """Allreduces x across the ranks and returns the result (out, or a new array/tensor).

        x: a dense NumPy array, torch tensor, or object with the buffer protocol,
        __array_interface__, __cuda_array_interface__ or __dlpack__ (host memory on a host comm,
        the comm's GPU on a GPU comm). out=x reduces in place; out=None allocates a NumPy array
        (host) or a tensor like x. op: "sum"|"max"|"min"|"avg" or a torch.distributed.ReduceOp
        (avg = sum, then divide by nranks in the buffer's dtype). algo: "auto" or one algorithm name
        (SymmarError symmarUnsupported if it cannot serve). dtype: e.g. "bfloat16" to read 2-byte
        integers as bf16. stream: for device buffers other than torch tensors, a cudaStream_t as
        int (torch tensors use torch.cuda.current_stream()).
        """
        algov = 0 if algo == "auto" else (_FORCED_ALGOS.get(algo, -1) if type(algo) is str else -1)
        if dtype is None and stream is None and algov >= 0:
            tx = type(x)
            top = type(op)
            opv = _STR_OPS.get(op) if top is str else (_TORCH_OPS.get(op) if top is _RedOpType else None)
            if opv is not None:
                if tx is _ndarray:
                    code = _NP_CODES.get(x.dtype)
                    if code is not None and self._host:
                        try:
                            sp = _addressof(_from_buffer(x))
                            if out is None:
                                out = _np_empty(x.shape, x.dtype)
                                rp = _addressof(_from_buffer(out))
                            elif out is x:
                                rp = sp
                            elif type(out) is _ndarray and out.dtype is x.dtype and out.shape == x.shape:
                                rp = _addressof(_from_buffer(out))
                            else:
                                rp = 0
                        except (ValueError, TypeError, BufferError):  # empty, read-only or strided
                            rp = 0
                        if rp:
                            if algov:
                                res = _AR_ALGO(sp, rp, x.size, code, opv, algov, self._handle, None)
                            else:
                                res = _AR(sp, rp, x.size, code, opv, self._handle, None)
                            if res:
                                self._fail(res)
                            return out
                elif tx is _Tensor:
                    code = _TORCH_CODES.get(x.dtype)
                    if code is not None and x.is_contiguous() and not x.is_neg():
                        if x.is_cpu:
                            dev, s = -1, None
                        elif x.is_cuda:
                            dev = x.get_device()
                            s = _raw_stream(dev)
                        else:
                            dev = -2  # no backend: the general path explains
                        if dev == self._device:
                            sp = x.data_ptr()
                            if out is None:
                                out = _torch.empty_like(x)
                                rp = out.data_ptr()
                            elif out is x:
                                rp = sp
                            elif (type(out) is _Tensor and out.dtype is x.dtype and out.get_device() == dev and
                                  out.shape == x.shape and out.is_contiguous() and not out.is_neg()):
                                rp = out.data_ptr()
                            else:
                                rp = -1
                            if rp != -1:
                                if algov:
                                    res = _AR_ALGO(sp, rp, x.numel(), code, opv, algov, self._handle, s)
                                else:
                                    res = _AR(sp, rp, x.numel(), code, opv, self._handle, s)
                                if res:
                                    self._fail(res)
                                return out
        return self._all_reduce_general(x, out, op, algo, dtype, stream)

    def all_reduce_(self, x, op="sum", algo="auto", dtype=None, stream=None):
        """In place: x holds the result afterwards (the same object is returned)."""
        return self.all_reduce(x, x, op, algo, dtype, stream)

    def all_reduce_ptr(self, send_ptr, recv_ptr, count, dtype, op="sum", stream=0, algo="auto"):
        """The bare call for engines that manage their own memory: addresses as ints (send_ptr ==
        recv_ptr is in place), count elements of dtype ("float32", "bfloat16", ...), stream a
        cudaStream_t as int (0 on the host backend). No checks beyond the library's own."""
        code = DTYPES.get(dtype)
        if code is None:
            code = DTYPES[dtype_name(dtype)]
        opv = _STR_OPS.get(op) if type(op) is str else None
        if opv is None:
            opv = library_op(op)
        if type(count) is not int or count < 0:
            count = int_arg(count, "count", 0)
        # ctypes would turn a str or bytes into the address of its characters: ints only
        if type(send_ptr) is not int or type(recv_ptr) is not int or (stream and type(stream) is not int):
            send_ptr = int_arg(send_ptr, "send_ptr", 0)
            recv_ptr = int_arg(recv_ptr, "recv_ptr", 0)
            stream = int_arg(stream or 0, "stream", 0)
        try:
            if algo == "auto":
                res = _AR(send_ptr, recv_ptr, count, code, opv, self._handle, stream or None)
            else:
                res = _AR_ALGO(send_ptr, recv_ptr, count, code, opv, name_arg(algo, ALGOS, "algo"), self._handle,
                               stream or None)
        except ctypes.ArgumentError as e:
            raise TypeError("all_reduce_ptr: addresses and stream must be ints (%s)" % e) from None
        if res:
            self._fail(res)

    all_reduce_add_rms_norm = _fused.all_reduce_add_rms_norm  # allreduce + residual add + RMSNorm (+ FP8)
    reduce_scatter = _scatter_gather.reduce_scatter
    all_gather = _scatter_gather.all_gather

    def _fail(self, res):
        if not self._handle:
            raise closed_error()
        check(res, self._handle)

    def _all_reduce_general(self, x, out, op, algo, dtype, stream):
        return _general.all_reduce(self, x, out, op, algo, dtype, stream)

    def _check_device(self, buf, what):
        _general.check_device(self, buf, what)

    # -- lifetime --

    def close(self):
        """Releases the comm (symmarCommDestroy; not collective). Idempotent. Views of symmetric
        buffers that are still alive keep the memory mapped until they go."""
        for hook in self.__dict__.pop("_close_hooks", ()):
            hook()  # before the library comm can go: no one may reach it through a stale pointer
        owner = getattr(self, "_owner", None)
        self._handle = None
        self._owner = None
        if owner is not None and not any(b.views_alive for b in list(self._buffers)):
            owner.destroy()
        # else: the views' memory objects hold the owner, which destroys the comm after the last view

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        if not self._handle:
            return "<symmar.Comm closed>"
        return "<symmar.Comm rank %d/%d %s>" % (self._rank, self._nranks, "host" if self._host else "cuda")

