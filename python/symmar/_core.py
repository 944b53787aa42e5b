"""Comm, plan and errors: the Python face of the symmar C ABI (include/symmar/symmar.h)."""
import ctypes
import numbers
import sys

from . import _lib as L

try:
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is a dependency, torch users may still get by
    _np = None

RESULT_NAMES = (
    "symmarSuccess",
    "symmarInvalidArgument",
    "symmarInvalidUsage",
    "symmarUnsupported",
    "symmarSystemError",
    "symmarCudaError",
    "symmarNcclError",
    "symmarTimeout",
    "symmarPeerFailure",
    "symmarOutOfMemory",
    "symmarInternalError",
)
_INVALID_USAGE = 2

DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2, "int32": 3, "float64": 4}
_DTYPE_ALIASES = {
    "fp32": "float32", "float": "float32",
    "fp16": "float16", "half": "float16",
    "bf16": "bfloat16",
    "int": "int32",
    "fp64": "float64", "double": "float64",
}
OPS = {"sum": 0, "max": 1, "min": 2}
ALGOS = {"auto": 0, "oneshot": 1, "twoshot": 2, "multimem": 3, "nccl": 4, "mpi": 5}
LINKS = {"unknown": 0, "nvswitch": 1, "nvlink": 2, "pcie": 3, "host": 4}
_LINK_NAMES = {v: k for k, v in LINKS.items()}


class SymmarError(RuntimeError):
    """A call into libsymmar failed. .code is the symmarResult_t, .name its name
    ("symmarTimeout", ...), and the message is the library's last-error text."""

    def __init__(self, code, message=""):
        self.code = int(code)
        self.name = _result_name(self.code)
        super().__init__(message or self.name)


def _result_name(code):
    if 0 <= code < len(RESULT_NAMES):
        return RESULT_NAMES[code]
    try:
        return L.lib().symmarGetErrorString(code).decode()
    except Exception:  # pragma: no cover
        return "unknown result"


def _check(res, handle=None):
    if res == 0:
        return
    lib = L.lib()
    text = lib.symmarGetLastError(None) or b""  # the calling thread's last failure
    if not text and handle:
        text = lib.symmarGetLastError(handle) or b""
    raise SymmarError(res, text.decode(errors="replace"))


# ---- argument conversion ----

