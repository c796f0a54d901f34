"""hicache as an LMCache native connector (the `native_plugin` L2 adapter
of LMCache's multi-process mode).

Loaded with (docs/LMCACHE.md has the whole story):
    lmcache server ... --l2-adapter '{"type": "native_plugin",
      "module_path": "hicache.lmcache", "class_name": "HicacheConnector",
      "adapter_params": {"root_dir": "/mnt/kv", "chunk_bytes": 2097152},
      "max_capacity_gb": 500}'

LMCache hands each call its keys (strings) and buffers (memoryviews carved
out of its L1 arena, alignment not promised) and wants a future id back at
once; completions are signalled on an eventfd and collected by
drain_completions(), each once. Here every call is one started hicache op
on a completion queue, tagged with its future id, and the queue's own
eventfd is the one LMCache polls: no thread of ours, no Python on the data
path. The store moves each buffer through its bounce slots (it needs no
alignment) and checks every byte; a shorter buffer (the last, partial
chunk of a request) is stored zero padded to chunk_bytes. A call refused
before it starts still completes through the queue (an op that only
completes), so the order and the fd stay the queue's.

Keys become object names by an injective escape (key_name); the namespace
keyword (dtype, revision, anything LMCache's key does not hold) goes into
every name's suffix. Every method is thread-safe; failures are completions
with ok False and an error string, never exceptions; bad construction
keywords raise ValueError naming the key.
"""
import errno
import hashlib
import logging
import mmap
import os
import re
import threading
import time

import hicache
from hicache._engine import RateLimitedLog

logger = logging.getLogger("hicache.lmcache")

NAME_MAX = 128  # HC_STORE_NAME_MAX
_ESCAPED = re.compile(r"[%/\x00-\x1f\x7f]")
_ELEM_TYPE = re.compile(r"[A-Za-z0-9_]{1,31}")  # HC_ELEM_TYPE_MAX
_GET, _SET, _EXISTS, _DELETE = "get", "set", "exists", "delete"


def key_name(key):
    """LMCache's key string -> an object name, injectively: '%' '/' control
    bytes and a leading '.' are %XX-escaped; a name over 128 bytes becomes
    '%H' + its SHA-256 (an escaped name never holds '%H')."""
    if not isinstance(key, str):
        raise TypeError("key must be a str, not %s" % type(key).__name__)
    if not key:
        raise ValueError("key is empty")
    if len(key) <= NAME_MAX and key.isascii() and key[0] != "." and not _ESCAPED.search(key):
        return key  # LMCache's usual key: verbatim
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
    __slots__ = ("op", "n", "error")

    def __init__(self, op, n, error=None):
        self.op = op
        self.n = n
        self.error = error


def _positive_int(v, key):
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError("hicache LMCache connector: %s must be a positive integer, not %r" % (key, v))
    return v


