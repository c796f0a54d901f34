import glob
import importlib
import os
import threading
import time

import pytest

torch = pytest.importorskip("torch", reason="torch cannot be imported (apt-get install python3-torch)")

import hicache  # noqa: E402
import hicache.sglang as hs  # noqa: E402
from pools import KVPool, MambaPool, SWAPool  # noqa: E402

LAYOUTS = ["layer_first", "page_first", "page_first_direct", "page_head"]


def cfg(tmp, mla=False, rank=0, size=1, **extra):
    e = {"backend_name": "hicache", "module_path": "hicache.sglang", "class_name": "HiCacheHicache",
         "interface_v1": 1, "backend": "file", "dirs": [str(tmp)]}
    e.update(extra)
    return hs.HiCacheStorageConfig(tp_rank=rank, tp_size=size, pp_rank=0, pp_size=1, attn_cp_rank=0,
                                   attn_cp_size=1, is_mla_model=mla, enable_storage_metrics=False,
                                   is_page_first_layout=True, model_name="org/model", extra_config=e)


def keys(n, seed=0):
    return hicache.key_chain([seed * 100000 + i for i in range(n * 4)], 4)


def slots(pages, ps):
    return torch.cat([torch.arange(p * ps, (p + 1) * ps) for p in pages]).to(torch.int64)


def objects(d):
    return {os.path.basename(p): p for p in glob.glob(os.path.join(str(d), "*", "*")) if not os.path.basename(p).startswith(".")}


def payload(path, n):
    with open(path, "rb") as f:
        return f.read(n)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mla", [False, True])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_layout_identity(tmp_path, layout, mla, aligned, dtype):
    hp = KVPool(layout, mla=mla, dtype=dtype, aligned=aligned)
    hp.fill()
    b = hs.HiCacheHicache(cfg(tmp_path, mla=mla), {})
    b.register_mem_pool_host(hp)
    info = b.store.pool_info("kv")
    pool = b._pools["kv"].pool
    zc = layout in ("page_first", "page_first_direct") and (
        not b.store.direct_io or pool.aligned(b.store.alignment))
    if aligned and not mla and b.store.direct_io:
        assert pool.aligned(b.store.alignment) or layout not in ("page_first", "page_first_direct")
    assert info["zero_copy"] == zc
    ks = keys(3)
    assert b.batch_set_v1(ks, slots([0, 5, 9], hp.page_size)) == [True] * 3
    objs = objects(tmp_path)
    sfx = "_org-model" if mla else "_org-model_0_1"
    for k, p in zip(ks, [0, 5, 9]):
        flat = hp.get_data_page(p * hp.page_size)
        raw = flat.contiguous().view(torch.uint8).numpy().tobytes() if dtype != torch.bfloat16 else \
            bytes(flat.contiguous().view(torch.int16).numpy().tobytes())
        # The objects of a page follow its layout, zero-copy or not (a
        # bounce pool copies each object through its slot).
        if layout in ("page_first", "page_first_direct"):
            half = len(raw) // (1 if mla else 2)
            parts = [("_k", raw[:half])] + ([] if mla else [("_v", raw[half:])])
        else:
            parts = [("", raw)]
        for comp, data in parts:
            name = k + sfx + comp
            assert name in objs, name
            assert payload(objs[name], len(data)) == data
    assert len(objs) == 3 * len(parts)
    b.close()


@pytest.mark.parametrize("ps", [1, 2, 64])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip(tmp_path, ps, layout):
    n = 130 if ps == 1 else 6
    hp = KVPool(layout, ps=ps, pages=2 * n + 4, D=8)
    hp.fill(7)
    b = hs.HiCacheHicache(cfg(tmp_path), {})
    b.register_mem_pool_host(hp)
    ks = keys(n, ps)
    src = list(range(0, 2 * n, 2))  # non-contiguous slots
    want = [hp.get_data_page(p * ps).clone() for p in src]
    assert all(b.batch_set_v1(ks, slots(src, ps)))
    hp.kv_buffer.zero_()
    dst = list(range(1, 2 * n, 2))
    assert b.batch_get_v1(ks, slots(dst, ps)) == [True] * n
    for w, p in zip(want, dst):
        assert torch.equal(w.view(torch.int16), hp.get_data_page(p * ps).view(torch.int16))
    b.close()


def test_mla_rank_nonzero_writes_nothing(tmp_path):
    hp = KVPool("page_first", mla=True)
    hp.fill()
    b = hs.HiCacheHicache(cfg(tmp_path, mla=True, rank=1, size=2), {})
    b.register_mem_pool_host(hp)
    assert b.batch_set_v1(keys(4), slots(range(4), 4)) == [True] * 4
    assert objects(tmp_path) == {}
    b.close()


