"""The adapter end to end for the host-pool layouts that reach it through
page buffer meta (NPU's page_first_kv_split MLA pool: separate K, V and
index buffers, no kv_buffer) and property tests of the call surface over
keys, indices and pool shapes (python3-hypothesis)."""
import mmap

import pytest

torch = pytest.importorskip("torch", reason="torch cannot be imported (apt-get install python3-torch)")
hypothesis = pytest.importorskip("hypothesis", reason="python3-hypothesis is not installed")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import hicache  # noqa: E402
import hicache.sglang as hs  # noqa: E402
from pools import KVPool  # noqa: E402


class KVSplitPool:
    """MLATokenToKVPoolHost in page_first_kv_split (NPU): the latent part
    (kv_lora_rank) and the rope part in buffers of their own, (size, L, 1,
    dim) each, optionally an indexer-key buffer; kv_buffer is None, and
    get_page_buffer_meta gives one segment per buffer and page."""

    def __init__(self, L=3, ps=4, pages=12, dims=(32, 8), index_dim=None, dtype=torch.bfloat16):
        self.layout, self.page_size, self.page_num, self.size = "page_first_kv_split", ps, pages, pages * ps
        self.kv_buffer = None
        self.dtype = dtype
        self._maps = []
        self.bufs = []
        for d in dims + ((index_dim,) if index_dim else ()):
            isz = torch.empty(0, dtype=dtype).element_size()
            m = mmap.mmap(-1, self.size * L * d * isz)
            self._maps.append(m)
            self.bufs.append(torch.frombuffer(m, dtype=dtype, count=self.size * L * d).view(self.size, L, 1, d))
        self.k_buffer, self.v_buffer = self.bufs[0], self.bufs[1]

    def get_hybrid_pool_buffer(self):
        return list(self.bufs)

    def get_page_buffer_meta(self, indices):
        ptrs, sizes = [], []
        for i in indices[:: self.page_size].tolist():
            for b in self.bufs:
                per_page = b[0].numel() * b.element_size() * self.page_size
                ptrs.append(b.data_ptr() + (i // self.page_size) * per_page)
                sizes.append(per_page)
        return ptrs, sizes

    def page(self, p):
        ps = self.page_size
        return torch.cat([b[p * ps:(p + 1) * ps].reshape(-1).view(torch.int16) for b in self.bufs])


def cfg(tmp, mla=True, **extra):
    e = {"interface_v1": 1, "backend": "file", "dirs": [str(tmp)]}
    e.update(extra)
    return hs.HiCacheStorageConfig(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                                   is_mla_model=mla, enable_storage_metrics=False, is_page_first_layout=True,
                                   model_name="org/model", extra_config=e)


def slots(pages, ps):
    return torch.cat([torch.arange(p * ps, (p + 1) * ps) for p in pages]).to(torch.int64)


def test_page_first_kv_split_with_index_buffer_refused(tmp_path):
    """A third buffer would have no object name of its own: refused at
    registration, never stored under another buffer's name."""
    b = hs.HiCacheHicache(cfg(tmp_path), {})
    with pytest.raises(ValueError, match="3 buffers"):
        b.register_mem_pool_host(KVSplitPool(index_dim=16))
    b.close()


@pytest.mark.parametrize("index_dim", [None])
def test_page_first_kv_split_round_trip(tmp_path, index_dim):
    hp = KVSplitPool(index_dim=index_dim)
    for i, b in enumerate(hp.bufs):
        b.view(-1).copy_(torch.arange(b.numel()).to(torch.float32).mul_(i + 1).to(b.dtype))
    b = hs.HiCacheHicache(cfg(tmp_path), {})
    b.register_mem_pool_host(hp)
    assert b.store.pool_info("kv")["objects"] == len(hp.bufs)
    ks = hicache.key_chain(list(range(4 * 5)), 4)
    want = [hp.page(p).clone() for p in range(5)]
    assert b.batch_set_v1(ks, slots(range(5), 4)) == [True] * 5
    for buf in hp.bufs:
        buf.zero_()
    assert b.batch_get_v1(ks, slots(range(6, 11), 4)) == [True] * 5
    for i in range(5):
        assert torch.equal(hp.page(6 + i), want[i])
    # a second instance, restarted, reads them too
    b.close()
    hp2 = KVSplitPool(index_dim=index_dim)
    b2 = hs.HiCacheHicache(cfg(tmp_path), {})
    b2.register_mem_pool_host(hp2)
    assert b2.batch_get_v1(ks, slots(range(5), 4)) == [True] * 5
    assert all(torch.equal(hp2.page(i), want[i]) for i in range(5))
    b2.close()


@pytest.mark.parametrize("mla", [False, True])
def test_page_head_and_direct_round_trip(tmp_path, mla):
    """page_head (MHA only in SGLang) and page_first_direct in SGLang's
    shapes, with pipeline ranks in the names."""
    for layout in (["page_first_direct"] if mla else ["page_head", "page_first_direct"]):
        hp = KVPool(layout, mla=mla, ps=8, pages=10)
        hp.fill(3)
        c = cfg(tmp_path / layout, mla=mla)
        c.pp_rank, c.pp_size = 1, 2
        b = hs.HiCacheHicache(c, {})
        b.register_mem_pool_host(hp)
        ks = hicache.key_chain(list(range(8 * 4)), 8)
        want = [hp.get_data_page(p * 8).clone() for p in range(4)]
        assert b.batch_set_v1(ks, slots(range(4), 8)) == [True] * 4
        hp.kv_buffer.zero_()
        assert b.batch_get_v1(ks, slots(range(5, 9), 8)) == [True] * 4
        for i in range(4):
            assert torch.equal(want[i].view(torch.int16), hp.get_data_page((5 + i) * 8).view(torch.int16))
        b.close()


# ---- properties of the call surface ----

_BACKEND = {}


def backend(tmp_path_factory):
    if "b" not in _BACKEND:
        hp = KVPool("page_first", ps=4, pages=16)
        hp.fill(1)
        b = hs.HiCacheHicache(cfg(tmp_path_factory.mktemp("prop"), mla=False, backend="mem"), {})
        b.register_mem_pool_host(hp)
        _BACKEND["b"] = (b, hp)
    return _BACKEND["b"]


key_text = st.text(min_size=1, max_size=40)
index_value = st.one_of(st.integers(-5, 2 ** 65), st.floats(allow_nan=True), st.booleans())


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(keys=st.lists(key_text, max_size=6), indices=st.lists(index_value, max_size=30))
def test_any_keys_and_indices_answer_in_shape(tmp_path_factory, keys, indices):
    b, hp = backend(tmp_path_factory)
    for fn in (b.batch_set_v1, b.batch_get_v1):
        r = fn(keys, indices)
        assert isinstance(r, list) and len(r) == len(keys) and all(isinstance(x, bool) for x in r)
        # only whole, in-range host pages may ever succeed
        ok_shape = len(indices) == 4 * len(keys) and all(
            type(v) is int and 0 <= v < 64 for v in indices)
        if any(r):
            assert ok_shape
    assert isinstance(b.batch_exists(keys), int)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(pages=st.lists(st.integers(0, 15), min_size=1, max_size=8, unique=True), seed=st.integers(0, 10 ** 4))
def test_whole_pages_round_trip(tmp_path_factory, pages, seed):
    b, hp = backend(tmp_path_factory)
    # key i names (seed, pages[:i+1]); its bytes are page pages[i] of fill(seed)
    ks = hicache.key_chain([seed * 100000 + p * 4 + j for p in pages for j in range(4)], 4)
    hp.fill(seed)
    want = [hp.get_data_page(p * 4).clone() for p in pages]
    assert b.batch_set_v1(ks, slots(pages, 4)) == [True] * len(pages)
    dst = [(p + 3) % 16 for p in pages]
    assert b.batch_get_v1(ks, slots(dst, 4)) == [True] * len(pages)
    for w, p in zip(want, dst):
        assert torch.equal(w.view(torch.int16), hp.get_data_page(p * 4).view(torch.int16))
