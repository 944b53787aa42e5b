"""The C side of an engine allgather: a ctypes callback that runs a Python gather and turns any
exception into a non-zero return (an exception must never cross into C), keeping it for the
caller's SymmarError. Subclasses implement _gather(send, recv, nbytes)."""
import weakref

from . import _lib as L


class CallbackAllGather:
    def __init__(self):
        self.error = None
        # The C callback reaches this object through a weak reference. A bound method would close a
        # cycle (object -> callback -> object) that only the garbage collector frees, keeping what the
        # object holds alive after its comm is closed: a torch process group and its worker threads
        # would then outlive destroy_process_group(), up to the interpreter's shutdown, where a
        # worker that still lets go of a collective's tensors aborts the process.
        this = weakref.ref(self)

        def call(send, recv, nbytes, user):
            gather = this()
            return 1 if gather is None else gather._call(send, recv, nbytes, user)

        self.c_fn = L.AllGatherFn(call)

    def _call(self, send, recv, nbytes, _user):
        try:
            self._gather(send, recv, nbytes)
            return 0
        except BaseException as e:  # never let an exception cross into C
            self.error = e
            return 1

    def _gather(self, send, recv, nbytes):
        raise NotImplementedError
