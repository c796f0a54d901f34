"""hicache.vllm and hicache.lmcache driven the way vLLM and LMCache drive
them, through stand-ins written from their contracts (tests/python/standins):
each case is a function of a scratch directory, run in a process of its
own by test_engine_tiers.py (a crash or a hang is that case's failure).
Run one by hand: engine_cases.py NAME DIR; it prints "HELD NAME" when the
case holds."""
import gc
import json
import os
import select
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "standins"), os.path.join(HERE, "..", "..", "python")):
    if p not in sys.path:
        sys.path.insert(0, p)

import numpy as np  # noqa: E402

import lmcache_driver as lm  # noqa: E402
import vllm_driver as vd  # noqa: E402
from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory  # noqa: E402

import hicache  # noqa: E402
import hicache.vllm  # noqa: E402

CASES = {}
BLOCK = 64 << 10
T = 30.0


def case(fn):
    CASES[fn.__name__] = fn
    return fn


# ---- vLLM ----


def _register():
    try:
        SecondaryTierFactory.register_tier("hicache", "hicache.vllm", "HicacheTier")
    except ValueError:
        pass


def _sched(d, view, **spec):
    _register()
    return vd.Scheduler(tier_config={"type": "hicache", "root_dir": os.path.join(d, "l3")},
                        primary_view=view, spec=vd.make_spec(**spec))


def _settle(s, key, timeout=T):
    """Ask as the scheduler does, once per step, until the answer settles."""
    deadline = time.monotonic() + timeout
    while True:
        a = s.lookup(key)
        if a is not None:
            return a
        assert time.monotonic() < deadline, "lookup never settled"
        s.step()
        time.sleep(0.001)


@case
def vllm_entry_point(d):
    """`make install` writes a vllm.general_plugins entry point; vLLM's
    start-up runs it and the type resolves to the tier."""
    vd.make_entry_point_dist(d, "hicache", {"vllm.general_plugins": {"hicache": "hicache.vllm:register"}})
    sys.path.insert(0, d)
    import vllm.plugins

    vllm.plugins.load_general_plugins()
    cls = SecondaryTierFactory.get_tier_class("hicache")
    assert cls is hicache.vllm.HicacheTier
    mm, view, _ = vd.make_primary(8, BLOCK)
    t = SecondaryTierFactory.create_secondary_tier({"type": "hicache", "root_dir": os.path.join(d, "l3")},
                                                   view, vd.make_spec())
    assert isinstance(t, hicache.vllm.HicacheTier)
    t.shutdown()


@case
def vllm_round_trip(d):
    """Many jobs, a job with no keys, lookups that settle, every byte back."""
    n = 64
    mm, view, _ = vd.make_primary(2 * n, BLOCK)
    s = _sched(d, view)
    keys = [vd.block_key(i) for i in range(n)]
    vd.fill_blocks(view, range(n), keys)
    vd.poison_blocks(view, range(n, 2 * n))
    assert _settle(s, keys[0]) is False
    jobs = [s.store(keys[i:i + 4], range(i, i + 4)) for i in range(0, n, 4)]
    jobs.append(s.store([], []))
    assert s.tier.has_pending_work()
    done = s.wait(jobs, timeout=T)
    assert all(done.values()), done
    assert not s.tier.has_pending_work()
    assert all(s.lookup(k) is True for k in keys)
    jobs = [s.load(keys[i:i + 8], range(n + i, n + i + 8)) for i in range(0, n, 8)]
    jobs.append(s.load([], []))
    assert all(s.wait(jobs, timeout=T).values())
    assert vd.check_blocks(view, range(n, 2 * n), keys) == []
    s.shutdown()


@case
def vllm_restart(d):
    """A new tier on the same directory finds the earlier process's blocks."""
    mm, view, _ = vd.make_primary(16, BLOCK)
    keys = [vd.block_key(i, salt=b"restart") for i in range(8)]
    vd.fill_blocks(view, range(8), keys)
    s = _sched(d, view)
    assert all(s.wait([s.store(keys, range(8))], timeout=T).values())
    s.shutdown()
    s = _sched(d, view)
    assert _settle(s, keys[3]) is True
    vd.poison_blocks(view, range(8, 16))
    assert all(s.wait([s.load(keys, range(8, 16))], timeout=T).values())
    assert vd.check_blocks(view, range(8, 16), keys) == []
    s.shutdown()


