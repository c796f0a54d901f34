"""The scheduler side of vLLM's multi-tier offloading, as a stand-in (written
from the interface's contract, vLLM main 5c1aec3dc; tests and benchmarks
only): what the tests and bench/vllm_tier.py share to build a primary tier's
memory and an OffloadingSpec and to drive a secondary tier the way vLLM's
scheduler does. Put tests/python/standins on sys.path.

  make_primary(num_blocks, row_bytes, path=None, offset_bytes=0)
      -> (mmap, view, path)     the CPU tier's memory: a file in /dev/shm,
                                mapped; view is the 2-D int8 memoryview a tier
                                gets; mmap.close() removes the file
  make_spec(**overrides)       an OffloadingSpec stand-in
  block_key(i, group=0, salt=b"") -> bytes   a deterministic OffloadKey
  fill_blocks(view, block_ids, keys) / check_blocks(view, block_ids, keys)
                               a per-key byte pattern, written and compared
  make_entry_point_dist(directory, dist_name, entry_points)
                               a dist-info that importlib.metadata finds
  Scheduler(tier | tier_config=..., primary_view=..., spec=...,
            newer_names=False)
      .store(keys, block_ids) / .load(keys, block_ids) -> job id
      .step() -> [JobResult]    one get_finished() call, checked as vLLM does
      .wait(job_ids, timeout) / .drain(timeout)
      .lookup(key) -> True | False | None
      .touch(keys) / .shutdown()
"""
import hashlib
import importlib
import itertools
import mmap
import os
import sys
import time
import uuid
import weakref
from types import SimpleNamespace
from typing import Any, Dict, Iterable, List, Optional, Sequence

import numpy as np

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

from vllm.v1.kv_offload.base import make_offload_key  # noqa: E402
from vllm.v1.kv_offload.tiering import base as tiering_base  # noqa: E402
from vllm.v1.kv_offload.tiering.base import JobMetadata, JobResult  # noqa: E402
from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory  # noqa: E402

SHM_DIR = "/dev/shm"


# --------------------------------------------------------------------------
# The primary (CPU) tier's memory


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class PrimaryMmap(mmap.mmap):
    """The mapping of a primary tier file; close() also removes the file (and
    so does the garbage collector or interpreter exit, if close is never
    called). When a view of the mapping is still exported, close() removes
    the file and leaves the mapping to go when its last view does."""

    def close(self) -> None:
        try:
            super().close()
        except BufferError:
            pass
        finally:
            fin = getattr(self, "_finalizer", None)
            if fin is not None:
                fin()


def make_primary(num_blocks: int, row_bytes: int, path: Optional[str] = None,
                 offset_bytes: int = 0):
    """The CPU tier's memory as vLLM builds it: the file `path` (default
    /dev/shm/vllm_offload_<id>.mmap) of num_blocks * row_bytes bytes
    (+ offset_bytes), mapped shared, and the 2-D int8 memoryview
    (num_blocks, row_bytes) over it, starting offset_bytes into the mapping
    (a non-zero offset makes rows that O_DIRECT refuses). Returns
    (mmap, view, path); release the view, then close the mmap: that removes
    the file."""
    if num_blocks <= 0 or row_bytes <= 0 or offset_bytes < 0:
        raise ValueError("make_primary(%r, %r, offset_bytes=%r)" % (num_blocks, row_bytes, offset_bytes))
    if path is None:
        path = os.path.join(SHM_DIR, "vllm_offload_%d_%s.mmap" % (os.getpid(), uuid.uuid4().hex[:12]))
    size = num_blocks * row_bytes + offset_bytes
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, size)
        mm = PrimaryMmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except BaseException:
        os.close(fd)
        _unlink_quietly(path)
        raise
    os.close(fd)
    mm.path = path
    mm._finalizer = weakref.finalize(mm, _unlink_quietly, path)
    whole = memoryview(mm)
    if offset_bytes:
        view = whole[offset_bytes:offset_bytes + num_blocks * row_bytes].cast("b", shape=[num_blocks, row_bytes])
        whole.release()
    else:
        view = whole.cast("b", shape=[num_blocks, row_bytes])
    return mm, view, path


