"""The loaded libhicache and what every call shares: its errors (Error
carries errno and the library's message), its version and log level."""
from . import _lib

_LIB, _LIB_PATH = _lib.load()
_C = _LIB


class Error(OSError):
    """A failed hicache call: errno (positive), strerror, and detail (the
    library's own message for this failure)."""

    def __init__(self, rc, what, detail=""):
        code = -rc if rc < 0 else rc
        text = _C.hc_strerror(rc).decode(errors="replace")
        super().__init__(code, text)
        self.what = what
        self.detail = detail

    def __str__(self):
        msg = "%s: %s" % (self.what, self.strerror)
        if self.detail:
            msg += " (%s)" % self.detail
        return msg


def _check(rc, what):
    if rc < 0:
        raise Error(int(rc), what, last_error())
    return rc


def last_error():
    """The library's message for the last failure on this thread."""
    s = _C.hc_last_error()
    return s.decode(errors="replace") if s else ""


def version():
    return _C.hc_version().decode()


def library_path():
    return _LIB_PATH


_LEVELS = {"off": 0, "error": 1, "warn": 2, "warning": 2, "info": 3, "debug": 4, "trace": 5}


def set_log_level(level):
    """'off', 'error', 'warn', 'info', 'debug', 'trace' or 0..5."""
    if isinstance(level, str):
        if level.lower() not in _LEVELS:
            raise ValueError("hicache: unknown log level %r" % level)
        level = _LEVELS[level.lower()]
    _C.hc_log_set_level(int(level))
