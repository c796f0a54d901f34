"""Hostile and unusual calls against the Python package and the SGLang
adapter, one case a process (test_hostile.py runs each through
`python3 hostile_cases.py CASE DIR`): a crash or a hang is that case's
recorded failure, not the end of the run. A case passes by returning; it
fails by raising (exit 1) or dying (a signal).

What each case holds is the contract of docs/SGLANG.md ("What the adapter
refuses"): no page shared between what must not share KV, no caller's
mistake reaching C, no exception into SGLang's threads."""
import glob
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import hicache  # noqa: E402
import hicache.sglang as hs  # noqa: E402
from hicache import sglang_names  # noqa: E402
from pools import KVPool, MambaPool, SWAPool  # noqa: E402

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def expect(exc, fn, *args, **kwargs):
    """fn(*args) raises exc (a class or tuple), and nothing else."""
    try:
        fn(*args, **kwargs)
    except exc as e:
        return e
    except BaseException as e:
        raise AssertionError("%s raised %s: %s, not %s" % (fn.__name__, type(e).__name__, e, exc)) from e
    raise AssertionError("%s did not raise %s" % (getattr(fn, "__name__", fn), exc))


def config(d, model="org/model", rank=0, size=1, pp=(0, 1), cp=(0, 1), mla=False, **fields):
    extra = {"interface_v1": 1, "backend": fields.pop("backend", "file")}
    if extra["backend"] == "file":
        extra["dirs"] = [str(d)]
    extra.update(fields.pop("extra", {}))
    c = hs.HiCacheStorageConfig(tp_rank=rank, tp_size=size, pp_rank=pp[0], pp_size=pp[1], attn_cp_rank=cp[0],
                                attn_cp_size=cp[1], is_mla_model=mla, enable_storage_metrics=False,
                                is_page_first_layout=True, model_name=model, extra_config=extra)
    for k, v in fields.items():
        setattr(c, k, v)  # the newer SGLang's fields, feature-detected
    return c


def keys(n, seed=0):
    return hicache.key_chain([seed * 100000 + i for i in range(n * 4)], 4)


def slots(pages, ps=4):
    return torch.cat([torch.arange(p * ps, (p + 1) * ps) for p in pages]).to(torch.int64)


def names(d):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(str(d), "*", "*"))
                  if not os.path.basename(p).startswith("."))


def adapter(d, hp=None, **kw):
    b = hs.HiCacheHicache(config(d, **kw), {})
    b.register_mem_pool_host(hp if hp is not None else KVPool("page_first"))
    return b


def page_bytes(hp, page):
    return hp.get_data_page(page * hp.page_size).view(torch.uint8).clone()


# ---- 1. every parallel rank in the name ----


@case
def pp_stages_do_not_share(d):
    """Stage 1 of PP=2 must not read stage 0's layers for the same prefix."""
    ks = keys(4)
    s0, s1 = KVPool("page_first"), KVPool("page_first")
    s0.fill(1)
    s1.fill(2)
    b0, b1 = adapter(d, s0, pp=(0, 2)), adapter(d, s1, pp=(1, 2))
    assert all(b0.batch_set_v1(ks, slots(range(4))))
    want = [page_bytes(s1, p) for p in range(4)]
    assert b1.batch_get_v1(ks, slots(range(4, 8))) == [False] * 4, "stage 1 read stage 0's pages"
    assert all(b1.batch_set_v1(ks, slots(range(4))))
    s1.kv_buffer.zero_()
    assert all(b1.batch_get_v1(ks, slots(range(4))))
    assert all(torch.equal(want[p], page_bytes(s1, p)) for p in range(4))
    sfx = {n[64:] for n in names(d)}
    assert sfx == {"_org-model_0_1_2_0_k", "_org-model_0_1_2_0_v", "_org-model_0_1_2_1_k",
                   "_org-model_0_1_2_1_v"}, sfx