@case
def vllm_two_instances(d):
    """Two tiers on one directory at once: what one stores, the other finds
    once its negative answer expires, and loads."""
    mm_a, view_a, _ = vd.make_primary(8, BLOCK)
    mm_b, view_b, _ = vd.make_primary(8, BLOCK)
    _register()
    cfg = {"type": "hicache", "root_dir": os.path.join(d, "l3"), "negative_ttl_s": 0.05}
    a = vd.Scheduler(tier_config=dict(cfg), primary_view=view_a, spec=vd.make_spec())
    b = vd.Scheduler(tier_config=dict(cfg), primary_view=view_b, spec=vd.make_spec())
    keys = [vd.block_key(i, salt=b"two") for i in range(4)]
    assert _settle(b, keys[0]) is False
    vd.fill_blocks(view_a, range(4), keys)
    assert all(a.wait([a.store(keys, range(4))], timeout=T).values())
    time.sleep(0.1)
    assert _settle(b, keys[0]) is True
    vd.poison_blocks(view_b, range(4, 8))
    assert all(b.wait([b.load(keys, range(4, 8))], timeout=T).values())
    assert vd.check_blocks(view_b, range(4, 8), keys) == []
    a.shutdown()
    b.shutdown()


@case
def vllm_namespace(d):
    """Another TP rank, another dtype, another revision: the blocks are not
    theirs (lookup False, a load fails and writes nothing)."""
    mm, view, _ = vd.make_primary(8, BLOCK)
    keys = [vd.block_key(i, salt=b"ns") for i in range(4)]
    vd.fill_blocks(view, range(4), keys)
    s = _sched(d, view, tp_size=2, tp_rank=0, dtype="bfloat16")
    assert all(s.wait([s.store(keys, range(4))], timeout=T).values())
    s.shutdown()
    for other in ({"tp_size": 2, "tp_rank": 1, "dtype": "bfloat16"},
                  {"tp_size": 2, "tp_rank": 0, "dtype": "float16"},
                  {"tp_size": 2, "tp_rank": 0, "dtype": "bfloat16", "revision": "v2"},
                  {"tp_size": 2, "tp_rank": 0, "dtype": "bfloat16", "block_size": 32}):
        s = _sched(d, view, **other)
        assert _settle(s, keys[0]) is False, other
        vd.poison_blocks(view, range(4, 8))
        done = s.wait([s.load(keys, range(4, 8))], timeout=T)
        assert not any(done.values()), other
        assert len(vd.check_blocks(view, range(4, 8), keys)) == 4
        s.shutdown()
    s = _sched(d, view, tp_size=2, tp_rank=0, dtype="bfloat16")
    assert _settle(s, keys[0]) is True
    s.shutdown()


@case
def vllm_shutdown_in_flight(d):
    """Shut down with many jobs in flight: every job is reported once
    (finished or failed), then the primary memory goes (ASan or a SIGSEGV
    would show a later use)."""
    n = 256
    mm, view, _ = vd.make_primary(n, BLOCK)
    s = _sched(d, view)
    keys = [vd.block_key(i, salt=b"shut") for i in range(n)]
    jobs = [s.store([keys[i]], [i]) for i in range(n)]
    tier = s.tier
    tier.shutdown()
    got = {r.job_id: r.success for r in tier.get_finished()}
    assert sorted(got) == sorted(jobs), (len(got), len(jobs))
    assert tier.get_finished() == []
    vd.close_primary(mm, view)
    del view, mm
    gc.collect()
    time.sleep(0.05)


@case
def vllm_unaligned_view(d):
    """A view that does not start on a sector: bounce under O_DIRECT, same bytes."""
    mm, view, _ = vd.make_primary(16, BLOCK, offset_bytes=100)
    s = _sched(d, view)
    assert s.tier._store.pool_info("kv")["zero_copy"] == (not s.tier._store.direct_io)
    keys = [vd.block_key(i, salt=b"unal") for i in range(8)]
    vd.fill_blocks(view, range(8), keys)
    vd.poison_blocks(view, range(8, 16))
    assert all(s.wait([s.store(keys, range(8))], timeout=T).values())
    assert all(s.wait([s.load(keys, range(8, 16))], timeout=T).values())
    assert vd.check_blocks(view, range(8, 16), keys) == []
    s.shutdown()


