"""Side pools under O_DIRECT, and batch_exists_v2 against SGLang's
contract (written out in contract() below).

A zero-copy object is written from and read into the pool's own memory, so
under O_DIRECT every segment's base and stride must be multiples of the
store's alignment; SGLang's Mamba and SWA pools often have strides of a few
hundred bytes: those must go through bounce slots (stats count the bytes)
and still round-trip exactly. Without O_DIRECT, or with aligned strides, the
same pools are zero-copy."""
import itertools

import pytest

torch = pytest.importorskip("torch", reason="torch cannot be imported (apt-get install python3-torch)")

import hicache.sglang as hs  # noqa: E402
from pools import KVPool, MambaPool, SWAPool  # noqa: E402
from test_sglang import cfg, keys, slots  # noqa: E402


def fill(*bufs):
    for i, b in enumerate(bufs):
        b.view(-1).copy_((torch.arange(b.numel()) * 7919 + i * 104729).remainder(30011).to(b.dtype))


def same(a, b):
    return torch.equal(a.contiguous().view(-1).view(torch.uint8), b.contiguous().view(-1).view(torch.uint8))


def backend(tmp_path, direct, mp, sp):
    b = hs.HiCacheHicache(cfg(tmp_path, use_direct_io=direct), {})
    if direct and not b.store.direct_io:
        b.close()
        pytest.skip("%s does not take O_DIRECT" % tmp_path)
    hp = KVPool("page_first")
    b.register_mem_pool_host(hp)
    b.register_mem_host_pool_v2(mp, hs.PoolName.MAMBA)
    b.register_mem_host_pool_v2(sp, hs.PoolName.SWA)
    return b


def round_trip(b, mp, sp):
    bufs = mp.buffers() + [sp.k, sp.v]
    fill(*bufs)
    want = [t.clone() for t in bufs]
    ks = keys(3, 5)
    t = [hs.PoolTransfer(name="mamba", host_indices=torch.tensor([1, 4, 9]), keys=ks),
         hs.PoolTransfer(name="swa", host_indices=slots([1, 4, 9], sp.page_size), keys=ks)]
    assert b.batch_set_v2(t) == {"mamba": [True] * 3, "swa": [True] * 3}
    for x in bufs:
        x.zero_()
    t = [hs.PoolTransfer(name="mamba", host_indices=torch.tensor([2, 5, 11]), keys=ks),
         hs.PoolTransfer(name="swa", host_indices=slots([2, 5, 11], sp.page_size), keys=ks)]
    assert b.batch_get_v2(t) == {"mamba": [True] * 3, "swa": [True] * 3}
    for w, x in zip(want, bufs):
        assert same(w[[1, 4, 9]], x[[2, 5, 11]])
        assert not x[[0, 1, 3, 4]].view(-1).view(torch.uint8).any()  # nothing else written


@pytest.mark.parametrize("direct", [True, False])
def test_small_strides(tmp_path, direct):
    mp = MambaPool(temporal=(4, 8), convs=((8, 4), (2, 16)))  # slot strides 256, 128, 128 bytes
    sp = SWAPool(H=2, D=8)  # 128-byte pages
    b = backend(tmp_path, direct, mp, sp)
    zc = not direct
    assert b.store.pool_info("kv")["zero_copy"]
    for name in ("mamba", "swa"):
        assert b.store.pool_info(name)["zero_copy"] == zc, name
    round_trip(b, mp, sp)
    # bounce_bytes: the slots the store holds (whole store); the anchor is
    # zero-copy either way, so only the side pools can have made them.
    bounce = b.store.stats()["bounce_bytes"]
    need = max(b.store.pool_info(n)["page_bytes"] for n in ("mamba", "swa"))
    assert (bounce >= need) if direct else bounce == 0, bounce
    b.close()