@case
def cp_ranks_do_not_share(d):
    ks = keys(2)
    c0, c1 = KVPool("page_first"), KVPool("page_first")
    c0.fill(1)
    b0, b1 = adapter(d, c0, cp=(0, 2)), adapter(d, c1, cp=(1, 2))
    assert all(b0.batch_set_v1(ks, slots(range(2))))
    assert b1.batch_get_v1(ks, slots(range(2))) == [False, False]
    assert b1.batch_exists(ks) == 0


@case
def sglang_suffix_rule(d):
    """SGLang's own examples, and PP=1/CP=1 names unchanged."""
    def sfx(mla=False, **kw):
        return sglang_names.suffix(config(d, **kw), mla)

    assert sfx() == "_org-model_0_1"
    assert sfx(mla=True) == "_org-model"
    assert sfx(rank=1, size=2) == "_org-model_1_2"
    assert sfx(pp=(2, 4)) == "_org-model_0_1_4_2"
    assert sfx(mla=True, pp=(1, 2), cp=(1, 2)) == "_org-model_2_1_cp1_2"
    assert sfx(cp=(1, 2)) == "_org-model_0_1_cp1_2"
    assert sfx(canonical_suffix="m_tp1of2_pp0") == "_m_tp1of2_pp0"
    assert sfx(model_identity_hash="ab12") == "_org-model@ab12_0_1"
    assert sfx(model=None) == "_0_1"


@case
def unsupported_parallelism_refused_at_open(d):
    e = expect(ValueError, hs.HiCacheHicache, config(d, canonical_suffix=["a", "b"]), {})
    assert "fan-out" in str(e)
    expect(ValueError, hs.HiCacheHicache, config(d, size=2, tp_lcm_size=4), {})
    expect(ValueError, hs.HiCacheHicache, config(d, should_split_heads=True), {})
    expect(ValueError, hs.HiCacheHicache, config(d, pp=(2, 2)), {})
    expect(ValueError, hs.HiCacheHicache, config(d, canonical_suffix="a/b"), {})
    hs.HiCacheHicache(config(d, size=2, tp_lcm_size=2), {}).close()  # homogeneous: fine


@case
def canonical_suffix_verbatim(d):
    b = adapter(d, canonical_suffix="cell7")
    assert all(b.batch_set_v1(keys(1), slots([0])))
    assert {n[64:] for n in names(d)} == {"_cell7_k", "_cell7_v"}


# ---- 2. the element type in the identity ----


@case
def dtypes_of_one_width_do_not_share(d):
    ks = keys(3)
    bf, fp = KVPool("page_first", dtype=torch.bfloat16), KVPool("page_first", dtype=torch.float16)
    bf.fill(3)
    a, b = adapter(d, bf), adapter(d, fp)
    assert all(a.batch_set_v1(ks, slots(range(3))))
    assert b.batch_get_v1(ks, slots(range(3))) == [False] * 3, "fp16 read bf16 pages"
    assert a.batch_get_v1(ks, slots(range(3, 6))) == [True] * 3


@case
def fp8_variants_do_not_share(d):
    """fp8 KV lives in uint8 pools: only kv_cache_dtype tells e4m3 from e5m2."""
    ks = keys(2)
    p1, p2 = KVPool("page_first", dtype=torch.uint8), KVPool("page_first", dtype=torch.uint8)
    p1.kv_buffer.fill_(7)
    a = adapter(d, p1, kv_cache_dtype="fp8_e4m3")
    b = adapter(d, p2, kv_cache_dtype="fp8_e5m2")
    c = adapter(d, KVPool("page_first", dtype=torch.uint8), kv_cache_dtype="fp8_e4m3")
    assert all(a.batch_set_v1(ks, slots(range(2))))
    assert b.batch_get_v1(ks, slots(range(2))) == [False, False]
    assert c.batch_get_v1(ks, slots(range(2))) == [True, True]


# ---- 3. names cut at NUL ----