def _int_arg(value, what, minimum=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError("%s must be >= %d, got %d" % (what, minimum, value))
    return value


def _opt_int_arg(value, what, minimum):
    return 0 if value is None else _int_arg(value, what, minimum)


def _name_arg(value, table, what):
    if not isinstance(value, str):
        raise TypeError("%s must be a str (one of %s), not %s" % (what, ", ".join(table), type(value).__name__))
    key = value.lower()
    if key not in table:
        raise ValueError("unknown %s %r (expected one of %s)" % (what, value, ", ".join(table)))
    return table[key]


def _dtype_name(dtype):
    """A dtype argument (str, numpy dtype or torch dtype) -> one of DTYPES' keys."""
    if isinstance(dtype, str):
        name = dtype.lower()
    else:
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(dtype, torch.dtype):
            name = str(dtype).replace("torch.", "")
        elif _np is not None and (isinstance(dtype, _np.dtype) or (isinstance(dtype, type) and issubclass(dtype, _np.generic))):
            name = _np.dtype(dtype).name
        else:
            raise TypeError("dtype must be a str such as 'bfloat16', not %s" % type(dtype).__name__)
    name = _DTYPE_ALIASES.get(name, name)
    if name not in DTYPES:
        raise ValueError("unsupported dtype %r (expected one of %s)" % (dtype, ", ".join(DTYPES)))
    return name


def _device_arg(device):
    if isinstance(device, str):
        d = device.lower()
        if d == "cpu":
            return L.DEVICE_CPU
        if d == "auto":
            return L.DEVICE_AUTO
        if d.startswith("cuda:") and d[5:].isdigit():
            return int(d[5:])
        raise ValueError("device must be 'cpu', 'auto', 'cuda:N' or a CUDA ordinal, got %r" % device)
    if isinstance(device, bool) or not isinstance(device, numbers.Integral):
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(device, torch.device):
            return L.DEVICE_CPU if device.type == "cpu" else (device.index if device.index is not None else L.DEVICE_AUTO)
        raise TypeError("device must be 'cpu', 'auto' or an int, not %s" % type(device).__name__)
    device = int(device)
    if device < 0:
        raise ValueError("a CUDA ordinal must be >= 0, got %d (use 'cpu' or 'auto')" % device)
    return device


def _config(device, timeout_ms, staging_bytes, table_file):
    cfg = L.Config()
    cfg.size = ctypes.sizeof(L.Config)
    cfg.device = _device_arg(device)
    cfg.timeout_ms = _opt_int_arg(timeout_ms, "timeout_ms", 1)
    cfg.staging_bytes = _opt_int_arg(staging_bytes, "staging_bytes", 0)
    if table_file is not None:
        if not isinstance(table_file, (str, bytes)):
            raise TypeError("table_file must be a str path")
        cfg.table_file = table_file.encode() if isinstance(table_file, str) else table_file
    return cfg


def _algo_name(value):
    return L.lib().symmarAlgoName(value).decode()


# ---- module functions ----

def get_unique_id():
    """A fresh rendezvous id (bytes, 128 long). Make it on one process (rank 0's, or a parent that
    forks the ranks) and hand it to every rank's Comm; each id serves one comm."""
    uid = L.UniqueId()
    _check(L.lib().symmarGetUniqueId(ctypes.byref(uid)))
    return ctypes.string_at(ctypes.addressof(uid), L.UNIQUE_ID_BYTES)


def version():
    """The loaded library's version as (major, minor, patch)."""
    v = ctypes.c_int()
    _check(L.lib().symmarGetVersion(ctypes.byref(v)))
    return (v.value // 10000, v.value // 100 % 100, v.value % 100)


def plan(cc=(12, 0), link="pcie", world=4, multicast=False, count=7168, dtype="bfloat16", op="sum"):
    """The pure planner (symmarPlan): the algorithm name symmarAlgoAuto would run for this request
    on the described machine, e.g. plan(cc=(9, 0), link="nvswitch", world=8, multicast=True)."""
    if not isinstance(cc, (tuple, list)) or len(cc) != 2:
        raise TypeError("cc must be a (major, minor) tuple")
    topo = L.Topology()
    topo.cc_major = _int_arg(cc[0], "cc major", 0)
    topo.cc_minor = _int_arg(cc[1], "cc minor", 0)
    topo.link = _name_arg(link, LINKS, "link")
    topo.world_size = _int_arg(world, "world", 1)
    if not isinstance(multicast, (bool, numbers.Integral)):
        raise TypeError("multicast must be a bool")
    topo.multicast = 1 if multicast else 0
    algo = ctypes.c_int()
    _check(L.lib().symmarPlan(ctypes.byref(topo), _int_arg(count, "count", 0), DTYPES[_dtype_name(dtype)],
                              _name_arg(op, OPS, "op"), ctypes.byref(algo)))
    return _algo_name(algo.value)


# ---- Comm ----

class _AllGather:
    """Adapts a Python allgather(bytes) -> list[bytes] to symmarAllGatherFn. Kept alive (with its
    CFUNCTYPE) for the comm's lifetime: the library calls it for collective memory calls too."""

    def __init__(self, fn, nranks):
        self.fn = fn
        self.nranks = nranks
        self.error = None
        self.c_fn = L.AllGatherFn(self._call)

    def _call(self, send, recv, nbytes, _user):
        try:
            parts = list(self.fn(ctypes.string_at(send, nbytes)))
            if len(parts) != self.nranks:
                raise ValueError("allgather returned %d parts for %d ranks" % (len(parts), self.nranks))
            for i, part in enumerate(parts):
                part = bytes(part)
                if len(part) != nbytes:
                    raise ValueError("allgather part %d has %d bytes, expected %d" % (i, len(part), nbytes))
                ctypes.memmove(recv + i * nbytes, part, nbytes)
            return 0
        except BaseException as e:  # never let an exception cross into C
            self.error = e
            return 1


class Comm:
    """A symmar communicator: one rank of an intra-node allreduce group.

    Comm(nranks, rank, uid, device="auto") joins the group named by uid (from get_unique_id);
    every rank must construct it concurrently. device: "cpu" (host backend), "auto" (the current
    CUDA device, else the host backend) or a CUDA ordinal.
    """

    def __init__(self, nranks, rank, uid, device="auto", timeout_ms=None, staging_bytes=None, table_file=None):
        nranks = _int_arg(nranks, "nranks", 1)
        rank = _int_arg(rank, "rank", 0)
        if not isinstance(uid, (bytes, bytearray, memoryview)):
            raise TypeError("uid must be bytes from symmar.get_unique_id(), not %s" % type(uid).__name__)
        uid = bytes(uid)
        if len(uid) != L.UNIQUE_ID_BYTES:
            raise ValueError("uid must be %d bytes, got %d" % (L.UNIQUE_ID_BYTES, len(uid)))
        cfg = _config(device, timeout_ms, staging_bytes, table_file)
        cid = L.UniqueId()
        ctypes.memmove(ctypes.addressof(cid), uid, L.UNIQUE_ID_BYTES)
        handle = ctypes.c_void_p()
        _check(L.lib().symmarCommInitRank(ctypes.byref(handle), nranks, cid, rank, ctypes.byref(cfg)))
        self._adopt(handle.value, keepalive=None)

    @classmethod
    def _wrap(cls, handle, keepalive=None):
        self = cls.__new__(cls)
        self._adopt(handle, keepalive)
        return self

    def _adopt(self, handle, keepalive):
        self._handle = handle
        self._keepalive = keepalive
        r, n = ctypes.c_int(), ctypes.c_int()
        lib = L.lib()
        _check(lib.symmarCommRank(handle, ctypes.byref(r)), handle)
        _check(lib.symmarCommCount(handle, ctypes.byref(n)), handle)
        self._rank, self._nranks = r.value, n.value
        self._host = self.topology["link"] == "host"

    @classmethod
    def from_allgather(cls, nranks, rank, allgather, device="auto", timeout_ms=None, staging_bytes=None,
                       table_file=None):
        """Creates the comm through the engine's own allgather: allgather(bytes) must return a list of
        nranks bytes objects (rank order), e.g. built on torch.distributed.all_gather_object. It is
        kept and may be called again (collectively) for as long as the comm lives."""
        nranks = _int_arg(nranks, "nranks", 1)
        rank = _int_arg(rank, "rank", 0)
        if not callable(allgather):
            raise TypeError("allgather must be callable: allgather(bytes) -> list of bytes")
        cfg = _config(device, timeout_ms, staging_bytes, table_file)
        gather = _AllGather(allgather, nranks)
        handle = ctypes.c_void_p()
        res = L.lib().symmarCommInitExternal(ctypes.byref(handle), nranks, rank, gather.c_fn, None, ctypes.byref(cfg))
        if res != 0 and gather.error is not None:
            try:
                _check(res)
            except SymmarError as e:
                raise e from gather.error
        _check(res)
        return cls._wrap(handle.value, keepalive=gather)

    @classmethod
    def init_all(cls, nranks, devices=None, timeout_ms=None, staging_bytes=None, table_file=None):
        """nranks comms in this process (symmarCommInitAll). devices: None (config default, "auto"),
        or one entry per rank ("cpu", "auto" or an ordinal; may repeat). On the host backend each
        comm's collectives must then be called from its own thread, concurrently."""
        nranks = _int_arg(nranks, "nranks", 1)
        cfg = _config("auto", timeout_ms, staging_bytes, table_file)
        devs = None
        if devices is not None:
            if isinstance(devices, (str, bytes)) or not hasattr(devices, "__len__"):
                raise TypeError("devices must be a list with one device per rank")
            if len(devices) != nranks:
                raise ValueError("devices has %d entries for %d ranks" % (len(devices), nranks))
            devs = (ctypes.c_int * nranks)(*[_device_arg(d) for d in devices])
        handles = (ctypes.c_void_p * nranks)()
        _check(L.lib().symmarCommInitAll(handles, nranks, devs, ctypes.byref(cfg)))
        return [cls._wrap(h) for h in handles]

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
            raise SymmarError(_INVALID_USAGE, "comm is closed")
        return self._handle

    @property
    def topology(self):
        """dict: cc_major, cc_minor, link ("nvswitch"|"nvlink"|"pcie"|"host"|"unknown"), world_size, multicast."""
        handle = self._live()
        t = L.Topology()
        _check(L.lib().symmarCommTopology(handle, ctypes.byref(t)), handle)
        return {
            "cc_major": t.cc_major,
            "cc_minor": t.cc_minor,
            "link": _LINK_NAMES.get(t.link, "unknown"),
            "world_size": t.world_size,
            "multicast": bool(t.multicast),
        }

    def describe(self):
        """One line on the backend, topology and table row in use (symmarCommDescribe)."""
        handle = self._live()
        buf = ctypes.create_string_buffer(1024)
        _check(L.lib().symmarCommDescribe(handle, buf, len(buf)), handle)
        return buf.value.decode(errors="replace")

    def async_error(self):
        """None, or the name of the error that failed the comm asynchronously (symmarCommGetAsyncError)."""
        handle = self._live()
        err = ctypes.c_int()
        _check(L.lib().symmarCommGetAsyncError(handle, ctypes.byref(err)), handle)
        return None if err.value == 0 else _result_name(err.value)

    def adopt_nccl(self, nccl_comm):
        """Uses the engine's ncclComm_t (an int address) as this comm's fallback; not owned."""
        handle = self._live()
        _check(L.lib().symmarCommAdoptNccl(handle, _int_arg(nccl_comm, "nccl_comm", 1)), handle)

    def plan(self, count, dtype="bfloat16", op="sum"):
        """The algorithm name this comm would run for count elements (symmarCommPlan)."""
        handle = self._live()
        algo = ctypes.c_int()
        _check(L.lib().symmarCommPlan(handle, _int_arg(count, "count", 0), DTYPES[_dtype_name(dtype)],
                                      _name_arg(op, OPS, "op"), ctypes.byref(algo)), handle)
        return _algo_name(algo.value)

    # -- the collective --

    def all_reduce(self, x, out=None, op="sum", algo="auto", dtype=None):
        """Allreduces x across the ranks and returns the result (out, or a new array/tensor).

        x: a C-contiguous NumPy array (host backend) or a contiguous torch tensor (CUDA tensor on a
        GPU comm, enqueued on torch.cuda.current_stream(); CPU tensor on the host backend).
        out=x reduces in place. op: "sum"|"max"|"min". algo: "auto"|"oneshot"|"twoshot"|"multimem"|
        "nccl"|"mpi" (forcing one raises SymmarError symmarUnsupported if it cannot serve).
        dtype: None (from x), or e.g. "bfloat16" to read a uint16/int16 array as bf16.
        """
        opv = _name_arg(op, OPS, "op")
        algov = _name_arg(algo, ALGOS, "algo")
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x, torch.Tensor):
            return self._all_reduce_torch(torch, x, out, opv, algov, dtype)
        if _np is None or not isinstance(x, _np.ndarray):
            raise TypeError("all_reduce takes a NumPy array or a torch tensor, not %s" % type(x).__name__)
        dt = _numpy_dtype(x, dtype)
        if not x.flags.c_contiguous:
            raise ValueError("x must be C-contiguous (use numpy.ascontiguousarray)")
        if out is None:
            out = _np.empty_like(x, order="C")
        elif not isinstance(out, _np.ndarray):
            raise TypeError("out must be a NumPy array like x, not %s" % type(out).__name__)
        else:
            _same_layout(out, x, out.dtype == x.dtype, out.flags.c_contiguous, out.flags.writeable)
        if not self._host:
            raise ValueError("NumPy arrays are host memory: they need a host-backend comm (device='cpu')")
        self._call(x.ctypes.data, out.ctypes.data, x.size, dt, opv, algov, None)
        return out

    def _all_reduce_torch(self, torch, x, out, opv, algov, dtype):
        dt = _torch_dtype(torch, x, dtype)
        if not x.is_contiguous():
            raise ValueError("x must be contiguous (use .contiguous())")
        if out is None:
            out = torch.empty_like(x, memory_format=torch.contiguous_format)
        elif not isinstance(out, torch.Tensor):
            raise TypeError("out must be a torch tensor like x, not %s" % type(out).__name__)
        else:
            if out.device != x.device:
                raise ValueError("out is on %s but x on %s" % (out.device, x.device))
            _same_layout(out, x, out.dtype == x.dtype, out.is_contiguous(), True)
        stream = None
        if x.is_cuda:
            if self._host:
                raise ValueError("x is a CUDA tensor but this comm uses the host backend")
            stream = torch.cuda.current_stream(x.device).cuda_stream
        elif x.device.type != "cpu":
            raise ValueError("tensors on %s are not supported" % x.device)
        elif not self._host:
            raise ValueError("x is a CPU tensor but this comm is a GPU comm")
        self._call(x.data_ptr(), out.data_ptr(), x.numel(), dt, opv, algov, stream)
        return out

    def _call(self, send, recv, count, dt, opv, algov, stream):
        handle = self._live()
        lib = L.lib()
        if algov == 0:
            res = lib.symmarAllReduce(send, recv, count, dt, opv, handle, stream)
        else:
            res = lib.symmarAllReduceAlgo(send, recv, count, dt, opv, algov, handle, stream)
        _check(res, handle)

    # -- lifetime --

    def close(self):
        """Releases the comm (symmarCommDestroy; not collective). Idempotent."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            res = L.lib().symmarCommDestroy(handle)
            self._keepalive = None
            _check(res)

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


def _same_layout(out, x, same_dtype, contiguous, writeable):
    if not same_dtype:
        raise ValueError("out has dtype %s but x %s" % (out.dtype, x.dtype))
    if tuple(out.shape) != tuple(x.shape):
        raise ValueError("out has shape %s but x %s" % (tuple(out.shape), tuple(x.shape)))
    if not contiguous:
        raise ValueError("out must be contiguous")
    if not writeable:
        raise ValueError("out is read-only")


def _numpy_dtype(x, dtype):
    xd = x.dtype
    if not xd.isnative:
        raise ValueError("x has non-native byte order %s" % xd)
    if dtype is None:
        name = xd.name
        if name not in DTYPES:
            if name == "uint16":
                raise ValueError("unsupported dtype uint16 (pass dtype='bfloat16' to read it as bf16)")
            raise ValueError("unsupported dtype %s (expected one of %s)" % (name, ", ".join(DTYPES)))
        return DTYPES[name]
    name = _dtype_name(dtype)
    if name == "bfloat16":
        ok = xd.itemsize == 2 and (xd.kind in "ui" or xd.name == "bfloat16")
    else:
        ok = xd == _np.dtype(name)
    if not ok:
        raise ValueError("dtype=%r does not match an array of %s" % (dtype, xd))
    return DTYPES[name]


def _torch_dtype(torch, x, dtype):
    names = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
             torch.int32: "int32", torch.float64: "float64"}
    if dtype is None:
        if x.dtype not in names:
            raise ValueError("unsupported dtype %s (expected one of %s)" % (x.dtype, ", ".join(DTYPES)))
        return DTYPES[names[x.dtype]]
    name = _dtype_name(dtype)
    if name == "bfloat16":
        ok = x.element_size() == 2 and (x.dtype == torch.bfloat16 or not x.is_floating_point())
    else:
        ok = names.get(x.dtype) == name
    if not ok:
        raise ValueError("dtype=%r does not match a tensor of %s" % (dtype, x.dtype))
    return DTYPES[name]
