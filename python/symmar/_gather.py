"""The C side of an engine allgather: a ctypes callback that runs a Python gather and turns any
exception into a non-zero return (an exception must never cross into C), keeping it for the
caller's SymmarError. Subclasses implement _gather(send, recv, nbytes)."""
from . import _lib as L


class CallbackAllGather:
    def __init__(self):
        self.error = None
        self.c_fn = L.AllGatherFn(self._call)

    def _call(self, send, recv, nbytes, _user):
        try:
            self._gather(send, recv, nbytes)
            return 0
        except BaseException as e:  # never let an exception cross into C
            self.error = e
            return 1

    def _gather(self, send, recv, nbytes):
        raise NotImplementedError