@case
def nul_in_keys_refused(d):
    with hicache.Store({"dirs": [str(d)]}, backend="mem") as st:
        pool = hicache.Pool.create_kv(layers=1, heads=1, head_dim=64, elem_bytes=2, page_size=1, pages=4)
        st.register("kv", pool, anchor=True)
        pool.scatter(0, b"\x01" * pool.page_bytes)
        expect(ValueError, st.set, ["a\x00b"], [0])
        st.set(["a"], [0])
        expect(ValueError, st.get, ["a\x00c"], [1])
        expect(ValueError, st.exists, ["a\x00c"])
        expect(ValueError, st.set, [b"a\x00b"], [0])
        assert st.exists(["a"]) == 1


@case
def nul_in_names_refused(d):
    expect(ValueError, hicache.Store, {"dirs": [str(d)]}, model="a\x00b")
    expect(ValueError, hicache.Store, {"dirs": [str(d) + "\x00/etc"]})
    expect(ValueError, hicache.Store, {"dirs": [str(d)]}, backend="file\x00x")
    with hicache.Store({"dirs": [str(d)]}) as st:
        pool = hicache.Pool.create_kv(layers=1, heads=1, head_dim=64, elem_bytes=2, page_size=1, pages=4)
        expect(ValueError, st.register, "a\x00b", pool)
        expect(ValueError, st.register, "ab", pool, suffix="_m\x00x")
        expect(ValueError, st.pool_info, "a\x00b")
        expect(ValueError, st.stats, "a\x00b")
        expect(hicache.Error, st.pool_info, "a")  # never registered as "a"
    expect(ValueError, hs.HiCacheHicache, config(d, model="a\x00b"), {})


# ---- 4. indices ----


@case
def wrapped_and_float_indices_refused(d):
    with hicache.Store({"dirs": [str(d)]}, backend="mem") as st:
        pool = hicache.Pool.create_kv(layers=1, heads=1, head_dim=64, elem_bytes=2, page_size=1, pages=8)
        st.register("kv", pool, anchor=True)
        ks = keys(1)
        pool.scatter(5, b"\x05" * pool.page_bytes)
        expect(ValueError, st.set, ks, [2 ** 64 + 5])
        assert st.exists(ks) == 0, "2**64 + 5 wrote page 5"
        expect(TypeError, st.set, ks, [5.0])
        expect(TypeError, st.set, ks, torch.tensor([5.0]))
        expect(TypeError, st.set, ks, np.array([5.0]))
        expect(TypeError, st.set, ks, torch.tensor([True]))
        expect(ValueError, st.set, ks, np.array([2 ** 63], dtype=np.uint64))
        expect(ValueError, st.set, ks, [-1])
        expect(TypeError, st.set, ks, "5")
        assert st.exists(ks) == 0
        assert st.set(ks, np.array([5], dtype=np.uint8)) == [0]
        expect(ValueError, pool.gather, 2 ** 64)
        expect(ValueError, pool.gather, 8)
        expect(TypeError, pool.gather, 1.0)
        expect(ValueError, pool.scatter, 2 ** 64 + 5, b"\x00" * pool.page_bytes)
        assert bytes(pool.gather(5)) == b"\x05" * pool.page_bytes


@case
def adapter_host_indices_checked(d):
    hp = KVPool("page_first", pages=16)
    hp.fill(9)
    b = adapter(d, hp)
    ks = keys(2)
    good = slots([2, 3])
    before = hp.kv_buffer.clone()
    bad = [
        good.to(torch.float32),  # floats
        good.tolist() + [],  # fine as a list: checked below
        torch.tensor([8, 9, 10, 11, 13, 14, 15, 16]),  # second page not page-aligned
        torch.tensor([8, 9, 10, 11, 12, 12, 14, 15]),  # not consecutive
        torch.tensor([9, 10, 11, 12, 13, 14, 15, 16]),  # misaligned
        torch.tensor([2 ** 62] * 8),  # out of the pool
        torch.tensor([-4, -3, -2, -1, 0, 1, 2, 3]),
        good[:7],  # too short
        None,
        "0123",
        [0.0] * 8,
        np.arange(8, dtype=np.float64),
    ]
    for i, hi in enumerate(bad):
        if i == 1:
            continue
        assert b.batch_set_v1(ks, hi) == [False, False], "bad indices %d accepted" % i
        assert b.batch_get_v1(ks, hi) == [False, False], "bad indices %d accepted" % i
    assert b.store.exists(ks) == 0
    assert torch.equal(before.view(torch.int16), hp.kv_buffer.view(torch.int16))
    assert b.batch_set_v1(ks, good.tolist()) == [True, True]
    assert b.batch_set_v1(ks, good.to(torch.int32)) == [True, True]


