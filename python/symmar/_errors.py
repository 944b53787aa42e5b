"""symmarResult_t names and SymmarError, the exception every failing library call raises."""
from . import _lib as L

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
# The codes the binding raises itself, by name: their values are their places in RESULT_NAMES.
INVALID_ARGUMENT = RESULT_NAMES.index("symmarInvalidArgument")
INVALID_USAGE = RESULT_NAMES.index("symmarInvalidUsage")
TIMEOUT = RESULT_NAMES.index("symmarTimeout")


class SymmarError(RuntimeError):
    """A call into libsymmar failed. .code is the symmarResult_t, .name its name
    ("symmarTimeout", ...), and the message is the library's last-error text."""

    def __init__(self, code, message=""):
        self.code = int(code)
        self.name = result_name(self.code)
        super().__init__(message or self.name)


def result_name(code):
    if 0 <= code < len(RESULT_NAMES):
        return RESULT_NAMES[code]
    try:
        return L.lib().symmarGetErrorString(code).decode()
    except Exception:  # pragma: no cover - only for codes a newer library adds
        return "unknown result"


def check(res, handle=None):
    """Raises SymmarError for a non-zero result, with the calling thread's last-error text (or the
    comm's, where the thread has none)."""
    if res == 0:
        return
    lib = L.lib()
    text = lib.symmarGetLastError(None) or b""
    if not text and handle:
        text = lib.symmarGetLastError(handle) or b""
    raise SymmarError(res, text.decode(errors="replace"))


def closed_error():
    return SymmarError(INVALID_USAGE, "comm is closed")