def test_semantics(tmp_path):
    hp = KVPool("page_first")
    hp.fill()
    b = hs.HiCacheHicache(cfg(tmp_path), {})
    b.register_mem_pool_host(hp)
    ks = keys(3)
    assert all(b.batch_set_v1(ks[:2], slots([0, 1], 4)))
    assert b.batch_exists(ks) == 2
    assert b.batch_exists([ks[2]] + ks[:2]) == 0
    before = hp.kv_buffer.clone()
    assert b.batch_get_v1(ks, slots([3, 4, 5], 4)) == [True, True, False]
    assert torch.equal(hp.kv_buffer[:, 20:24].view(torch.int16), before[:, 20:24].view(torch.int16))
    assert b.batch_get_v1(ks, slots([3, 4], 4)) == [False] * 3
    assert b.batch_set_v1(ks, slots([0], 4)) == [False] * 3
    assert b.batch_get_v1(ks, slots([3, 4, 999], 4)) == [False] * 3
    r = b.batch_get_v2([hs.PoolTransfer(name="nope", host_indices=torch.arange(2), keys=ks[:2])])
    assert r == {"nope": [False, False]}
    # legacy tensor API: the same objects as v1
    flat = b.get(ks[0])
    assert flat is not None and torch.equal(flat.view(torch.int16), hp.get_data_page(0).view(torch.int16))
    assert b.get(ks[2]) is None
    assert b.exists(ks[0]) and not b.exists(ks[2])
    assert b.set("p0", hp.get_data_page(8).clone())
    assert b.exists("p0")
    b.clear()
    assert b.batch_exists(ks) == 0
    assert b.get_stats() is None or hs.StorageMetrics is not None
    b.close()


def test_config_errors(tmp_path):
    c = cfg(tmp_path)
    c.extra_config["interface_v1"] = 0
    with pytest.raises(ValueError, match="interface_v1"):
        hs.HiCacheHicache(c, {})
    c = cfg(tmp_path, no_such_key=1)
    with pytest.raises(hicache.Error, match="no_such_key"):
        hs.HiCacheHicache(c, {})
    hs.HiCacheHicache(cfg(tmp_path, prefetch_threshold=256, tp_lcm_size=2), {}).close()


@pytest.mark.parametrize("temporal", [(4, 8), None])
def test_v2_mamba_swa(tmp_path, temporal):
    hp = KVPool("page_first")
    hp.fill()
    mp = MambaPool(temporal=temporal, convs=((8, 4), (2, 16)))
    sp = SWAPool()
    for buf in mp.buffers():
        buf.copy_(torch.randn(buf.shape).to(buf.dtype))
    sp.k.copy_(torch.randn(sp.k.shape))
    sp.v.copy_(torch.randn(sp.v.shape))
    want_m = [t.clone() for t in mp.buffers()]
    want_s = (sp.k.clone(), sp.v.clone())
    b = hs.HiCacheHicache(cfg(tmp_path), {})
    b.register_mem_pool_host(hp)
    b.register_mem_host_pool_v2(hp, hs.PoolName.KV)
    b.register_mem_host_pool_v2(mp, hs.PoolName.MAMBA)
    b.register_mem_host_pool_v2(sp, hs.PoolName.SWA)
    ks = keys(4)
    assert all(b.batch_set_v1(ks, slots(range(4), 4)))
    same = ks[1:3]  # the same keys in mamba and swa
    t = [hs.PoolTransfer(name=hs.PoolName.MAMBA, host_indices=torch.tensor([3, 7]), keys=same),
         hs.PoolTransfer(name=hs.PoolName.SWA, host_indices=slots([2, 6], 4), keys=same)]
    assert b.batch_set_v2(t) == {"mamba": [True, True], "swa": [True, True]}
    names = objects(tmp_path)
    # One object per buffer whether the pool moves zero-copy or (strides
    # below the O_DIRECT alignment) through bounce slots.
    assert sum(n.endswith("_mamba_conv_1") for n in names) == 2
    assert sum(n.endswith("_mamba_temporal") for n in names) == (2 if temporal else 0)
    assert sum(n.endswith("_swa_k") for n in names) == 2
    for buf in mp.buffers():
        buf.zero_()
    sp.k.zero_()
    sp.v.zero_()
    g = [hs.PoolTransfer(name="mamba", host_indices=torch.tensor([3, 7]), keys=same),
         hs.PoolTransfer(name="swa", host_indices=slots([2, 6], 4), keys=same)]
    assert b.batch_get_v2(g) == {"mamba": [True, True], "swa": [True, True]}
    for w, buf in zip(want_m, mp.buffers()):
        assert torch.equal(w[[3, 7]].view(torch.uint8) if w.dtype == torch.float32 else w[[3, 7]].view(torch.int16),
                           buf[[3, 7]].view(torch.uint8) if buf.dtype == torch.float32 else buf[[3, 7]].view(torch.int16))
    assert torch.equal(want_s[0][[2, 6]].view(torch.int16), sp.k[[2, 6]].view(torch.int16))
    # length mismatch: that pool all False, the other still transfers
    g = [hs.PoolTransfer(name="mamba", host_indices=torch.tensor([3]), keys=same),
         hs.PoolTransfer(name="swa", host_indices=slots([2, 6], 4), keys=same)]
    assert b.batch_get_v2(g) == {"mamba": [False, False], "swa": [True, True]}
    # exists_v2 matrix: mamba has pages 1, 2 of 4
    A, T = hs.PoolHitPolicy.ALL_PAGES, hs.PoolHitPolicy.TRAILING_PAGES
    r = b.batch_exists_v2(ks, [hs.PoolTransfer(name="mamba", keys=None, hit_policy=A)])
    assert r.kv_hit_pages == 0  # gap at the start
    r = b.batch_exists_v2(ks, [hs.PoolTransfer(name="mamba", keys=["x"], hit_policy=T)])
    assert r.kv_hit_pages == 3 and r.extra_pool_hit_pages == {"mamba": 3}
    r = b.batch_exists_v2(ks, [hs.PoolTransfer(name="mamba", keys=["x", "y"], hit_policy=T)])
    assert r.kv_hit_pages == 3
    r = b.batch_exists_v2(ks, [hs.PoolTransfer(name="mamba", keys=["x"] * 3, hit_policy=T)])
    assert r.kv_hit_pages == 0
    r = b.batch_exists_v2(keys(4, 9), [hs.PoolTransfer(name="mamba", keys=["x"], hit_policy=T)])
    assert r.kv_hit_pages == 0  # zero KV hits
    r = b.batch_exists_v2(ks, [])
    assert r.kv_hit_pages == 4
    b.close()