@case
def vllm_tmpfs(d):
    """A root_dir where O_DIRECT is refused (tmpfs): buffered, it works."""
    import tempfile

    root = tempfile.mkdtemp(dir="/dev/shm")
    try:
        mm, view, _ = vd.make_primary(8, BLOCK)
        _register()
        s = vd.Scheduler(tier_config={"type": "hicache", "root_dir": root}, primary_view=view,
                         spec=vd.make_spec())
        keys = [vd.block_key(i, salt=b"tmpfs") for i in range(4)]
        vd.fill_blocks(view, range(4), keys)
        vd.poison_blocks(view, range(4, 8))
        assert all(s.wait([s.store(keys, range(4))], timeout=T).values())
        assert all(s.wait([s.load(keys, range(4, 8))], timeout=T).values())
        assert vd.check_blocks(view, range(4, 8), keys) == []
        s.shutdown()
    finally:
        import shutil

        shutil.rmtree(root, ignore_errors=True)


@case
def vllm_corrupt_block(d):
    """One block's file damaged on disk: its load fails (vLLM recomputes),
    no wrong byte lands, the other blocks' files stay and load."""
    mm, view, _ = vd.make_primary(16, BLOCK)
    s = _sched(d, view)
    keys = [vd.block_key(i, salt=b"bad") for i in range(4)]
    vd.fill_blocks(view, range(4), keys)
    assert all(s.wait([s.store(keys, range(4))], timeout=T).values())
    root = os.path.join(d, "l3")
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(root) for f in fs
                   if f.startswith(keys[1].hex()))
    assert len(files) == 1, files
    with open(files[0], "r+b") as f:
        f.seek(1000)
        b = f.read(1)
        f.seek(1000)
        f.write(bytes([b[0] ^ 0xFF]))
    vd.poison_blocks(view, range(4, 8))
    assert s.wait([s.load([keys[1]], [5])], timeout=T) == {1: False}
    assert len(vd.check_blocks(view, [5], [keys[1]])) == 1
    ok = s.wait([s.load([keys[0], keys[2], keys[3]], [4, 6, 7])], timeout=T)
    assert all(ok.values())
    assert vd.check_blocks(view, [4, 6, 7], [keys[0], keys[2], keys[3]]) == []
    for k in (keys[0], keys[2], keys[3]):
        assert any(f.startswith(k.hex()) for _, _, fs in os.walk(root) for f in fs)
    s.shutdown()


@case
def vllm_disk_full(d):
    """A root_dir that fills up: the jobs that do not fit fail (vLLM keeps
    its CPU copy), nothing raises, and what was stored loads. Needs a small
    tmpfs (root); elsewhere the case holds trivially, saying so."""
    import subprocess

    root = os.path.join(d, "small")
    os.makedirs(root)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", root],
                      capture_output=True).returncode:
        print("no tmpfs mount here: disk-full part skipped")
        return
    try:
        n = 32  # 2 MiB of blocks into 1 MiB
        mm, view, _ = vd.make_primary(2 * n, BLOCK)
        _register()
        s = vd.Scheduler(tier_config={"type": "hicache", "root_dir": root}, primary_view=view,
                         spec=vd.make_spec())
        keys = [vd.block_key(i, salt=b"full") for i in range(n)]
        vd.fill_blocks(view, range(n), keys)
        jobs = [s.store([keys[i]], [i]) for i in range(n)]
        done = s.wait(jobs, timeout=T)
        stored = [i for i, j in enumerate(jobs) if done[j]]
        assert 0 < len(stored) < n, len(stored)
        vd.poison_blocks(view, range(n, 2 * n))
        got = s.wait([s.load([keys[i] for i in stored], [n + i for i in stored])], timeout=T)
        assert all(got.values())
        assert vd.check_blocks(view, [n + i for i in stored], [keys[i] for i in stored]) == []
        s.shutdown()
    finally:
        subprocess.run(["umount", "-l", root], capture_output=True)


