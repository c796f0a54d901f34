"""hicache as a vLLM secondary offloading tier (TieringOffloadingSpec).

vLLM keeps its own CPU tier (the primary) and hands each secondary tier a
memoryview over that memory; a tier answers lookups, accepts store and
load jobs over the view's block ids and reports finished jobs when polled,
all from the scheduler thread, never blocking. This tier wraps the view as
one hicache pool (zero-copy where the memory and the block stride suit
O_DIRECT, bounce otherwise), maps each job to one started hicache op on a
completion queue, and reports each job once.

Loaded with (docs/VLLM.md has the whole story):
    --kv-transfer-config '{"kv_connector": "OffloadingConnector",
      "kv_role": "kv_both", "kv_connector_extra_config": {
        "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": N,
        "secondary_tiers": [{"type": "hicache", "root_dir": "/mnt/kv"}]}}'
The type is registered by register(), which vLLM runs at start-up through
the `vllm.general_plugins` entry point that `make install` writes.

Keys: vLLM's OffloadKey (block hash bytes + 4-byte group index) becomes the
object name key.hex(); everything that must not share KV goes into the
pool's suffix (model, revision, dtypes, parallel sizes and rank, block
sizes, layer names, hash algorithm, the view's row bytes: see _namespace).
"""
import hashlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass

import hicache
from hicache._engine import RateLimitedLog, never_raises

logger = logging.getLogger("hicache.vllm")

TIER_TYPE = "hicache"
_MODULE = "hicache.vllm"
_CLASS = "HicacheTier"

try:  # the contract's own types where vLLM is importable
    from vllm.v1.kv_offload.tiering import base as _base

    _Base = _base.SecondaryTierManager
    JobResult = _base.JobResult
except ImportError:  # pragma: no cover - vLLM absent: the same shapes
    _base = None
    _Base = object

    @dataclass
    class JobResult:
        job_id: int
        success: bool


def register():
    """The `vllm.general_plugins` entry point: registers the tier type
    "hicache" with vLLM's SecondaryTierFactory (lazily imported there).
    Harmless where vLLM is absent or the type is registered already."""
    try:
        from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory
    except ImportError:
        return
    try:
        SecondaryTierFactory.register_tier(TIER_TYPE, _MODULE, _CLASS)
    except ValueError:
        pass  # registered already (plugins run in every process, maybe twice)


# ---- identity ----

_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_ELEM_TYPE_MAX = 31  # HC_ELEM_TYPE_MAX


def _attr(obj, *path, default=None):
    for p in path:
        obj = getattr(obj, p, None)
        if obj is None:
            return default
    return obj


def _dtype_name(d):
    """"torch.bfloat16" / torch.bfloat16 / "bfloat16" -> "bfloat16"."""
    if d is None:
        return None
    s = str(d)
    s = s[len("torch."):] if s.startswith("torch.") else s
    s = re.sub(r"[^A-Za-z0-9_]", "_", s)[:_ELEM_TYPE_MAX]
    return s or None


def _namespace(spec, row_bytes, model_revision=None, namespace=None):
    """Everything that makes two tiers' blocks mean different bytes, as a
    dict: model and revision, model and KV dtypes, TP/PP sizes and this
    rank, block sizes, layer names per group, the hash algorithm, the
    view's row bytes, and the operator's namespace string. vLLM's own fs
    tier hashes model, block sizes, parallel sizes, dtype and layer names;
    revision, KV dtype, hash algorithm and row bytes are added here."""
    vc = _attr(spec, "vllm_config")
    groups = _attr(spec, "kv_cache_config", "kv_cache_groups", default=()) or ()
    cache_dtype = _attr(vc, "cache_config", "cache_dtype")
    return {
        "format": 1,
        "model": str(_attr(vc, "model_config", "model", default="")),
        "revision": model_revision if model_revision is not None
        else _attr(vc, "model_config", "revision"),
        "dtype": _dtype_name(_attr(vc, "model_config", "dtype")),
        "kv_dtype": None if cache_dtype in (None, "auto") else str(cache_dtype),
        "tp": int(_attr(vc, "parallel_config", "tensor_parallel_size", default=1)),
        "pp": int(_attr(vc, "parallel_config", "pipeline_parallel_size", default=1)),
        "pcp": _attr(vc, "parallel_config", "prefill_context_parallel_size"),
        "dcp": _attr(vc, "parallel_config", "decode_context_parallel_size"),
        "rank": int(_attr(vc, "parallel_config", "rank", default=0)),
        "block_size": _attr(vc, "cache_config", "block_size"),
        "gpu_block_size": _attr(spec, "gpu_block_size"),
        "hash_block_size": _attr(spec, "hash_block_size"),
        "block_size_factor": _attr(spec, "block_size_factor"),
        "layers": [list(getattr(g, "layer_names", ()) or ()) for g in groups],
        "hash_algo": _attr(vc, "cache_config", "prefix_caching_hash_algo"),
        "row_bytes": int(row_bytes),
        "namespace": namespace,
    }


