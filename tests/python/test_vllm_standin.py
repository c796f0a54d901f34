"""The vLLM multi-tier offloading stand-in (tests/python/standins: vllm and
vllm_driver.py) and the baseline file-system tier (bench/vllm_fs_tier.py)
driven through it end to end: what later tests of hicache's own vLLM tier
rely on. A few seconds; no torch."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
for p in (os.path.join(HERE, "standins"), os.path.join(REPO, "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

import vllm  # noqa: E402
import vllm.plugins  # noqa: E402
import vllm_driver as vd  # noqa: E402
from vllm.v1.kv_offload import base as kv_base  # noqa: E402
from vllm.v1.kv_offload.tiering import base as tier_base  # noqa: E402
from vllm.v1.kv_offload.tiering.base import JobResult, SecondaryTierManager  # noqa: E402
from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory  # noqa: E402

ROW = 64 << 10
FS_TYPE = "fs_python_test"


def _odirect_ok(directory):
    """Whether `directory` takes an aligned O_DIRECT write (not on tmpfs)."""
    import mmap
    probe = os.path.join(directory, ".odirect-probe")
    buf = mmap.mmap(-1, 4096)
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o600)
        try:
            return os.write(fd, buf) == 4096
        finally:
            os.close(fd)
    except OSError:
        return False
    finally:
        buf.close()
        try:
            os.unlink(probe)
        except OSError:
            pass


@pytest.fixture
def odirect_dir(tmp_path):
    """pytest's tmp_path when it takes O_DIRECT, else a directory under
    /var/tmp; the test skips when neither does."""
    import shutil
    import tempfile
    if _odirect_ok(str(tmp_path)):
        yield str(tmp_path)
        return
    if not _odirect_ok("/var/tmp"):
        pytest.skip("O_DIRECT is refused in %s and /var/tmp" % tmp_path)
    made = tempfile.mkdtemp(prefix="hicache-vllm-standin.", dir="/var/tmp")
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


@pytest.fixture
def fs_type():
    if FS_TYPE not in SecondaryTierFactory._registry:
        SecondaryTierFactory.register_tier(FS_TYPE, "vllm_fs_tier", "FsPythonTier")
    yield FS_TYPE
    SecondaryTierFactory._unregister_tier(FS_TYPE)


@pytest.fixture
def primary():
    mm, view, path = vd.make_primary(16, ROW)
    yield mm, view, path
    vd.close_primary(mm, view)
    assert not os.path.exists(path)


def _drop_cache(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def test_offload_key_helpers():
    h = bytes(range(32))
    k = kv_base.make_offload_key(h, 7)
    assert len(k) == 36 and k[-4:] == b"\x00\x00\x00\x07"
    assert kv_base.get_offload_block_hash(k) == h
    assert kv_base.get_offload_group_idx(k) == 7
    k2 = vd.block_key(3, group=2, salt=b"s")
    assert k2 == vd.block_key(3, group=2, salt=b"s") != vd.block_key(3, group=2)
    assert kv_base.get_offload_group_idx(k2) == 2 and len(k2) == 36


def test_primary_view_shape(primary):
    mm, view, path = primary
    assert path.startswith("/dev/shm/vllm_offload_") and path.endswith(".mmap")
    assert view.shape == (16, ROW) and view.format == "b" and not view.readonly
    mm2, view2, path2 = vd.make_primary(2, 4096, offset_bytes=8)
    try:
        assert view2.shape == (2, 4096)
        assert mm2.size() == 2 * 4096 + 8
    finally:
        vd.close_primary(mm2, view2)
    assert not os.path.exists(path2)


def test_factory_register_and_create(fs_type, primary, odirect_dir):
    _, view, _ = primary
    with pytest.raises(ValueError):
        SecondaryTierFactory.register_tier(fs_type, "vllm_fs_tier", "FsPythonTier")
    # lazy: an unimportable module fails only when a tier is made
    SecondaryTierFactory.register_tier("nowhere_test", "no_such_module_xyz", "Tier")
    try:
        with pytest.raises(ImportError):
            SecondaryTierFactory.create_secondary_tier({"type": "nowhere_test"}, view, vd.make_spec())
    finally:
        SecondaryTierFactory._unregister_tier("nowhere_test")
    cfg = {"type": fs_type, "root_dir": odirect_dir, "num_load_threads": 2}
    tier = SecondaryTierFactory.create_secondary_tier(cfg, view, vd.make_spec(model="org/m", tp_size=2, tp_rank=1))
    try:
        assert cfg == {"type": fs_type, "root_dir": odirect_dir, "num_load_threads": 2}  # copied
        assert tier.tier_type == fs_type and tier.primary_kv_view is view
        assert os.path.basename(tier.base_dir).startswith("org-m_")
        assert tier.base_dir.endswith("_r1")
    finally:
        tier.shutdown()


def test_fs_tier_end_to_end(fs_type, primary, odirect_dir):
    _, view, _ = primary
    keys = [vd.block_key(i, salt=b"e2e") for i in range(8)]
    vd.fill_blocks(view, range(8), keys)
    vd.poison_blocks(view, range(8, 16))
    with vd.Scheduler(tier_config={"type": fs_type, "root_dir": odirect_dir},
                      primary_view=view, spec=vd.make_spec()) as s:
        assert s.lookup(keys[0]) is False
        jobs = [s.store(keys[:5], [0, 1, 2, 3, 4]), s.store(keys[5:], [5, 6, 7])]
        empty = s.store([], [])
        assert s.wait(jobs + [empty], timeout=30) == {jobs[0]: True, jobs[1]: True, empty: True}
        for k in keys:
            assert s.lookup(k) is True
        assert s.lookup(vd.block_key(99, salt=b"e2e")) is False
        files = [s.tier._path(k) for k in keys]
        assert all(os.path.getsize(f) == ROW for f in files)
        _drop_cache(files)
        # stores of blocks already there are skipped, and succeed
        again = s.store(keys[:2], [0, 1])
        load = s.load(keys, list(range(8, 16)))
        empty_load = s.load([], [])
        assert s.wait([again, load, empty_load], timeout=30) == {again: True, load: True, empty_load: True}
        assert vd.check_blocks(view, range(8, 16), keys) == []
        assert vd.check_blocks(view, range(8), keys) == []
        assert not s.in_flight and s.steps >= 1
        # a load that fails (here: a truncated file) fails its job and deletes the file
        with open(files[3], "r+b") as f:
            f.truncate(ROW // 2)
        bad = s.load([keys[3]], [8])
        assert s.wait([bad], timeout=30) == {bad: False}
        assert not os.path.exists(files[3]) and s.lookup(keys[3]) is False
        missing = s.load([vd.block_key(1234)], [9])
        assert s.wait([missing], timeout=30) == {missing: False}


def test_fs_tier_unaligned_rows_fail(fs_type, odirect_dir):
    """O_DIRECT always, as vLLM's tier: rows that are not aligned fail."""
    mm, view, _ = vd.make_primary(2, ROW, offset_bytes=8)
    try:
        with vd.Scheduler(tier_config={"type": fs_type, "root_dir": odirect_dir},
                          primary_view=view, spec=vd.make_spec()) as s:
            j = s.store([vd.block_key(1, salt=b"u")], [0])
            assert s.wait([j], timeout=30) == {j: False}
            assert s.lookup(vd.block_key(1, salt=b"u")) is False
    finally:
        vd.close_primary(mm, view)


