"""Started operations that report themselves: a completion queue of one
store (hc_store_cq_* in include/hicache/store.h).

An engine that polls once per step (vLLM's scheduler) or waits on a file
descriptor (LMCache's demux thread) starts transfers, lookups and deletes
here with a tag of its own and later reaps (tag, outcome, per-page results)
in finish order, each once, never blocking. fileno() is an eventfd that is
readable exactly while something waits to be reaped.

Every buffer the C side reads or writes for an op (keys, names, page
indices, results) is held here, by tag, until the op is reaped or the queue
is closed; close() cancels what has not begun and waits for the rest, so
the caller may free the pool memory once it returns. The store closes its
queues before itself."""
import ctypes
import threading

from . import _lib
from ._args import _Mem, _Pages, _cstr
from ._life import _Closing, _Life
from ._native import Error, _C, _check, last_error
from .keys import _Keys

_INT = ctypes.c_int


class _Held:
    __slots__ = ("refs", "results", "n")

    def __init__(self, refs, results, n):
        self.refs = refs
        self.results = results
        self.n = n


class Completions(_Closing):
    """A completion queue of store. Thread-safe: any threads may start and
    reap at once. Tags are any integers in [0, 2**64), unique among the
    ops not yet reaped."""

    def __init__(self, store, reap_max=4096):
        self._store = store
        h = ctypes.c_void_p()
        _check(store._call(_C.hc_store_cq_open, ctypes.byref(h)), "open completion queue")
        self._life = _Life(h, "completion queue")
        self._fd = int(_C.hc_store_cq_fd(h))
        self._held = {}
        self._lock = threading.Lock()
        self._cqe = (_lib.StoreCqe * max(int(reap_max), 1))()
        # The entries as flat int64s: one slice and tolist() per reap
        # instead of two ctypes field reads per op.
        self._cqe_words = memoryview(self._cqe).cast("B").cast("q")
        self._reap_lock = threading.Lock()
        store._adopt_queue(self)

    def fileno(self):
        """The eventfd: poll it for readability, never read it."""
        self._life.enter()
        self._life.leave()
        return self._fd

    @property
    def pending(self):
        """Ops started and not yet reaped."""
        return int(self._life.call(_C.hc_store_cq_pending))

    # starting

    def _start(self, tag, fn, pool, keys, pages, want_results, what, bufs=None):
        if not isinstance(tag, int) or isinstance(tag, bool) or not 0 <= tag < 1 << 64:
            raise ValueError("hicache: %s: tag must be an integer in [0, 2**64), not %r" % (what, tag))
        if pool is None:  # no transfer at all: an op that only completes
            return self._go(tag, fn, (None, 0), _Held([], None, 0), what)
        k = _Keys(keys)
        t = _lib.PoolTransfer()
        cpool = _cstr(pool, "pool name")
        t.pool = cpool
        t.n = k.n
        t.keys = k.keys
        t.names = k.names
        refs = [cpool, k]
        args = (ctypes.byref(t), 1)  # one transfer
        if bufs is not None:
            iov = _Iovecs(bufs, writable=what == "get_bufs")
            if iov.n != k.n:
                raise ValueError("hicache: %s: %d keys but %d buffers" % (what, k.n, iov.n))
            refs.append(iov)
            args = (ctypes.byref(t), iov.arr)  # hc_store_*_bufs_start: the transfer, its buffers
        elif pages is not None:
            p = _Pages(pages)
            if p.n != k.n:
                raise ValueError("hicache: %s: %d keys but %d pages" % (what, k.n, p.n))
            t.pages = p.ptr
            refs.append(p)
            self._store._check_memory((pool,))
        res = None
        if want_results:
            res = (_INT * max(k.n, 1))()
            t.results = ctypes.cast(res, ctypes.POINTER(_INT))
        refs.append(t)
        return self._go(tag, fn, args, _Held(refs, res, k.n), what)

    def _go(self, tag, fn, args, held, what):
        """Start fn(store, *args, &op) and hand the op to the queue under
        tag, holding held's buffers until it is reaped."""
        with self._lock:
            if tag in self._held:
                raise ValueError("hicache: %s: tag %d is in use by an op not yet reaped" % (what, tag))
            self._held[tag] = held
        op = ctypes.c_void_p()
        try:
            h = self._life.enter()
            try:
                rc = self._store._call(fn, *args, ctypes.byref(op))
                if rc < 0:
                    raise Error(int(rc), what, last_error())
                rc = _C.hc_store_op_submit(h, op, tag)
                if rc < 0:  # cannot happen short of a bug: the op stays ours
                    _C.hc_store_op_wait(op)
                    raise Error(int(rc), what, last_error())
            finally:
                self._life.leave()
        except BaseException:
            with self._lock:
                self._held.pop(tag, None)
            raise

    def set(self, tag, keys, pages, pool="kv", results=False):
        """Start storing pages[i] of pool under keys[i]. Outcome: 0, or the
        first failed page's -errno."""
        self._start(tag, _C.hc_store_set_v2_start, pool, keys, pages, results, "set")

    def get(self, tag, keys, pages, pool="kv", results=True):
        """Start reading keys[i] into pages[i] of pool. Outcome: leading hits."""
        self._start(tag, _C.hc_store_get_v2_start, pool, keys, pages, results, "get")

    def set_bufs(self, tag, keys, bufs, pool="kv", results=False):
        """Start storing caller buffers (bufs[i]: a writable or read-only
        buffer, or an (address, length) pair) under keys[i] in a bounce
        pool of one buffer per page (hc_store_set_bufs_start). The buffers
        are held until the op is reaped; the caller keeps their memory."""
        self._start(tag, _C.hc_store_set_bufs_start, pool, keys, None, results, "set_bufs", bufs)

    def get_bufs(self, tag, keys, bufs, pool="kv", results=True):
        """Start reading keys[i] into caller buffers (writable)."""
        self._start(tag, _C.hc_store_get_bufs_start, pool, keys, None, results, "get_bufs", bufs)

    def nop(self, tag):
        """An op that only completes (a lookup of nothing): to report
        something through the queue, in order with the rest."""
        self._start(tag, _C.hc_store_lookup_start, None, None, None, False, "nop")

    def lookup(self, tag, keys, pool="kv"):
        """Start asking which keys' pages exist. Outcome: how many; results
        per key: 0, -ENOENT, -EBADMSG."""
        self._start(tag, _C.hc_store_lookup_start, pool, keys, None, True, "lookup")

    def delete(self, tag, keys, pool="kv"):
        """Start deleting the keys' pages. Outcome: how many went; results
        per key: 0, -ENOENT, -errno."""
        self._start(tag, _C.hc_store_delete_start, pool, keys, None, True, "delete")

    # reaping

    def reap(self):
        """Finished ops, oldest first, each once: [(tag, outcome, results
        list or None)]. Never blocks on I/O."""
        out = []
        with self._reap_lock:
            cqe = self._cqe
            while True:
                n = int(self._life.call(_C.hc_store_cq_reap, cqe, len(cqe)))
                if not n:
                    break
                words = self._cqe_words[: 2 * n].tolist()
                tags, outcomes = words[0::2], words[1::2]
                if min(tags) < 0:  # tags of 2**63 and more, read as int64
                    tags = [t & 0xFFFFFFFFFFFFFFFF for t in tags]
                with self._lock:
                    pop = self._held.pop
                    held = [pop(tag, None) for tag in tags]
                for tag, result, h in zip(tags, outcomes, held):
                    res = h.results[: h.n] if h is not None and h.results is not None else None
                    out.append((tag, result, res))
                if n < len(cqe):
                    break
        return out

    # teardown

    @property
    def closed(self):
        return not self._life.open

    def close(self):
        """Cancel what has not begun, wait for the rest, drop everything
        unreaped. Afterwards no op of this queue touches caller memory."""
        if self._life.close(_C.hc_store_cq_close):
            with self._lock:
                self._held.clear()


class _Iovecs:
    """struct iovec[n] over caller buffers, holding them. A buffer is an
    (address, length) pair or any buffer-protocol object (its address
    taken without a copy; writable ones for gets)."""

    __slots__ = ("n", "arr", "refs")

    def __init__(self, bufs, writable):
        bufs = list(bufs)
        self.n = len(bufs)
        self.refs = []
        flat = []
        for i, b in enumerate(bufs):
            if isinstance(b, tuple):
                addr, ln = b
                if isinstance(addr, bool) or not isinstance(addr, int) or not isinstance(ln, int):
                    raise TypeError("hicache: buffer %d: (address, length) must be integers" % i)
            else:
                m = _Mem(b, "buffer %d" % i, writable=writable)
                self.refs.append(m)
                addr, ln = m.addr, m.len
            flat += (addr, ln)
        self.arr = (ctypes.c_size_t * max(2 * self.n, 2))(*flat)

