"""Symmetric buffers (symmarMemAlloc) as NumPy arrays and torch tensors, and the comm handle's
lifetime. A view of a symmetric buffer points into memory the comm maps: the handle is destroyed
only when the comm is closed and no view is alive any more, so a view never outlives its memory."""
import ctypes
import sys

from . import _lib as L
from ._args import DTYPE_NAMES, DTYPES, ITEMSIZE, dtype_name
from ._errors import check, closed_error


class Owner:
    """Owns the symmarComm_t. Comm holds one; every symmetric buffer's memory object holds one, so
    symmarCommDestroy (not collective) runs when the last of them goes."""

    __slots__ = ("handle", "keepalive", "__weakref__")

    def __init__(self, handle, keepalive):
        self.handle = handle
        self.keepalive = keepalive  # the allgather callback: collective memory calls use it

    def destroy(self):
        handle, self.handle = self.handle, None
        try:
            if handle:
                check(L.lib().symmarCommDestroy(handle))
        finally:
            # Only now: the library may call the allgather until the destroy returns, and the
            # callback is no longer kept alive by a reference cycle of its own.
            self.keepalive = None

    def __del__(self):
        try:
            self.destroy()
        except Exception:
            pass


class SymmetricBuffer:
    """nbytes of the comm's symmetric heap (same offset on every rank): inputs read from it are
    zero-copy. Views: .numpy(dtype, shape) on a host comm, .torch(dtype, shape) (CPU tensor on a
    host comm, CUDA tensor on a GPU comm). free() is collective, like the allocation, and refuses
    while a view is alive (del the views first). Also a context manager that frees on exit."""

    __slots__ = ("_comm", "ptr", "nbytes", "host", "_mem", "_refs_alone", "__weakref__")

    def __init__(self, comm, owner, ptr, nbytes, host):
        self._comm = comm
        self.ptr = ptr
        self.nbytes = nbytes
        self.host = host
        # The views hold this object (and it the owner): the comm's mapping outlives every view.
        self._mem = (ctypes.c_char * nbytes).from_address(ptr) if host else _CudaMemory(ptr, nbytes)
        self._mem.owner = owner
        self._refs_alone = sys.getrefcount(self._mem)

    def _live(self):
        if self._mem is None:
            raise ValueError("this symmetric buffer was freed")
        if not self._mem.owner.handle or not self._comm._handle:
            raise closed_error()
        return self._mem

    def _count(self, dtype, shape, itemsize):
        if shape is None:
            if self.nbytes % itemsize:
                raise ValueError("%d bytes are not a whole number of %d-byte elements" % (self.nbytes, itemsize))
            return (self.nbytes // itemsize,)
        shape = tuple(int(d) for d in ((shape,) if isinstance(shape, int) else shape))
        n = 1
        for d in shape:
            if d < 0:
                raise ValueError("negative dimension in shape %s" % (shape,))
            n *= d
        if n * itemsize > self.nbytes:
            raise ValueError("shape %s of %d-byte elements needs %d bytes; the buffer has %d"
                             % (shape, itemsize, n * itemsize, self.nbytes))
        return shape

    def numpy(self, dtype="float32", shape=None):
        """A NumPy array over the buffer (host comm only; bf16 as uint16 bit patterns)."""
        import numpy as np
        mem = self._live()
        if not self.host:
            raise ValueError("a GPU comm's symmetric memory is device memory: use .torch()")
        code = DTYPES[dtype_name(dtype)]
        np_dtype = np.dtype("uint16" if code == DTYPES["bfloat16"] else DTYPE_NAMES[code])
        shape = self._count(dtype, shape, ITEMSIZE[code])
        n = 1
        for d in shape:
            n *= d
        return np.frombuffer(mem, np_dtype, n).reshape(shape)

    def torch(self, dtype=None, shape=None):
        """A torch tensor over the buffer: CPU on a host comm, CUDA (the comm's device) on a GPU comm."""
        import torch
        mem = self._live()
        dtype = torch.float32 if dtype is None else dtype
        if not isinstance(dtype, torch.dtype):
            raise TypeError("dtype must be a torch.dtype, not %s" % type(dtype).__name__)
        shape = self._count(dtype, shape, torch.empty((), dtype=dtype).element_size())
        n = 1
        for d in shape:
            n *= d
        if self.host:
            if n == 0:
                return torch.empty(shape, dtype=dtype)
            return torch.frombuffer(mem, dtype=dtype, count=n).view(shape)
        mem.set_view(shape, dtype)
        view = torch.as_tensor(mem, device="cuda:%d" % self._comm._device)
        return view.view(torch.bfloat16) if dtype == torch.bfloat16 else view

    @property
    def views_alive(self):
        """Whether an array or tensor made by numpy()/torch() still exists."""
        return self._mem is not None and sys.getrefcount(self._mem) > self._refs_alone

    def free(self):
        """Collective: returns the memory to the heap. Every rank must call it, in the same order."""
        if self._mem is None:
            return
        if self.views_alive:
            raise ValueError("views of this symmetric buffer are still alive: delete them before free() "
                             "(a view after free would read memory the heap hands out again)")
        handle = self._mem.owner.handle
        if not handle or not self._comm._handle:
            raise closed_error()
        res = L.lib().symmarMemFree(handle, self.ptr)
        self._mem = None
        check(res, handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False

    def __repr__(self):
        return "<symmar.SymmetricBuffer %d bytes at 0x%x%s>" % (self.nbytes, self.ptr, "" if self._mem else " freed")


class _CudaMemory:
    """Device memory as __cuda_array_interface__ for torch.as_tensor (which keeps this object alive
    for the tensor's life). The shape and dtype of the next view are set just before it is made."""

    def __init__(self, ptr, nbytes):
        self.ptr, self.nbytes = ptr, nbytes
        self._iface = None

    def set_view(self, shape, dtype):
        import torch
        typestr = {torch.float32: "<f4", torch.float16: "<f2", torch.float64: "<f8", torch.int32: "<i4",
                   torch.int16: "<i2", torch.uint8: "|u1", torch.int64: "<i8"}.get(dtype)
        if typestr is None:
            # torch cannot import bf16 through this interface: view it as int16 and reinterpret
            if dtype != torch.bfloat16:
                raise ValueError("unsupported dtype %s for a device view" % dtype)
            typestr = "<i2"
        self._iface = {"shape": tuple(shape), "typestr": typestr, "data": (self.ptr, False), "version": 3,
                       "strides": None, "stream": None}

    @property
    def __cuda_array_interface__(self):
        return self._iface