def test_aligned_strides_zero_copy(tmp_path):
    # Every slot of every buffer 4 KiB (mmap memory, page-aligned bases).
    mp = MambaPool(temporal=(32, 16), convs=((64, 16),))
    sp = SWAPool(ps=4, H=4, D=128)
    b = backend(tmp_path, True, mp, sp)
    for name in ("mamba", "swa"):
        assert b.store.pool_info(name)["zero_copy"], name
    round_trip(b, mp, sp)
    assert b.store.stats()["bounce_bytes"] == 0
    b.close()


# ---- batch_exists_v2: SGLang's hit policies, written out ----

def contract(kv_present, n, transfers):
    """kv = longest KV prefix; per transfer, until the result is 0 (an
    unregistered pool gives 0): ALL_PAGES: the first page in [0, kv) the
    pool lacks (kv if none); TRAILING_PAGES, N = max(1, len(keys)): the
    largest p in (0, kv] with pages [max(0, p - N), p) present (0 if none),
    so a prefix shorter than the window counts; the result is the minimum.
    (SGLang's HiCacheStorage.batch_exists_v2 with its hit policies.)"""
    kv = 0
    while kv < n and kv in kv_present:
        kv += 1
    final = kv
    for present, policy, nkeys in transfers:
        if final == 0:
            break
        if present is None:
            final = 0
        elif policy == "all_pages":
            b = next((p for p in range(kv) if p not in present), kv)
        else:
            w = max(1, nkeys)
            b = next((p for p in range(kv, 0, -1) if all(q in present for q in range(max(0, p - w), p))), 0)
        final = min(final, b)
    return final


N = 6
KV_SETS = [set(range(N)), set(range(N)) - {4}, set()]
SIDE_SETS = [set(range(N)), set(), set(range(1, N)), set(range(N)) - {2}, set(range(N - 1)), {N - 1},
             {2, 3}, {0, 1, 3, 4}]
POLICIES = [("all_pages", 0), ("trailing_pages", 1), ("trailing_pages", 2), ("trailing_pages", 3)]


def test_exists_v2_contract(tmp_path):
    mp, sp = MambaPool(slots=N), SWAPool(pages=N)
    b = backend(tmp_path, False, mp, sp)
    seed = 100
    checked = 0
    cases = list(itertools.product(range(len(KV_SETS)), range(len(SIDE_SETS)), POLICIES))
    cases += [(0, i, POLICIES[1]) for i in range(len(SIDE_SETS))]
    for ki, si, (pol, nk) in cases:
        seed += 1
        ks = keys(N, seed)
        kvp, mam = KV_SETS[ki], SIDE_SETS[si]
        swa = SIDE_SETS[(si + 3) % len(SIDE_SETS)]  # a second pool, another pattern
        kv_idx = sorted(kvp)
        if kv_idx:
            assert all(b.batch_set_v1([ks[i] for i in kv_idx], slots(kv_idx, 4)))
        for name, present, ps in (("mamba", mam, 1), ("swa", swa, sp.page_size)):
            idx = sorted(present)
            if idx:
                t = hs.PoolTransfer(name=name, host_indices=slots(idx, ps), keys=[ks[i] for i in idx])
                assert b.batch_set_v2([t]) == {name: [True] * len(idx)}
        for transfers in ([("mamba", mam, pol, nk)],
                          [("mamba", mam, pol, nk), ("swa", swa, "trailing_pages", 2)],
                          [("swa", swa, "all_pages", 0), ("mamba", mam, pol, nk)],
                          [("mamba", mam, pol, nk), ("indexer", None, "all_pages", 0)]):
            pts = [hs.PoolTransfer(name=nm, keys=(["k"] * c if c else None), hit_policy=hs.PoolHitPolicy(p))
                   for nm, _, p, c in transfers]
            r = b.batch_exists_v2(ks, pts)
            want = contract(kvp, N, [(s, p, c) for _, s, p, c in transfers])
            assert r.kv_hit_pages == want, (sorted(kvp), transfers, r)
            checked += 1
    assert b.batch_exists_v2(ks, []).kv_hit_pages == contract(kvp, N, [])
    assert checked == 4 * len(cases)
    b.close()
