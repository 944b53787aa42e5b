"""Loading libsymmar and the one table of C entry points the binding uses."""
import ctypes
import ctypes.util
import glob
import os
import sys
import threading

UNIQUE_ID_BYTES = 128
DEVICE_CPU = -1
DEVICE_AUTO = -2


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class Config(ctypes.Structure):
    """symmarConfig_t; `size` must be sizeof(symmarConfig_t)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("device", ctypes.c_int),
        ("staging_bytes", ctypes.c_size_t),
        ("timeout_ms", ctypes.c_int),
        ("table_file", ctypes.c_char_p),
    ]


class Topology(ctypes.Structure):
    _fields_ = [
        ("cc_major", ctypes.c_int),
        ("cc_minor", ctypes.c_int),
        ("link", ctypes.c_int),
        ("world_size", ctypes.c_int),
        ("multicast", ctypes.c_int),
    ]


class AddRmsNormArgs(ctypes.Structure):
    """symmarAddRmsNormArgs_t (the fused allreduce + residual add + RMSNorm)."""

    _fields_ = [
        ("input", ctypes.c_void_p),
        ("residual_in", ctypes.c_void_p),
        ("residual_out", ctypes.c_void_p),
        ("norm_out", ctypes.c_void_p),
        ("gamma", ctypes.c_void_p),
        ("fp8_out", ctypes.c_void_p),
        ("fp8_scale", ctypes.c_float),
        ("eps", ctypes.c_float),
        ("tokens", ctypes.c_size_t),
        ("hidden", ctypes.c_size_t),
        ("dtype", ctypes.c_int),
    ]


# int (*)(const void* sendbuf, void* recvbuf, size_t bytes_per_rank, void* user)
AllGatherFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)

_c_int = ctypes.c_int
_vp = ctypes.c_void_p
_sz = ctypes.c_size_t
_pint = ctypes.POINTER(ctypes.c_int)
_pvp = ctypes.POINTER(ctypes.c_void_p)
_pcfg = ctypes.POINTER(Config)
_ptopo = ctypes.POINTER(Topology)
_pargs = ctypes.POINTER(AddRmsNormArgs)

# The one table of exported functions: name -> (restype, argtypes). Enums are C ints; every
# function returning a symmarResult_t has restype c_int.
FUNCTIONS = {
    "symmarGetErrorString": (ctypes.c_char_p, [_c_int]),
    "symmarGetLastError": (ctypes.c_char_p, [_vp]),
    "symmarGetVersion": (_c_int, [_pint]),
    "symmarAlgoName": (ctypes.c_char_p, [_c_int]),
    "symmarTypeSize": (_sz, [_c_int]),
    "symmarGetUniqueId": (_c_int, [ctypes.POINTER(UniqueId)]),
    "symmarCommInitRank": (_c_int, [_pvp, _c_int, UniqueId, _c_int, _pcfg]),
    "symmarCommInitExternal": (_c_int, [_pvp, _c_int, _c_int, AllGatherFn, _vp, _pcfg]),
    "symmarCommInitAll": (_c_int, [_pvp, _c_int, _pint, _pcfg]),
    "symmarCommDestroy": (_c_int, [_vp]),
    "symmarCommGetAsyncError": (_c_int, [_vp, _pint]),
    "symmarCommTopology": (_c_int, [_vp, _ptopo]),
    "symmarCommAdoptNccl": (_c_int, [_vp, _vp]),
    "symmarCommSetHostThreads": (_c_int, [_vp, _c_int, _vp, _vp]),
    "symmarCommRank": (_c_int, [_vp, _pint]),
    "symmarCommCount": (_c_int, [_vp, _pint]),
    "symmarCommDescribe": (_c_int, [_vp, ctypes.c_char_p, _sz]),
    "symmarMemAlloc": (_c_int, [_vp, _sz, _pvp]),
    "symmarMemFree": (_c_int, [_vp, _vp]),
    "symmarPlan": (_c_int, [_ptopo, _sz, _c_int, _c_int, _pint]),
    "symmarCommPlan": (_c_int, [_vp, _sz, _c_int, _c_int, _pint]),
    "symmarAllReduce": (_c_int, [_vp, _vp, _sz, _c_int, _c_int, _vp, _vp]),
    "symmarAllReduceAlgo": (_c_int, [_vp, _vp, _sz, _c_int, _c_int, _c_int, _vp, _vp]),
    "symmarReduceScatter": (_c_int, [_vp, _vp, _sz, _c_int, _c_int, _vp, _vp]),
    "symmarReduceScatterAlgo": (_c_int, [_vp, _vp, _sz, _c_int, _c_int, _c_int, _vp, _vp]),
    "symmarAllGather": (_c_int, [_vp, _vp, _sz, _c_int, _vp, _vp]),
    "symmarAllGatherAlgo": (_c_int, [_vp, _vp, _sz, _c_int, _c_int, _vp, _vp]),
    "symmarAllReduceAddRmsNorm": (_c_int, [_pargs, _vp, _vp]),
    "symmarAllReduceAddRmsNormAlgo": (_c_int, [_pargs, _c_int, _vp, _vp]),
}

_lock = threading.Lock()
_lib = None
_lib_path = None


def _candidates():
    """Where libsymmar is looked for, in order (the first that exists wins)."""
    here = os.path.dirname(os.path.abspath(__file__))
    # 1. the copy a wheel ships in the package (an editable install keeps it in site-packages, the
    #    other folder of the package's __path__), or beside the package
    package = sys.modules.get(__package__)
    folders = list(getattr(package, "__path__", None) or [here])
    for folder in folders + [os.path.dirname(here)]:
        yield folder
    # 2. the source tree's build folders, for the package imported from python/ of a checkout:
    #    build/ (scripts/build.sh) first, then the others (a sanitizer build cannot be loaded into
    #    an uninstrumented python, so it must not come first)
    repo = os.path.dirname(os.path.dirname(here))
    builds = sorted(glob.glob(os.path.join(repo, "build*", "src")))
    for build in sorted(builds, key=lambda b: os.path.basename(os.path.dirname(b)) != "build"):
        yield build
    # 3. an installation (cmake --install): this environment's prefix, the usual prefixes, and
    #    $LD_LIBRARY_PATH (which ctypes.util.find_library does not read on Linux)
    for prefix in (sys.prefix, "/usr/local", "/usr"):
        for libdir in ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu"):
            yield os.path.join(prefix, libdir)
    for folder in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if folder:
            yield folder


def find_library():
    """The libsymmar to load: $SYMMAR_LIBRARY; else the first libsymmar.so* in the package, the
    source tree's build/src then build*/src, an install prefix (sys.prefix, /usr/local, /usr) or $LD_LIBRARY_PATH;
    else the loader's own search (ctypes.util.find_library), else plain "libsymmar.so.0"."""
    env = os.environ.get("SYMMAR_LIBRARY")
    if env:
        return env
    for folder in _candidates():
        found = sorted(glob.glob(os.path.join(folder, "libsymmar.so*")), key=lambda p: (len(p), p))
        if found:
            return found[0]
    return ctypes.util.find_library("symmar") or "libsymmar.so.0"


def lib():
    """The loaded library (loaded once, on first use), with argtypes/restype from FUNCTIONS."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path = find_library()
            try:
                handle = ctypes.CDLL(path)  # CDLL releases the GIL during calls: other threads run
            except OSError as e:
                raise OSError(
                    "symmar: cannot load libsymmar from %r (%s); set SYMMAR_LIBRARY to the library's path" % (path, e)
                ) from e
            for name, (restype, argtypes) in FUNCTIONS.items():
                try:
                    fn = getattr(handle, name)
                except AttributeError as e:
                    raise OSError("symmar: %r does not export %s (library too old?)" % (path, name)) from e
                fn.restype = restype
                fn.argtypes = argtypes
            _lib_path = path
            _lib = handle
    return _lib


def library_path():
    lib()
    return _lib_path