def test_loader(tmp_path):
    c = cfg(tmp_path)
    e = c.extra_config
    cls = getattr(importlib.import_module(e["module_path"]), e["class_name"])
    assert issubclass(cls, hs.HiCacheStorage)
    b = cls(c, {})
    hp = KVPool("page_first_direct")
    b.register_mem_pool_host(hp)
    assert b.batch_set_v1(keys(1), slots([0], 4)) == [True]
    b.close()


def test_concurrency(tmp_path):
    hp = KVPool("page_first", pages=96, D=32)
    hp.fill(3)
    b = hs.HiCacheHicache(cfg(tmp_path), {})
    b.register_mem_pool_host(hp)
    ks = keys(32)
    want = hp.kv_buffer.clone()
    assert all(b.batch_set_v1(ks, slots(range(32), 4)))
    stop = time.time() + 10
    errors = []

    def prefetch():
        while time.time() < stop:
            if b.batch_exists(ks) != 32:
                errors.append("exists")

    def io():
        while time.time() < stop:
            if not all(b.batch_get_v1(ks, slots(range(32, 64), 4))):
                errors.append("get")
            if not torch.equal(hp.kv_buffer[:, 128:256].view(torch.int16), want[:, :128].view(torch.int16)):
                errors.append("content")

    def backup():
        i = 0
        while time.time() < stop:
            i += 1
            if not all(b.batch_set_v1(keys(8, 1000 + i), slots(range(64, 72), 4))):
                errors.append("set")

    th = [threading.Thread(target=f) for f in (prefetch, io, backup)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert errors == []
    b.close()


def test_restart_and_interop(tmp_path):
    hp = KVPool("page_first")
    hp.fill()
    b = hs.HiCacheHicache(cfg(tmp_path), {})
    b.register_mem_pool_host(hp)
    ks = keys(5)
    assert all(b.batch_set_v1(ks, slots(range(5), 4)))
    b.close()
    b2 = hs.HiCacheHicache(cfg(tmp_path), {})
    b2.register_mem_pool_host(KVPool("page_first"))
    assert b2.batch_exists(ks) == 5
    b2.close()
    rep = hicache.fsck([str(tmp_path)])
    assert rep["ok"] == 10 and rep["corrupt"] == 0 and rep["foreign"] == 0
    assert rep["misplaced"] == 0 and rep["gone"] == 0
    # a C store of the same config, its own pool: the adapter tags its
    # pages with the pool's element type, so only a pool of that type reads
    # them (a 2-byte pool of no stated type reads misses, never bf16 bytes)
    pool = hicache.Pool.create_kv(layers=2, heads=2, head_dim=16, elem_bytes=2, page_size=4, pages=8)
    with hicache.Store({"dirs": [str(tmp_path)], "model": "org/model"}) as st:
        st.register("kv", pool, anchor=True)
        assert st.get(ks, range(5))[0] == 0
        st.unregister("kv")
        st.register("kv", pool, anchor=True, elem_type="bfloat16")
        hits, _ = st.get(ks, range(5))
        assert hits == 5
        assert bytes(pool.gather(2)) == hp.get_data_page(8).view(torch.int16).numpy().tobytes()
    pool.close()


def test_keys_equal_hashlib():
    import hashlib

    toks = list(range(1000, 1000 + 64 * 3))
    prior, want = b"", []
    for i in range(3):
        h = hashlib.sha256(prior)
        for t in toks[i * 64:(i + 1) * 64]:
            h.update(t.to_bytes(4, "little"))
        prior = h.digest()
        want.append(h.hexdigest())
    assert hicache.key_chain(toks, 64) == want
