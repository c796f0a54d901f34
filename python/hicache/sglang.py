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
through the store's bounce slots. Object names are NIXL's: "<key>_<model>_
<tp_rank>_<tp_size>" ("<key>_<model>" for MLA), "_k"/"_v" per zero-copy
half, "_mamba_temporal"/"_mamba_conv_<i>", "_<pool>" for a side pool's
bounce page. docs/SGLANG.md has the whole story.

The transfer methods run in SGLang's daemon threads (prefetch, I/O, backup):
they never raise and never return None; a bad argument (index length
mismatch, unknown pool, pages outside the pool) gives all False for that
call and one log line.

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
# NIXL names them.
ZERO_COPY_LAYOUTS = ("page_first", "page_first_direct")

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


class _BadCall(Exception):
    """A bad argument of one call: all False, one log line."""


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
        cfg = {k: v for k, v in extra.items() if k not in SGLANG_KEYS and k not in ADAPTER_KEYS}
        if "log_level" in extra:
            hicache.set_log_level(extra["log_level"])
        self._force_bounce = bool(extra.get("force_bounce", False))
        self._tp_rank = int(getattr(storage_config, "tp_rank", 0) or 0)
        self._tp_size = int(getattr(storage_config, "tp_size", 1) or 1)
        self._mla = bool(getattr(storage_config, "is_mla_model", False))
        self._metrics_on = bool(getattr(storage_config, "enable_storage_metrics", False))
        self._opts = dict(
            backend=str(extra.get("backend", "file")),
            model=getattr(storage_config, "model_name", None) or None,
            tp_rank=self._tp_rank,
            tp_size=self._tp_size,
            force_bounce=self._force_bounce,
        )
        self._cfg = cfg
        self.store = hicache.Store(cfg, **self._opts)
        self.mem_pool_host = None
        self.registered_pools = {}
        self._pools = {}  # name -> (hicache.Pool, host pool, page_size)
        self._anchor = None
        self._lock = threading.Lock()
        self._legacy = None  # (store, twin pool, lock), opened on first use
        self._metrics = {"prefetch_pgs": [], "backup_pgs": [], "prefetch_bandwidth": [], "backup_bandwidth": []}
        self._page_bytes = 0
        self._closed = False

    # ---- registration ----

    def register_mem_pool_host(self, mem_pool_host):
        """Wrap SGLang's anchor host pool (KV, MLA, or a dummy without
        kv_buffer: logical marker pages) and register it as "kv"."""
        self.mem_pool_host = mem_pool_host
        with self._lock:
            if self._anchor is mem_pool_host:
                return
            if self._anchor is not None:
                self._unregister_locked("kv")
            pool, bounce = self._wrap_kv(mem_pool_host)
            sharing = "replicated" if self._mla else "sharded"
            self.store.register("kv", pool, anchor=True, sharing=sharing, force_bounce=bounce)
            self._pools["kv"] = (pool, mem_pool_host, int(mem_pool_host.page_size))
            self._anchor = mem_pool_host
            self._page_bytes = pool.page_bytes
            info = self.store.pool_info("kv")
        logger.info(
            "hicache: kv pool registered, %s, %d-byte pages, %d object(s) per page",
            "zero-copy" if info["zero_copy"] else "bounce",
            info["page_bytes"],
            info["objects"],
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
                if old is not None and old[1] is host_pool:
                    return
                if old is not None:
                    self._unregister_locked(name)
                pool, bounce, sharing = self._wrap_side(host_pool, name)
                self.store.register(name, pool, sharing=sharing, force_bounce=bounce)
                self._pools[name] = (pool, host_pool, int(getattr(host_pool, "page_size", 1) or 1))
        except Exception as e:
            # Registration runs in the scheduler; a pool we cannot wrap
            # turns its transfers into misses rather than stopping it.
            logger.error("hicache: pool %r not registered: %s", name, e)

    def _unregister_locked(self, name):
        pool = self._pools.pop(name)[0]
        self.store.unregister(name)
        pool.close()
        if name == "kv":
            self._anchor = None

    def _wrap_kv(self, hp):
        """(hicache.Pool, force bounce) for an MHA/MLA host pool."""
        ps = int(hp.page_size)
        layout = str(getattr(hp, "layout", "layer_first"))
        kv = getattr(hp, "kv_buffer", None)
        if kv is None and hasattr(hp, "k_buffer") and hasattr(hp, "get_page_buffer_meta"):
            # Asymmetric K/V (two buffers of their own head dims).
            return self._wrap_meta(hp), layout not in ZERO_COPY_LAYOUTS
        size = int(getattr(hp, "size", 0) or 0)
        if kv is None:
            pages = size // ps if size else int(getattr(hp, "page_num", 0))
            return hicache.Pool.create_anchor(pages=pages, page_size=ps), False
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
        return pool, layout not in ZERO_COPY_LAYOUTS

    def _wrap_side(self, hp, name):
        """(hicache.Pool, force bounce, sharing) for a side pool."""
        if hasattr(hp, "conv_buffer"):
            convs = list(hp.conv_buffer)
            temporal = getattr(hp, "temporal_buffer", None)
            if temporal is None and hasattr(hp, "get_hybrid_pool_buffer"):
                rest = [b for b in hp.get_hybrid_pool_buffer() if all(b is not c for c in convs)]
                temporal = rest[0] if rest else None
            c0 = convs[0]
            slots, layers = int(c0.shape[0]), int(c0.shape[1])
            if temporal is not None and temporal.numel() == 0:
                temporal = None
            pool = hicache.Pool.wrap_mamba(temporal, convs, slots=slots, layers=layers)
            layout = str(getattr(hp, "layout", "page_first"))
            # Every TP rank backs up its own Mamba state, MLA or not.
            return pool, layout not in ZERO_COPY_LAYOUTS, "sharded"
        sharing = "replicated" if self._mla else "sharded"
        if getattr(hp, "kv_buffer", None) is not None and str(getattr(hp, "layout", "")) in _KV_SHAPES:
            pool, bounce = self._wrap_kv(hp)
            return pool, bounce, sharing
        if hasattr(hp, "get_page_buffer_meta") and hasattr(hp, "get_hybrid_pool_buffer"):
            return self._wrap_meta(hp), False, sharing
        raise ValueError("hicache.sglang: pool %r: no kv_buffer, conv_buffer or page buffer meta" % name)

    def _wrap_meta(self, hp):
        """A generic pool from get_hybrid_pool_buffer() and the page buffer
        meta of pages 0 and 1 (SWA, DeepSeek-V4 side pools, asymmetric K/V)."""
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
        bufs = [(int(b.data_ptr()), _nbytes(b), b) for b in hp.get_hybrid_pool_buffer()]
        comps = ["k", "v"] if c == 2 else ["plain"] * c
        out = []
        for i in range(c):
            base = ptrs[i]
            owner = next((b for b in bufs if b[0] <= base < b[0] + b[1]), None)
            if owner is None:
                raise ValueError("hicache.sglang: segment %d of page 0 lies in no pool buffer" % i)
            stride = ptrs[c + i] - base if npg == 2 else sizes[i]
            out.append({"buffer": (owner[0], owner[1]), "base": base, "page_stride": stride,
                        "seg_len": sizes[i], "component": comps[i], "index": i})
        pool = hicache.Pool.wrap_segments(out, pages=pages, page_tokens=ps)
        pool._refs.append([b[2] for b in bufs])  # the tensors outlive the pool
        return pool

    # ---- helpers ----

    def _pages(self, host_indices, n, ps, what):
        """Page index of each of n pages: host_indices[i * ps] // ps."""
        import torch

        hi = host_indices if isinstance(host_indices, torch.Tensor) else torch.as_tensor(host_indices)
        if int(hi.numel()) != n * ps:
            raise _BadCall("%s: %d host indices for %d pages of %d tokens" % (what, int(hi.numel()), n, ps))
        sel = hi.reshape(-1)[::ps].to(torch.int64)
        return torch.div(sel, ps, rounding_mode="floor") if ps > 1 else sel

    def _note(self, kind, pages, t0):
        if not self._metrics_on or not pages:
            return
        dt = time.perf_counter() - t0
        gbs = pages * self._page_bytes / dt / 1e9 if dt > 0 else 0.0
        with self._lock:
            self._metrics[kind + "_pgs"].append(pages)
            self._metrics[kind + "_bandwidth"].append(gbs)

    @staticmethod
    def _bad(what, e):
        logger.warning("hicache: %s: %s", what, e)

    # ---- v1 ----

    def batch_exists(self, keys, extra_info=None) -> int:
        """Consecutive keys from the start whose KV pages exist."""
        try:
            if not keys:
                return 0
            return int(self.store.exists(keys))
        except Exception as e:
            self._bad("batch_exists", e)
            return 0

    def batch_get_v1(self, keys, host_indices, extra_info=None) -> List[bool]:
        """Page i of keys into host slots host_indices[i*ps:(i+1)*ps]."""
        n = len(keys)
        try:
            if not n:
                return []
            t0 = time.perf_counter()
            pages = self._pages(host_indices, n, self._pools["kv"][2], "batch_get_v1")
            hits, res = self.store.get(keys, pages)
            self._note("prefetch", hits, t0)
            return [r == 0 for r in res]
        except Exception as e:
            self._bad("batch_get_v1", e)
            return [False] * n

    def batch_set_v1(self, keys, host_indices, extra_info=None) -> List[bool]:
        n = len(keys)
        try:
            if not n:
                return []
            t0 = time.perf_counter()
            pages = self._pages(host_indices, n, self._pools["kv"][2], "batch_set_v1")
            res = self.store.set(keys, pages)
            self._note("backup", n, t0)
            return [r == 0 for r in res]
        except Exception as e:
            self._bad("batch_set_v1", e)
            return [False] * n

    # ---- v2 ----

    def _v2(self, transfers, setting):
        what = "batch_set_v2" if setting else "batch_get_v2"
        out, todo = {}, []
        for t in transfers or []:
            name = _name(t.name)
            keys = list(t.keys or [])
            out[name] = [False] * len(keys)
            if not keys:
                continue
            entry = self._pools.get(name)
            try:
                if entry is None:
                    raise _BadCall("pool %r is not registered" % name)
                pages = self._pages(t.host_indices, len(keys), entry[2], "%s pool %r" % (what, name))
                if int(pages.max()) >= entry[0].pages or int(pages.min()) < 0:
                    raise _BadCall("pool %r: a page outside its %d pages" % (name, entry[0].pages))
            except Exception as e:
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

    def batch_get_v2(self, transfers, extra_info=None) -> Dict[str, List[bool]]:
        try:
            return self._v2(transfers, False)
        except Exception as e:
            self._bad("batch_get_v2", e)
            return {_name(t.name): [False] * len(t.keys or []) for t in transfers or []}

    def batch_set_v2(self, transfers, extra_info=None) -> Dict[str, List[bool]]:
        try:
            return self._v2(transfers, True)
        except Exception as e:
            self._bad("batch_set_v2", e)
            return {_name(t.name): [False] * len(t.keys or []) for t in transfers or []}

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        """kv_hit_pages: the usable prefix (the longest KV prefix cut by each
        transfer's hit policy); extra_pool_hit_pages: each pool's own hits;
        restorable_prefix_pages (when SGLang's record has it): every end
        point at which all pools can restore."""
        transfers = list(pool_transfers or [])
        want_ends = "restorable_prefix_pages" in getattr(PoolTransferResult, "__dataclass_fields__", {})
        try:
            tr = []
            for t in transfers:
                pol = _name(getattr(t, "hit_policy", "all_pages"))
                tr.append(hicache.Transfer(_name(t.name), n=len(t.keys or []), policy=pol))
            final, kv, hits, ends = self.store.exists_query(list(keys or []), tr, endpoints=want_ends)
            extra = {t.pool: int(h) for t, h in zip(tr, hits)}
            res = PoolTransferResult(kv_hit_pages=int(final), extra_pool_hit_pages=extra)
            if want_ends:
                res.restorable_prefix_pages = list(ends)
            return res
        except Exception as e:
            self._bad("batch_exists_v2", e)
            return PoolTransferResult(kv_hit_pages=0, extra_pool_hit_pages={_name(t.name): 0 for t in transfers})

    # ---- legacy tensor API (interface_v1 off; SGLang's tests) ----
    #
    # Flat pages (get_data_page's bytes) go through a twin of the anchor: a
    # pool of the same geometry that hicache maps, in a second store over
    # the same storage, so the objects are the ones v1 reads and writes.

    def _twin(self):
        with self._lock:
            if self._legacy is not None:
                return self._legacy
            entry = self._pools.get("kv")
            if entry is None:
                raise _BadCall("no host pool registered")
            pool, hp, ps = entry
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
            st = hicache.Store(self._cfg, **self._opts)
            st.register("kv", twin, anchor=True, sharing="replicated" if self._mla else "sharded",
                        force_bounce=not info["zero_copy"])
            self._legacy = (st, twin, threading.Lock())
            return self._legacy

    def _flat(self, t):
        if t is None or _nbytes(t) != self._page_bytes or not t.is_contiguous():
            raise _BadCall("a flat page must be a contiguous tensor of %d bytes" % self._page_bytes)
        return t

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None) -> bool:
        try:
            keys = list(keys)
            if values is None or len(values) != len(keys):
                raise _BadCall("%d keys but %s values" % (len(keys), "no" if values is None else len(values)))
            st, twin, lock = self._twin()
            with lock:
                for i in range(0, len(keys), STORAGE_BATCH_SIZE):
                    chunk = keys[i:i + STORAGE_BATCH_SIZE]
                    for j, v in enumerate(values[i:i + STORAGE_BATCH_SIZE]):
                        twin.scatter(j, self._flat(v))
                    if any(st.set(chunk, range(len(chunk)))):
                        return False
            return True
        except Exception as e:
            self._bad("batch_set", e)
            return False

    def set(self, key, value=None, target_location=None, target_sizes=None) -> bool:
        return self.batch_set([key], [value])

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        """Flat pages (target_locations filled, or new tensors); None for a
        page that is missing."""
        keys = list(keys)
        out = [None] * len(keys)
        try:
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
        except Exception as e:
            self._bad("batch_get", e)
        return out

    def _new_flat(self):
        hp = self._pools["kv"][1]
        if hasattr(hp, "get_dummy_flat_data_page"):
            return hp.get_dummy_flat_data_page().clone()
        import torch

        return torch.empty(self._page_bytes, dtype=torch.uint8)

    def get(self, key, target_location=None, target_sizes=None):
        return self.batch_get([key], [target_location] if target_location is not None else None)[0]

    def exists(self, key) -> bool:
        return self.batch_exists([key]) == 1

    # ---- control ----

    def clear(self) -> None:
        """Delete this instance's objects (its model, ranks and pools)."""
        try:
            n = self.store.clear()
            logger.info("hicache: clear removed %d objects", n)
        except Exception as e:
            self._bad("clear", e)

    def get_stats(self):
        """SGLang's StorageMetrics of the calls since the last get_stats
        (None when SGLang is not importable or metrics are off)."""
        with self._lock:
            m = self._metrics
            self._metrics = {k: [] for k in m}
        if StorageMetrics is None or not self._metrics_on:
            return None
        try:
            sm = StorageMetrics()
            for k, v in m.items():
                setattr(sm, k, v)
            return sm
        except Exception as e:
            self._bad("get_stats", e)
            return None

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
        for pool, _, _ in pools.values():
            pool.close()
        self._anchor = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


# Other spellings users may write in class_name.
HiCacheStorageHicache = HiCacheHicache
