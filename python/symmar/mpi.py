"""symmar for mpi4py programs (imported only where mpi4py is installed).

    from mpi4py import MPI
    import symmar.mpi
    comm = symmar.mpi.from_mpi(MPI.COMM_WORLD, device="cpu")   # or symmar.Comm.from_mpi

Two ways in. Where libsymmar_mpi sits next to libsymmar (or $SYMMAR_MPI_LIBRARY names it) and was
built against the MPI that mpi4py runs on, the comm is made by symmarCommInitMpi and has the `mpi`
fallback (MPI_Allreduce on a duplicate of the communicator), which the tables pick where it is
fastest. Otherwise the comm is bootstrapped through MPI_Iallgather, bounded by the comm's timeout,
and has no MPI fallback. fallback=True insists on the first way, False takes the second.
"""
import ctypes
import glob
import os
import time

try:
    from mpi4py import MPI
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("symmar.mpi needs mpi4py (pip install mpi4py, built against the MPI you run)") from e

from . import _core
from . import _lib as L
from ._args import config, effective_timeout_ms
from ._gather import CallbackAllGather
from ._errors import check

# Requests that gave up on their deadline: MPI still owns their buffers until they complete.
_abandoned = []


class _MpiAllGather(CallbackAllGather):
    """symmarAllGatherFn over MPI_Iallgather, polled against the comm's timeout: a rank that never
    makes the matching call costs a TimeoutError (symmarTimeout) instead of a hang."""

    def __init__(self, mpi_comm, timeout_ms):
        self.comm = mpi_comm
        self.nranks = mpi_comm.Get_size()
        self.timeout_ms = timeout_ms
        super().__init__()

    def _gather(self, send, recv, nbytes):
        mine = bytearray(ctypes.string_at(send, nbytes))
        total = bytearray(nbytes * self.nranks)
        req = self.comm.Iallgather([mine, MPI.BYTE], [total, MPI.BYTE])
        deadline = time.monotonic() + self.timeout_ms / 1000.0
        polls = 0
        while not req.Test():
            polls += 1
            if polls > 1000:  # ranks arrive within microseconds when all is well; then stop spinning
                if time.monotonic() > deadline:
                    _abandoned.append((req, mine, total))
                    raise TimeoutError("MPI_Iallgather did not complete within %d ms (does every rank of the "
                                       "communicator create the comm?)" % self.timeout_ms)
                time.sleep(0.0005)
        ctypes.memmove(recv, (ctypes.c_char * len(total)).from_buffer(total), len(total))


def mpi_library():
    """The path of a libsymmar_mpi usable from here, or None: $SYMMAR_MPI_LIBRARY, else a
    libsymmar_mpi.so* next to the libsymmar in use."""
    env = os.environ.get("SYMMAR_MPI_LIBRARY")
    if env:
        return env
    folder = os.path.dirname(os.path.abspath(L.library_path()))
    found = sorted(glob.glob(os.path.join(folder, "libsymmar_mpi.so*")), key=lambda p: (len(p), p))
    return found[0] if found else None


def _init_mpi_function(path):
    """symmarCommInitMpi, if libsymmar_mpi at path runs on the very MPI library mpi4py uses (the
    handle of MPI_COMM_WORLD must be the same object for both): else None and the reason."""
    try:
        handle = ctypes.CDLL(path)
    except OSError as e:
        return None, "cannot load %s (%s)" % (path, e)
    if MPI._sizeof(MPI.Comm) == ctypes.sizeof(ctypes.c_void_p) and "open mpi" in MPI.Get_library_version().lower():
        try:
            libmpi = ctypes.CDLL("libmpi.so.40", mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
            world = ctypes.addressof(ctypes.c_char.in_dll(libmpi, "ompi_mpi_comm_world"))
        except (OSError, ValueError) as e:
            return None, "libsymmar_mpi's Open MPI is not the one loaded (%s)" % e
        if world != MPI._handleof(MPI.COMM_WORLD):
            return None, "mpi4py runs on a different Open MPI than libsymmar_mpi"
        fn = handle.symmarCommInitMpi
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.POINTER(L.Config)]
        return fn, None
    return None, "libsymmar_mpi is used only with Open MPI here (mpi4py runs on %s)" % MPI.get_vendor()[0]


def from_mpi(mpi_comm=None, device="cpu", fallback="auto", timeout_ms=None, staging_bytes=None, table_file=None):
    """A symmar comm over the ranks of an mpi4py intracommunicator (default MPI.COMM_WORLD), in its
    rank order; collective over it. fallback: "auto" (libsymmar_mpi where usable, with the mpi
    fallback; else the bounded allgather), True (libsymmar_mpi or RuntimeError), False (allgather)."""
    mpi_comm = MPI.COMM_WORLD if mpi_comm is None else mpi_comm
    if not isinstance(mpi_comm, MPI.Intracomm):
        raise TypeError("mpi_comm must be an mpi4py Intracomm, not %s" % type(mpi_comm).__name__)
    if fallback not in ("auto", True, False):
        raise ValueError("fallback must be 'auto', True or False, got %r" % (fallback,))
    timeout_ms = effective_timeout_ms(timeout_ms)
    cfg = config(device, timeout_ms, staging_bytes, table_file)
    if fallback is not False:
        path = mpi_library()
        fn, why = _init_mpi_function(path) if path else (None, "no libsymmar_mpi next to %s" % L.library_path())
        if fn is not None:
            out = ctypes.c_void_p()
            check(fn(ctypes.byref(out), MPI._handleof(mpi_comm), ctypes.byref(cfg)))
            return _core.Comm._wrap(out.value, None, cfg.device)
        if fallback is True:
            raise RuntimeError("symmar.mpi: the MPI fallback is not available: %s" % why)
    gather = _MpiAllGather(mpi_comm, timeout_ms)
    return _core.Comm._from_c_allgather(mpi_comm.Get_size(), mpi_comm.Get_rank(), gather, cfg)
