"""hicache as an LMCache native connector (the `native_plugin` L2 adapter
of LMCache's multi-process mode).

Loaded with (docs/LMCACHE.md has the whole story):
    lmcache server ... --l2-adapter '{"type": "native_plugin",
      "module_path": "hicache.lmcache", "class_name": "HicacheConnector",
      "adapter_params": {"root_dir": "/mnt/kv"}, "max_capacity_gb": 500}'

LMCache hands each call its keys (strings) and buffers (memoryviews carved
out of its L1 arena, alignment not promised) and wants a future id back at
once; completions are signalled on an eventfd and collected by
drain_completions(), each once. Here:

- each buffer is copied into a staging page of our own (aligned, so the
  store moves it zero-copy under O_DIRECT) by a copy thread, never on the
  caller's thread, and stored as one object of chunk_bytes (a shorter
  buffer, LMCache's last partial chunk, is padded: its key names its
  length already); a get reads into staging pages and copies the hits out;
- every call is one started hicache op on a completion queue; a reaper
  thread collects finished ops, finishes them (copies, frees pages) and
  hands them to drain_completions through the eventfd;
- keys become object names by an injective escape (docs/LMCACHE.md);
  the namespace keyword (dtype, revision, anything else LMCache's key
  does not hold) goes into every name's suffix.
Every method is thread-safe; failures are completions with ok False and an
error string, never exceptions; bad construction keywords raise ValueError
naming the key.
"""
import ctypes
import hashlib
import logging
import mmap
import os
import queue
import select
import threading

import hicache
from hicache._engine import RateLimitedLog

logger = logging.getLogger("hicache.lmcache")

NAME_MAX = 128  # HC_STORE_NAME_MAX
_GET, _SET, _EXISTS, _DELETE = "get", "set", "exists", "delete"


def key_name(key):
    """LMCache's key string -> an object name, injectively: '%' '/' control
    bytes and a leading '.' are %XX-escaped; a name over 128 bytes becomes
    '%H' + its SHA-256 (an escaped name never holds '%H')."""
    if not isinstance(key, str):
        raise TypeError("key must be a str, not %s" % type(key).__name__)
    if not key:
        raise ValueError("key is empty")
    out = []
    for i, ch in enumerate(key):
        o = ord(ch)
        if ch in "%/" or o < 0x20 or o == 0x7F or (i == 0 and ch == "."):
            out.append("%%%02X" % o)
        else:
            out.append(ch)
    name = "".join(out)
    if len(name.encode("utf-8", "surrogatepass")) > NAME_MAX:
        name = "%H" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return name


class _Call:
    __slots__ = ("fid", "op", "names", "views", "pages", "error", "keys")

    def __init__(self, fid, op, keys, names, views):
        self.fid = fid
        self.op = op
        self.keys = keys
        self.names = names
        self.views = views
        self.pages = None
        self.error = None


