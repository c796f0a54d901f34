"""The lifetime of C handles: calls in flight hold a handle open, close
waits for them, and a forked child never touches its parent's handles."""
import errno as _errno
import os
import threading

from ._native import Error

# The process this module's handles belong to. A forked child inherits the
# parent's stores and pools as bytes only: their worker threads and rings
# stay with the parent (and the rings' memory is shared with it), so the
# child must never call into them, not even to close them.
_PID = os.getpid()


def _after_fork_in_child():
    global _PID
    _PID = os.getpid()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _Life:
    """The lifetime of one C handle: calls in flight hold it open, close
    waits for them and then runs destroy once; after close, and in a
    process forked from the one that opened it, every call raises Error
    (EBADF) instead of reaching C."""

    __slots__ = ("h", "what", "busy", "cond", "pid")

    def __init__(self, handle, what):
        self.h = handle
        self.what = what
        self.busy = 0
        self.cond = threading.Condition()
        self.pid = _PID

    def enter(self):
        with self.cond:
            if not self.h:
                raise Error(-_errno.EBADF, self.what, "%s is closed" % self.what)
            if self.pid != _PID:
                raise Error(-_errno.EBADF, self.what,
                            "%s was opened in process %d, this is %d (a fork): open a new one here"
                            % (self.what, self.pid, _PID))
            self.busy += 1
            return self.h

    def leave(self):
        with self.cond:
            self.busy -= 1
            if not self.busy:
                self.cond.notify_all()

    def call(self, fn, *args):
        h = self.enter()
        try:
            return fn(h, *args)
        finally:
            self.leave()

    def close(self, destroy):
        """Take the handle (waiting for calls in flight) and destroy it,
        once; a forked child drops it without touching C."""
        with self.cond:
            h, self.h = self.h, None
            while self.busy:
                self.cond.wait()
        if h and self.pid == _PID:
            destroy(h)
        return bool(h)

    @property
    def open(self):
        return bool(self.h) and self.pid == _PID


class _Closing:
    """close() on leaving a with block and when collected (a close that
    fails while collected is dropped: there is no caller to tell)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