class HicacheConnector:
    """An LMCache native connector over a hicache store. Keywords (LMCache's
    adapter_params): root_dir (the file store's base directory, created if
    missing), backend ("file", "mem", "s3"), chunk_bytes (the largest
    buffer, a full chunk; default: the first buffer's size), kv_dtype (the
    KV element type, e.g. "bfloat16": LMCache's key does not hold it, and
    chunks of two types of one width have one size; it goes into every
    object's geometry tag), namespace (identity beyond LMCache's key:
    model revision, tenant, ...),
    close_timeout_s, and any hicache configuration key (docs/CONFIG.md)."""

    def __init__(self, root_dir=None, backend="file", chunk_bytes=None, namespace=None,
                 kv_dtype=None, close_timeout_s=60.0, **config):
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
        if chunk_bytes is not None:
            _positive_int(chunk_bytes, "chunk_bytes")
        if kv_dtype is not None and not (isinstance(kv_dtype, str) and _ELEM_TYPE.fullmatch(kv_dtype)):
            raise ValueError("hicache LMCache connector: kv_dtype must be a name like \"bfloat16\" "
                             "([A-Za-z0-9_], at most 31), not %r" % (kv_dtype,))
        self._kv_dtype = kv_dtype
        if namespace is not None and not isinstance(namespace, str):
            raise ValueError("hicache LMCache connector: namespace must be a string, not %r"
                             % (namespace,))
        if isinstance(close_timeout_s, bool) or not isinstance(close_timeout_s, (int, float)) \
                or close_timeout_s < 0:
            raise ValueError("hicache LMCache connector: close_timeout_s must be a number >= 0, "
                             "not %r" % (close_timeout_s,))
        self._close_timeout = close_timeout_s
        self._suffix = "_lmc_" + hashlib.sha256(
            ("lmcache/1/" + (namespace or "")).encode()).hexdigest()[:16]
        try:
            self._store = hicache.Store(cfg, backend=backend)
        except (hicache.Error, ValueError) as e:
            raise ValueError("hicache LMCache connector: bad configuration: %s" % e) from None
        self._lock = threading.Lock()  # fids, the geometry, the calls
        self._fid = 0
        self._chunk = None
        self._pool = None
        self._pool_mem = None
        self._calls = {}  # fid -> _Call, until drained
        self._late = []  # completions reaped by close(), for a last drain
        self._bad = RateLimitedLog(log=logger)
        self._closed = False
        try:
            self._queue = hicache.Completions(self._store)
            self._efd = self._queue.fileno()
            if chunk_bytes is not None:
                self._setup(chunk_bytes)
        except BaseException:
            self._store.close()
            raise

    def _setup(self, chunk_bytes):
        """The pool whose bounce slots carry every buffer: one page of
        chunk_bytes (the page itself is never used), bounce mode, the
        anchor. Once; under self._lock or in the constructor."""
        mem = mmap.mmap(-1, chunk_bytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        pool = hicache.Pool.wrap_segments(
            [{"buffer": mem, "page_stride": chunk_bytes, "seg_len": chunk_bytes}],
            pages=1, page_tokens=1)
        try:
            self._store.register("kv", pool, anchor=True, suffix=self._suffix, force_bounce=True,
                                 elem_type=self._kv_dtype)
        except BaseException:
            pool.close()
            raise
        self._chunk, self._pool, self._pool_mem = chunk_bytes, pool, mem

    # ---- the contract ----

    def event_fd(self):
        """Readable while completions wait; drain_completions clears it."""
        return self._efd

    def _submit(self, op, keys, views):
        with self._lock:
            self._fid += 1
            fid = self._fid
        n = 0
        try:
            if isinstance(keys, (str, bytes)) or keys is None:
                raise TypeError("keys must be a list of str, not %s" % type(keys).__name__)
            keys = list(keys)
            n = len(keys)
            if self._closed:
                raise RuntimeError("the connector is closed")
            names = [key_name(k) for k in keys]
            if views is not None:
                views = list(views)
                if len(views) != n:
                    raise ValueError("%d keys but %d buffers" % (n, len(views)))
                sizes = [memoryview(v).nbytes for v in views]
                if self._chunk is None and n:
                    with self._lock:
                        if self._chunk is None:
                            self._setup(max(sizes))
                big = [i for i, s in enumerate(sizes) if self._chunk is not None and s > self._chunk]
                if big:
                    raise ValueError("buffer %d holds %d bytes, more than chunk_bytes %d (set "
                                     "chunk_bytes in adapter_params)" % (big[0], sizes[big[0]], self._chunk))
            with self._lock:
                self._calls[fid] = _Call(op, n)
            try:
                if not n:
                    self._queue.nop(fid)
                elif self._chunk is None:  # no geometry yet: nothing stored through us
                    self._calls[fid].error = "" if op != _GET else "not found"
                    self._queue.nop(fid)
                elif op == _SET:
                    self._queue.set_bufs(fid, names, views)
                elif op == _GET:
                    self._queue.get_bufs(fid, names, views)
                elif op == _EXISTS:
                    self._queue.lookup(fid, names)
                else:
                    self._queue.delete(fid, names)
            except BaseException:
                with self._lock:
                    self._calls.pop(fid, None)
                raise
        except Exception as e:
            self._bad("submit_batch_" + op, e)
            self._refused(fid, op, n, "%s: %s" % (type(e).__name__, e))
        return fid

    def _refused(self, fid, op, n, error):
        """A call that failed before its op: it completes through the queue
        all the same (an op that only completes), else straight to the
        next drain."""
        with self._lock:
            self._calls[fid] = _Call(op, n, error)
        try:
            self._queue.nop(fid)
        except Exception:
            with self._lock:
                self._calls.pop(fid, None)
                self._late.append(_failed(fid, op, n, error))

    def submit_batch_get(self, keys, memoryviews):
        return self._submit(_GET, keys, memoryviews)

    def submit_batch_set(self, keys, memoryviews):
        return self._submit(_SET, keys, memoryviews)

    def submit_batch_exists(self, keys):
        return self._submit(_EXISTS, keys, None)

    def submit_batch_delete(self, keys):
        return self._submit(_DELETE, keys, None)

    def drain_completions(self):
        """Every completion since the last call, each once; afterwards the
        fd is not readable until the next one."""
        out = []
        with self._lock:
            late, self._late = self._late, []
        out += late
        try:
            got = self._queue.reap()
        except hicache.Error:
            got = []  # closed: what close() reaped is in late
        for fid, outcome, results in got:
            with self._lock:
                call = self._calls.pop(fid, None)
            if call is not None:
                out.append(_completion(fid, call, outcome, results))
        return out

    # ---- teardown ----

    def close(self):
        """Let the calls accepted so far finish (up to close_timeout_s, then
        cancel the rest), then close the store. LMCache's buffers are not
        touched after this returns; completions not yet drained are given
        by a later drain_completions()."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        deadline = time.monotonic() + self._close_timeout
        done = []
        try:
            while self._queue.pending and time.monotonic() < deadline:
                got = self._queue.reap()
                done += got
                if not got:
                    time.sleep(0.002)
            done += self._queue.reap()
        except hicache.Error:
            pass
        self._queue.close()  # cancels what is left and waits for it
        with self._lock:
            for fid, outcome, results in done:
                call = self._calls.pop(fid, None)
                if call is not None:
                    self._late.append(_completion(fid, call, outcome, results))
            for fid, call in self._calls.items():
                self._late.append(_failed(fid, call.op, call.n, "closed before it finished"))
            self._calls.clear()
        self._store.close()
        if self._pool is not None:
            self._pool.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _failed(fid, op, n, error):
    return (fid, False, error, [False] * n if op in (_GET, _EXISTS) else None)


def _completion(fid, call, outcome, results):
    """(future id, ok, error, per-key list or None) from an op's outcome."""
    n = call.n
    if call.error is not None:
        if call.error == "" and call.op != _GET:  # nothing known yet: all absent
            return (fid, True, "", [False] * n if call.op == _EXISTS else None)
        return _failed(fid, call.op, n, call.error)
    if not n:
        return (fid, True, "", [] if call.op in (_GET, _EXISTS) else None)
    if outcome == -errno.ECANCELED:
        return _failed(fid, call.op, n, "closed before it began")
    if call.op == _SET:
        ok = outcome == 0
        return (fid, ok, "" if ok else "set: %s" % _errtext(outcome), None)
    if call.op == _GET:
        hits = [r == 0 for r in (results or [-1] * n)]
        ok = all(hits)
        return (fid, ok, "" if ok else "get: %d of %d keys missing or unreadable" % (n - sum(hits), n),
                hits)
    if call.op == _EXISTS:
        if outcome < 0:
            return _failed(fid, call.op, n, "exists: %s" % _errtext(outcome))
        return (fid, True, "", [r == 0 for r in results])
    ok = outcome >= 0 and all(r in (0, -errno.ENOENT) for r in results or ())
    return (fid, ok, "" if ok else "delete: %s" % _errtext(outcome), None)


def _errtext(rc):
    return os.strerror(-rc) if isinstance(rc, int) and rc < 0 else str(rc)
