"""hicache from Python: stores, pools over your own memory, page keys.

A thin ctypes layer over libhicache (no compile step). Every C call
releases the GIL, so several threads calling one store run their I/O at
once. The library is found through HICACHE_LIB, then next to this package
(the installed layout), then the system loader.

    import hicache
    with hicache.Store({"backend": "file", "dirs": ["/mnt/l3"], "model": "m"}) as st:
        pool = hicache.Pool.wrap_kv(kv_buffer, layers=L, heads=H, head_dim=D,
                                    elem_bytes=2, page_size=64, pages=P,
                                    layout="page_first")
        st.register("kv", pool, anchor=True)
        st.set(keys, pages)            # keys: 64-hex strings, 32-byte keys or names
        hits, results = st.get(keys, pages)

Errors of the C library raise hicache.Error (an OSError) carrying errno
and the library's message (hc_last_error()).

The SGLang storage backend is hicache.sglang.HiCacheHicache.
"""

import array
import ctypes
import errno as _errno
import json
import operator
import os
import threading
import weakref

from . import _lib
from ._lib import KEY_BYTES, KEY_HEX_LEN, LAYOUTS

__all__ = [
    "Error",
    "Store",
    "Pool",
    "Completions",
    "version",
    "library_path",
    "keys_to_bytes",
    "key_chain",
    "key_seed",
    "suffix",
    "fsck",
    "ls",
    "set_log_level",
]

_LIB, _LIB_PATH = _lib.load()
_C = _LIB

# The process this module's handles belong to. A forked child inherits the
# parent's stores and pools as bytes only: their worker threads and rings
# stay with the parent (and the rings' memory is shared with it), so the
# child must never call into them, not even to close them.
_PID = os.getpid()


def _after_fork_in_child():
    global _PID
    _PID = os.getpid()


os.register_at_fork(after_in_child=_after_fork_in_child)


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


def _cstr(s, what):
    """s (str or bytes) as the NUL-terminated bytes a C call reads: a NUL
    inside would silently cut the name short in C, so it is refused."""
    if isinstance(s, str):
        b = s.encode()
    elif isinstance(s, (bytes, bytearray)):
        b = bytes(s)
    else:
        raise TypeError("hicache: %s must be a str, not %s" % (what, type(s).__name__))
    if b"\0" in b:
        raise ValueError("hicache: %s %r holds a NUL byte" % (what, s))
    return b


