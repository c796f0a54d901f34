"""Pools: page geometry over memory the library maps or the caller owns."""
import ctypes
import errno as _errno
import threading

from . import _lib
from ._args import _Mem, _index, _region
from ._lib import LAYOUTS
from ._life import _Closing, _Life
from ._native import Error, _C, _check

# ---- pools ----


def _layout_index(layout):
    if isinstance(layout, int):
        return layout
    try:
        return LAYOUTS.index(layout)
    except ValueError:
        raise ValueError("hicache: unknown layout %r (one of %s)" % (layout, ", ".join(LAYOUTS))) from None


_COMPONENTS = {"plain": 0, "k": 1, "v": 2}


class Pool(_Closing):
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

    def __del__(self):  # a pool a store still holds stays for the store
        try:
            if not self._stores:
                self.close()
        except Exception:
            pass


def _kv_geo(layers, heads, head_dim, elem_bytes, page_size, pages, layout, mla):
    return _lib.KvGeometry(layers, heads, head_dim, elem_bytes, page_size, pages,
                           _layout_index(layout), bool(mla))
