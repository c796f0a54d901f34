"""The LMCache native_plugin stand-in (tests/python/standins/lmcache_driver.py)
and the plain one-file-per-key baseline connector (bench/lmcache_plain.py)
end to end: loading from an --l2-adapter JSON config, set / exists / get /
delete through the demux thread over an unaligned arena, the eventfd left
clear after a drain, every future reported once; and the stand-in's own
checks: a future reported twice, a connector without event_fd."""
import json
import os
import select
import sys
import threading
import time

import pytest

_here = os.path.dirname(os.path.abspath(__file__))
for _p in (os.path.join(_here, "standins"), os.path.join(_here, "..", "..", "bench")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import lmcache_driver as lm  # noqa: E402

CHUNK = 64 << 10
N = 8
T = 10.0


def _fill(view, seed):
    pattern = bytes((seed * 31 + i * 7) & 0xFF for i in range(251))
    n = len(view)
    reps = pattern * (n // len(pattern) + 1)
    view[:] = reps[:n]


def _readable(fd):
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(0))


def test_plain_connector_end_to_end(tmp_path):
    cfg = json.dumps({
        "type": "native_plugin",
        "module_path": "lmcache_plain",
        "class_name": "PlainFileConnector",
        "adapter_params": {"root_dir": str(tmp_path / "l2"), "threads": 4},
        "max_capacity_gb": 1,
    })
    conn = lm.load_native_plugin(cfg)
    drv = lm.L2Driver(conn, max_capacity_gb=json.loads(cfg)["max_capacity_gb"])
    arena = lm.Arena(2 * N * CHUNK, CHUNK, offset_bytes=512)
    try:
        views = [arena.slice(i) for i in range(2 * N)]
        for v in views:
            assert len(v) == CHUNK and not v.readonly
        # not page-aligned: the arena's slices sit 512 bytes past a page
        import ctypes
        addr = ctypes.addressof(ctypes.c_char.from_buffer(views[0]))
        assert addr % 4096 == 512

        keys = [lm.key("llama", 3, "g0", "%016x" % (0xABC000 + i)) for i in range(N)]
        assert keys[0] == "llama@00000003@g0@0000000000abc000"
        assert lm.key("m", 0, "g", 0xff, salt="s1") == "m@00000000@g@ff@s1"
        for i in range(N):
            _fill(views[i], i)

        f = drv.set(keys, views[:N])
        ok, err, _ = f.result(T)
        assert ok, err
        assert drv.stored_bytes == N * CHUNK

        missing = lm.key("llama", 3, "g0", "deadbeef")
        probe = keys[:3] + [missing] + keys[3:]
        ok, err, res = drv.exists(probe).result(T)
        assert ok, err
        assert res == [True, True, True, False] + [True] * (N - 3)

        ok, err, res = drv.get(keys, views[N:]).result(T)
        assert ok, err
        assert res == [True] * N
        for i in range(N):
            assert views[N + i] == views[i], "chunk %d differs after get" % i

        # a get with one missing key: per-key success
        ok, err, res = drv.get([keys[0], missing], views[N:N + 2]).result(T)
        assert res == [True, False] and not ok and err

        if drv.has_delete:
            ok, err, _ = drv.delete(keys[:2]).result(T)
            assert ok, err
            ok, err, res = drv.exists(keys[:3]).result(T)
            assert res == [False, False, True]
            assert drv.stored_bytes == (N - 2) * CHUNK

        assert drv.wait_all(T)
        # every completion drained: the eventfd is clear
        assert not _readable(conn.event_fd())
        assert drv.empty_drains == 0
        drv.check()
        assert drv.completions == len(drv.submit_times)
        assert drv.max_submit_s() < 1.0
    finally:
        drv.close()
        del views
        arena.close()
    drv.check()


def test_plain_connector_drain_clears_eventfd(tmp_path):
    """Without the driver: the eventfd turns readable once a completion is
    queued, drain_completions returns it exactly once and leaves the
    eventfd clear."""
    import lmcache_plain
    conn = lmcache_plain.PlainFileConnector(str(tmp_path), threads=2)
    try:
        efd = conn.event_fd()
        assert not _readable(efd)
        fids = [conn.submit_batch_exists(["a", "b"]), conn.submit_batch_delete(["a"])]
        assert len(set(fids)) == 2
        got = []
        p = select.poll()
        p.register(efd, select.POLLIN)
        while len(got) < 2:
            assert p.poll(T * 1000), "no completion within %ss" % T
            got += conn.drain_completions()
        assert sorted(c[0] for c in got) == sorted(fids)
        assert not _readable(efd)
        assert conn.drain_completions() == []
        byid = {c[0]: c for c in got}
        assert byid[fids[0]] == (fids[0], True, "", [False, False])
    finally:
        conn.close()


def test_capacity_evicts_lru_through_delete(tmp_path):
    conn = lm.load_native_plugin({
        "type": "native_plugin", "module_path": "lmcache_plain",
        "class_name": "PlainFileConnector", "adapter_params": {"root_dir": str(tmp_path)},
    })
    # room for 3 chunks of 64 KiB
    drv = lm.L2Driver(conn, max_capacity_gb=3 * CHUNK / lm.GIB)
    arena = lm.Arena(4 * CHUNK, CHUNK, offset_bytes=100)
    try:
        keys = [lm.key("m", 0, "g", i) for i in range(4)]
        for i in range(3):
            assert drv.set([keys[i]], [arena.slice(i)]).result(T)[0]
        assert drv.get([keys[0]], [arena.slice(3)]).result(T)[0]   # keys[0] most recent now
        assert drv.set([keys[3]], [arena.slice(3)]).result(T)[0]
        assert len(drv.evictions) == 1 and drv.evictions[0].keys == [keys[1]]
        assert drv.evictions[0].result(T)[0]
        assert drv.exists(keys).result(T)[2] == [True, False, True, True]
        assert drv.lru_keys() == [keys[2], keys[0], keys[3]]
        drv.check()
    finally:
        drv.close()
        arena.close()


class _Fake:
    """A minimal in-memory connector; report_twice makes it post every
    completion twice, bogus adds a completion for an id never handed out,
    delay makes submits return the id only after the completion is out."""

    def __init__(self, report_twice=False, delay=0.0, bogus=False):
        self.delay = delay
        self.bogus = bogus
        self.efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.lock = threading.Lock()
        self.q = []
        self.n = 0
        self.twice = report_twice

    def event_fd(self):
        return self.efd

    def _post(self, res):
        with self.lock:
            self.n += 1
            fid = self.n
            self.q.append((fid, True, "", res))
            if self.twice:
                self.q.append((fid, True, "", res))
            if self.bogus:
                self.q.append((10**9 + fid, True, "", res))
            os.eventfd_write(self.efd, 1)
        if self.delay:
            time.sleep(self.delay)   # the demux thread drains before the id is returned
        return fid

    def submit_batch_get(self, keys, mvs):
        return self._post([True] * len(keys))

    def submit_batch_set(self, keys, mvs):
        return self._post(None)

    def submit_batch_exists(self, keys):
        return self._post([False] * len(keys))

    def drain_completions(self):
        try:
            os.eventfd_read(self.efd)
        except BlockingIOError:
            pass
        with self.lock:
            out, self.q = self.q, []
        return out

    def close(self):
        os.close(self.efd)


class _NoEventFd(_Fake):
    event_fd = None


def test_future_reported_twice_fails_check():
    drv = lm.L2Driver(_Fake(report_twice=True))
    try:
        assert drv.exists(["a", "b"]).result(T) == (True, "", [False, False])
        assert drv.delete(["a"]) is None          # no submit_batch_delete
        drv.wait_all(T)
        with pytest.raises(AssertionError, match="more than once"):
            drv.check()
    finally:
        drv.close()


@pytest.mark.parametrize("delay", [0.0, 0.01])
def test_well_behaved_fake_passes_check(delay):
    drv = lm.L2Driver(_Fake(delay=delay))
    try:
        futs = [drv.exists(["a"]) for _ in range(5 if delay else 50)]
        assert drv.wait_all(T)
        assert all(f.result(0) == (True, "", [False]) for f in futs)
        drv.check()
    finally:
        drv.close()
    drv.check()


def test_twice_before_submit_returns_and_unknown_id_fail_check():
    for fake, msg in ((_Fake(report_twice=True, delay=0.01), "more than once"),
                      (_Fake(bogus=True), "never returned by a submit")):
        drv = lm.L2Driver(fake)
        try:
            assert drv.exists(["a"]).result(T)[0]
            time.sleep(0.02)
            with pytest.raises(AssertionError, match=msg):
                drv.check()
        finally:
            drv.close()


def test_missing_event_fd_refused(tmp_path):
    mod = tmp_path / "noefd_plugin.py"
    mod.write_text(
        "class Conn:\n"
        "    def __init__(self, **kw): pass\n"
        "    def submit_batch_get(self, k, m): return 1\n"
        "    def submit_batch_set(self, k, m): return 1\n"
        "    def submit_batch_exists(self, k): return 1\n"
        "    def drain_completions(self): return []\n"
        "    def close(self): pass\n")
    cfg = {"type": "native_plugin", "module_path": str(mod), "class_name": "Conn",
           "adapter_params": {}}
    with pytest.raises(TypeError, match="event_fd"):
        lm.load_native_plugin(json.dumps(cfg))
    with pytest.raises(TypeError, match="event_fd"):
        lm.L2Driver(_NoEventFd())