class _FakeTier(SecondaryTierManager):
    """Finishes every job at once; reports each `repeat` times, plus `bogus`
    ids never submitted."""

    def __init__(self, offloading_spec, primary_kv_view, tier_type, repeat=1, bogus=()):
        super().__init__(offloading_spec, primary_kv_view, tier_type)
        self.repeat, self.bogus, self.pending, self.calls = repeat, list(bogus), [], []

    def lookup(self, key, req_context):
        self.calls.append("lookup")
        return key.startswith(b"\x01")

    def submit_store(self, job):
        self.pending.append(job.job_id)

    def submit_load(self, job):
        self.pending.append(job.job_id)

    def get_finished(self):
        out = [JobResult(j, True) for j in self.pending for _ in range(self.repeat)]
        out += [JobResult(j, True) for j in self.bogus]
        self.pending, self.bogus = [], []
        return out

    def shutdown(self):
        self.calls.append("shutdown")


def test_scheduler_asserts_duplicate_report(primary):
    _, view, _ = primary
    s = vd.Scheduler(_FakeTier(vd.make_spec(), view, "fake", repeat=2))
    j = s.store([vd.block_key(0)], [0])
    with pytest.raises(AssertionError, match="reported twice"):
        s.step()
    s2 = vd.Scheduler(_FakeTier(vd.make_spec(), view, "fake"))
    j = s2.store([vd.block_key(0)], [0])
    assert s2.wait([j]) == {j: True}
    s2.tier.pending.append(j)  # reported again, one step later
    with pytest.raises(AssertionError, match="reported twice"):
        s2.step()
    s3 = vd.Scheduler(_FakeTier(vd.make_spec(), view, "fake", bogus=[4242]))
    with pytest.raises(AssertionError, match="unknown job id"):
        s3.step()