def _suffix(ns):
    """'_<model>_<16 hex of the namespace>_r<rank>': readable in a listing,
    injective through the hash."""
    model = _SAFE.sub("-", ns["model"].replace("/", "-"))[:64].lstrip(".") or "model"
    digest = hashlib.sha256(json.dumps(ns, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return "_%s_%s_r%d" % (model, digest, ns["rank"])


# ---- the tier ----

_KIND_STORE, _KIND_LOAD, _KIND_LOOKUP = 0, 1, 2


class _Job:
    __slots__ = ("job_id", "kind", "names")

    def __init__(self, job_id, kind, names):
        self.job_id = job_id
        self.kind = kind
        self.names = names


class HicacheTier(_Base):
    """A vLLM secondary tier over a hicache store. Keywords besides the
    three vLLM passes: root_dir (as vLLM's fs tier: the file store's base
    directory, created if missing), backend ("file", "mem", "s3"),
    model_revision and namespace (more identity, see docs/VLLM.md),
    negative_ttl_s (how long a lookup's "absent" is believed: another
    writer's blocks appear within it), index_max (blocks remembered as
    present), shutdown_timeout_s, and any hicache configuration key
    (docs/CONFIG.md: dirs, use_direct_io, capacity_gb, endpoint, bucket,
    ...). A bad key raises ValueError naming it; nothing else raises."""

    def __init__(self, offloading_spec=None, primary_kv_view=None, tier_type=TIER_TYPE, *,
                 root_dir=None, backend="file", model_revision=None, namespace=None,
                 negative_ttl_s=2.0, index_max=1 << 20, shutdown_timeout_s=60.0, **config):
        view = _check_view(primary_kv_view)
        self.offloading_spec = offloading_spec
        self.primary_kv_view = primary_kv_view
        self.tier_type = tier_type
        self._negative_ttl = _number(negative_ttl_s, "negative_ttl_s", 0.0)
        self._index_max = int(_number(index_max, "index_max", 1))
        self._shutdown_timeout = _number(shutdown_timeout_s, "shutdown_timeout_s", 0.0)
        if namespace is not None and not isinstance(namespace, str):
            raise ValueError("hicache vLLM tier: namespace must be a string, not %r" % (namespace,))
        blocks, row = view.shape
        self._blocks = blocks
        cfg = dict(config)
        if root_dir is not None:
            if "dirs" in cfg:
                raise ValueError("hicache vLLM tier: give root_dir or dirs, not both")
            if not isinstance(root_dir, str) or not root_dir:
                raise ValueError("hicache vLLM tier: root_dir must be a directory path, not %r"
                                 % (root_dir,))
            os.makedirs(root_dir, mode=0o700, exist_ok=True)
            cfg["dirs"] = [root_dir]
        if backend == "file" and "dirs" not in cfg:
            raise ValueError("hicache vLLM tier: root_dir (or dirs) is required for the file backend")
        self._ns = _namespace(offloading_spec, row, model_revision, namespace)
        vc = _attr(offloading_spec, "vllm_config")
        elem = _dtype_name(self._ns["kv_dtype"] or _attr(vc, "model_config", "dtype"))
        tokens = int(_attr(offloading_spec, "gpu_block_size", default=0) or 0) * int(
            _attr(offloading_spec, "block_size_factor", default=1) or 1)
        try:
            self._store = hicache.Store(cfg, backend=backend)
        except (hicache.Error, ValueError) as e:
            raise ValueError("hicache vLLM tier: bad configuration: %s" % e) from None
        try:
            flat = view.cast("B")
            self._pool = hicache.Pool.wrap_segments(
                [{"buffer": flat, "page_stride": row, "seg_len": row}],
                pages=blocks, page_tokens=max(tokens, 1))
            self._store.register("kv", self._pool, anchor=True, suffix=_suffix(self._ns),
                                 elem_type=elem)
            self._queue = hicache.Completions(self._store)
        except BaseException:
            self._store.close()
            raise
        self._jobs = {}  # tag -> _Job
        self._tag = 0
        self._ready = []  # JobResults to report at the next get_finished
        self._present = {}  # name -> None, least recently stored or loaded first
        self._absent = {}  # name -> monotonic time until which it is believed
        self._asking = set()  # names with a lookup in flight
        self._storing = {}  # name -> stores of it in flight
        self._bad = RateLimitedLog(log=logger)
        self._closed = False
        logger.info("hicache vLLM tier: %d blocks of %d bytes, %s, suffix %s", blocks, row,
                    "zero-copy" if self._store.pool_info("kv")["zero_copy"] else "bounce",
                    _suffix(self._ns))

    @staticmethod
    def get_tier_type():
        return TIER_TYPE

    # ---- jobs ----

    def _next_tag(self):
        self._tag += 1
        return self._tag

    def _start(self, job, kind):
        job_id = job.job_id
        keys = list(job.keys)
        if not keys:
            self._ready.append(JobResult(job_id, True))
            return
        if self._closed:
            raise RuntimeError("the tier is shut down")
        names = [_name(k) for k in keys]
        blocks = job.block_ids
        tag = self._next_tag()
        self._jobs[tag] = _Job(job_id, kind, names)
        try:
            if kind == _KIND_STORE:
                self._queue.set(tag, names, blocks)
                storing = self._storing
                for name in names:
                    storing[name] = storing.get(name, 0) + 1
            else:
                self._queue.get(tag, names, blocks, results=True)
        except BaseException:
            del self._jobs[tag]
            raise

    def _job_failed(self, job, *args, **kwargs):
        self._ready.append(JobResult(getattr(job, "job_id", job), False))

    @never_raises(_job_failed)
    def submit_store(self, job):
        """Start storing job.block_ids' rows under job.keys; non-blocking."""
        self._start(job, _KIND_STORE)

    @never_raises(_job_failed)
    def submit_load(self, job):
        """Start loading job.keys into job.block_ids' rows; non-blocking."""
        self._start(job, _KIND_LOAD)

    def _finish(self, tag, outcome, results):
        job = self._jobs.pop(tag, None)
        if job is None:
            return
        if job.kind == _KIND_LOOKUP:
            until = time.monotonic() + self._negative_ttl
            for name, r in zip(job.names, results or ()):
                self._asking.discard(name)
                if r == 0:
                    self._remember(name)
                else:
                    self._absent[name] = until
            return
        if job.kind == _KIND_STORE:
            storing = self._storing
            for name in job.names:
                left = storing.pop(name) - 1
                if left:
                    storing[name] = left
            ok = outcome == 0
            if ok:
                for name in job.names:
                    self._remember(name)
            else:
                self._bad("store", RuntimeError("job %s: %s" % (job.job_id, _errtext(outcome))))
        else:
            ok = outcome == len(job.names)
            if not ok:
                # Out of the index: the next lookup asks the store again.
                for name, r in zip(job.names, results or ()):
                    if r != 0:
                        self._present.pop(name, None)
                self._bad("load", RuntimeError("job %s: %d of %d blocks" %
                                               (job.job_id, max(outcome, 0), len(job.names))))
        self._ready.append(JobResult(job.job_id, ok))

    def _remember(self, name):
        if self._absent:
            self._absent.pop(name, None)
        present = self._present
        present.pop(name, None)  # re-inserted: the young end
        present[name] = None
        if len(present) > self._index_max:
            del present[next(iter(present))]

    def _reap(self):
        for tag, outcome, results in self._queue.reap():
            self._finish(tag, outcome, results)

    def _finished_fallback(self, *args, **kwargs):
        out, self._ready = self._ready, []
        return out

    @never_raises(_finished_fallback)
    def get_finished(self):
        """Jobs finished since the last call, each once."""
        if not self._closed:
            self._reap()
        out, self._ready = self._ready, []
        return out

    get_finished_jobs = get_finished  # newer vLLM's name

    def has_pending_work(self):
        """Newer vLLM: whether a job is still to be reported."""
        return bool(self._ready) or any(j.kind != _KIND_LOOKUP for j in self._jobs.values())

    # ---- lookups ----

    def _answer(self, value):
        """True/False/None, or the newer LookupResult where vLLM has it."""
        lr = getattr(_base, "LookupResult", None) if _base is not None else None
        if lr is None:
            return value
        return lr.HIT if value else lr.MISS if value is False else lr.RETRY

    def _lookup_failed(self, key, *args, **kwargs):
        return self._answer(False)

    @never_raises(_lookup_failed)
    def lookup(self, key, req_context=None):
        """From memory: True (stored), False (absent, believed for
        negative_ttl_s), None while the store is being asked or the block
        is being stored."""
        name = _name(key)
        if name in self._present:
            return self._answer(True)
        if name in self._storing:
            return self._answer(None)
        if name in self._asking:
            self._reap()
            if name in self._present:
                return self._answer(True)
            if name in self._asking:
                return self._answer(None)
        until = self._absent.get(name)
        if until is not None:
            if time.monotonic() < until:
                return self._answer(False)
            del self._absent[name]
        if self._closed:
            return self._answer(False)
        tag = self._next_tag()
        self._jobs[tag] = _Job(None, _KIND_LOOKUP, [name])
        try:
            self._queue.lookup(tag, [name])
        except BaseException:
            del self._jobs[tag]
            raise
        self._asking.add(name)
        return self._answer(None)

    def touch(self, keys, req_context=None):
        """Recently used: kept at the young end of the in-memory index (the
        store's cleaner evicts by age on disk)."""
        try:
            for k in keys:
                name = _name(k)
                if self._present.pop(name, 0) is None:
                    self._present[name] = None
        except Exception as e:
            self._bad("touch", e)

    # ---- teardown ----

    def shutdown(self):
        """Finish the jobs in flight (up to shutdown_timeout_s, then cancel
        what has not begun), then close the store. Jobs finished meanwhile
        are reported by a later get_finished. No block of the primary view
        is touched after this returns."""
        if self._closed:
            return
        self._closed = True
        try:
            deadline = time.monotonic() + self._shutdown_timeout
            while self._queue.pending and time.monotonic() < deadline:
                self._reap()
                time.sleep(0.002)
            self._reap()
        except Exception as e:
            self._bad("shutdown", e)
        self._queue.close()  # cancels and waits for the rest
        for job in list(self._jobs.values()):
            if job.kind != _KIND_LOOKUP:
                self._ready.append(JobResult(job.job_id, False))
        self._jobs.clear()
        self._store.close()
        self._pool.close()

    def __del__(self):
        try:
            self.shutdown()
        except Exception:
            pass


def _name(key):
    """An OffloadKey (block hash bytes + 4-byte group) -> its object name."""
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise TypeError("a key must be bytes (vLLM's OffloadKey), not %s" % type(key).__name__)
    return bytes(key).hex()


def _errtext(rc):
    return os.strerror(-rc) if isinstance(rc, int) and rc < 0 else str(rc)


def _number(v, key, low):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < low:
        raise ValueError("hicache vLLM tier: %s must be a number >= %s, not %r" % (key, low, v))
    return v


def _check_view(view):
    """The primary view: a writable, C-contiguous 2-D memoryview of
    1-byte elements, (num_blocks, row_bytes)."""
    if not isinstance(view, memoryview):
        raise ValueError("hicache vLLM tier: primary_kv_view must be a memoryview, not %s"
                         % type(view).__name__)
    if view.ndim != 2 or view.itemsize != 1 or not view.c_contiguous:
        raise ValueError("hicache vLLM tier: primary_kv_view must be a C-contiguous 2-D view of "
                         "bytes (num_blocks, row_bytes); got ndim %d, itemsize %d"
                         % (view.ndim, view.itemsize))
    if view.readonly:
        raise ValueError("hicache vLLM tier: primary_kv_view is read-only; loads write into it")
    if not view.shape[0] or not view.shape[1]:
        raise ValueError("hicache vLLM tier: primary_kv_view is empty")
    return view