@case
def exists_str_is_not_64_keys(d):
    b = adapter(d)
    k = keys(1)[0]
    assert all(b.batch_set_v1([k], slots([0])))
    assert b.batch_exists(k) == 0  # a bad call: 0, never 64 one-character keys
    assert b.exists(k) is True
    assert b.batch_exists([k]) == 1
    with hicache.Store({"dirs": [str(d)]}) as st:
        expect(TypeError, st.exists, k)
        expect(TypeError, st.exists, None)
        expect(TypeError, st.exists, [k, 5])


# ---- 6. model names ----


@case
def model_names_do_not_collide(d):
    ks = keys(1)
    p1, p2 = KVPool("page_first"), KVPool("page_first")
    p1.fill(4)
    a, b = adapter(d, p1, model="my model"), adapter(d, p2, model="my_model")
    assert all(a.batch_set_v1(ks, slots([0])))
    assert b.batch_get_v1(ks, slots([0])) == [False]
    expect(ValueError, hicache.Store, {"dirs": [str(d)]}, model="my model")
    expect(ValueError, hicache.Store, {"dirs": [str(d)]}, model="../up")
    # SGLang's own rule, kept: '/' becomes '-'
    assert sglang_names.model_part("org/m") == "org-m"
    assert hicache.suffix("org/m") == "_org-m_0_1"


# ---- 7. duplicate destinations ----


@case
def duplicate_get_slots_lose_nothing(d):
    for backend in ("mem", "file"):
        sub = os.path.join(str(d), backend)
        os.makedirs(sub)
        hp = KVPool("page_first")
        hp.fill(5)
        b = adapter(sub, hp, backend=backend)
        ks = keys(2)
        want = [page_bytes(hp, p) for p in (0, 1)]
        assert all(b.batch_set_v1(ks, slots([0, 1])))
        r = b.batch_get_v1(ks, slots([3, 3]))
        assert r == [False, False], r
        # and the package straight to the store: the C library refuses it
        e = expect(hicache.Error, b.store.get, ks, [3, 3])
        assert "twice" in str(e) or "Invalid" in str(e), e
        st = b.store.stats()
        assert st["corrupt"] == 0, st
        assert b.batch_exists(ks) == 2, "a healthy object was deleted"
        assert b.batch_get_v1(ks, slots([4, 5])) == [True, True]
        assert torch.equal(page_bytes(hp, 4), want[0]) and torch.equal(page_bytes(hp, 5), want[1])
        b.close()


# ---- 8. handles the Python objects own ----


@case
def unregister_alias_drops_only_the_anchor(d):
    st = hicache.Store({"dirs": [str(d)]})
    anchor = hicache.Pool.create_kv(layers=1, heads=1, head_dim=64, elem_bytes=2, page_size=1, pages=4)
    side = hicache.Pool.create_kv(layers=1, heads=1, head_dim=64, elem_bytes=2, page_size=1, pages=4)
    st.register("main", anchor, anchor=True)
    st.register("swa", side)
    st.unregister("kv")
    e = expect(hicache.Error, side.close)  # still registered
    assert "registered" in str(e)
    anchor.close()
    res = st.set_v2([hicache.Transfer("swa", keys(1), [0])])
    assert res == {"swa": [0]}, res
    st.close()
    side.close()
    expect(hicache.Error, st.get, keys(1), [0])
    expect(hicache.Error, side.gather, 0)
    expect(hicache.Error, lambda: side.page_bytes)
    expect(hicache.Error, st.register, "x", anchor)


