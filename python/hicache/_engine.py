"""What every engine adapter (hicache.sglang, hicache.vllm, hicache.lmcache)
shares: an adapter runs inside the engine's threads, so a call into it
answers whatever it is handed and never raises; a broken caller gets one
log line per kind of failure per interval, not a flood."""
import logging
import threading
import time

logger = logging.getLogger("hicache")


class RateLimitedLog:
    """One warning per kind of failure per interval, with the count of
    those left out: a broken caller must not flood the engine's log."""

    def __init__(self, interval_s=10.0, log=None):
        self._interval = interval_s
        self._log = log or logger
        self._last = {}
        self._skipped = {}
        self._lock = threading.Lock()

    def __call__(self, what, e):
        now = time.monotonic()
        with self._lock:
            last = self._last.get(what)
            if last is not None and now - last < self._interval:
                self._skipped[what] = self._skipped.get(what, 0) + 1
                return
            self._last[what] = now
            skipped = self._skipped.pop(what, 0)
        try:
            text = "%s: %s" % (type(e).__name__, e)
        except Exception:
            text = type(e).__name__
        self._log.warning("hicache: %s: %s%s", what, text,
                          " (%d more like it since the last report)" % skipped if skipped else "")


def never_raises(fallback):
    """A method the engine calls from its own threads (SGLang's prefetch,
    I/O and backup threads, vLLM's scheduler, LMCache's workers): whatever
    the arguments, it answers (fallback(self, *args) on a bad call, after
    self._bad(name, exception) logs it) and never raises. Each fallback only
    counts and builds its answer, so it cannot fail itself."""

    def wrap(fn):
        def method(self, *args, **kwargs):
            try:
                return fn(self, *args, **kwargs)
            except Exception as e:
                self._bad(fn.__name__, e)
                return fallback(self, *args, **kwargs)

        method.__name__ = fn.__name__
        method.__doc__ = fn.__doc__
        return method

    return wrap
