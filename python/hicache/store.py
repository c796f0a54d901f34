"""The store: pools registered by name, v1 and v2 transfers, exists, clear
and statistics."""
import ctypes
import json
import threading
import weakref

from . import _lib
from ._args import _Pages, _cstr, _index, _no_nul
from .keys import _Keys, _model_name
from ._life import _Closing, _Life
from ._native import _C, _check
from .pool import Pool

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


class Store(_Closing):
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