# ---- 9. read-only memory ----


@case
def read_only_targets_refused(d):
    pool = hicache.Pool.create_kv(layers=1, heads=1, head_dim=64, elem_bytes=2, page_size=1, pages=4)
    pool.scatter(1, b"\x09" * pool.page_bytes)
    frozen = bytes(pool.page_bytes)
    expect(ValueError, pool.gather, 1, frozen)
    assert frozen == bytes(pool.page_bytes)
    ro = np.zeros(pool.page_bytes, dtype=np.uint8)
    ro.flags.writeable = False
    expect(ValueError, pool.gather, 1, ro)
    path = os.path.join(str(d), "ro.bin")
    with open(path, "wb") as f:
        f.write(b"\x00" * (64 * 2 * 4))
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    expect(ValueError, hicache.Pool.wrap_kv, mm, layers=1, heads=1, head_dim=64, elem_bytes=2,
           page_size=1, pages=4, layout="page_first", mla=True)
    pool.scatter(2, frozen)  # a read-only source is fine
    assert bytes(pool.gather(2)) == frozen
    if torch.cuda.is_available():
        expect(ValueError, pool.gather, 1, torch.empty(pool.page_bytes, dtype=torch.uint8, device="cuda"))
    pool.close()


# ---- 10. fork ----


@case
def fork_child_refused_parent_unharmed(d):
    hp = KVPool("page_first")
    hp.fill(6)
    b = adapter(d, hp)
    ks = keys(3)
    assert all(b.batch_set_v1(ks[:1], slots([0])))
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            try:
                b.store.get(ks[:1], [5])
            except hicache.Error as e:
                code = 0 if "fork" in str(e) else 3
            if b.batch_get_v1(ks[:1], slots([5])) != [False]:
                code = 4
            b.close()  # must not touch the parent's rings or wait for its threads
        finally:
            os._exit(code)
    # the parent keeps working while the child runs and after it exits
    assert all(b.batch_set_v1(ks[1:], slots([1, 2])))
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        assert time.monotonic() < deadline, "the forked child hung"
        time.sleep(0.05)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    want = [page_bytes(hp, p) for p in range(3)]
    assert b.batch_get_v1(ks, slots([5, 6, 7])) == [True] * 3
    assert all(torch.equal(page_bytes(hp, 5 + i), want[i]) for i in range(3))
    b.close()


# ---- 11. memory the engine moved ----


@case
def moved_pool_memory_refused(d):
    hp = KVPool("page_first", aligned=False)
    hp.fill(2)
    b = adapter(d, hp)
    ks = keys(2)
    assert all(b.batch_set_v1(ks, slots([0, 1])))
    old = hp.kv_buffer
    hp.kv_buffer = torch.zeros_like(old)  # the engine reallocated its pool
    assert b.batch_get_v1(ks, slots([2, 3])) == [False, False]
    assert b.batch_set_v1(keys(1, 9), slots([2])) == [False]
    hp.kv_buffer = old
    assert b.batch_get_v1(ks, slots([2, 3])) == [True, True]
    old.resize_(old.numel() * 4)  # moves the storage
    assert b.batch_get_v1(ks, slots([2, 3])) == [False, False]
    # the package: a wrapped tensor that moved is an Error, never a write
    t = torch.zeros(4 * 64, dtype=torch.int16)
    pool = hicache.Pool.wrap_kv(t, layers=1, heads=1, head_dim=64, elem_bytes=2, page_size=1, pages=4,
                                mla=True)
    with hicache.Store({"dirs": [str(d)]}) as st:
        st.register("kv", pool, anchor=True)
        t.resize_(64 * 1024)
        e = expect(hicache.Error, st.get, keys(1), [0])
        assert "moved" in str(e)
        expect(hicache.Error, pool.gather, 0)