@case
def vllm_bad_calls(d):
    """Bad jobs are failed jobs, reported once; bad configuration raises
    ValueError naming the key."""
    mm, view, _ = vd.make_primary(8, BLOCK)
    s = _sched(d, view)
    t = s.tier
    from vllm.v1.kv_offload.tiering.base import JobMetadata

    k = vd.block_key(1)
    t.submit_store(JobMetadata(100, [k], np.array([99]), False, None))  # block out of range
    t.submit_store(JobMetadata(101, [k], np.array([-1]), False, None))
    t.submit_load(JobMetadata(102, [k, k], np.array([1]), True, None))  # lengths differ
    t.submit_load(JobMetadata(103, ["not bytes"], np.array([1]), True, None))
    t.submit_load(JobMetadata(104, [k, k], np.array([1, 1]), True, None))  # one block twice
    t.submit_store(JobMetadata(105, [k], np.array([1.5]), False, None))
    assert t.lookup(12345, None) is False
    got = {}
    deadline = time.monotonic() + T
    while len(got) < 6 and time.monotonic() < deadline:
        for r in t.get_finished():
            assert r.job_id not in got
            got[r.job_id] = r.success
        time.sleep(0.001)
    assert got == {100: False, 101: False, 102: False, 103: False, 104: False, 105: False}, got
    t.shutdown()
    t.submit_store(JobMetadata(106, [k], np.array([1]), False, None))  # after shutdown
    assert [(r.job_id, r.success) for r in t.get_finished()] == [(106, False)]
    assert t.lookup(k, None) in (False, True)
    spec = vd.make_spec()
    for kwargs, word in (({"root_dir": os.path.join(d, "x"), "no_such_key": 1}, "no_such_key"),
                         ({}, "root_dir"),
                         ({"root_dir": os.path.join(d, "x"), "negative_ttl_s": -1}, "negative_ttl_s"),
                         ({"root_dir": os.path.join(d, "x"), "io_depth": "many"}, "io_depth")):
        try:
            hicache.vllm.HicacheTier(spec, view, "hicache", **kwargs)
        except ValueError as e:
            assert word in str(e), (word, str(e))
        else:
            raise AssertionError("%r accepted" % (kwargs,))
    try:
        hicache.vllm.HicacheTier(spec, memoryview(bytes(BLOCK * 2)).cast("b", [2, BLOCK]), "hicache",
                                 root_dir=os.path.join(d, "x"))
    except ValueError as e:
        assert "read-only" in str(e)
    else:
        raise AssertionError("a read-only view accepted")


@case
def vllm_newer_names(d):
    """A newer vLLM: get_finished_jobs and LookupResult."""
    from vllm.v1.kv_offload.tiering import base

    base.set_newer_names(True)
    mm, view, _ = vd.make_primary(8, BLOCK)
    t = hicache.vllm.HicacheTier(vd.make_spec(), view, "hicache", root_dir=os.path.join(d, "l3"))
    k = vd.block_key(7, salt=b"newer")
    assert t.lookup(k, None) is base.LookupResult.RETRY
    deadline = time.monotonic() + T
    while t.lookup(k, None) is base.LookupResult.RETRY:
        assert time.monotonic() < deadline
        t.get_finished_jobs()
        time.sleep(0.001)
    assert t.lookup(k, None) is base.LookupResult.MISS
    t.shutdown()


# ---- LMCache ----

CHUNK = 64 << 10


def _lm(d, driver=True, **params):
    """The connector as LMCache loads it, with LMCache's demux thread
    (the stand-in driver) unless driver is False."""
    params.setdefault("root_dir", os.path.join(d, "l2"))
    cfg = json.dumps({"type": "native_plugin", "module_path": "hicache.lmcache",
                      "class_name": "HicacheConnector", "adapter_params": params,
                      "max_capacity_gb": params.pop("_cap", 100)})
    conn = lm.load_native_plugin(cfg)
    if not driver:
        return conn, None
    return conn, lm.L2Driver(conn, max_capacity_gb=json.loads(cfg)["max_capacity_gb"])


def _fill(view, seed):
    a = np.frombuffer(view, dtype=np.uint8)
    a[:] = (np.arange(a.size, dtype=np.uint64) * 2654435761 + seed * 97).astype(np.uint8)


def _keys(n, salt="k"):
    return [lm.key("org/model", 0, 0, "%s%04x" % (salt, i)) for i in range(n)]


