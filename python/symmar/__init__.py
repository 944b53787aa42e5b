"""symmar: intra-node allreduce that picks the fastest correct algorithm (ctypes binding).

    import symmar
    uid = symmar.get_unique_id()                       # in one process, shared with all ranks
    with symmar.Comm(nranks, rank, uid, device="cpu") as comm:
        y = comm.all_reduce(x)                         # NumPy array, torch tensor, any buffer
        comm.all_reduce_(x, op="max")                  # in place

Engines: symmar.torch (Comm.from_process_group), symmar.mpi (Comm.from_mpi). libsymmar is found
through $SYMMAR_LIBRARY, a copy shipped in this package, the build tree this package was
installed from, then the loader's paths (docs/python.md).
"""
from ._args import ALGOS, DTYPES, LINKS, OPS
from ._api import get_unique_id, plan, version
from ._core import Comm
from ._errors import SymmarError
from ._lib import UNIQUE_ID_BYTES, find_library, library_path
from ._symmetric import SymmetricBuffer

try:
    from ._version import __version__  # written into the wheel by its CMake build
except ImportError:  # the source tree: the version of the library in use

    def __getattr__(name):
        if name == "__version__":
            return "%d.%d.%d" % version()
        raise AttributeError("module 'symmar' has no attribute %r" % name)


__all__ = [
    "Comm",
    "SymmarError",
    "SymmetricBuffer",
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