def _no_nul(obj, what):
    """Every string inside a JSON-able config: cJSON would read "\u0000" as
    the end of the string."""
    if isinstance(obj, str):
        if "\0" in obj:
            raise ValueError("hicache: %s: %r holds a NUL byte" % (what, obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _no_nul(k, what)
            _no_nul(v, "%s.%s" % (what, k))
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _no_nul(v, what)


def _index(v, what, limit=None):
    """An integer index (int, numpy or 0-d torch integer; never a float or
    a bool) in [0, limit) (limit None: [0, 2**63))."""
    if isinstance(v, bool):
        raise TypeError("hicache: %s must be an integer, not a bool" % what)
    try:
        i = operator.index(v)
    except TypeError:
        raise TypeError("hicache: %s must be an integer, not %s" % (what, type(v).__name__)) from None
    top = (1 << 63) if limit is None else limit
    if not 0 <= i < top:
        raise ValueError("hicache: %s %d is outside [0, %d)" % (what, i, top))
    return i


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


# ---- memory of Python objects ----


class _Mem:
    """(address, length) of a contiguous host buffer, holding what keeps it
    alive. Accepts CPU torch tensors (data_ptr/numel/element_size), numpy
    arrays, (address, length) tuples and buffer-protocol objects (mmap,
    bytearray, memoryview; bytes only where nothing is written into it).
    writable: the library will write into it (get targets, pool memory):
    read-only memory is refused, never written."""

    __slots__ = ("addr", "len", "ref", "tensor")

    def __init__(self, obj, what="buffer", writable=True):
        self.ref = obj
        self.tensor = None
        if isinstance(obj, tuple) and len(obj) == 2:
            addr, n = _index(obj[0], what + " address"), _index(obj[1], what + " length")
            if addr + n >= 1 << 64 or (n and not addr):
                raise ValueError("hicache: %s: address 0x%x + %d bytes is not a buffer" % (what, addr, n))
            self.addr, self.len = addr, n
            return
        if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):
            dev = getattr(obj, "device", None)
            if dev is not None and getattr(dev, "type", "cpu") != "cpu":
                raise ValueError("hicache: %s: a %s tensor is not host memory" % (what, dev))
            if hasattr(obj, "is_contiguous") and not obj.is_contiguous():
                raise ValueError("hicache: %s: tensor is not contiguous" % what)
            self.addr = int(obj.data_ptr())
            self.len = int(obj.numel()) * int(obj.element_size())
            # Checked per call (moved()): an engine that reallocates or
            # resizes the tensor would leave this address behind.
            self.tensor = obj
            return
        if hasattr(obj, "__array_interface__") and hasattr(obj, "ctypes"):
            if not obj.flags["C_CONTIGUOUS"]:
                raise ValueError("hicache: %s: array is not C-contiguous" % what)
            if writable and not obj.flags["WRITEABLE"]:
                raise ValueError("hicache: %s: array is read-only" % what)
            self.addr = int(obj.ctypes.data)
            self.len = int(obj.nbytes)
            return
        mv = memoryview(obj)
        if not mv.contiguous:
            raise ValueError("hicache: %s: buffer is not contiguous" % what)
        n = mv.nbytes
        if mv.readonly:
            if writable:
                raise ValueError("hicache: %s: buffer is read-only" % what)
            if isinstance(obj, bytes):
                self.addr = ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value or 0
                self.len = n
                return
            raise ValueError("hicache: %s: read-only buffer of type %s" % (what, type(obj).__name__))
        if n == 0:
            self.addr, self.len = 0, 0
            return
        carr = (ctypes.c_char * n).from_buffer(mv.cast("B"))
        self.ref = (obj, carr)
        self.addr = ctypes.addressof(carr)
        self.len = n

    def moved(self):
        """Why this tensor's memory is no longer where it was wrapped, or
        None (a resize_ or set_ moves it; the old block may be freed)."""
        t = self.tensor
        if t is None:
            return None
        addr, n = int(t.data_ptr()), int(t.numel()) * int(t.element_size())
        if addr != self.addr or n != self.len:
            return "tensor moved from 0x%x (%d bytes) to 0x%x (%d bytes)" % (self.addr, self.len, addr, n)
        return None


def _region(mem):
    return _lib.Region(mem.addr, mem.len)


# ---- keys ----


class _Keys:
    """Keys for one call: a packed hc_key array when every key is a 64-digit
    lowercase hex string (or 32 raw bytes), else an array of names. Holds
    the buffers the C call reads. keys is a list (or tuple, or any other
    iterable but a str or bytes-like object of names) of str or of bytes;
    a lone str is refused, never read as one key per character."""

    __slots__ = ("n", "keys", "names", "ref")

    def __init__(self, keys):
        self.keys = None
        self.names = None
        self.ref = None
        if isinstance(keys, str):
            raise TypeError("hicache: keys must be a list of keys, not one str (wrap a single key in a list)")
        if isinstance(keys, (bytes, bytearray, memoryview)):
            raw = bytes(keys)
            if len(raw) % KEY_BYTES:
                raise ValueError("hicache: packed keys: %d bytes is not a multiple of 32" % len(raw))
            self.n = len(raw) // KEY_BYTES
            self._packed(raw)
            return
        if keys is None:
            raise TypeError("hicache: keys must be a list of keys, not None")
        keys = keys if isinstance(keys, list) else list(keys)
        self.n = n = len(keys)
        if n == 0:
            return
        if isinstance(keys[0], str):
            try:
                joined = "".join(keys)
            except TypeError:
                bad = next(k for k in keys if not isinstance(k, str))
                raise TypeError("hicache: keys mix str and %s" % type(bad).__name__) from None
            if "\0" in joined:
                i = next(i for i, k in enumerate(keys) if "\0" in k)
                raise ValueError("hicache: key %d (%r) holds a NUL byte" % (i, keys[i]))
            # SGLang's keys: one join and one fromhex for the whole batch.
            # Only lowercase 64-digit keys are hc_keys (a name of other
            # text is used verbatim); lengths are checked per key in C.
            if len(joined) == KEY_HEX_LEN * n and set(map(len, keys)) == {KEY_HEX_LEN}:
                try:
                    raw = bytes.fromhex(joined)
                except ValueError:
                    raw = None
                if raw is not None and len(raw) == KEY_BYTES * n and joined == joined.lower():
                    self._packed(raw)
                    return
            self._named([k.encode() for k in keys])
            return
        if all(isinstance(k, (bytes, bytearray)) for k in keys):
            if set(map(len, keys)) == {KEY_BYTES}:
                self._packed(b"".join(keys))
                return
            enc = [bytes(k) for k in keys]
            for i, k in enumerate(enc):
                if b"\0" in k:
                    raise ValueError("hicache: key %d (%r) holds a NUL byte" % (i, k))
            self._named(enc)
            return
        bad = next(k for k in keys if not isinstance(k, (str, bytes, bytearray)))
        raise TypeError("hicache: keys must be str or bytes, not %s" % type(bad).__name__)

    def _packed(self, raw):
        buf = ctypes.create_string_buffer(raw, len(raw))
        self.ref = buf
        self.keys = ctypes.cast(buf, ctypes.c_void_p)

    def _named(self, encoded):
        arr = (ctypes.c_char_p * len(encoded))(*encoded)
        self.ref = (arr, encoded)
        self.names = ctypes.cast(arr, ctypes.c_void_p)


def keys_to_bytes(keys):
    """64-hex keys -> one bytes object of n x 32 (hc_key[n])."""
    if isinstance(keys, str):
        raise TypeError("hicache: keys must be a list of keys, not one str")
    joined = "".join(keys)
    raw = bytes.fromhex(joined)
    if len(raw) != KEY_BYTES * len(keys) or set(map(len, keys)) - {KEY_HEX_LEN}:
        raise ValueError("hicache: keys must be 64 hex digits each")
    return raw


_INDEX_MAX = (1 << 63) - 1


class _Pages:
    """int64 page indices for one call, without per-page Python work for
    tensors and numpy arrays. Integers only (a float index is refused, not
    truncated), never wrapped: lists and arrays are checked to [0, 2**63),
    and the store checks every index against its pool (-EFAULT)."""

    __slots__ = ("n", "ptr", "ref")

    def __init__(self, pages):
        if isinstance(pages, (str, bytes, bytearray)) or pages is None:
            raise TypeError("hicache: pages must be integers, not %s" % type(pages).__name__)
        if hasattr(pages, "data_ptr") and hasattr(pages, "element_size"):
            import torch

            if pages.dtype.is_floating_point or pages.dtype.is_complex or pages.dtype == torch.bool:
                raise TypeError("hicache: pages must be an integer tensor, not %s" % pages.dtype)
            # Every integer dtype converts to int64 exactly, and a negative
            # index reaches C as one past any pool (-EFAULT): no check here,
            # on the engines' path.
            t = pages.reshape(-1).to(device="cpu", dtype=torch.int64).contiguous()
            self.ref = t
            self.n = int(t.numel())
            self.ptr = ctypes.c_void_p(t.data_ptr() if self.n else 0)
            return
        if hasattr(pages, "__array_interface__"):
            import numpy as np

            a = np.asarray(pages).reshape(-1)
            if a.dtype.kind not in "iu":
                raise TypeError("hicache: pages must be an integer array, not %s" % a.dtype)
            # Signed indices reach C as they are, a negative one as one past
            # any pool (-EFAULT); only uint64 can hold 2**63 and more, which
            # int64 would wrap into range.
            if a.size and a.dtype.kind == "u" and a.dtype.itemsize == 8 and int(a.max()) > _INDEX_MAX:
                raise ValueError("hicache: a page index outside [0, 2**63)")
            a = np.ascontiguousarray(a, dtype=np.int64)
            self.ref = a
            self.n = int(a.size)
            self.ptr = ctypes.c_void_p(a.ctypes.data if self.n else 0)
            return
        pages = [_index(p, "page index") for p in pages]
        self.n = len(pages)
        arr = (ctypes.c_int64 * self.n)(*pages)
        self.ref = arr
        self.ptr = ctypes.cast(arr, ctypes.c_void_p)


# ---- pools ----


def _layout_index(layout):
    if isinstance(layout, int):
        return layout
    try:
        return LAYOUTS.index(layout)
    except ValueError:
        raise ValueError("hicache: unknown layout %r (one of %s)" % (layout, ", ".join(LAYOUTS))) from None


_COMPONENTS = {"plain": 0, "k": 1, "v": 2}


class Pool:
    """Host pages in the layout of one engine pool. Wrapped pools (wrap_*)
    point into memory the caller owns and keep a reference to the objects
    they were given; created pools (create_kv) own their memory."""

    def __init__(self, handle, refs, kind):
        self._life = _Life(handle, "pool")
        self._refs = refs
        self.kind = kind
        self._stores = 0
        self._lock = threading.Lock()
        self._pages = int(_C.hc_pool_pages(handle))

    # constructors

    @classmethod
    def wrap_kv(cls, buffers, *, layers, heads, head_dim, elem_bytes, page_size, pages,
                layout="page_first", mla=False):
        """One buffer (SGLang's kv_buffer: K half then V half; MLA: the
        latent buffer) or a (K, V) pair of buffers."""
        if not isinstance(buffers, (list, tuple)) or (
            isinstance(buffers, tuple) and len(buffers) == 2 and isinstance(buffers[0], int)
        ):
            buffers = [buffers]
        mems = [_Mem(b, "kv buffer %d" % i) for i, b in enumerate(buffers)]
        geo = _kv_geo(layers, heads, head_dim, elem_bytes, page_size, pages, layout, mla)
        regs = (_lib.Region * len(mems))(*[_region(m) for m in mems])
        out = ctypes.c_void_p()
        _check(_C.hc_pool_wrap_kv(ctypes.byref(geo), regs, len(mems), ctypes.byref(out)), "wrap kv pool")
        return cls(out, mems, "kv")

    @classmethod
    def create_kv(cls, *, layers, heads, head_dim, elem_bytes, page_size, pages,
                  layout="page_first", mla=False):
        """A pool whose memory the library maps (benchmarks, tests)."""
        geo = _kv_geo(layers, heads, head_dim, elem_bytes, page_size, pages, layout, mla)
        out = ctypes.c_void_p()
        _check(_C.hc_pool_create_kv(ctypes.byref(geo), None, ctypes.byref(out)), "create kv pool")
        return cls(out, [], "kv")

    @classmethod
    def create_anchor(cls, *, pages, page_size):
        """A logical anchor: slots only, no data (its pages are markers)."""
        geo = _lib.AnchorGeometry(pages, page_size)
        out = ctypes.c_void_p()
        _check(_C.hc_pool_create_anchor(ctypes.byref(geo), ctypes.byref(out)), "create anchor pool")
        return cls(out, [], "anchor")

    @classmethod
    def wrap_mamba(cls, temporal, convs, *, slots, layers):
        """temporal: None or an empty buffer for none; convs: 1..8 buffers,
        each slots x layers x (its bytes per layer and slot)."""
        slots, layers = _index(slots, "mamba slots"), _index(layers, "mamba layers")
        if not slots or not layers:
            raise ValueError("hicache: mamba pool: slots and layers must be > 0")
        geo = _lib.MambaGeometry()
        geo.slots = slots
        geo.layers = layers
        tm = _Mem(temporal, "temporal buffer") if temporal is not None else None
        if tm is not None and tm.len == 0:
            tm = None
        geo.temporal_bytes = tm.len // (slots * layers) if tm else 0
        if not 1 <= len(convs) <= _lib.MAMBA_MAX_CONV:
            raise ValueError("hicache: mamba pool: %d conv buffers (1..8)" % len(convs))
        cms = [_Mem(c, "conv buffer %d" % i) for i, c in enumerate(convs)]
        geo.nconv = len(cms)
        for i, m in enumerate(cms):
            geo.conv_bytes[i] = m.len // (slots * layers)
        creg = (_lib.Region * len(cms))(*[_region(m) for m in cms])
        treg = ctypes.byref(_region(tm)) if tm else None
        out = ctypes.c_void_p()
        _check(_C.hc_pool_wrap_mamba(ctypes.byref(geo), treg, creg, ctypes.byref(out)), "wrap mamba pool")
        return cls(out, [tm] + cms, "mamba")

    @classmethod
    def wrap_indexer(cls, buffer, *, pages, page_size, page_bytes):
        m = _Mem(buffer, "indexer buffer")
        geo = _lib.IndexerGeometry(pages, page_size, page_bytes)
        out = ctypes.c_void_p()
        _check(_C.hc_pool_wrap_indexer(ctypes.byref(geo), ctypes.byref(_region(m)), ctypes.byref(out)),
               "wrap indexer pool")
        return cls(out, [m], "indexer")

    @classmethod
    def wrap_segments(cls, buffers, *, pages, page_tokens):
        """buffers: dicts {buffer, page_stride, seg_len, [base], [component
        'plain'|'k'|'v'], [index]}: page p of a buffer is [base + p *
        page_stride, + seg_len) (base defaults to the buffer's start)."""
        mems, sbs = [], []
        for i, b in enumerate(buffers):
            m = _Mem(b["buffer"], "segment buffer %d" % i)
            base = int(b.get("base", m.addr))
            if not m.addr <= base <= m.addr + m.len:
                raise ValueError("hicache: segment buffer %d: base outside the buffer" % i)
            comp = b.get("component", "plain")
            comp = _COMPONENTS[comp] if isinstance(comp, str) else int(comp)
            sbs.append(_lib.SegmentBuffer(base, m.addr + m.len - base, int(b["page_stride"]),
                                          int(b["seg_len"]), comp, int(b.get("index", i))))
            mems.append(m)
        arr = (_lib.SegmentBuffer * len(sbs))(*sbs)
        out = ctypes.c_void_p()
        _check(_C.hc_pool_wrap_segments(arr, len(sbs), pages, page_tokens, ctypes.byref(out)),
               "wrap segments pool")
        return cls(out, mems, "segments")

    # queries

    def _handle(self):
        """The C handle (or Error when closed or inherited through fork)."""
        h = self._life.enter()
        self._life.leave()
        return h

    def moved(self):
        """Why the memory this pool wraps is no longer where it was wrapped
        (a tensor resized or re-set since), or None."""
        for m in self._refs or ():
            why = m.moved() if isinstance(m, _Mem) else None
            if why:
                return why
        return None

    def _check_memory(self):
        why = self.moved()
        if why:
            raise Error(-_errno.EFAULT, "pool", "the memory of this %s pool moved: %s" % (self.kind, why))

    @property
    def pages(self):
        return int(self._life.call(_C.hc_pool_pages))

    @property
    def page_tokens(self):
        return int(self._life.call(_C.hc_pool_page_tokens))

    @property
    def page_bytes(self):
        return int(self._life.call(_C.hc_pool_page_bytes))

    @property
    def contiguous(self):
        return bool(self._life.call(_C.hc_pool_contiguous))

    def aligned(self, alignment=4096):
        return bool(self._life.call(_C.hc_pool_aligned, _index(alignment, "alignment")))

    def segments(self, page):
        """[(address, length), ...] of the page's zero-copy segments."""
        page = _index(page, "page", self._pages)
        segs = (_lib.Segment * 16)()
        n = _check(self._life.call(_C.hc_pool_page_segments, page, segs, 16), "pool segments")
        return [(segs[i].addr or 0, segs[i].len) for i in range(n)]

    def gather(self, page, out=None):
        """The page's flat bytes (into out, a writable buffer, if given)."""
        page = _index(page, "page", self._pages)
        if out is None:
            out = bytearray(self.page_bytes)
        m = _Mem(out, "gather target", writable=True)
        self._check_memory()
        _check(self._life.call(_C.hc_pool_gather, page, m.addr, m.len), "gather page %d" % page)
        return out

    def scatter(self, page, data):
        page = _index(page, "page", self._pages)
        m = _Mem(data, "scatter source", writable=False)
        self._check_memory()
        _check(self._life.call(_C.hc_pool_scatter, page, m.addr, m.len), "scatter page %d" % page)

    @property
    def closed(self):
        return not self._life.open

    def close(self):
        with self._lock:
            if self._stores:
                raise Error(-_errno.EBUSY, "close pool", "still registered in a store")
        self._life.close(_C.hc_pool_destroy)
        self._refs = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if not self._stores:
                self.close()
        except Exception:
            pass


def _kv_geo(layers, heads, head_dim, elem_bytes, page_size, pages, layout, mla):
    return _lib.KvGeometry(layers, heads, head_dim, elem_bytes, page_size, pages,
                           _layout_index(layout), bool(mla))


# ---- store ----

_OPT_KEYS = ("backend", "model", "tp_rank", "tp_size", "force_bounce")
_SHARING = {"auto": _lib.SHARING_AUTO, "sharded": _lib.RANK_SHARDED, "replicated": _lib.RANK_REPLICATED}
_POLICY = {"all_pages": _lib.HIT_ALL_PAGES, "trailing_pages": _lib.HIT_TRAILING_PAGES}


def _policy(p):
    if isinstance(p, int):
        return p
    v = getattr(p, "value", p)
    if v not in _POLICY:
        raise ValueError("hicache: unknown hit policy %r" % (p,))
    return _POLICY[v]


class Transfer:
    """One pool's part of a v2 call: pool name, keys (or only a count for
    exists), pages (set/get), hit policy (exists)."""

    __slots__ = ("pool", "keys", "pages", "policy", "n", "results")

    def __init__(self, pool, keys=None, pages=None, policy="all_pages", n=None):
        self.pool = pool
        self.keys = keys
        self.pages = pages
        self.policy = policy
        self.n = n if n is not None else (len(keys) if keys is not None else 0)
        self.results = None


class Store:
    """An open store. config: a dict of docs/CONFIG.md keys plus the store
    options backend ('file', 'mem', 's3'), model, tp_rank, tp_size and
    force_bounce (also accepted as keyword arguments). Any thread may call
    set/get/exists/clear/stats at once; close() waits for calls in flight.
    After close(), and in a child forked after the store was opened, every
    call raises Error (EBADF)."""

    def __init__(self, config=None, **opts):
        cfg = dict(config or {})
        for k in _OPT_KEYS:
            if k in cfg:
                opts.setdefault(k, cfg.pop(k))
        unknown = set(opts) - set(_OPT_KEYS)
        if unknown:
            raise ValueError("hicache: unknown store option %s" % ", ".join(sorted(unknown)))
        _no_nul(cfg, "config")
        self._pools = {}
        self._queues = weakref.WeakSet()  # Completions over this store
        self._anchor = None  # the anchor's registered name ("kv" names it too)
        self._lock = threading.Lock()
        self._life = _Life(None, "store")
        o = _lib.StoreOpts()
        _C.hc_store_opts_init(ctypes.byref(o), ctypes.sizeof(o))
        self._backend = _cstr(str(opts.get("backend") or "file"), "backend")
        o.backend = self._backend
        model = opts.get("model")
        self._model = _model_name(model) if model else None
        o.model = self._model
        o.tp_rank = _index(opts.get("tp_rank", 0), "tp_rank", 1 << 32)
        o.tp_size = _index(opts.get("tp_size", 1), "tp_size", 1 << 32)
        o.force_bounce = bool(opts.get("force_bounce", False))
        chandle = ctypes.c_void_p()
        text = json.dumps(cfg).encode() if cfg else None
        _check(_C.hc_config_create(text, ctypes.byref(chandle)), "store config")
        try:
            o.config = chandle
            h = ctypes.c_void_p()
            _check(_C.hc_store_open(ctypes.byref(o), ctypes.byref(h)), "open store")
            self._life = _Life(h, "store")
        finally:
            _C.hc_config_destroy(chandle)

    def _adopt_queue(self, q):
        with self._lock:
            self._queues.add(q)

    def close(self):
        # Queues first: their ops use the store until they are over.
        with self._lock:
            queues = list(self._queues)
        for q in queues:
            q.close()
        if self._life.close(_C.hc_store_close):
            with self._lock:
                pools, self._pools, self._anchor = self._pools, {}, None
            for p in pools.values():
                with p._lock:
                    p._stores -= 1

    @property
    def closed(self):
        return not self._life.open

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _call(self, fn, *args):
        return self._life.call(fn, *args)

    def _check_memory(self, names):
        """The pools a call moves pages of must still wrap live memory."""
        with self._lock:
            pools = [self._pools.get(self._anchor if n == "kv" and "kv" not in self._pools else n)
                     for n in names]
        for p in pools:
            if p is not None:
                p._check_memory()

    # properties

    @property
    def alignment(self):
        return int(self._call(_C.hc_store_alignment))

    @property
    def direct_io(self):
        return bool(self._call(_C.hc_store_direct_io))

    @property
    def io_engine(self):
        return self._call(_C.hc_store_io_engine).decode()

    # pools

    def register(self, name, pool, *, anchor=False, sharing="auto", suffix=None, force_bounce=False,
                 elem_type=None):
        """Register pool under name. suffix: this pool's name suffix,
        verbatim (default: the store's model and TP ranks). elem_type: the
        element type of its bytes ("bfloat16", "float8_e4m3fn", ...): folded
        into the objects' geometry tag, so pools that differ only in it
        read each other's pages as misses."""
        if not isinstance(pool, Pool):
            raise TypeError("hicache: register: pool must be a hicache.Pool, not %s" % type(pool).__name__)
        cname = _cstr(name, "pool name")
        reg = _lib.PoolReg()
        _C.hc_pool_reg_init(ctypes.byref(reg), ctypes.sizeof(reg))
        reg.anchor = bool(anchor)
        if isinstance(sharing, str):
            if sharing not in _SHARING:
                raise ValueError("hicache: unknown sharing %r (one of %s)" % (sharing, ", ".join(_SHARING)))
            reg.sharing = _SHARING[sharing]
        else:
            reg.sharing = _index(sharing, "sharing", len(_SHARING))
        sfx = _cstr(suffix, "suffix") if suffix is not None else None
        reg.suffix = sfx
        reg.force_bounce = bool(force_bounce)
        et = _cstr(elem_type, "elem_type") if elem_type else None
        if et is not None:
            reg.elem_type = et
        pool._check_memory()
        with pool._lock:
            # Counted first: a close racing this registration must fail
            # (EBUSY) rather than free a pool the store is taking.
            pool._stores += 1
        try:
            _check(self._call(_C.hc_store_register_pool_ex, cname, pool._handle(), ctypes.byref(reg)),
                   "register pool %r" % name)
        except BaseException:
            with pool._lock:
                pool._stores -= 1
            raise
        with self._lock:
            self._pools[name] = pool
            if anchor:
                self._anchor = name

    def unregister(self, name):
        """Unregister a pool ("kv" names the anchor, as in transfers). The
        store drops its reference only to the pool registered under that
        name."""
        cname = _cstr(name, "pool name")
        _check(self._call(_C.hc_store_unregister_pool, cname), "unregister pool %r" % name)
        with self._lock:
            key = name if name in self._pools else (self._anchor if name == "kv" else None)
            pool = self._pools.pop(key, None) if key is not None else None
            if key is not None and key == self._anchor:
                self._anchor = None
        if pool is not None:
            with pool._lock:
                pool._stores -= 1

    def pool_info(self, name):
        info = _lib.PoolInfo()
        _check(self._call(_C.hc_store_pool_info, _cstr(name, "pool name"), ctypes.byref(info)),
               "pool info %r" % name)
        return {f: getattr(info, f) for f, _ in _lib.PoolInfo._fields_}

    # v1

    def set(self, keys, pages):
        """Store pages[i] of the anchor under keys[i]. Returns the per-page
        results (0 stored or existing, else -errno)."""
        k, p = _Keys(keys), _Pages(pages)
        _same_len(k, p)
        self._check_memory(("kv",))
        res = (ctypes.c_int * max(k.n, 1))()
        fn = _C.hc_store_set if k.keys is not None else _C.hc_store_set_named
        rc = self._call(fn, k.keys if k.keys is not None else k.names, k.n, p.ptr, res)
        if rc < 0 and all(res[i] == 0 for i in range(k.n)):
            _check(rc, "set")  # a whole-call error: nothing written
        return list(res[: k.n])

    def get(self, keys, pages):
        """Read keys[i] into pages[i]. Returns (leading hits, results)."""
        k, p = _Keys(keys), _Pages(pages)
        _same_len(k, p)
        self._check_memory(("kv",))
        res = (ctypes.c_int * max(k.n, 1))()
        fn = _C.hc_store_get if k.keys is not None else _C.hc_store_get_named
        rc = _check(self._call(fn, k.keys if k.keys is not None else k.names, k.n, p.ptr, res), "get")
        return int(rc), list(res[: k.n])

    def exists(self, keys):
        k = _Keys(keys)
        fn = _C.hc_store_exists if k.keys is not None else _C.hc_store_exists_named
        return int(_check(self._call(fn, k.keys if k.keys is not None else k.names, k.n), "exists"))

    # v2

    def _transfers(self, transfers, with_pages):
        if isinstance(transfers, (str, bytes)) or transfers is None:
            raise TypeError("hicache: transfers must be a list of Transfer")
        transfers = list(transfers)
        arr = (_lib.PoolTransfer * max(len(transfers), 1))()
        hold = []
        for i, t in enumerate(transfers):
            if not isinstance(t, Transfer):
                raise TypeError("hicache: transfer %d is a %s, not a hicache.Transfer" % (i, type(t).__name__))
            k = _Keys(t.keys if t.keys is not None else [])
            c = arr[i]
            pool = _cstr(t.pool, "pool name")
            hold.append((pool, k))
            c.pool = pool
            c.n = _index(t.n, "transfer count", 1 << 32) if t.keys is None else k.n
            c.keys = k.keys
            c.names = k.names
            c.policy = _policy(t.policy)
            if with_pages:
                p = _Pages(t.pages)
                _same_len(k, p)
                hold.append(p)
                c.pages = p.ptr
                res = (ctypes.c_int * max(k.n, 1))()
                hold.append(res)
                c.results = ctypes.cast(res, ctypes.POINTER(ctypes.c_int))
                t.results = res
        if with_pages:
            self._check_memory([t.pool for t in transfers])
        return transfers, arr, hold

    def set_v2(self, transfers):
        """Per transfer as set(); fills each Transfer.results and returns
        {pool: results}."""
        transfers, arr, hold = self._transfers(transfers, True)
        rc = self._call(_C.hc_store_set_v2, arr, len(transfers))
        out = {t.pool: list(t.results[: len(t.keys)]) for t in transfers}
        if rc < 0 and not any(any(r) for r in out.values()):
            _check(rc, "set_v2")
        del hold
        return out

    def get_v2(self, transfers):
        transfers, arr, hold = self._transfers(transfers, True)
        _check(self._call(_C.hc_store_get_v2, arr, len(transfers)), "get_v2")
        out = {t.pool: list(t.results[: len(t.keys)]) for t in transfers}
        del hold
        return out

    def exists_query(self, keys, transfers=(), endpoints=False):
        """Returns (result of the min rule, kv_hit_pages, [pool hits per
        transfer], restorable end points or None)."""
        k = _Keys(keys)
        transfers, arr, hold = self._transfers(transfers, False)
        q = _lib.ExistsQuery()
        _C.hc_exists_query_init(ctypes.byref(q), ctypes.sizeof(q))
        q.keys = k.keys
        q.names = k.names
        q.n = k.n
        q.transfers = arr
        q.nt = len(transfers)
        hits = (ctypes.c_uint64 * max(len(transfers), 1))()
        q.pool_hits = hits
        ends = None
        if endpoints:
            ends = (ctypes.c_uint64 * max(k.n, 1))()
            q.endpoints = ends
            q.endpoints_max = k.n
        rc = _check(self._call(_C.hc_store_exists_query, ctypes.byref(q)), "exists_v2")
        del hold
        eps = list(ends[: q.nendpoints]) if endpoints else None
        return int(rc), int(q.kv_hit_pages), list(hits[: len(transfers)]), eps

    def clear(self):
        """Delete every object of this store's registered pools; returns how many."""
        return int(_check(self._call(_C.hc_store_clear), "clear"))

    def stats(self, pool=None):
        """Counters as a dict; latency histograms as lists, with p50/p99 in us."""
        s = _lib.StoreStats()
        _check(self._call(_C.hc_store_stats, _cstr(pool, "pool name") if pool else None, ctypes.byref(s)),
               "stats")
        out = {f: int(getattr(s, f)) for f in _lib.STAT_FIELDS}
        out["set_lookups"] = int(s.set_lookups)
        out["bounce_bytes"] = int(s.bounce_bytes)
        out["other_geometry"] = int(s.other_geometry)
        for op in ("set", "get", "exists"):
            hist = getattr(s, op + "_latency_us")
            out[op + "_latency_us"] = list(hist)
            for q in (0.5, 0.99):
                out["%s_p%d_us" % (op, int(q * 100))] = float(_C.hc_store_latency_quantile(hist, q))
        return out


def _same_len(k, p):
    if k.n != p.n:
        raise ValueError("hicache: %d keys but %d pages" % (k.n, p.n))


# ---- keys, names, tools ----


def _u32s(values, what):
    """values as a uint32 array; an out-of-range or non-integer value is
    refused (array.array checks each in C), never wrapped or truncated."""
    try:
        arr = array.array("I", values if isinstance(values, (list, tuple, range)) else list(values))
    except (OverflowError, TypeError, ValueError) as e:
        raise ValueError("hicache: a %s is not an integer in [0, 2**32): %s" % (what, e)) from None
    n = len(arr)
    out = (ctypes.c_uint32 * max(n, 1))()
    if n:
        ctypes.memmove(out, arr.buffer_info()[0], n * 4)
    return out, n


def _seed_key(extra_key, cache_salt):
    k = _lib.Key()
    ek = _cstr(extra_key, "extra_key") if extra_key is not None else None
    salt = _cstr(cache_salt, "cache_salt") if cache_salt is not None else None
    _check(_C.hc_key_seed(ek, salt, ctypes.byref(k)), "key seed")
    return k


def key_chain(tokens, page_size, prior=None, seed=None):
    """SGLang's page keys (hex) of the full pages of tokens. prior: the key
    (hex) of the page before tokens[0]; seed: (extra_key, cache_salt) for a
    namespace seed."""
    toks, ntok = _u32s(tokens, "token")
    page_size = _index(page_size, "page_size", 1 << 32)
    n = ntok // page_size if page_size else 0
    out = (_lib.Key * max(n, 1))()
    pk = None
    if prior is not None:
        raw = bytes.fromhex(prior) if isinstance(prior, str) else bytes(prior)
        if len(raw) != KEY_BYTES:
            raise ValueError("hicache: prior key must be 32 bytes (64 hex digits)")
        pk = _lib.Key.from_buffer_copy(raw)
    elif seed is not None:
        pk = _seed_key(*seed)
    got = _check(_C.hc_key_chain(ctypes.byref(pk) if pk is not None else None, toks, ntok,
                                 page_size, out, n), "key chain")
    return [bytes(out[i].bytes).hex() for i in range(got)]


def key_seed(extra_key=None, cache_salt=None):
    return bytes(_seed_key(extra_key, cache_salt).bytes).hex()


_MODEL_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-/")


def _model_name(model):
    """model as the store's C layer names it: '/' becomes '-' (SGLang's
    rule; so "org/m" and "org-m" share pages, in SGLang too). A name the
    C sanitiser would alter any further (another byte becomes '_', a
    leading '.' or a '..') is refused: "my model" and "my_model" must not
    share pages. Such a model names its pages through register(suffix=)."""
    b = _cstr(model, "model name")
    bad = sorted(set(b) - _MODEL_BYTES)
    if bad or b.startswith(b".") or b".." in b:
        raise ValueError(
            "hicache: model name %r would be altered to fit a file name (%s): name it with "
            "[A-Za-z0-9._-/] only, or pass register(suffix=...)"
            % (model, "byte %r" % bytes([bad[0]]) if bad else "a leading '.' or '..'"))
    return b


def suffix(model, tp_rank=0, tp_size=1, replicated=False):
    """The object name suffix: '_<model>' or '_<model>_<tp_rank>_<tp_size>'."""
    buf = ctypes.create_string_buffer(256)
    _check(_C.hc_key_suffix(_model_name(model) if model else None, _index(tp_rank, "tp_rank", 1 << 32),
                            _index(tp_size, "tp_size", 1 << 32), bool(replicated), buf, 256), "suffix")
    return buf.value.decode()


def route(name, ndirs=1):
    """(bucket 0..255, disk index) of an object name."""
    h = _C.hc_key_route_hash(_cstr(name, "name"))
    return int(_C.hc_key_bucket(h)), int(_C.hc_key_disk(h, _index(ndirs, "ndirs", 1 << 32)))


def _dirs(dirs):
    if isinstance(dirs, (str, bytes, os.PathLike)):
        dirs = [dirs]
    enc = [_cstr(os.fsencode(d), "dir") for d in dirs]
    return (ctypes.c_char_p * len(enc))(*enc), len(enc), enc


def fsck(dirs, repair=False, temp_age=None):
    """Check every object under dirs (hc_file_fsck_ex). repair removes
    corrupt objects and orphaned temp files; temp_age (seconds, default the
    library's 600) is the age from which a temp file counts as orphaned: a
    smaller one removes a live writer's temp file, whose write then fails.
    Returns the report as a dict."""
    opts = _lib.FsckOpts()
    _C.hc_fsck_opts_init(ctypes.byref(opts), ctypes.sizeof(opts))
    opts.repair = bool(repair)
    if temp_age is not None:
        if isinstance(temp_age, bool) or not isinstance(temp_age, int) or temp_age <= 0:
            raise ValueError("fsck: temp_age must be a positive whole number of seconds, not %r" % (temp_age,))
        opts.temp_age_s = temp_age
    arr, n, hold = _dirs(dirs)
    r = _lib.FsckReport()
    _check(_C.hc_file_fsck_ex(arr, n, ctypes.byref(opts), ctypes.byref(r)), "fsck")
    del hold
    return {f: int(getattr(r, f)) for f, _ in _lib.FsckReport._fields_}


def ls(dirs):
    arr, n, hold = _dirs(dirs)
    r = _lib.LsReport()
    _check(_C.hc_file_ls(arr, n, ctypes.byref(r)), "ls")
    del hold
    return {f: int(getattr(r, f)) for f, _ in _lib.LsReport._fields_}


from .completions import Completions  # noqa: E402  (uses the names above)