def test_scheduler_pins_and_shutdown(primary):
    _, view, _ = primary
    tier = _FakeTier(vd.make_spec(), view, "fake")
    s = vd.Scheduler(tier)
    j = s.load([vd.block_key(0)], [3])
    with pytest.raises(ValueError, match="pinned"):
        s.load([vd.block_key(1)], [3])
    with pytest.raises(ValueError, match="pinned"):
        s.store([vd.block_key(1)], [3])
    s.wait([j])
    j2 = s.load([vd.block_key(1)], [3])  # unpinned once reported
    s.wait([j2])
    assert s.lookup(b"\x01" + bytes(35)) is True and s.lookup(bytes(36)) is False
    with pytest.raises(AssertionError, match="not True/False/None"):
        tier.lookup = lambda key, ctx: 1
        s.lookup(bytes(36))
    s.shutdown()
    s.shutdown()
    assert tier.calls.count("shutdown") == 1


class _NewerTier(_FakeTier):
    """Speaks only the newer revision's names."""

    def lookup(self, key, req_context):
        return tier_base.LookupResult.RETRY if key.startswith(b"\x02") else tier_base.LookupResult.HIT

    def get_finished(self):
        raise AssertionError("the newer names call get_finished_jobs")

    def get_finished_jobs(self):
        return _FakeTier.get_finished(self)


def test_newer_names_switch(primary):
    _, view, _ = primary
    assert not hasattr(tier_base, "LookupResult")  # the target revision by default
    s = vd.Scheduler(_NewerTier(vd.make_spec(), view, "newer"), newer_names=True)
    try:
        assert {m.name for m in tier_base.LookupResult} == {"HIT", "MISS", "RETRY"}
        j = s.store([vd.block_key(0)], [0])
        assert s.wait([j]) == {j: True}
        assert s.lookup(b"\x02" + bytes(35)) is None
        assert s.lookup(bytes(36)) is True
    finally:
        s.shutdown()
    assert not hasattr(tier_base, "LookupResult")
    # the same scheduler default drives get_finished and takes bools
    s = vd.Scheduler(_FakeTier(vd.make_spec(), view, "fake"))
    j = s.store([vd.block_key(0)], [0])
    assert s.wait([j]) == {j: True}


def test_make_spec_overrides():
    spec = vd.make_spec(model="a/b", tp_size=4, tp_rank=3, pp_size=2, pp_rank=1, dtype="float16",
                        block_size=32, num_layers=6, num_groups=2, extra_config={"x": 1})
    vc = spec.vllm_config
    assert vc.model_config.model == "a/b" and vc.model_config.dtype == "float16"
    assert vc.parallel_config.tensor_parallel_size == 4 and vc.parallel_config.pipeline_parallel_size == 2
    assert vc.parallel_config.rank == 7 and vc.cache_config.block_size == 32
    assert spec.gpu_block_size == 32 and spec.hash_block_size == 32 and spec.block_size_factor == 1
    assert [len(g.layer_names) for g in spec.kv_cache_config.kv_cache_groups] == [3, 3]
    assert spec.extra_config == {"x": 1}
    with pytest.raises(TypeError):
        vd.make_spec(nonsense=1)


def test_general_plugins(tmp_path, monkeypatch, caplog):
    mod = tmp_path / "standin_plugin_mod.py"
    mod.write_text(
        "calls = []\n"
        "def register():\n"
        "    from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory\n"
        "    SecondaryTierFactory.register_tier('plugin_test_tier', 'vllm_fs_tier', 'FsPythonTier')\n"
        "    calls.append('register')\n"
        "def broken():\n"
        "    raise RuntimeError('plugin boom')\n")
    vd.make_entry_point_dist(str(tmp_path), "standin-plugin-test", {
        "vllm.general_plugins": {"good": "standin_plugin_mod:register", "bad": "standin_plugin_mod:broken",
                                 "missing": "standin_no_such_module:f"}})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(vllm.plugins, "plugins_loaded", False)
    try:
        called = vllm.plugins.load_general_plugins()
        assert "good" in called and "bad" in called and "missing" not in called
        assert "plugin_test_tier" in SecondaryTierFactory._registry
        assert "plugin boom" in caplog.text or "broken" in caplog.text or "bad" in caplog.text
        assert vllm.plugins.load_general_plugins() == {}  # once per process
        import standin_plugin_mod
        assert standin_plugin_mod.calls == ["register"]
    finally:
        SecondaryTierFactory._unregister_tier("plugin_test_tier")
        sys.modules.pop("standin_plugin_mod", None)


def test_is_standin():
    assert getattr(vllm, "STANDIN", False)
    assert "stand-in" in vllm.__doc__.lower()
