"""The baseline for bench/vllm_tier.py: a reimplementation, from its
description, of the I/O pattern of vLLM's own file-system secondary tier
("fs_python"), which is what a vLLM user has without hicache. Not vLLM's code.

FsPythonTier(offloading_spec, primary_kv_view, tier_type, root_dir):
  - 16 load-first and 16 store-first Python threads: two worker sets over
    one pair of queues, each thread taking its own kind of task first and
    the other kind when its own queue is empty; one task per block;
  - store: a block whose file exists is skipped; otherwise the row is written
    to a temporary file opened with O_DIRECT, in one write(), and renamed
    over the block's file (no fsync);
  - load: the file, opened with O_DIRECT, is read with os.preadv straight
    into the primary view's row; a load that fails in any way deletes the
    block's file;
  - lookup: os.path.exists, in the caller's (the scheduler's) thread;
  - no capacity limit; shutdown drops queued jobs without reporting them;
  - O_DIRECT always: on tmpfs, or with rows that are not aligned, the
    blocks fail (as vLLM's do);
  - a job succeeds when all its blocks did; a job without keys is reported
    at once.
Files: <root>/<model, / as ->_<12 hex of sha256 over the model, the block
sizes, TP/PP sizes, dtype and layer names>_r<rank>/<hash hex[:3]>/
<hash hex[3:5]>_g<group>/<hash hex>.bin.
"""
import collections
import hashlib
import logging
import os
import sys
import threading
from typing import Iterable, List

try:
    from vllm.v1.kv_offload.tiering.base import JobMetadata, JobResult, SecondaryTierManager
except ImportError:  # the stand-in, when run from the repository
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "tests", "python", "standins"))
    from vllm.v1.kv_offload.tiering.base import JobMetadata, JobResult, SecondaryTierManager

logger = logging.getLogger(__name__)

O_DIRECT = getattr(os, "O_DIRECT", 0o40000)


def _config_dir_name(spec) -> str:
    """<model with / as ->_<12 hex>_r<rank>: the directory of one model
    configuration and rank."""
    vc = spec.vllm_config
    mc, pc = vc.model_config, vc.parallel_config
    layer_names = [list(g.layer_names) for g in spec.kv_cache_config.kv_cache_groups]
    ident = repr((
        str(mc.model),
        int(vc.cache_config.block_size), spec.gpu_block_size, spec.hash_block_size,
        spec.block_size_factor,
        int(pc.tensor_parallel_size), int(pc.pipeline_parallel_size),
        str(mc.dtype),
        layer_names,
    ))
    digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
    return "%s_%s_r%d" % (str(mc.model).replace("/", "-"), digest, int(pc.rank))


class _Workers:
    """Two sets of threads over a load queue and a store queue; each thread
    takes tasks of its own kind first."""

    def __init__(self, num_load: int, num_store: int):
        self._cv = threading.Condition()
        self._queues = {"load": collections.deque(), "store": collections.deque()}
        self._stopping = False
        self._threads: List[threading.Thread] = []
        for kind, n in (("load", num_load), ("store", num_store)):
            other = "store" if kind == "load" else "load"
            for i in range(n):
                t = threading.Thread(target=self._run, args=(kind, other),
                                     name="fs-tier-%s-%d" % (kind, i), daemon=True)
                t.start()
                self._threads.append(t)

    def submit(self, kind: str, task) -> None:
        with self._cv:
            if self._stopping:
                return
            self._queues[kind].append(task)
            self._cv.notify()

    def _run(self, mine: str, other: str) -> None:
        qm, qo = self._queues[mine], self._queues[other]
        while True:
            with self._cv:
                while not self._stopping and not qm and not qo:
                    self._cv.wait()
                if self._stopping:
                    return
                task = qm.popleft() if qm else qo.popleft()
            try:
                task()
            except BaseException:  # a task reports its own failures
                logger.exception("fs tier task failed")

    def shutdown(self) -> None:
        """Drop what is queued; wait for the tasks under way."""
        with self._cv:
            self._stopping = True
            for q in self._queues.values():
                q.clear()
            self._cv.notify_all()
        for t in self._threads:
            t.join()


class _JobState:
    __slots__ = ("remaining", "ok")

    def __init__(self, n: int):
        self.remaining = n
        self.ok = True