def _readable(fd):
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(0))


@case
def lmcache_round_trip(d):
    """set from an unaligned arena, exists per key, get into other slices,
    delete, and the eventfd clear after each drain."""
    n = 8
    conn, drv = _lm(d)
    arena = lm.Arena(2 * n * CHUNK, CHUNK, offset_bytes=512)
    keys = _keys(n)
    src = [arena.slice(i) for i in range(n)]
    dst = [arena.slice(n + i) for i in range(n)]
    for i, v in enumerate(src):
        _fill(v, i)
    ok, err, res = drv.set(keys, src).result(T)
    assert ok, err
    ok, err, res = drv.exists(keys[:4] + _keys(1, "absent")).result(T)
    assert ok and res == [True] * 4 + [False], (err, res)
    ok, err, res = drv.get(keys, dst).result(T)
    assert ok and res == [True] * n, err
    for i in range(n):
        assert bytes(dst[i]) == bytes(src[i]), i
    ok, err, res = drv.get(keys[:2] + _keys(1, "absent"), dst[:3]).result(T)
    assert not ok and res == [True, True, False] and "missing" in err
    ok, err, _ = drv.delete(keys[:3]).result(T)
    assert ok, err
    ok, err, res = drv.exists(keys).result(T)
    assert res == [False] * 3 + [True] * (n - 3)
    time.sleep(0.05)
    assert not _readable(conn.event_fd())
    drv.check()
    drv.close()
    arena.close()


@case
def lmcache_partial_and_restart(d):
    """A shorter buffer (the last chunk of a request) is stored padded and
    read back exact; a restarted connector with chunk_bytes answers exists
    and get at once."""
    conn, drv = _lm(d, chunk_bytes=CHUNK)
    arena = lm.Arena(4 * CHUNK, CHUNK, offset_bytes=64)
    full, short = arena.slice(0), arena.slice(1)[: 40 << 10]
    _fill(full, 1)
    _fill(short, 2)
    keys = _keys(2, "part")
    assert drv.set(keys, [full, short]).result(T)[0]
    drv.close()
    conn, drv = _lm(d, chunk_bytes=CHUNK)
    assert drv.exists(keys).result(T)[2] == [True, True]
    out_full, out_short = arena.slice(2), arena.slice(3)[: 40 << 10]
    ok, err, res = drv.get(keys, [out_full, out_short]).result(T)
    assert ok, err
    assert bytes(out_full) == bytes(full) and bytes(out_short) == bytes(short)
    drv.check()
    drv.close()
    arena.close()


@case
def lmcache_kv_dtype(d):
    """Chunks of one size and another KV element type are not each other's
    (bf16 and fp16 chunks have one size; LMCache's key holds no dtype)."""
    arena = lm.Arena(2 * CHUNK, CHUNK)
    _fill(arena.slice(0), 9)
    keys = _keys(1, "dt")
    conn, drv = _lm(d, chunk_bytes=CHUNK, kv_dtype="bfloat16")
    assert drv.set(keys, [arena.slice(0)]).result(T)[0]
    drv.close()
    conn, drv = _lm(d, chunk_bytes=CHUNK, kv_dtype="float16")
    # exists looks at sizes (it may say True); the get checks the type and
    # fails, writing nothing into the buffer.
    ok, err, res = drv.get(keys, [arena.slice(1)]).result(T)
    assert not ok and res == [False]
    assert bytes(arena.slice(1)) == bytes(CHUNK)
    drv.close()
    conn, drv = _lm(d, chunk_bytes=CHUNK, kv_dtype="bfloat16")
    ok, err, res = drv.get(keys, [arena.slice(1)]).result(T)
    assert ok and bytes(arena.slice(1)) == bytes(arena.slice(0)), err
    drv.close()
    try:
        from hicache.lmcache import HicacheConnector

        HicacheConnector(root_dir=os.path.join(d, "l2"), kv_dtype="bf 16")
    except ValueError as e:
        assert "kv_dtype" in str(e)
    else:
        raise AssertionError("a bad kv_dtype accepted")
    arena.close()