# ---- 12. clear stays inside the store ----


@case
def clear_never_follows_a_planted_bucket(d):
    root, outside = os.path.join(str(d), "store"), os.path.join(str(d), "outside")
    os.makedirs(root)
    os.makedirs(outside)
    b = adapter(root)
    ks = keys(8)
    assert all(b.batch_set_v1(ks, slots(range(8))))
    buckets = sorted(p for p in glob.glob(os.path.join(root, "*")) if os.listdir(p))
    # a bucket made a symlink to a directory outside, holding files named
    # as this store's objects
    bucket = buckets[0]
    held = []
    for f in os.listdir(bucket):
        os.rename(os.path.join(bucket, f), os.path.join(outside, f))
        held.append(os.path.join(outside, f))
    os.rmdir(bucket)
    os.symlink(outside, bucket)
    # and a directory planted in another bucket, named as an object
    os.makedirs(os.path.join(buckets[1], "0" * 64 + "_org-model_0_1_k"))
    b.clear()
    assert held and all(os.path.exists(h) for h in held), "clear deleted files outside the store"
    real = [p for p in glob.glob(os.path.join(root, "*", "*")) if not os.path.islink(os.path.dirname(p))
            and os.path.isfile(p) and not os.path.basename(p).startswith(".")]
    assert not real, "clear stopped early: %s" % real
    b.close()


# ---- 13. names do not depend on alignment or bounce ----


@case
def aligned_and_unaligned_pools_share_pages(d):
    ks = keys(4)
    for mla in (False, True):
        sub = os.path.join(str(d), "mla" if mla else "mha")
        os.makedirs(sub)
        al, un = KVPool("page_first", mla=mla, aligned=True), KVPool("page_first", mla=mla, aligned=False)
        al.fill(8)
        a = adapter(sub, al, mla=mla, extra={"use_direct_io": True})
        u = adapter(sub, un, mla=mla, extra={"use_direct_io": True})
        bounce = adapter(sub, KVPool("page_first", mla=mla), mla=mla, extra={"force_bounce": True})
        want = [page_bytes(al, p) for p in range(4)]
        assert all(a.batch_set_v1(ks, slots(range(4))))
        assert u.batch_get_v1(ks, slots(range(4))) == [True] * 4, (a.store.pool_info("kv"), u.store.pool_info("kv"))
        assert all(torch.equal(page_bytes(un, p), want[p]) for p in range(4))
        ks2 = keys(2, 5)
        un.fill(11)
        want2 = [page_bytes(un, p) for p in range(2)]
        assert all(u.batch_set_v1(ks2, slots(range(2))))
        assert a.batch_get_v1(ks2, slots([6, 7])) == [True, True]
        assert torch.equal(page_bytes(al, 6), want2[0])
        assert bounce.batch_get_v1(ks, slots(range(4))) == [True] * 4
        for x in (a, u, bounce):
            x.close()


# ---- 14. nothing raises into SGLang ----


class Junk:
    def __len__(self):
        raise RuntimeError("len of junk")


class NoName:
    keys = ["k"]


HOSTILE = [None, 5, 3.5, "abc", b"abc", {"a": 1}, [None], [5], [b"x" * 32, "y"], Junk(), [float("nan")],
           torch.zeros(3), object()]