class _Staging:
    """Pages of chunk_bytes in one anonymous mapping, handed out and back
    under a condition so the copy thread waits (never the caller) when
    every page is on its way."""

    def __init__(self, pages, chunk_bytes):
        self.chunk = chunk_bytes
        self.map = mmap.mmap(-1, pages * chunk_bytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        self.free = list(range(pages - 1, -1, -1))
        self.cond = threading.Condition()
        self.closed = False

    def take(self, n):
        with self.cond:
            while len(self.free) < n and not self.closed:
                self.cond.wait()
            if self.closed:
                return None
            got = self.free[-n:]
            del self.free[-n:]
            return got

    def give(self, pages):
        with self.cond:
            self.free.extend(pages)
            self.cond.notify_all()

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify_all()


def _address(view, writable):
    """The address and length of a buffer (memoryview or any buffer)."""
    mv = view if isinstance(view, memoryview) else memoryview(view)
    if not mv.contiguous:
        raise ValueError("a buffer is not contiguous")
    if writable and mv.readonly:
        raise ValueError("a get buffer is read-only")
    mv = mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
    if not mv.nbytes:
        return 0, 0
    if mv.readonly:
        import numpy as np

        return int(np.frombuffer(mv, dtype=np.uint8).ctypes.data), mv.nbytes
    return ctypes.addressof(ctypes.c_char.from_buffer(mv)), mv.nbytes


class HicacheConnector:
    """An LMCache native connector over a hicache store. Keywords (LMCache's
    adapter_params): root_dir (the file store's base directory, created if
    missing), backend ("file", "mem", "s3"), chunk_bytes (the largest
    buffer; default: the first buffer seen), namespace (identity beyond
    LMCache's key: KV dtype, model revision, ...), staging_mib (staging
    memory, default 256), and any hicache configuration key
    (docs/CONFIG.md)."""

    def __init__(self, root_dir=None, backend="file", chunk_bytes=None, namespace=None,
                 staging_mib=256, **config):
        cfg = dict(config)
        if root_dir is not None:
            if "dirs" in cfg:
                raise ValueError("hicache LMCache connector: give root_dir or dirs, not both")
            if not isinstance(root_dir, str) or not root_dir:
                raise ValueError("hicache LMCache connector: root_dir must be a directory path, "
                                 "not %r" % (root_dir,))
            os.makedirs(root_dir, mode=0o700, exist_ok=True)
            cfg["dirs"] = [root_dir]
        if backend == "file" and "dirs" not in cfg:
            raise ValueError("hicache LMCache connector: root_dir (or dirs) is required for the "
                             "file backend")
        if chunk_bytes is not None and (isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int)
                                        or chunk_bytes <= 0):
            raise ValueError("hicache LMCache connector: chunk_bytes must be a positive integer, "
                             "not %r" % (chunk_bytes,))
        if isinstance(staging_mib, bool) or not isinstance(staging_mib, (int, float)) or staging_mib <= 0:
            raise ValueError("hicache LMCache connector: staging_mib must be a positive number, not %r"
                             % (staging_mib,))
        if namespace is not None and not isinstance(namespace, str):
            raise ValueError("hicache LMCache connector: namespace must be a string, not %r"
                             % (namespace,))
        self._suffix = "_lmc_" + hashlib.sha256(
            ("lmcache/1/" + (namespace or "")).encode()).hexdigest()[:16]
        try:
            self._store = hicache.Store(cfg, backend=backend)
        except (hicache.Error, ValueError) as e:
            raise ValueError("hicache LMCache connector: bad configuration: %s" % e) from None
        self._staging_bytes = int(staging_mib * (1 << 20))
        self._lock = threading.Lock()  # fids, the geometry, the done list, the fd
        self._fid = 0
        self._chunk = None
        self._staging = None
        self._pool = None
        self._queue = None
        self._calls = {}  # fid -> _Call with an op in flight
        self._done = []  # (fid, ok, error, result) for drain_completions
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._signalled = False
        self._work = queue.SimpleQueue()
        self._bad = RateLimitedLog(log=logger)
        self._closed = False
        self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._reaper = None  # started with the queue
        if chunk_bytes is not None:
            self._setup(chunk_bytes)
        self._copier = threading.Thread(target=self._copy_main, name="hicache-lmc-copy", daemon=True)
        self._copier.start()

    # ---- geometry, made once ----

    def _setup(self, chunk_bytes):
        """The staging pool of chunk_bytes pages, registered as the anchor,
        and the completion queue with its reaper. Under self._lock or
        before any thread runs."""
        pages = max(8, self._staging_bytes // chunk_bytes)
        st = _Staging(pages, chunk_bytes)
        pool = hicache.Pool.wrap_segments(
            [{"buffer": st.map, "page_stride": chunk_bytes, "seg_len": chunk_bytes}],
            pages=pages, page_tokens=1)
        try:
            self._store.register("kv", pool, anchor=True, suffix=self._suffix)
            self._queue = hicache.Completions(self._store)
        except BaseException:
            pool.close()
            raise
        self._chunk, self._staging, self._pool = chunk_bytes, st, pool
        self._reaper = threading.Thread(target=self._reap_main, name="hicache-lmc-reap", daemon=True)
        self._reaper.start()

    # ---- the contract ----

    def event_fd(self):
        return self._efd

    def _submit(self, op, keys, views):
        with self._lock:
            self._fid += 1
            fid = self._fid
        try:
            if self._closed:
                raise RuntimeError("the connector is closed")
            if isinstance(keys, (str, bytes)) or keys is None:
                raise TypeError("keys must be a list of str")
            keys = list(keys)
            names = [key_name(k) for k in keys]
            if views is not None:
                views = list(views)
                if len(views) != len(keys):
                    raise ValueError("%d keys but %d buffers" % (len(keys), len(views)))
            call = _Call(fid, op, keys, names, views)
        except Exception as e:
            self._bad("submit_batch_" + op, e)
            self._complete(fid, False, "%s: %s" % (type(e).__name__, e),
                           [False] * _count(keys) if op in (_GET, _EXISTS) else None)
            return fid
        self._work.put(call)
        return fid

    def submit_batch_get(self, keys, memoryviews):
        return self._submit(_GET, keys, memoryviews)

    def submit_batch_set(self, keys, memoryviews):
        return self._submit(_SET, keys, memoryviews)

    def submit_batch_exists(self, keys):
        return self._submit(_EXISTS, keys, None)

    def submit_batch_delete(self, keys):
        return self._submit(_DELETE, keys, None)

    def drain_completions(self):
        """Every completion since the last call, each once; clears the fd."""
        with self._lock:
            out, self._done = self._done, []
            if self._signalled and self._efd >= 0:
                try:
                    os.eventfd_read(self._efd)
                except BlockingIOError:
                    pass
                self._signalled = False
        return out

    def _complete(self, fid, ok, error, result):
        with self._lock:
            self._done.append((fid, bool(ok), error or "", result))
            if not self._signalled and self._efd >= 0:
                os.eventfd_write(self._efd, 1)
                self._signalled = True

    # ---- the copy thread: buffers into staging pages, ops started ----

    def _copy_main(self):
        while True:
            call = self._work.get()
            if call is None:
                return
            try:
                self._begin(call)
            except Exception as e:
                self._fail(call, e)

    def _fail(self, call, e):
        if call.pages and self._staging is not None:
            self._staging.give(call.pages)
            call.pages = None
        self._bad(call.op, e)
        n = len(call.keys)
        self._complete(call.fid, False, "%s: %s" % (type(e).__name__, e),
                       [False] * n if call.op in (_GET, _EXISTS) else None)

    def _begin(self, call):
        if self._closed:
            raise RuntimeError("the connector is closed")
        addrs = None
        if call.views is not None:
            addrs = [_address(v, call.op == _GET) for v in call.views]
            if self._chunk is None:
                with self._lock:
                    if self._chunk is None:
                        self._setup(max(n for _, n in addrs) if addrs else 4096)
            big = [i for i, (_, n) in enumerate(addrs) if n > self._chunk]
            if big:
                raise ValueError("buffer %d holds %d bytes, more than chunk_bytes %d (set chunk_bytes "
                                 "in adapter_params)" % (big[0], addrs[big[0]][1], self._chunk))
        if self._queue is None:
            # Nothing stored through this connector's geometry yet.
            n = len(call.keys)
            self._complete(call.fid, call.op != _GET or not n, "" if call.op != _GET else "not found",
                           [False] * n if call.op in (_GET, _EXISTS) else None)
            return
        if not call.keys:
            self._complete(call.fid, True, "", [] if call.op in (_GET, _EXISTS) else None)
            return
        with self._lock:
            self._calls[call.fid] = call
        try:
            if call.op == _EXISTS:
                self._queue.lookup(call.fid, call.names)
                return
            if call.op == _DELETE:
                self._queue.delete(call.fid, call.names)
                return
            call.pages = self._staging.take(len(call.keys))
            if call.pages is None:
                raise RuntimeError("the connector is closed")
            chunk, base = self._chunk, self._staging.base
            if call.op == _SET:
                for page, (addr, n) in zip(call.pages, addrs):
                    dst = base + page * chunk
                    ctypes.memmove(dst, addr, n)  # releases the GIL
                    if n < chunk:
                        ctypes.memset(dst + n, 0, chunk - n)
                self._queue.set(call.fid, call.names, call.pages)
            else:
                call.views = addrs
                self._queue.get(call.fid, call.names, call.pages, results=True)
        except BaseException:
            with self._lock:
                self._calls.pop(call.fid, None)
            raise

    # ---- the reaper: finished ops finished here ----

    def _reap_main(self):
        fd = self._queue.fileno()
        p = select.poll()
        p.register(fd, select.POLLIN)
        p.register(self._stop_r, select.POLLIN)
        stopping = False
        while True:
            try:
                # Once told to stop, the pipe stays readable: wait on the
                # queue alone, briefly, until the last op is in.
                p.poll(10 if stopping else None)
                got = self._queue.reap()
                for fid, outcome, results in got:
                    self._finish(fid, outcome, results)
                stopping = self._closed
                if stopping and not got and not self._queue.pending:
                    return
            except hicache.Error:
                return  # the queue was closed
            except Exception as e:
                self._bad("reap", e)
            if stopping:
                p.unregister(self._stop_r)

    def _finish(self, fid, outcome, results):
        with self._lock:
            call = self._calls.pop(fid, None)
        if call is None:
            return
        try:
            n = len(call.keys)
            if call.op == _SET:
                ok = outcome == 0
                self._complete(fid, ok, "" if ok else "set: %s" % _errtext(outcome), None)
            elif call.op == _GET:
                hits = [r == 0 for r in (results or [-1] * n)]
                chunk, base = self._chunk, self._staging.base
                for hit, page, (addr, nbytes) in zip(hits, call.pages, call.views):
                    if hit:
                        ctypes.memmove(addr, base + page * chunk, nbytes)
                ok = all(hits)
                self._complete(fid, ok, "" if ok else "get: %d of %d keys missing or unreadable"
                               % (n - sum(hits), n), hits)
            elif call.op == _EXISTS:
                self._complete(fid, outcome >= 0, "" if outcome >= 0 else _errtext(outcome),
                               [r == 0 for r in (results or [-1] * n)])
            else:
                ok = outcome >= 0 and all(r in (0, -2) for r in results or ())
                self._complete(fid, ok, "" if ok else "delete: %s" % _errtext(outcome), None)
        finally:
            if call.pages:
                self._staging.give(call.pages)
                call.pages = None

    # ---- teardown ----

    def close(self):
        """Finish the calls accepted so far (copies included), then close the
        store. No buffer LMCache handed in is touched after this returns."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._work.put(None)
        self._copier.join()
        if self._queue is not None:
            # In flight: let them finish (the reaper exits once none is left).
            os.write(self._stop_w, b"x")
            self._reaper.join()
            self._queue.close()
        with self._lock:
            left = list(self._calls.values())
            self._calls.clear()
        for call in left:
            self._complete(call.fid, False, "closed before it finished",
                           [False] * len(call.keys) if call.op in (_GET, _EXISTS) else None)
        if self._staging is not None:
            self._staging.close()
        self._store.close()
        if self._pool is not None:
            self._pool.close()
        os.close(self._stop_r)
        os.close(self._stop_w)
        with self._lock:
            efd, self._efd = self._efd, -1
        os.close(efd)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _count(keys):
    try:
        return len(keys)
    except Exception:
        return 0


def _errtext(rc):
    return os.strerror(-rc) if isinstance(rc, int) and rc < 0 else str(rc)
