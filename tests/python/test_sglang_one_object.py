"""kv_one_object_max_bytes through the SGLang adapter, called as SGLang
calls it (extra config, register_mem_pool_host, batch_*_v1, v2 side
pools, the legacy tensor API): page_first and page_first_direct MHA pages
of at most that many bytes become one object of the flat page (K then V)
named "<key><suffix>", byte for byte SGLang's flat page; without it (the
default) they stay "_k"/"_v"; MLA keeps its "_k"; instances that differ
in it read each other's pages as misses, never as data; a bad value stops
the start naming the key."""
import glob
import os

import pytest

torch = pytest.importorskip("torch", reason="torch cannot be imported (apt-get install python3-torch)")

import hicache  # noqa: E402
import hicache.sglang as hs  # noqa: E402
from pools import KVPool  # noqa: E402

SFX = "_org-model_0_1"
# KVPool's defaults (2 layers, 2 heads of 16 bf16, 4 tokens): K and V.
PAGE_BYTES = 2 * 2 * 2 * 16 * 2 * 4


def cfg(tmp, mla=False, **extra):
    e = {"backend_name": "hicache", "module_path": "hicache.sglang", "class_name": "HiCacheHicache",
         "interface_v1": 1, "backend": "file", "dirs": [str(tmp)]}
    e.update(extra)
    return hs.HiCacheStorageConfig(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0,
                                   attn_cp_size=1, is_mla_model=mla, enable_storage_metrics=False,
                                   is_page_first_layout=True, model_name="org/model", extra_config=e)


def keys(n, seed=0):
    return hicache.key_chain([seed * 100000 + i for i in range(n * 4)], 4)


def slots(pages, ps=4):
    return torch.cat([torch.arange(p * ps, (p + 1) * ps) for p in pages]).to(torch.int64)


def objects(d):
    return {os.path.basename(p): p for p in glob.glob(os.path.join(str(d), "*", "*"))
            if not os.path.basename(p).startswith(".")}


def raw(t):
    return t.contiguous().view(torch.int16).numpy().tobytes()


def backend(tmp, hp, mla=False, **extra):
    b = hs.HiCacheHicache(cfg(tmp, mla=mla, **extra), {})
    b.register_mem_pool_host(hp)
    return b


@pytest.mark.parametrize("layout", ["page_first", "page_first_direct"])
@pytest.mark.parametrize("limit", [0, PAGE_BYTES - 1, PAGE_BYTES, 1 << 20])
def test_names_and_round_trip(tmp_path, layout, limit):
    one = limit >= PAGE_BYTES
    hp = KVPool(layout)
    hp.fill(5)
    extra = {"kv_one_object_max_bytes": limit} if limit else {}
    b = backend(tmp_path, hp, **extra)
    info = b.store.pool_info("kv")
    assert info["page_bytes"] == PAGE_BYTES
    assert info["objects"] == (1 if one else 2)
    if one:
        assert not info["zero_copy"]  # the flat page goes through a bounce slot
    ks = keys(3)
    src = [0, 5, 9]
    want = [hp.get_data_page(p * 4).clone() for p in src]
    assert b.batch_set_v1(ks, slots(src)) == [True] * 3
    objs = objects(tmp_path)
    for k, w in zip(ks, want):
        data = raw(w)
        if one:
            # SGLang's flat page (get_data_page: K then V), as HiCacheFile
            # would store it, then hicache's trailer.
            assert set(n for n in objs if n.startswith(k)) == {k + SFX}
            with open(objs[k + SFX], "rb") as f:
                assert f.read(len(data)) == data
        else:
            assert set(n for n in objs if n.startswith(k)) == {k + SFX + "_k", k + SFX + "_v"}
    assert len(objs) == 3 * (1 if one else 2)

    hp.kv_buffer.zero_()
    dst = [2, 7, 11]
    assert b.batch_exists(ks) == 3
    assert b.batch_get_v1(ks, slots(dst)) == [True] * 3
    for w, p in zip(want, dst):
        assert raw(hp.get_data_page(p * 4)) == raw(w)
    # The legacy flat-page API names pages alike (its twin store has the
    # same config).
    flat = b.get(ks[1])
    assert flat is not None and raw(flat) == raw(want[1])
    b.close()

    # A restarted instance of the same config reads them.
    hp2 = KVPool(layout)
    b2 = backend(tmp_path, hp2, **extra)
    assert b2.batch_get_v1(ks, slots([1, 3, 4])) == [True] * 3
    for w, p in zip(want, [1, 3, 4]):
        assert raw(hp2.get_data_page(p * 4)) == raw(w)
    b2.close()


@pytest.mark.parametrize("layout", ["page_first", "page_first_direct"])
def test_split_and_one_object_are_misses_to_each_other(tmp_path, layout):
    hp = KVPool(layout)
    hp.fill(9)
    split = backend(tmp_path, hp)
    one = backend(tmp_path, hp, kv_one_object_max_bytes=PAGE_BYTES)
    a, c = keys(2, seed=1), keys(2, seed=2)
    assert split.batch_set_v1(a, slots([0, 1])) == [True] * 2
    assert one.batch_set_v1(c, slots([2, 3])) == [True] * 2
    before = hp.kv_buffer.clone()
    for reader, ks in ((one, a), (split, c)):
        assert reader.batch_exists(ks) == 0
        assert reader.batch_get_v1(ks, slots([10, 11])) == [False] * 2
        assert reader.get(ks[0]) is None
    # nothing reached the missed pages
    assert torch.equal(hp.kv_buffer.view(torch.int16), before.view(torch.int16))
    assert all(s["corrupt"] == 0 for s in (split.hicache_stats(), one.hicache_stats()))
    split.close()
    one.close()


def test_side_kv_pool_and_mla(tmp_path):
    """A KV side pool (v2) is one "_<pool>" object too; an MLA anchor is
    one buffer, so it keeps its zero-copy "_k" object."""
    hp = KVPool("page_first", mla=True)
    hp.fill(3)
    draft = KVPool("page_first")
    draft.fill(4)
    b = backend(tmp_path, hp, mla=True, kv_one_object_max_bytes=1 << 20)
    b.register_mem_host_pool_v2(draft, "draft")
    assert b.store.pool_info("kv")["objects"] == 1
    assert b.store.pool_info("draft")["objects"] == 1
    ks = keys(2)
    t = [hs.PoolTransfer(name="kv", host_indices=slots([0, 1]), keys=ks),
         hs.PoolTransfer(name="draft", host_indices=slots([0, 1]), keys=ks)]
    assert b.batch_set_v2(t) == {"kv": [True] * 2, "draft": [True] * 2}
    names = set(objects(tmp_path))
    # MLA pools are rank-replicated: no TP ranks in the suffix.
    assert names == {k + "_org-model" + c for k in ks for c in ("_k", "_draft")}
    want = [draft.get_data_page(p * 4).clone() for p in (0, 1)]
    draft.kv_buffer.zero_()
    r = b.batch_get_v2([hs.PoolTransfer(name="draft", host_indices=slots([5, 6]), keys=ks)])
    assert r == {"draft": [True] * 2}
    assert [raw(draft.get_data_page(p * 4)) for p in (5, 6)] == [raw(w) for w in want]
    b.close()


@pytest.mark.parametrize("bad", [-1, 1.5, "64K", True, 1 << 31])
def test_bad_value_stops_the_start(tmp_path, bad):
    with pytest.raises(hicache.Error, match="kv_one_object_max_bytes"):
        hs.HiCacheHicache(cfg(tmp_path, kv_one_object_max_bytes=bad), {})