@case
def transfer_methods_never_raise(d):
    hp = KVPool("page_first")
    b = adapter(d, hp)
    b.register_mem_host_pool_v2(SWAPool(), hs.PoolName.SWA)
    ks = keys(2)
    for x in HOSTILE:
        for y in HOSTILE + [slots([0, 1])]:
            r = b.batch_get_v1(x, y)
            assert isinstance(r, list) and r == [False] * (len(x) if isinstance(x, list) else 0), (x, y, r)
            r = b.batch_set_v1(x, y)
            assert isinstance(r, list) and not any(r), (x, y, r)
        assert b.batch_exists(x) == 0, x
        assert b.exists(x) is False
        assert b.get(x) is None
        assert b.set(x, x) is False
        assert b.batch_set(x, x) is False
        r = b.batch_get(x)
        assert isinstance(r, list) and all(v is None for v in r)
        for tr in (x, [x], [NoName()], [hs.PoolTransfer(name="swa", keys=x, host_indices=x)],
                   [hs.PoolTransfer(name=x, keys=ks, host_indices=slots([0, 1]))]):
            for fn in (b.batch_get_v2, b.batch_set_v2):
                r = fn(tr)
                assert isinstance(r, dict) and not any(any(v) for v in r.values()), (tr, r)
            r = b.batch_exists_v2(ks, tr)
            assert isinstance(r, hs.PoolTransferResult), r
        r = b.batch_exists_v2(x, None)
        assert isinstance(r, hs.PoolTransferResult) and r.kv_hit_pages == 0
    # a transfer for an unknown pool next to a good one: only it fails
    r = b.batch_set_v2([hs.PoolTransfer(name="nope", keys=ks, host_indices=slots([0, 1])),
                        hs.PoolTransfer(name="swa", keys=ks, host_indices=slots([0, 1]))])
    assert r == {"nope": [False, False], "swa": [True, True]}, r
    assert b.batch_set_v1(ks, slots([0, 1])) == [True, True]
    b.clear()
    b.close()
    # after close: still an answer, never an exception
    assert b.batch_get_v1(ks, slots([0, 1])) == [False, False]
    assert b.batch_exists(ks) == 0
    assert b.get_stats() is None


@case
def logging_is_rate_limited(d):
    import logging

    seen = []

    class Catch(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    logging.getLogger("hicache.sglang").addHandler(Catch())
    b = adapter(d)
    for _ in range(200):
        b.batch_get_v1(None, None)
    assert len(seen) == 1, seen[:3]


@case
def mamba_and_swa_checked_too(d):
    b = adapter(d)
    mp, sp = MambaPool(), SWAPool()
    b.register_mem_host_pool_v2(mp, hs.PoolName.MAMBA)
    b.register_mem_host_pool_v2(sp, hs.PoolName.SWA)
    ks = keys(2)
    bad = hs.PoolTransfer(name=hs.PoolName.MAMBA, keys=ks, host_indices=torch.tensor([1.0, 2.0]))
    assert b.batch_set_v2([bad]) == {"mamba": [False, False]}
    dup = hs.PoolTransfer(name=hs.PoolName.SWA, keys=ks, host_indices=slots([1, 1]))
    assert b.batch_set_v2([dup]) == {"swa": [True, True]}  # reading one slot twice is fine
    assert b.batch_get_v2([dup]) == {"swa": [False, False]}  # writing it twice is not
    okm = hs.PoolTransfer(name=hs.PoolName.MAMBA, keys=ks, host_indices=torch.tensor([1, 2]))
    assert b.batch_set_v2([okm]) == {"mamba": [True, True]}
    assert b.batch_get_v2([dup, okm]) == {"swa": [False, False], "mamba": [True, True]}  # only the bad one
    bad_keys = hs.PoolTransfer(name=hs.PoolName.SWA, keys="k" * 64, host_indices=slots([1]))
    assert b.batch_get_v2([bad_keys, okm]) == {"swa": [], "mamba": [True, True]}
    old = mp.conv_buffer[0]
    mp.conv_buffer[0] = torch.zeros_like(old)
    assert b.batch_set_v2([okm]) == {"mamba": [False, False]}
    mp.conv_buffer[0] = old
    assert b.batch_set_v2([okm]) == {"mamba": [True, True]}


def main():
    name, d = sys.argv[1], sys.argv[2]
    CASES[name](d)
    print("HELD", name)


if __name__ == "__main__":
    main()
