"""hicache as SGLang's L3 storage backend (`--hicache-storage-backend dynamic`).

    --hicache-storage-backend dynamic --hicache-storage-backend-extra-config
    '{"backend_name": "hicache", "module_path": "hicache.sglang",
      "class_name": "HiCacheHicache", "interface_v1": 1,
      "backend": "file", "dirs": ["/mnt/l3"]}'

SGLang constructs the class as cls(storage_config, {}) and registers its host
pools afterwards (register_mem_pool_host, then register_mem_host_pool_v2 for
each pool of a hybrid model). Pools are wrapped where they are: pages move
straight between SGLang's host tensors and storage (zero-copy) for the
layouts SGLang's NIXL backend moves so (page_first, page_first_direct;
under O_DIRECT only when every buffer base and page stride is aligned), else
through the store's bounce slots, under the same names either way; with
hicache's config key kv_one_object_max_bytes in the extra config, an MHA
page of those layouts up to that size is one object of the flat page
instead, through a bounce slot (fewer files for small pages; it changes
names, so every instance sharing a store sets it alike). Names
follow SGLang's rule (sglang_names.py: model, TP ranks unless MLA, PP and
attention-CP ranks when there are several); the element type goes into each
object's geometry tag. docs/SGLANG.md has the whole story.

The transfer methods run in SGLang's daemon threads (prefetch, I/O, backup):
they never raise and never return None; a bad call (keys that are not a
list of str, host indices that are not whole pages of the pool, an
unregistered or moved pool, a closed backend, a forked process) gives all
False for that call and one rate-limited log line.

No SGLang code is used or copied: when `sglang` is importable the class
subclasses its HiCacheStorage and returns its records; otherwise local
stand-ins written from the contract (docs/SGLANG.md) take their place.
"""

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional

import hicache
from hicache import sglang_names
from hicache._engine import RateLimitedLog as _RateLimitedLog, never_raises as _never_raises

logger = logging.getLogger("hicache.sglang")

STORAGE_BATCH_SIZE = 128

try:  # SGLang's own records, when it is installed
    from sglang.srt.mem_cache.hicache_storage import (  # type: ignore
        HiCacheStorage,
        HiCacheStorageConfig,
        HiCacheStorageExtraInfo,
        PoolHitPolicy,
        PoolName,
        PoolTransfer,
        PoolTransferResult,
    )

    HAVE_SGLANG = True
except Exception:  # not installed (or an older revision): the stand-ins
    HAVE_SGLANG = False
    from abc import ABC, abstractmethod

    class PoolName(str, Enum):
        KV = "kv"
        MAMBA = "mamba"
        SWA = "swa"
        INDEXER = "indexer"
        DEEPSEEK_V4_C4 = "deepseek_v4_c4"
        DEEPSEEK_V4_C4_INDEXER = "deepseek_v4_c4_indexer"
        DEEPSEEK_V4_C128 = "deepseek_v4_c128"
        DEEPSEEK_V4_C4_STATE = "deepseek_v4_c4_state"
        DEEPSEEK_V4_C4_INDEXER_STATE = "deepseek_v4_c4_indexer_state"
        DEEPSEEK_V4_C128_STATE = "deepseek_v4_c128_state"
        DRAFT = "draft"
        DRAFT_INDEXER = "draft_indexer"
        DRAFT_SWA = "draft_swa"

    class PoolHitPolicy(str, Enum):
        ALL_PAGES = "all_pages"
        TRAILING_PAGES = "trailing_pages"

    @dataclass
    class HiCacheStorageConfig:
        tp_rank: int
        tp_size: int
        pp_rank: int
        pp_size: int
        attn_cp_rank: int
        attn_cp_size: int
        is_mla_model: bool
        enable_storage_metrics: bool
        is_page_first_layout: bool
        model_name: Optional[str]
        dp_rank: int = 0
        dp_size: int = 1
        tp_lcm_size: Optional[int] = None
        should_split_heads: bool = False
        extra_config: Optional[dict] = None

    @dataclass
    class HiCacheStorageExtraInfo:
        prefix_keys: Optional[List[str]] = None
        extra_info: Optional[dict] = None

    @dataclass
    class PoolTransfer:
        name: Any
        host_indices: Any = None
        device_indices: Any = None
        keys: Optional[List[str]] = None
        hit_policy: PoolHitPolicy = PoolHitPolicy.ALL_PAGES
        nodes_to_load: Any = None
        indices_from_pool: Any = None

    @dataclass
    class PoolTransferResult:
        kv_hit_pages: int
        extra_pool_hit_pages: Dict[str, int] = field(default_factory=dict)
        restorable_prefix_pages: Optional[List[int]] = None

    class HiCacheStorage(ABC):
        """The contract SGLang's controller calls (docs/SGLANG.md)."""

        def register_mem_pool_host(self, mem_pool_host):
            self.mem_pool_host = mem_pool_host

        def register_mem_host_pool_v2(self, host_pool, host_pool_name):
            if not hasattr(self, "registered_pools"):
                self.registered_pools = {}
            self.registered_pools[host_pool_name] = host_pool

        def batch_get_v1(self, keys, host_indices, extra_info=None):
            raise NotImplementedError

        def batch_set_v1(self, keys, host_indices, extra_info=None):
            raise NotImplementedError

        @abstractmethod
        def get(self, key, target_location=None, target_sizes=None):
            ...

        @abstractmethod
        def batch_get(self, keys, target_locations=None, target_sizes=None):
            ...

        @abstractmethod
        def set(self, key, value=None, target_location=None, target_sizes=None):
            ...

        @abstractmethod
        def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
            ...

        @abstractmethod
        def exists(self, key):
            ...

        def batch_exists(self, keys, extra_info=None):
            for i, k in enumerate(keys):
                if not self.exists(k):
                    return i
            return len(keys)

        def clear(self):
            return None

        def get_stats(self):
            return None