def close_primary(mm: PrimaryMmap, view: memoryview) -> None:
    """Release `view` (if nothing still exports it) and close `mm`."""
    try:
        view.release()
    except BufferError:
        pass
    mm.close()


# --------------------------------------------------------------------------
# OffloadingSpec


_SPEC_DEFAULTS: Dict[str, Any] = dict(
    model="hicache-test/tiny-model",
    revision=None,
    dtype="bfloat16",
    tp_size=1,
    tp_rank=0,
    pp_size=1,
    pp_rank=0,
    rank=None,               # default: pp_rank * tp_size + tp_rank
    block_size=16,           # tokens per GPU block (cache_config.block_size)
    gpu_block_size=None,     # default: block_size
    hash_block_size=None,    # default: block_size
    block_size_factor=1,
    num_layers=4,
    num_groups=1,
    layer_names=None,        # list of names (one group) or list of lists
    extra_config=None,
)


def make_spec(**overrides) -> SimpleNamespace:
    """An OffloadingSpec stand-in: .vllm_config (.model_config.model,
    .revision, .dtype; .parallel_config.tensor_parallel_size,
    .pipeline_parallel_size, .rank; .cache_config.block_size),
    .kv_cache_config.kv_cache_groups[g].layer_names, .extra_config,
    .gpu_block_size, .hash_block_size, .block_size_factor. Keywords: see
    _SPEC_DEFAULTS (model, revision, dtype, tp_size, tp_rank, pp_size,
    pp_rank, rank, block_size, gpu_block_size, hash_block_size,
    block_size_factor, num_layers, num_groups, layer_names, extra_config)."""
    unknown = set(overrides) - set(_SPEC_DEFAULTS)
    if unknown:
        raise TypeError("make_spec: unknown keyword(s) %s" % ", ".join(sorted(unknown)))
    o = dict(_SPEC_DEFAULTS, **overrides)
    if not (0 <= o["tp_rank"] < o["tp_size"] and 0 <= o["pp_rank"] < o["pp_size"]):
        raise ValueError("rank outside its group: tp %d/%d, pp %d/%d"
                         % (o["tp_rank"], o["tp_size"], o["pp_rank"], o["pp_size"]))
    rank = o["rank"] if o["rank"] is not None else o["pp_rank"] * o["tp_size"] + o["tp_rank"]
    names = o["layer_names"]
    if names is None:
        per = max(1, o["num_layers"] // o["num_groups"])
        groups = [["model.layers.%d.self_attn.attn" % (g * per + i) for i in range(per)]
                  for g in range(o["num_groups"])]
    elif names and not isinstance(names[0], str):
        groups = [list(g) for g in names]
    else:
        groups = [list(names)]
    vllm_config = SimpleNamespace(
        model_config=SimpleNamespace(model=o["model"], revision=o["revision"], dtype=o["dtype"]),
        parallel_config=SimpleNamespace(
            tensor_parallel_size=o["tp_size"], pipeline_parallel_size=o["pp_size"], rank=rank,
            world_size=o["tp_size"] * o["pp_size"]),
        cache_config=SimpleNamespace(block_size=o["block_size"]),
    )
    kv_cache_config = SimpleNamespace(
        kv_cache_groups=[SimpleNamespace(layer_names=g) for g in groups])
    return SimpleNamespace(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        extra_config=dict(o["extra_config"] or {}),
        gpu_block_size=o["gpu_block_size"] if o["gpu_block_size"] is not None else o["block_size"],
        hash_block_size=o["hash_block_size"] if o["hash_block_size"] is not None else o["block_size"],
        block_size_factor=o["block_size_factor"],
        # stand-in only, for readers of a test's failure output
        tp_rank=o["tp_rank"], pp_rank=o["pp_rank"],
    )


# --------------------------------------------------------------------------
# Keys and block contents


def block_key(i: int, group: int = 0, salt: bytes = b"") -> bytes:
    """A deterministic OffloadKey: sha256(salt + i) (32 bytes) + group."""
    h = hashlib.sha256(bytes(salt) + int(i).to_bytes(8, "big", signed=True)).digest()
    return make_offload_key(h, group)


_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _pattern(seeds: np.ndarray, words: int) -> np.ndarray:
    """(len(seeds), words) uint64: a mix of each seed and the word index."""
    with np.errstate(over="ignore"):
        x = seeds[:, None] * np.uint64(0x9E3779B97F4A7C15) + np.arange(words, dtype=np.uint64)[None, :]
        x ^= x >> np.uint64(31)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(29)
    return x


def _seeds(keys: Sequence[bytes]) -> np.ndarray:
    return np.array([int.from_bytes(hashlib.blake2b(bytes(k), digest_size=8).digest(), "little")
                     for k in keys], dtype=np.uint64)


def _rows(view: memoryview) -> np.ndarray:
    arr = np.asarray(view)
    if arr.ndim != 2 or arr.shape[1] % 8:
        raise ValueError("want a 2-D view with rows of a multiple of 8 bytes, got %r" % (arr.shape,))
    return arr


def _chunks(n: int, words: int):
    step = max(1, (4 << 20) // max(1, words))  # ~32 MiB of uint64 temporaries
    for lo in range(0, n, step):
        yield lo, min(n, lo + step)


def fill_blocks(view: memoryview, block_ids: Sequence[int], keys: Sequence[bytes]) -> None:
    """Write key keys[i]'s pattern into primary block block_ids[i]."""
    arr = _rows(view)
    words = arr.shape[1] // 8
    ids = np.asarray(block_ids, dtype=np.int64)
    seeds = _seeds(keys)
    if len(ids) != len(seeds):
        raise ValueError("%d block ids for %d keys" % (len(ids), len(seeds)))
    for lo, hi in _chunks(len(ids), words):
        pat = _pattern(seeds[lo:hi], words).view(np.int8)
        arr[ids[lo:hi]] = pat
    del arr


def poison_blocks(view: memoryview, block_ids: Sequence[int], value: int = -91) -> None:
    """Fill the blocks with one byte (0xa5), so stale contents cannot pass."""
    arr = np.asarray(view)
    arr[np.asarray(block_ids, dtype=np.int64)] = value
    del arr


def check_blocks(view: memoryview, block_ids: Sequence[int], keys: Sequence[bytes]) -> List[int]:
    """The indexes i whose block block_ids[i] does not hold key keys[i]'s
    pattern, every byte compared (empty: all good)."""
    arr = _rows(view)
    words = arr.shape[1] // 8
    ids = np.asarray(block_ids, dtype=np.int64)
    seeds = _seeds(keys)
    if len(ids) != len(seeds):
        raise ValueError("%d block ids for %d keys" % (len(ids), len(seeds)))
    bad: List[int] = []
    for lo, hi in _chunks(len(ids), words):
        pat = _pattern(seeds[lo:hi], words).view(np.int8)
        ok = (arr[ids[lo:hi]] == pat).all(axis=1)
        bad.extend(int(lo + j) for j in np.nonzero(~ok)[0])
    del arr
    return bad


# --------------------------------------------------------------------------
# Plugins


def make_entry_point_dist(directory: str, dist_name: str,
                          entry_points: Dict[str, Dict[str, str]]) -> str:
    """Write <directory>/<dist_name>-0.0.dist-info with the given entry points
    ({group: {name: "module:attr"}}), as an installed distribution has; with
    `directory` on sys.path, importlib.metadata.entry_points finds them.
    Returns the dist-info path."""
    info = os.path.join(directory, "%s-0.0.dist-info" % dist_name.replace("-", "_"))
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: %s\nVersion: 0.0\n" % dist_name)
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        for group, eps in entry_points.items():
            f.write("[%s]\n" % group)
            for name, value in eps.items():
                f.write("%s = %s\n" % (name, value))
            f.write("\n")
    importlib.invalidate_caches()
    return info


# --------------------------------------------------------------------------
# The scheduler


class Scheduler:
    """Owns a secondary tier and drives it as vLLM's scheduler does, from one
    thread: submit_store / submit_load with JobMetadata, get_finished() once
    per step() (each result checked: a job id never submitted, or reported
    twice, is an AssertionError, as in vLLM), lookup(), touch(), shutdown().

    A job's primary blocks stay pinned until it is reported: a load into a
    block that an unreported job uses, or a store from a block an unreported
    load writes, is refused (ValueError: the caller's mistake, not the
    tier's).

    newer_names=True drives a newer vLLM revision's names instead: the
    stand-in exports LookupResult (HIT/MISS/RETRY), lookup must return one,
    and get_finished_jobs() is called when the tier has it.

    The time of every tier call is kept, in ns, in call_ns[name]
    (submit_store, submit_load, get_finished, lookup)."""

    def __init__(self, tier=None, *, tier_config: Optional[dict] = None,
                 primary_view: Optional[memoryview] = None, spec=None,
                 newer_names: bool = False):
        self.newer_names = bool(newer_names)
        self._prev_newer = tiering_base.set_newer_names(True) if self.newer_names else None
        try:
            if tier is None:
                if tier_config is None or primary_view is None:
                    raise TypeError("Scheduler needs a tier, or tier_config and primary_view")
                tier = SecondaryTierFactory.create_secondary_tier(
                    tier_config, primary_view, spec if spec is not None else make_spec())
        except BaseException:
            self._restore_names()
            raise
        self.tier = tier
        self._ids = itertools.count()
        self.in_flight: Dict[int, JobMetadata] = {}
        self.kind: Dict[int, str] = {}
        self.results: Dict[int, bool] = {}
        self.submitted_ns: Dict[int, int] = {}
        self.finished_ns: Dict[int, int] = {}
        self._pins: Dict[int, List[int]] = {}   # block -> [stores, loads]
        self.call_ns: Dict[str, List[int]] = {
            "submit_store": [], "submit_load": [], "get_finished": [], "lookup": []}
        self.steps = 0
        self.closed = False

    # -- jobs

    def _pin(self, kind: str, ids: Iterable[int]) -> None:
        blocks = list(ids)
        for b in blocks:
            stores, loads = self._pins.get(b, (0, 0))
            if loads or (kind == "load" and stores):
                raise ValueError("primary block %d is pinned by an unreported job" % b)
        if kind == "load" and len(set(blocks)) != len(blocks):
            raise ValueError("a load job names a primary block twice")
        for b in blocks:
            p = self._pins.setdefault(b, [0, 0])
            p[0 if kind == "store" else 1] += 1

    def _unpin(self, kind: str, ids: Iterable[int]) -> None:
        for b in ids:
            p = self._pins[b]
            p[0 if kind == "store" else 1] -= 1
            if p == [0, 0]:
                del self._pins[b]

    def _submit(self, kind: str, keys, block_ids, req_context, is_promotion: bool) -> int:
        if self.closed:
            raise RuntimeError("scheduler is shut down")
        keys = [bytes(k) for k in keys]
        ids = np.asarray(block_ids, dtype=np.int64).reshape(-1)
        if len(keys) != len(ids):
            raise ValueError("%d keys for %d blocks" % (len(keys), len(ids)))
        num_blocks = len(self.tier.primary_kv_view) if getattr(self.tier, "primary_kv_view", None) is not None else None
        if num_blocks is not None and len(ids) and (ids.min() < 0 or ids.max() >= num_blocks):
            raise ValueError("block id outside the primary tier (%d blocks)" % num_blocks)
        job_id = next(self._ids)
        job = JobMetadata(job_id=job_id, keys=keys, block_ids=ids,
                          is_promotion=is_promotion, req_context=req_context)
        self._pin(kind, (int(b) for b in ids))
        self.in_flight[job_id] = job
        self.kind[job_id] = kind
        fn = self.tier.submit_store if kind == "store" else self.tier.submit_load
        t0 = time.perf_counter_ns()
        try:
            fn(job)
        except BaseException:
            del self.in_flight[job_id]
            del self.kind[job_id]
            self._unpin(kind, (int(b) for b in ids))
            raise
        t1 = time.perf_counter_ns()
        self.call_ns["submit_" + kind].append(t1 - t0)
        self.submitted_ns[job_id] = t0
        return job_id

    def store(self, keys, block_ids, req_context: Any = None, is_promotion: bool = False) -> int:
        """Submit a store of primary blocks block_ids under keys; its job id."""
        return self._submit("store", keys, block_ids, req_context, is_promotion)

    def load(self, keys, block_ids, req_context: Any = None, is_promotion: bool = True) -> int:
        """Submit a load of keys into primary blocks block_ids; its job id."""
        return self._submit("load", keys, block_ids, req_context, is_promotion)

    def step(self) -> List[JobResult]:
        """One engine step: get_finished() once (get_finished_jobs() with the
        newer names, when the tier has it), every result checked and
        recorded, its blocks unpinned."""
        if self.closed:
            raise RuntimeError("scheduler is shut down")
        fn = self.tier.get_finished
        if self.newer_names and hasattr(self.tier, "get_finished_jobs"):
            fn = self.tier.get_finished_jobs
        t0 = time.perf_counter_ns()
        got = fn()
        got = list(got)
        t1 = time.perf_counter_ns()
        self.call_ns["get_finished"].append(t1 - t0)
        self.steps += 1
        for r in got:
            jid = r.job_id
            assert jid not in self.results, "job %r reported twice" % (jid,)
            assert jid in self.in_flight, "unknown job id %r reported" % (jid,)
            assert isinstance(r.success, (bool, np.bool_)), \
                "job %r: success is %r, not a bool" % (jid, r.success)
            job = self.in_flight.pop(jid)
            self._unpin(self.kind[jid], (int(b) for b in job.block_ids))
            self.results[jid] = bool(r.success)
            self.finished_ns[jid] = t1
        return got

    def wait(self, job_ids: Iterable[int], timeout: float = 60.0, poll_s: float = 0.001) -> Dict[int, bool]:
        """Step (sleeping poll_s between steps) until every job of job_ids is
        reported; {job id: success}. TimeoutError after `timeout` seconds."""
        want = list(job_ids)
        for j in want:
            if j not in self.results and j not in self.in_flight:
                raise ValueError("job %r was never submitted" % (j,))
        deadline = time.monotonic() + timeout
        while True:
            if all(j in self.results for j in want):
                return {j: self.results[j] for j in want}
            self.step()
            if all(j in self.results for j in want):
                return {j: self.results[j] for j in want}
            if time.monotonic() > deadline:
                missing = [j for j in want if j not in self.results]
                raise TimeoutError("%d job(s) not reported after %.1f s (first: %r)"
                                   % (len(missing), timeout, missing[:5]))
            time.sleep(poll_s)

    def drain(self, timeout: float = 60.0, poll_s: float = 0.001) -> Dict[int, bool]:
        """wait() for every job in flight."""
        return self.wait(list(self.in_flight), timeout, poll_s)

    # -- lookups

    def lookup(self, key: bytes, req_context: Any = None) -> Optional[bool]:
        """The tier's lookup, checked and normalised: True (ready), False
        (absent), None (in transfer)."""
        t0 = time.perf_counter_ns()
        r = self.tier.lookup(bytes(key), req_context)
        self.call_ns["lookup"].append(time.perf_counter_ns() - t0)
        if self.newer_names:
            LR = tiering_base._LookupResult
            assert isinstance(r, LR), "lookup returned %r, not a LookupResult" % (r,)
            return {LR.HIT: True, LR.MISS: False, LR.RETRY: None}[r]
        assert r is None or isinstance(r, bool), "lookup returned %r, not True/False/None" % (r,)
        return r

    def touch(self, keys, req_context: Any = None) -> None:
        self.tier.touch([bytes(k) for k in keys], req_context)

    # -- the end

    def _restore_names(self) -> None:
        if self._prev_newer is not None:
            tiering_base.set_newer_names(self._prev_newer)
            self._prev_newer = None

    def shutdown(self) -> None:
        """tier.shutdown(), once; jobs still in flight are abandoned."""
        if self.closed:
            return
        self.closed = True
        try:
            self.tier.shutdown()
        finally:
            self._restore_names()

    def reset_timing(self) -> None:
        for v in self.call_ns.values():
            v.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
        return False