@case
def lmcache_threads(d):
    """Four threads submitting at once: every future once, every byte back."""
    conn, drv = _lm(d, chunk_bytes=CHUNK)
    per = 16
    arena = lm.Arena(8 * per * CHUNK, CHUNK, offset_bytes=256)
    errors = []

    def worker(w):
        try:
            keys = _keys(per, "t%d-" % w)
            src = [arena.slice(w * 2 * per + i) for i in range(per)]
            dst = [arena.slice(w * 2 * per + per + i) for i in range(per)]
            for i, v in enumerate(src):
                _fill(v, w * 100 + i)
            futs = [drv.set(keys[i:i + 4], src[i:i + 4]) for i in range(0, per, 4)]
            assert all(f.result(T)[0] for f in futs)
            ok, err, _ = drv.get(keys, dst).result(T)
            assert ok, err
            for i in range(per):
                assert bytes(dst[i]) == bytes(src[i])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    th = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert not errors, errors
    drv.check()
    drv.close()
    arena.close()


@case
def lmcache_close_in_flight(d):
    """close() with calls in flight finishes them first; the arena can go
    right after (a later touch would be a crash)."""
    conn, drv = _lm(d, chunk_bytes=CHUNK)
    arena = lm.Arena(64 * CHUNK, CHUNK)
    for i in range(64):
        _fill(arena.slice(i), i)
    futs = [drv.set(_keys(4, "c%d-" % i), [arena.slice(4 * i + j) for j in range(4)]) for i in range(16)]
    drv.close()
    assert all(f.done() for f in futs)
    assert all(f.result(0)[0] for f in futs)
    arena.close()
    gc.collect()
    time.sleep(0.05)


@case
def lmcache_bad_calls(d):
    """Bad calls are failed futures with an error, never exceptions."""
    conn, _ = _lm(d, driver=False, chunk_bytes=CHUNK)
    arena = lm.Arena(4 * CHUNK, CHUNK)
    fid = conn.submit_batch_set("abc", [arena.slice(0)])  # a str, not a list
    fid2 = conn.submit_batch_get(_keys(2), [arena.slice(0)])  # lengths differ
    big = bytearray(2 * CHUNK)
    fid3 = conn.submit_batch_set(_keys(1, "big"), [memoryview(big)])
    fid4 = conn.submit_batch_get(_keys(1, "ro"), [memoryview(bytes(CHUNK))])
    fid5 = conn.submit_batch_exists([1, 2])
    want = {fid: None, fid2: None, fid3: "chunk_bytes", fid4: "read-only", fid5: None}
    got = {}
    deadline = time.monotonic() + T
    while len(got) < len(want) and time.monotonic() < deadline:
        for f, ok, err, res in conn.drain_completions():
            got[f] = (ok, err)
        time.sleep(0.005)
    assert set(got) == set(want), got
    for f, word in want.items():
        assert got[f][0] is False and got[f][1], (f, got[f])
        if word:
            assert word in got[f][1], got[f]
    conn.close()
    f = conn.submit_batch_exists(_keys(1))  # after close: a failed future, no exception
    assert [c[:2] for c in conn.drain_completions()] == [(f, False)]
    arena.close()
    for kwargs, word in (({"no_such_key": 1}, "no_such_key"), ({"root_dir": None}, "root_dir"),
                         ({"chunk_bytes": -5}, "chunk_bytes")):
        try:
            p = {"root_dir": os.path.join(d, "l2")}
            p.update(kwargs)
            from hicache.lmcache import HicacheConnector

            HicacheConnector(**p).close()
        except ValueError as e:
            assert word in str(e), (word, str(e))
        else:
            raise AssertionError("%r accepted" % (kwargs,))


@case
def lmcache_names(d):
    """Key strings become object names injectively."""
    from hicache.lmcache import key_name

    keys = ["a/b", "a%2Fb", "a-b", ".x", "%2Ex", "a\x01", "é@1", "k" * 200, "k" * 199 + "j"]
    names = [key_name(k) for k in keys]
    assert len(set(names)) == len(names), names
    for n in names:
        assert "/" not in n and not n.startswith(".") and len(n.encode()) <= 128
        assert all(ord(c) >= 0x20 and ord(c) != 0x7F for c in n)


def main():
    name, d = sys.argv[1], sys.argv[2]
    CASES[name](d)
    print("HELD " + name)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