try:
    from sglang.srt.metrics.collector import StorageMetrics  # type: ignore
except Exception:
    StorageMetrics = None

# Keys of the extra config that SGLang itself reads (the factory, the radix
# tree's prefetch knobs, the controller); they are not hicache's to reject.
SGLANG_KEYS = frozenset(
    {
        "backend_name",
        "module_path",
        "class_name",
        "interface_v1",
        "prefetch_threshold",
        "prefetch_timeout_base",
        "prefetch_timeout_per_ki_token",
        "prefetch_timeout_per_page",
        "hicache_storage_pass_prefix_keys",
        "tp_lcm_size",
    }
)
# The adapter's own keys; every other key is hicache's configuration
# (docs/CONFIG.md), where an unknown key fails the open naming it.
ADAPTER_KEYS = frozenset({"backend", "force_bounce", "log_level"})

# Layouts whose pages SGLang's NIXL backend moves without a copy; the
# others go through bounce slots under the plain "<key><suffix>" name, as
# NIXL names them. (The store, not this list, decides that a small page
# of these layouts is one object: kv_one_object_max_bytes.)
ZERO_COPY_LAYOUTS = ("page_first", "page_first_direct")

# Side pools whose pages hold KV (their element type may be SGLang's
# kv_cache_dtype); the others (indexer, states) are tagged by their own.
_KV_SIDE_POOLS = frozenset({"swa", "draft", "draft_swa"})

# Per layout: (dims of an MHA kv_buffer, index of layers, heads, head_dim);
# an MLA buffer has no leading K/V axis (one dim less, indices one lower).
_KV_SHAPES = {
    "layer_first": (5, 1, 3, 4),
    "page_first": (5, 2, 3, 4),
    "page_first_direct": (6, 2, 4, 5),
    "page_head": (6, 4, 2, 5),
}


def _name(x):
    return str(getattr(x, "value", x))


def _nbytes(t):
    return int(t.numel()) * int(t.element_size())


def _count(keys):
    """How many answers a call over keys owes, even when keys is bad."""
    return len(keys) if isinstance(keys, (list, tuple)) else 0


class _BadCall(Exception):
    """A bad argument of one call: all False, one log line."""


def _v2_misses(self, transfers=None, *args, **kwargs):
    out = {}
    for t in transfers if isinstance(transfers, (list, tuple)) else ():
        try:
            out[_name(t.name)] = [False] * _count(t.keys)
        except Exception:
            continue
    return out


def _exists_v2_miss(self, keys=None, pool_transfers=None, *args, **kwargs):
    hits = {}
    for t in pool_transfers if isinstance(pool_transfers, (list, tuple)) else ():
        try:
            hits[_name(t.name)] = 0
        except Exception:
            continue
    res = PoolTransferResult(kv_hit_pages=0, extra_pool_hit_pages=hits)
    if "restorable_prefix_pages" in getattr(PoolTransferResult, "__dataclass_fields__", {}):
        res.restorable_prefix_pages = []
    return res