class FsPythonTier(SecondaryTierManager):
    def __init__(self, offloading_spec, primary_kv_view: memoryview, tier_type: str,
                 root_dir: str, num_load_threads: int = 16, num_store_threads: int = 16):
        super().__init__(offloading_spec, primary_kv_view, tier_type)
        if primary_kv_view.ndim != 2:
            raise ValueError("primary_kv_view must be 2-D, got shape %r" % (primary_kv_view.shape,))
        self.root_dir = os.path.abspath(root_dir)
        self.base_dir = os.path.join(self.root_dir, _config_dir_name(offloading_spec))
        os.makedirs(self.base_dir, exist_ok=True)
        self._row_bytes = primary_kv_view.shape[1]
        self._flat = primary_kv_view.cast("B")  # row b: [b * row, (b + 1) * row)
        self._lock = threading.Lock()
        self._jobs = {}
        self._finished = collections.deque()
        self._workers = _Workers(num_load_threads, num_store_threads)
        self._closed = False

    # -- paths

    def _path(self, key: bytes) -> str:
        hx = bytes(key[:-4]).hex()
        group = int.from_bytes(key[-4:], "big")
        return os.path.join(self.base_dir, hx[:3], "%s_g%d" % (hx[3:5], group), hx + ".bin")

    def _row(self, block_id: int) -> memoryview:
        rb = self._row_bytes
        return self._flat[block_id * rb:(block_id + 1) * rb]

    # -- block tasks

    def _store_block(self, key: bytes, block_id: int) -> bool:
        path = self._path(key)
        if os.path.exists(path):
            return True
        tmp = "%s.tmp.%d.%d" % (path, os.getpid(), threading.get_ident())
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            row = self._row(block_id)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | O_DIRECT, 0o644)
            try:
                n = os.write(fd, row)
            finally:
                os.close(fd)
            if n != len(row):
                raise OSError("short write: %d of %d bytes" % (n, len(row)))
            os.rename(tmp, path)
            return True
        except OSError as e:
            logger.warning("fs tier: store of %s failed: %s", path, e)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False

    def _load_block(self, key: bytes, block_id: int) -> bool:
        path = self._path(key)
        try:
            row = self._row(block_id)
            fd = os.open(path, os.O_RDONLY | O_DIRECT)
            try:
                n = os.preadv(fd, [row], 0)
            finally:
                os.close(fd)
            if n != len(row):
                raise OSError("short read: %d of %d bytes" % (n, len(row)))
            return True
        except OSError as e:
            logger.warning("fs tier: load of %s failed: %s", path, e)
            try:
                os.unlink(path)
            except OSError:
                pass
            return False

    def _block_done(self, job_id: int, ok: bool) -> None:
        with self._lock:
            st = self._jobs[job_id]
            st.remaining -= 1
            st.ok = st.ok and ok
            if st.remaining:
                return
            del self._jobs[job_id]
        self._finished.append(JobResult(job_id=job_id, success=st.ok))

    def _submit(self, kind: str, job: JobMetadata) -> None:
        keys = list(job.keys)
        ids = [int(b) for b in job.block_ids]
        if not keys:
            self._finished.append(JobResult(job_id=job.job_id, success=True))
            return
        with self._lock:
            self._jobs[job.job_id] = _JobState(len(keys))
        fn = self._store_block if kind == "store" else self._load_block
        jid = job.job_id
        for key, b in zip(keys, ids):
            def task(key=key, b=b):
                ok = False
                try:
                    ok = fn(key, b)
                finally:
                    self._block_done(jid, ok)
            self._workers.submit(kind, task)

    # -- SecondaryTierManager

    def lookup(self, key: bytes, req_context) -> bool:
        return os.path.exists(self._path(key))

    def submit_store(self, job: JobMetadata) -> None:
        self._submit("store", job)

    def submit_load(self, job: JobMetadata) -> None:
        self._submit("load", job)

    def get_finished(self) -> Iterable[JobResult]:
        out = []
        q = self._finished
        while True:
            try:
                out.append(q.popleft())
            except IndexError:
                return out

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._workers.shutdown()
        try:
            self._flat.release()
        except BufferError:
            pass
