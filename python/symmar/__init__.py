"""symmar: intra-node allreduce that picks the fastest correct algorithm (ctypes binding).

    import symmar
    uid = symmar.get_unique_id()                       # on one process, shared with all ranks
    with symmar.Comm(nranks, rank, uid, device="cpu") as comm:
        y = comm.all_reduce(x)                         # NumPy array (host) or torch tensor (GPU)

libsymmar is found through $SYMMAR_LIBRARY, else a libsymmar.so* next to this package, else the
dynamic loader's search path. See docs/integration.md in the source tree.
"""
from ._core import (ALGOS, DTYPES, LINKS, OPS, Comm, SymmarError, get_unique_id, plan, version)
from ._lib import UNIQUE_ID_BYTES, find_library, library_path

__version__ = "0.1.0"

__all__ = [
    "Comm",
    "SymmarError",
    "get_unique_id",
    "plan",
    "version",
    "library_path",
    "find_library",
    "UNIQUE_ID_BYTES",
    "DTYPES",
    "OPS",
    "ALGOS",
    "LINKS",
]