class _Entry:
    """A registered pool: the hicache pool, SGLang's host pool, its page
    size, and the host pool's tensors as registered. The hicache pool
    notices a tensor that moved (resized); this notices one the engine
    replaced by another under the same attribute."""

    __slots__ = ("pool", "host", "page_size", "watch")

    def __init__(self, pool, host, page_size, watch):
        self.pool = pool
        self.host = host
        self.page_size = page_size
        # (label, getter of the host pool's tensor or None, tensor registered)
        self.watch = watch

    def stale(self):
        """Why the host pool's tensors are not the ones registered, or None."""
        for label, get, t in self.watch:
            if get is None:
                continue
            try:
                cur = get(self.host)
            except Exception:
                cur = None
            if cur is not t:
                return "the host pool's %s is another tensor than the one registered" % label
        return None


def _attr(name, index=None):
    if index is None:
        return lambda hp: getattr(hp, name, None)
    return lambda hp: list(getattr(hp, name))[index]


class HiCacheHicache(HiCacheStorage):
    """SGLang HiCacheStorage over a hicache store (file, S3 or memory)."""

    def __init__(self, storage_config, kwargs=None):
        self.storage_config = storage_config
        extra = getattr(storage_config, "extra_config", None) or {}
        if isinstance(extra, str):
            extra = json.loads(extra)
        extra = dict(extra)
        if kwargs:
            extra.update({k: v for k, v in dict(kwargs).items() if k not in extra})
        v1 = extra.get("interface_v1")
        if v1 is not True and v1 != 1:
            # Without it SGLang's controller uses the legacy tensor path:
            # every page copied into a fresh flat tensor, one Python call
            # per page, no zero-copy.
            raise ValueError(
                "hicache.sglang: the extra config must hold \"interface_v1\": 1 "
                "(got %r): SGLang's legacy path copies every page through Python" % (v1,)
            )
        sglang_names.check_supported(storage_config)
        cfg = {k: v for k, v in extra.items() if k not in SGLANG_KEYS and k not in ADAPTER_KEYS}
        if "log_level" in extra:
            hicache.set_log_level(extra["log_level"])
        self._force_bounce = bool(extra.get("force_bounce", False))
        self._tp_rank = int(getattr(storage_config, "tp_rank", 0) or 0)
        self._tp_size = int(getattr(storage_config, "tp_size", 1) or 1)
        self._mla = bool(getattr(storage_config, "is_mla_model", False))
        self._metrics_on = bool(getattr(storage_config, "enable_storage_metrics", False))
        # Every pool names its pages with one of these (SGLang's rule,
        # sglang_names.py); the store's own model suffix is never used.
        self._suffix = {
            "replicated": sglang_names.suffix(storage_config, True),
            "sharded": sglang_names.suffix(storage_config, False),
        }
        self._opts = dict(
            backend=str(extra.get("backend", "file")),
            model=None,
            tp_rank=self._tp_rank,
            tp_size=self._tp_size,
            force_bounce=self._force_bounce,
        )
        self._cfg = cfg
        self._bad = _RateLimitedLog(log=logger)
        self.store = hicache.Store(cfg, **self._opts)
        self.mem_pool_host = None
        self.registered_pools = {}
        self._pools = {}  # name -> _Entry
        self._anchor = None
        self._lock = threading.Lock()
        self._legacy = None  # (store, twin pool, lock), opened on first use
        self._metrics = {"prefetch_pgs": [], "backup_pgs": [], "prefetch_bandwidth": [], "backup_bandwidth": []}
        self._page_bytes = 0
        self._closed = False

    # ---- registration ----

    def _register(self, name, pool, host, page_size, watch, sharing, bounce, elem_type, anchor=False):
        self.store.register(name, pool, anchor=anchor, sharing=sharing, suffix=self._suffix[sharing],
                            force_bounce=bounce, elem_type=elem_type)
        self._pools[name] = _Entry(pool, host, page_size, watch)

    def register_mem_pool_host(self, mem_pool_host):
        """Wrap SGLang's anchor host pool (KV, MLA, or a dummy without
        kv_buffer: logical marker pages) and register it as "kv"."""
        self.mem_pool_host = mem_pool_host
        with self._lock:
            if self._anchor is mem_pool_host:
                return
            if self._anchor is not None:
                self._unregister_locked("kv")
            pool, bounce, watch = self._wrap_kv(mem_pool_host)
            sharing = "replicated" if self._mla else "sharded"
            et = sglang_names.elem_type(self.storage_config, [w[2] for w in watch])
            self._register("kv", pool, mem_pool_host, int(mem_pool_host.page_size), watch, sharing, bounce, et,
                           anchor=True)
            self._anchor = mem_pool_host
            self._page_bytes = pool.page_bytes
            info = self.store.pool_info("kv")
        logger.info(
            "hicache: kv pool registered, %s, %d-byte pages, %d object(s) per page, names end %s",
            "zero-copy" if info["zero_copy"] else "bounce",
            info["page_bytes"],
            info["objects"],
            self._suffix[sharing],
        )

    def register_mem_host_pool_v2(self, host_pool, host_pool_name):
        """Register a pool of a hybrid model (kv aliases the anchor); also
        at run time, while other pools transfer."""
        name = _name(host_pool_name)
        self.registered_pools[host_pool_name] = host_pool
        if name == "kv":
            if self._anchor is not host_pool:
                self.register_mem_pool_host(host_pool)
            return
        try:
            with self._lock:
                old = self._pools.get(name)
                if old is not None and old.host is host_pool:
                    return
                if old is not None:
                    self._unregister_locked(name)
                pool, bounce, sharing, watch, kv = self._wrap_side(host_pool, name)
                et = sglang_names.elem_type(self.storage_config, [w[2] for w in watch], kv=kv)
                self._register(name, pool, host_pool, int(getattr(host_pool, "page_size", 1) or 1), watch,
                               sharing, bounce, et)
        except Exception as e:
            # Registration runs in the scheduler; a pool we cannot wrap
            # turns its transfers into misses rather than stopping it.
            logger.error("hicache: pool %r not registered: %s", name, e)

    def _unregister_locked(self, name):
        entry = self._pools.pop(name)
        self.store.unregister(name)
        entry.pool.close()
        if name == "kv":
            self._anchor = None

    def _wrap_kv(self, hp):
        """(hicache.Pool, force bounce, watched tensors) for an MHA/MLA
        host pool."""
        ps = int(hp.page_size)
        layout = str(getattr(hp, "layout", "layer_first"))
        kv = getattr(hp, "kv_buffer", None)
        if kv is None and hasattr(hp, "k_buffer") and hasattr(hp, "get_page_buffer_meta"):
            # Asymmetric K/V (two buffers of their own head dims; NPU's
            # page_first_kv_split MLA pool: latent and rope parts).
            pool, watch = self._wrap_meta(hp)
            if len(watch) > 2:
                # The anchor's objects are "_k" and "_v": a third buffer
                # (an indexer key) would have no name of its own.
                pool.close()
                raise ValueError("hicache.sglang: a KV host pool of %d buffers (K, V and more) is not "
                                 "supported as the anchor" % len(watch))
            return pool, layout not in ZERO_COPY_LAYOUTS, watch
        size = int(getattr(hp, "size", 0) or 0)
        if kv is None:
            pages = size // ps if size else int(getattr(hp, "page_num", 0))
            return hicache.Pool.create_anchor(pages=pages, page_size=ps), False, []
        if layout not in _KV_SHAPES:
            raise ValueError("hicache.sglang: unknown host pool layout %r" % layout)
        dims, li, hi, di = _KV_SHAPES[layout]
        shape = tuple(kv.shape)
        mla = len(shape) == dims - 1
        if not mla and len(shape) != dims:
            raise ValueError("hicache.sglang: kv_buffer of shape %s does not fit layout %s" % (shape, layout))
        if mla:
            li, hi, di = li - 1, hi - 1, di - 1
        layers, heads, head_dim = shape[li], shape[hi], shape[di]
        if not size:
            lead = 0 if mla else 1  # the token (or page) axis after K/V
            if layout == "layer_first":
                size = shape[lead + 1]
            elif layout == "page_first":
                size = shape[lead]
            else:
                size = shape[lead] * ps
        pool = hicache.Pool.wrap_kv(
            kv, layers=layers, heads=heads, head_dim=head_dim, elem_bytes=kv.element_size(),
            page_size=ps, pages=size // ps, layout=layout, mla=mla,
        )
        return pool, layout not in ZERO_COPY_LAYOUTS, [("kv_buffer", _attr("kv_buffer"), kv)]

    def _wrap_side(self, hp, name):
        """(hicache.Pool, force bounce, sharing, watched tensors, is KV) for
        a side pool."""
        if hasattr(hp, "conv_buffer"):
            convs = list(hp.conv_buffer)
            temporal = getattr(hp, "temporal_buffer", None)
            t_get = _attr("temporal_buffer") if temporal is not None else None
            if temporal is None and hasattr(hp, "get_hybrid_pool_buffer"):
                rest = [b for b in hp.get_hybrid_pool_buffer() if all(b is not c for c in convs)]
                temporal = rest[0] if rest else None
            c0 = convs[0]
            slots, layers = int(c0.shape[0]), int(c0.shape[1])
            if temporal is not None and temporal.numel() == 0:
                temporal = None
            pool = hicache.Pool.wrap_mamba(temporal, convs, slots=slots, layers=layers)
            layout = str(getattr(hp, "layout", "page_first"))
            watch = [("conv_buffer[%d]" % i, _attr("conv_buffer", i), c) for i, c in enumerate(convs)]
            if temporal is not None:
                watch.append(("temporal buffer", t_get, temporal))
            # Every TP rank backs up its own Mamba state, MLA or not.
            return pool, layout not in ZERO_COPY_LAYOUTS, "sharded", watch, False
        sharing = "replicated" if self._mla else "sharded"
        if getattr(hp, "kv_buffer", None) is not None and str(getattr(hp, "layout", "")) in _KV_SHAPES:
            pool, bounce, watch = self._wrap_kv(hp)
            return pool, bounce, sharing, watch, True
        if hasattr(hp, "get_page_buffer_meta") and hasattr(hp, "get_hybrid_pool_buffer"):
            pool, watch = self._wrap_meta(hp)
            return pool, False, sharing, watch, name in _KV_SIDE_POOLS
        raise ValueError("hicache.sglang: pool %r: no kv_buffer, conv_buffer or page buffer meta" % name)

    def _wrap_meta(self, hp):
        """A generic pool from get_hybrid_pool_buffer() and the page buffer
        meta of pages 0 and 1 (SWA, DeepSeek-V4 side pools, asymmetric K/V,
        NPU's page_first_kv_split)."""
        import torch

        ps = int(getattr(hp, "page_size", 1) or 1)
        size = int(getattr(hp, "size", 0) or 0)
        pages = size // ps if size else int(hp.page_num)
        npg = 2 if pages > 1 else 1
        ptrs, sizes = hp.get_page_buffer_meta(torch.arange(npg * ps, dtype=torch.int64))
        ptrs, sizes = [int(p) for p in ptrs], [int(s) for s in sizes]
        c = len(ptrs) // npg
        if c < 1 or c * npg != len(ptrs):
            raise ValueError("hicache.sglang: page buffer meta of %d entries for %d pages" % (len(ptrs), npg))
        tensors = list(hp.get_hybrid_pool_buffer())
        bufs = [(int(b.data_ptr()), _nbytes(b), b) for b in tensors]
        comps = ["k", "v"] if c == 2 else ["plain"] * c
        out = []
        for i in range(c):
            base = ptrs[i]
            owner = next((b for b in bufs if b[0] <= base < b[0] + b[1]), None)
            if owner is None:
                raise ValueError("hicache.sglang: segment %d of page 0 lies in no pool buffer" % i)
            stride = ptrs[c + i] - base if npg == 2 else sizes[i]
            # The tensor itself: the pool keeps it alive and notices a move.
            out.append({"buffer": owner[2], "base": base, "page_stride": stride,
                        "seg_len": sizes[i], "component": comps[i], "index": i})
        pool = hicache.Pool.wrap_segments(out, pages=pages, page_tokens=ps)
        # get_hybrid_pool_buffer() may build a new list each call: nothing
        # to compare identities with (moves are the pool's to notice); the
        # tensors are listed for their dtypes.
        return pool, [("buffer %d" % i, None, t) for i, t in enumerate(tensors)]

    # ---- helpers ----

    def _entry(self, name):
        entry = self._pools.get(name)
        if entry is None:
            raise _BadCall("pool %r is not registered" % name)
        why = entry.stale()
        if why:
            raise _BadCall("pool %r: %s; register it again" % (name, why))
        return entry

    @staticmethod
    def _keys(keys, what):
        if not isinstance(keys, (list, tuple)):
            raise _BadCall("%s: keys must be a list of str, not %s" % (what, type(keys).__name__))
        return keys

    @staticmethod
    def _pages(host_indices, n, entry, what, destination=False):
        """Page index of each of n pages. host_indices holds n * ps integer
        token slots, page i's being p*ps .. p*ps+ps-1 for one page p of the
        pool (SGLang allocates host pages whole); anything else is a bad
        call, never a guess. destination (gets): no page twice, since two
        objects would be written into one slot."""
        import torch

        ps = entry.page_size
        if isinstance(host_indices, torch.Tensor):
            hi = host_indices
        elif hasattr(host_indices, "__array_interface__") and hasattr(host_indices, "dtype"):
            if host_indices.dtype.kind not in "iu":
                raise _BadCall("%s: host indices must be integers, not %s" % (what, host_indices.dtype))
            if host_indices.dtype.itemsize == 8 and host_indices.dtype.kind == "u":
                raise _BadCall("%s: uint64 host indices may not fit int64" % what)
            hi = torch.from_numpy(host_indices.astype("int64").reshape(-1))
        elif isinstance(host_indices, (list, tuple, range)):
            # Checked here, in Python: torch raises a C++ exception for a
            # bad element, which a sanitised interpreter cannot unwind.
            try:
                vals = [hicache._index(v, "host index") for v in host_indices]
            except (TypeError, ValueError) as e:
                raise _BadCall("%s: %s" % (what, e)) from None
            hi = torch.tensor(vals, dtype=torch.int64)
        else:
            raise _BadCall("%s: host indices must be integers, not %s" % (what, type(host_indices).__name__))
        if hi.dtype.is_floating_point or hi.dtype.is_complex or hi.dtype == torch.bool:
            raise _BadCall("%s: host indices must be integers, not %s" % (what, hi.dtype))
        hi = hi.reshape(-1)
        if int(hi.numel()) != n * ps:
            raise _BadCall("%s: %d host indices for %d pages of %d tokens" % (what, int(hi.numel()), n, ps))
        hi = hi.to(device="cpu", dtype=torch.int64).contiguous()
        pages = torch.empty(n, dtype=torch.int64)
        # One pass in C: every page's slots whole and inside the pool.
        if hicache._C.hc_pages_of_slots(hi.data_ptr(), n, ps, entry.pool._pages, pages.data_ptr()):
            raise _BadCall("%s: %s" % (what, hicache.last_error()))
        if destination and n > 1 and int(torch.unique(pages).numel()) != n:
            raise _BadCall("%s: a host page named twice as a destination" % what)
        return pages

    def _note(self, kind, pages, t0):
        if not self._metrics_on or not pages:
            return
        dt = time.perf_counter() - t0
        gbs = pages * self._page_bytes / dt / 1e9 if dt > 0 else 0.0
        with self._lock:
            self._metrics[kind + "_pgs"].append(pages)
            self._metrics[kind + "_bandwidth"].append(gbs)

    # ---- v1 ----

    @_never_raises(lambda self, *a, **k: 0)
    def batch_exists(self, keys, extra_info=None) -> int:
        """Consecutive keys from the start whose KV pages exist."""
        keys = self._keys(keys, "batch_exists")
        if not keys:
            return 0
        return int(self.store.exists(keys))

    @_never_raises(lambda self, keys=None, *a, **k: [False] * _count(keys))
    def batch_get_v1(self, keys, host_indices, extra_info=None) -> List[bool]:
        """Page i of keys into host slots host_indices[i*ps:(i+1)*ps]."""
        keys = self._keys(keys, "batch_get_v1")
        if not keys:
            return []
        t0 = time.perf_counter()
        # A page named twice as a destination: the store refuses the whole
        # call (EINVAL), which is what one transfer's bad call gives here.
        pages = self._pages(host_indices, len(keys), self._entry("kv"), "batch_get_v1")
        hits, res = self.store.get(keys, pages)
        self._note("prefetch", hits, t0)
        return [r == 0 for r in res]

    @_never_raises(lambda self, keys=None, *a, **k: [False] * _count(keys))
    def batch_set_v1(self, keys, host_indices, extra_info=None) -> List[bool]:
        keys = self._keys(keys, "batch_set_v1")
        if not keys:
            return []
        t0 = time.perf_counter()
        pages = self._pages(host_indices, len(keys), self._entry("kv"), "batch_set_v1")
        res = self.store.set(keys, pages)
        self._note("backup", len(keys), t0)
        return [r == 0 for r in res]

    # ---- v2 ----

    def _v2(self, transfers, setting):
        what = "batch_set_v2" if setting else "batch_get_v2"
        if not isinstance(transfers, (list, tuple)):
            raise _BadCall("%s: transfers must be a list of PoolTransfer, not %s" % (what, type(transfers).__name__))
        out, todo = {}, []
        for t in transfers:
            name = _name(t.name)  # no name, nothing to answer under: a bad call
            raw = getattr(t, "keys", None)
            out[name] = [False] * _count(raw)
            try:
                keys = self._keys(raw if raw is not None else [], "%s pool %r" % (what, name))
                if not keys:
                    continue
                entry = self._entry(name)
                pages = self._pages(t.host_indices, len(keys), entry, "%s pool %r" % (what, name), not setting)
            except Exception as e:
                # This transfer only: the others still move.
                self._bad(what, e)
                continue
            todo.append(hicache.Transfer(name, keys, pages))
        if todo:
            try:
                got = self.store.set_v2(todo) if setting else self.store.get_v2(todo)
                for name, res in got.items():
                    out[name] = [r == 0 for r in res]
            except Exception as e:
                self._bad(what, e)
        return out

    @_never_raises(_v2_misses)
    def batch_get_v2(self, transfers, extra_info=None) -> Dict[str, List[bool]]:
        return self._v2(transfers, False)

    @_never_raises(_v2_misses)
    def batch_set_v2(self, transfers, extra_info=None) -> Dict[str, List[bool]]:
        return self._v2(transfers, True)

    @_never_raises(_exists_v2_miss)
    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        """kv_hit_pages: the usable prefix (the longest KV prefix cut by each
        transfer's hit policy); extra_pool_hit_pages: each pool's own hits;
        restorable_prefix_pages (when SGLang's record has it): every end
        point at which all pools can restore."""
        keys = self._keys(keys if keys is not None else [], "batch_exists_v2")
        if pool_transfers is not None and not isinstance(pool_transfers, (list, tuple)):
            raise _BadCall("batch_exists_v2: pool_transfers must be a list")
        transfers = list(pool_transfers or [])
        want_ends = "restorable_prefix_pages" in getattr(PoolTransferResult, "__dataclass_fields__", {})
        tr = []
        for t in transfers:
            pol = _name(getattr(t, "hit_policy", "all_pages"))
            n = len(self._keys(t.keys if t.keys is not None else [], "batch_exists_v2"))
            tr.append(hicache.Transfer(_name(t.name), n=n, policy=pol))
        final, kv, hits, ends = self.store.exists_query(list(keys), tr, endpoints=want_ends)
        extra = {t.pool: int(h) for t, h in zip(tr, hits)}
        res = PoolTransferResult(kv_hit_pages=int(final), extra_pool_hit_pages=extra)
        if want_ends:
            res.restorable_prefix_pages = list(ends)
        return res

    # ---- legacy tensor API (interface_v1 off; SGLang's tests) ----
    #
    # Flat pages (get_data_page's bytes) go through a twin of the anchor: a
    # pool of the same geometry that hicache maps, in a second store over
    # the same storage, so the objects are the ones v1 reads and writes.

    def _twin(self):
        with self._lock:
            if self._legacy is not None:
                return self._legacy
            entry = self._entry("kv")
            hp, ps = entry.host, entry.page_size
            info = self.store.pool_info("kv")
            kv = getattr(hp, "kv_buffer", None)
            if kv is None:
                raise _BadCall("the legacy API needs a kv_buffer")
            layout = str(hp.layout)
            dims, li, hi, di = _KV_SHAPES[layout]
            shape = tuple(kv.shape)
            mla = len(shape) == dims - 1
            if mla:
                li, hi, di = li - 1, hi - 1, di - 1
            twin = hicache.Pool.create_kv(
                layers=shape[li], heads=shape[hi], head_dim=shape[di], elem_bytes=kv.element_size(),
                page_size=ps, pages=STORAGE_BATCH_SIZE, layout=layout, mla=mla,
            )
            sharing = "replicated" if self._mla else "sharded"
            st = hicache.Store(self._cfg, **self._opts)
            st.register("kv", twin, anchor=True, sharing=sharing, suffix=self._suffix[sharing],
                        force_bounce=not info["zero_copy"],
                        elem_type=sglang_names.elem_type(self.storage_config, [kv]))
            self._legacy = (st, twin, threading.Lock())
            return self._legacy

    def _flat(self, t):
        import torch

        if (not isinstance(t, torch.Tensor) or t.device.type != "cpu" or not t.is_contiguous()
                or _nbytes(t) != self._page_bytes):
            raise _BadCall("a flat page must be a contiguous CPU tensor of %d bytes" % self._page_bytes)
        return t

    @_never_raises(lambda self, *a, **k: False)
    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None) -> bool:
        keys = list(self._keys(keys, "batch_set"))
        if values is None or not isinstance(values, (list, tuple)) or len(values) != len(keys):
            raise _BadCall("%d keys but %s values" % (
                len(keys), "no" if values is None else getattr(values, "__len__", lambda: "?")()))
        values = [self._flat(v) for v in values]
        st, twin, lock = self._twin()
        with lock:
            for i in range(0, len(keys), STORAGE_BATCH_SIZE):
                chunk = keys[i:i + STORAGE_BATCH_SIZE]
                for j, v in enumerate(values[i:i + STORAGE_BATCH_SIZE]):
                    twin.scatter(j, v)
                if any(st.set(chunk, range(len(chunk)))):
                    return False
        return True

    @_never_raises(lambda self, *a, **k: False)
    def set(self, key, value=None, target_location=None, target_sizes=None) -> bool:
        if not isinstance(key, str):
            raise _BadCall("set: key must be a str, not %s" % type(key).__name__)
        return self.batch_set([key], [value])

    @_never_raises(lambda self, keys=None, *a, **k: [None] * _count(keys))
    def batch_get(self, keys, target_locations=None, target_sizes=None):
        """Flat pages (target_locations filled, or new tensors); None for a
        page that is missing."""
        keys = list(self._keys(keys, "batch_get"))
        out = [None] * len(keys)
        if target_locations is not None:
            if not isinstance(target_locations, (list, tuple)) or len(target_locations) != len(keys):
                raise _BadCall("batch_get: target_locations must be a list of one tensor per key")
            target_locations = [None if t is None else self._flat(t) for t in target_locations]
        st, twin, lock = self._twin()
        with lock:
            for i in range(0, len(keys), STORAGE_BATCH_SIZE):
                chunk = keys[i:i + STORAGE_BATCH_SIZE]
                _, res = st.get(chunk, range(len(chunk)))
                for j, r in enumerate(res):
                    if r:
                        continue
                    tgt = target_locations[i + j] if target_locations is not None else None
                    if tgt is None:
                        tgt = self._new_flat()
                    twin.gather(j, self._flat(tgt))
                    out[i + j] = tgt
        return out

    def _new_flat(self):
        hp = self._pools["kv"].host
        if hasattr(hp, "get_dummy_flat_data_page"):
            return hp.get_dummy_flat_data_page().clone()
        import torch

        return torch.empty(self._page_bytes, dtype=torch.uint8)

    @_never_raises(lambda self, *a, **k: None)
    def get(self, key, target_location=None, target_sizes=None):
        if not isinstance(key, str):
            raise _BadCall("get: key must be a str, not %s" % type(key).__name__)
        return self.batch_get([key], [target_location] if target_location is not None else None)[0]

    @_never_raises(lambda self, *a, **k: False)
    def exists(self, key) -> bool:
        if not isinstance(key, str):
            raise _BadCall("exists: key must be a str, not %s" % type(key).__name__)
        return self.batch_exists([key]) == 1

    # ---- control ----

    @_never_raises(lambda self, *a, **k: None)
    def clear(self) -> None:
        """Delete this instance's objects (its model, ranks and pools)."""
        n = self.store.clear()
        logger.info("hicache: clear removed %d objects", n)

    @_never_raises(lambda self, *a, **k: None)
    def get_stats(self):
        """SGLang's StorageMetrics of the calls since the last get_stats
        (None when SGLang is not importable or metrics are off)."""
        with self._lock:
            m = self._metrics
            self._metrics = {k: [] for k in m}
        if StorageMetrics is None or not self._metrics_on:
            return None
        sm = StorageMetrics()
        for k, v in m.items():
            setattr(sm, k, v)
        return sm

    def hicache_stats(self, pool=None):
        """hicache's own counters (pages, bytes, hits, latency) as a dict."""
        return self.store.stats(pool)

    def close(self):
        """After SGLang stopped its threads (detach does)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            legacy, self._legacy = self._legacy, None
            pools, self._pools = self._pools, {}
        if legacy is not None:
            legacy[0].close()
            legacy[1].close()
        self.store.close()
        for entry in pools.values():
            entry.pool.close()
        self._anchor = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


# Other spellings users may write in class_name.
HiCacheStorageHicache = HiCacheHicache
