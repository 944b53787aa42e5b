"""Argument conversion shared by the module functions, Comm and the engine adapters: names of
dtypes, ops, algorithms and links, devices and the config struct. Wrong Python types raise
TypeError and bad values ValueError, before anything reaches the library."""
import ctypes
import numbers
import sys

from . import _lib as L

try:
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is a dependency
    _np = None

DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2, "int32": 3, "float64": 4}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
ITEMSIZE = {0: 4, 1: 2, 2: 2, 3: 4, 4: 8}
_DTYPE_ALIASES = {
    "fp32": "float32", "float": "float32",
    "fp16": "float16", "half": "float16",
    "bf16": "bfloat16",
    "int": "int32",
    "fp64": "float64", "double": "float64",
}
# "avg" is not a library op: the binding runs a sum and divides by nranks in the buffer's dtype.
OPS = {"sum": 0, "max": 1, "min": 2, "avg": 3}
AVG = OPS["avg"]
ALGOS = {"auto": 0, "oneshot": 1, "twoshot": 2, "multimem": 3, "nccl": 4, "mpi": 5, "lamport": 6}
LINKS = {"unknown": 0, "nvswitch": 1, "nvlink": 2, "pcie": 3, "host": 4, "pcie-nop2p": 5}
LINK_NAMES = {v: k for k, v in LINKS.items()}

# Hooks for ops of other libraries (symmar.torch registers torch.distributed.ReduceOp): type -> fn(op)
# returning an OPS value or None.
OP_CONVERTERS = {}


def int_arg(value, what, minimum=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError("%s must be >= %d, got %d" % (what, minimum, value))
    return value


def opt_int_arg(value, what, minimum):
    return 0 if value is None else int_arg(value, what, minimum)


def name_arg(value, table, what):
    if not isinstance(value, str):
        raise TypeError("%s must be a str (one of %s), not %s" % (what, ", ".join(table), type(value).__name__))
    key = value.lower()
    if key not in table:
        raise ValueError("unknown %s %r (expected one of %s)" % (what, value, ", ".join(table)))
    return table[key]


def op_arg(op):
    """op: "sum"|"max"|"min"|"avg", or an op of a registered library (torch.distributed.ReduceOp)."""
    for kind, convert in OP_CONVERTERS.items():
        if isinstance(op, kind):
            value = convert(op)
            if value is None:
                raise ValueError("unsupported op %s (symmar reduces with sum, max, min and avg)" % (op,))
            return value
    return name_arg(op, OPS, "op")


def library_op(op):
    """op_arg for calls that reach the library directly: avg is not one of its ops."""
    value = op_arg(op)
    if value == AVG:
        raise ValueError("op 'avg' needs a buffer the binding can divide: use all_reduce, not a raw pointer")
    return value


def dtype_name(dtype):
    """A dtype argument (str, numpy dtype or torch dtype) -> one of DTYPES' keys."""
    if isinstance(dtype, str):
        name = dtype.lower()
    else:
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(dtype, torch.dtype):
            name = str(dtype).replace("torch.", "")
        elif _np is not None and (isinstance(dtype, _np.dtype) or
                                  (isinstance(dtype, type) and issubclass(dtype, _np.generic))):
            name = _np.dtype(dtype).name
        else:
            raise TypeError("dtype must be a str such as 'bfloat16', not %s" % type(dtype).__name__)
    name = _DTYPE_ALIASES.get(name, name)
    if name not in DTYPES:
        raise ValueError("unsupported dtype %r (expected one of %s)" % (dtype, ", ".join(DTYPES)))
    return name


def device_arg(device):
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
            if device.type == "cpu":
                return L.DEVICE_CPU
            if device.type != "cuda":
                raise ValueError("device %s is neither cpu nor cuda" % device)
            return device.index if device.index is not None else torch.cuda.current_device()
        raise TypeError("device must be 'cpu', 'auto' or an int, not %s" % type(device).__name__)
    device = int(device)
    if device < 0:
        raise ValueError("a CUDA ordinal must be >= 0, got %d (use 'cpu' or 'auto')" % device)
    return device


def config(device, timeout_ms, staging_bytes, table_file):
    cfg = L.Config()
    cfg.size = ctypes.sizeof(L.Config)
    cfg.device = device_arg(device)
    cfg.timeout_ms = opt_int_arg(timeout_ms, "timeout_ms", 1)
    cfg.staging_bytes = opt_int_arg(staging_bytes, "staging_bytes", 0)
    if table_file is not None:
        if not isinstance(table_file, (str, bytes)):
            raise TypeError("table_file must be a str path")
        cfg.table_file = table_file.encode() if isinstance(table_file, str) else table_file
    return cfg


def effective_timeout_ms(timeout_ms):
    """The bound the library applies when timeout_ms is None: $SYMMAR_TIMEOUT_MS, else 30 s. The
    engine adapters bound their own collectives with it."""
    if timeout_ms is not None:
        return int_arg(timeout_ms, "timeout_ms", 1)
    import os
    try:
        value = int(os.environ.get("SYMMAR_TIMEOUT_MS", "30000"))
    except ValueError:
        value = 30000
    return value if value >= 1 else 30000
