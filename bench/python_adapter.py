#!/usr/bin/python3
"""hicache from Python: the SGLang adapter (hicache.sglang) against the C
benchmark doing the same work, and against a Python loop doing what SGLang's
own file backend does (docs/PERFORMANCE.md, "Python adapter").

Per run, page size and side (C and adapter take turns going first):
  C        `hicache bench store --op set|get --pages 128*K --batch 128
           --slots S`
  adapter  HiCacheHicache.batch_set_v1 / batch_get_v1 of the same pages, in
           K calls of 128 (--calls K)
  paired   the adapter's set and get against the bare hc_store_set and
           hc_store_get through ctypes in one process, call by call in turn
           (see paired())
  loop     per page: get_data_page -> tofile(<path>.tmp.<pid>.<tid>.<uuid>) ->
           os.replace; read back with open(buffering=0).readinto into a flat
           page, then copied into the pool (SGLang's HiCacheFile)

The C bench and the adapter do the same work, step by step:
  - slots: --slots distinct (the default) gives every page of a run a pool
    slot of its own, as an engine's large host pool does; --slots reuse
    reads and writes every call through the same 128 slots (the C bench's
    own default). Which one matters to the figures (docs/PERFORMANCE.md).
  - set: a call's pages are put into its slots, untimed, then the call is
    timed;
  - get: the page cache is dropped after the pool warm-up (page 0's object
    read into every slot the gets use, untimed: the first device write into
    a page makes the next CPU touch slow on some VMs, and a serving pool is
    long past that); then each call is timed, and (adapter, loop) its slots
    compared byte for byte with the pages stored, untimed. The C bench's
    gets run without --verify; the store's checksums reject any wrong
    object;
  - memory: the adapter's pool is SGLang's MHATokenToKVPoolHost in
    page_first layout over page-aligned anonymous memory with transparent
    huge pages asked for, faulted in before use, as SGLang's pinned host
    pool (cudaHostAlloc) and the C bench's pool are;
  - time: the sum of the store calls' times; GB/s are 10^9 bytes of page
    payload per second.
The adapter's pool has the C bench's object geometry: MHA, page_first, one
layer and head, K half then V half of each page (zero-copy: _k and _v objects
of page_bytes / 2; with --kv-one-object-max at or above the page, one object
of the page through a bounce slot); --page-tokens 64 gives SGLang's 64 tokens per page in
bf16, so each call also converts 64 * 128 host indices. O_DIRECT for both
hicache sides. Every get is cold: each run writes fresh directories and the
page cache (with dentries and inodes) is dropped before every get, as root.
Directories stay until the end (creating files right after deleting many is
slow on this ext4); when the disk would run short, the finished runs' are
removed and the next run waits a minute. Ratios are per run (the sides of a
run ran within seconds of each other); the table gives their mean with its
standard error, GB/s the medians.

--kv-one-object-max SIZE sets the config key kv_one_object_max_bytes for
the adapter, the paired calls and (through its environment variable) the C
bench: pages of at most SIZE are one object through a bounce slot instead
of zero-copy _k and _v (docs/SGLANG.md, "Small pages").

usage: bench/python_adapter.py [--dir BASE] [--runs N] [--pages N] [--calls K] [--bin HICACHE]
         [--sizes 64K,512K,2M] [--slots distinct|reuse] [--huge-pages thp|off]
         [--page-tokens T] [--kv-one-object-max SIZE] [--keep]
Run it under `flock /tmp/hicache-bench.lock` (bench/python_adapter.sh does).
"""
import argparse
import ctypes
import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
os.environ.setdefault("HICACHE_LIB", os.path.join(REPO, "build", "libhicache.so"))
os.environ.setdefault("HICACHE_LOG", "off")

import torch  # noqa: E402

import hicache  # noqa: E402
import hicache.sglang as hs  # noqa: E402

PS = 1  # tokens per page: --page-tokens
ONE_OBJECT_MAX = 0  # --kv-one-object-max
HUGE = 2 << 20
MADV_POPULATE_WRITE = 23  # Linux 5.14
GIB = 1 << 30


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().rstrip("IB")
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def drop_caches():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        sys.exit("python_adapter: cannot drop the page cache (%s): run as root" % e)


def batches(total, batch):
    """(first, n) of each call over total pages."""
    return [(at, min(batch, total - at)) for at in range(0, total, batch)]


class HostPool:
    """SGLang's MHATokenToKVPoolHost in page_first layout: kv_buffer
    (2, tokens, layers, heads, head_dim) over page-aligned anonymous memory,
    transparent huge pages asked for (as the C bench's default pool) and
    every page faulted in before use (as cudaHostAlloc, which SGLang's
    pinned host pool comes from, and the C bench's pool do)."""

    def __init__(self, pages, page_bytes, huge):
        self.layout, self.page_size, self.size = "page_first", PS, pages * PS
        self.layer_num, self.head_num = 1, 1
        self.dtype = torch.bfloat16 if PS > 1 else torch.uint8
        self.esz = 2 if PS > 1 else 1
        self.head_dim = page_bytes // (2 * PS * self.esz)
        numel = 2 * self.size * self.head_dim
        # 2 MiB aligned so that every 2 MiB of it can be a huge page.
        # Private: a shared anonymous map is shmem, which gets no THP.
        self._mem = mmap.mmap(-1, numel * self.esz + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if huge and hasattr(mmap, "MADV_HUGEPAGE"):
            self._mem.madvise(mmap.MADV_HUGEPAGE)
        whole = torch.frombuffer(self._mem, dtype=torch.uint8)
        skip = -whole.data_ptr() % HUGE
        raw = whole[skip:skip + numel * self.esz]
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        if libc.madvise(raw.data_ptr(), raw.numel(), MADV_POPULATE_WRITE):
            raw.zero_()  # before Linux 5.14: one write per page
        self.kv_buffer = raw.view(self.dtype).view(2, self.size, 1, 1, self.head_dim)

    def pages(self, first, n):
        """Pool pages [first, first + n): K and V halves."""
        return self.kv_buffer[:, first * PS:(first + n) * PS]

    def get_data_page(self, index):
        return self.kv_buffer[:, index:index + PS].flatten()

    def get_dummy_flat_data_page(self):
        return torch.zeros(2 * PS * self.head_dim, dtype=self.dtype)

    def set_from_flat_data_page(self, index, flat):
        self.kv_buffer[:, index:index + PS] = flat.view(2, PS, 1, 1, self.head_dim)


def source_pages(hp, total, seed):
    """The run's page contents, in the pool's shape: every page its own."""
    src = torch.empty((2, total * PS, 1, 1, hp.head_dim), dtype=hp.dtype)
    src.view(-1).view(torch.int64).random_(generator=torch.Generator().manual_seed(seed))
    return src


def same_bytes(a, b):
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def config(d):
    extra = {"backend_name": "hicache", "module_path": "hicache.sglang", "class_name": "HiCacheHicache",
             "interface_v1": 1, "backend": "file", "dirs": [d], "use_direct_io": True,
             "l3_cleaner_interval_s": 0}  # as the C bench: no cleaner mid-run
    if ONE_OBJECT_MAX:
        extra["kv_one_object_max_bytes"] = ONE_OBJECT_MAX
    return hs.HiCacheStorageConfig(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0,
                                   attn_cp_size=1, is_mla_model=False, enable_storage_metrics=False,
                                   is_page_first_layout=True, model_name="bench", extra_config=extra)


class Work:
    """What both sides do in one run at one page size."""

    def __init__(self, keys, src, page_bytes, batch, reuse):
        self.keys, self.src, self.page_bytes = keys, src, page_bytes
        self.batch, self.reuse = batch, reuse
        self.total = len(keys)

    def slot(self, at):
        """First pool slot of the call starting at page at."""
        return 0 if self.reuse else at

    def source(self, at, n):
        return self.src[:, at * PS:(at + n) * PS]

    def gbps(self, seconds):
        return self.total * self.page_bytes / seconds / 1e9


def c_bench(binary, op, d, w, seed, huge):
    cmd = [binary, "bench", "store", "--op", op, "--pages", str(w.total), "--batch", str(w.batch),
           "--page-bytes", str(w.page_bytes), "--dir", d, "--direct", "on", "--seed", str(seed), "--json",
           "--huge-pages", "thp" if huge else "off", "--slots", "reuse" if w.reuse else "distinct"]
    if op == "get":
        # No --verify: it compares each batch's pages between the timed
        # batches. The store's checksums still reject any wrong object
        # (counted as corrupt), and the adapter side is compared byte for
        # byte.
        cmd += ["--drop-caches", "--pool-warmup", "on"]
    env = dict(os.environ)
    if ONE_OBJECT_MAX:
        env["HICACHE_KV_ONE_OBJECT_MAX_BYTES"] = str(ONE_OBJECT_MAX)
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout)
    if r["errors"] or (op == "get" and (r["hits"] != w.total or r["corrupt"])):
        sys.exit("python_adapter: C bench %s failed: %s" % (op, r))
    return r["gbps"]


def warm_pool(get, w, idx):
    """As the C bench's --pool-warmup on: page 0's object into every slot
    the timed gets use. One page many times, so that nothing the gets then
    read is cached below the file system but that page."""
    for at, n in batches(w.batch if w.reuse else w.total, w.batch):
        get([w.keys[0]] * n, idx[at * PS:(at + n) * PS])


def timed_calls(hp, w, call, what, fill):
    """The summed time of call(at, n, first slot) over the run's calls, as
    GB/s. Untimed around each: with fill (sets) the call's pages put into
    its slots first; after it, its results (all true), and without fill
    (gets) its slots compared byte for byte with the pages stored."""
    spent = 0.0
    for at, n in batches(w.total, w.batch):
        s0 = w.slot(at)
        if fill:
            hp.pages(s0, n).copy_(w.source(at, n))
        t0 = time.perf_counter()
        ok = call(at, n, s0)
        spent += time.perf_counter() - t0
        if not all(ok) or (not fill and not same_bytes(hp.pages(s0, n), w.source(at, n))):
            sys.exit("python_adapter: %s of pages %d..%d failed" % (what, at, at + n))
    return w.gbps(spent)


def adapter(hp, d, w):
    idx = torch.arange(hp.size, dtype=torch.int64)
    b = hs.HiCacheHicache(config(d), {})
    b.register_mem_pool_host(hp)
    info = b.store.pool_info("kv")
    one = w.page_bytes <= ONE_OBJECT_MAX
    if info["objects"] != (1 if one else 2) or (not one and not info["zero_copy"]):
        sys.exit("python_adapter: the adapter's pool has %d object(s) per page, %s; expected %s" % (
            info["objects"], "zero-copy" if info["zero_copy"] else "bounce",
            "one (bounce)" if one else "two, zero-copy"))
    st = timed_calls(hp, w, lambda at, n, s0: b.batch_set_v1(w.keys[at:at + n], idx[s0 * PS:(s0 + n) * PS]),
                     "adapter set", fill=True)
    warm_pool(b.batch_get_v1, w, idx)
    drop_caches()
    gt = timed_calls(hp, w, lambda at, n, s0: b.batch_get_v1(w.keys[at:at + n], idx[s0 * PS:(s0 + n) * PS]),
                     "adapter get", fill=False)
    b.close()
    return st, gt


def paired(hp, d, keys, batch, flip):
    """The adapter against the bare C calls in one process, call by call:
    hc_store_set and hc_store_get through ctypes with their key, page and
    result arrays made before the clock. The keys come in two halves over
    the same pool pages; per call of batch pages the adapter takes the first
    half's chunk and the bare call the second's, in turn (which goes first
    alternates by call, and by run through flip). Sets write fresh objects;
    gets read each object once, with O_DIRECT, both halves' metadata
    equally warm. No cache drop between the calls: a drop (with its sync)
    right before a call of a few milliseconds was most of what that call
    measured. Two calls milliseconds apart see nearly the same disk, so
    what is left is the adapter's own cost.
    Returns (bare/adapter time of the sets, of the gets)."""
    half = len(keys) // 2
    idx = torch.arange(hp.size, dtype=torch.int64)
    b = hs.HiCacheHicache(config(d), {})
    b.register_mem_pool_host(hp)
    want = hp.kv_buffer.clone()
    chunks = []
    for at, n in batches(half, batch):
        ix = idx[at * PS:(at + n) * PS]
        # The bare call takes page indices, the adapter host (token) indices.
        chunks.append((at, n, ix, hicache._Keys(keys[half + at:half + at + n]),
                       hicache._Pages(list(range(at, at + n))), (ctypes.c_int * n)()))

    def timed(op, at, n, ix, bare_keys, bare_pages, res):
        def adapter_call():
            fn = b.batch_set_v1 if op == "set" else b.batch_get_v1
            return all(fn(keys[at:at + n], ix))

        def bare_call():
            fn = hicache._C.hc_store_set if op == "set" else hicache._C.hc_store_get
            rc = b.store._call(fn, bare_keys.keys, n, bare_pages.ptr, res)
            return rc == (0 if op == "set" else n) and all(r == 0 for r in res)

        spent = {}
        for name, fn in (("adapter", adapter_call), ("bare", bare_call))[:: 1 if (at // batch + flip) % 2 == 0 else -1]:
            if op == "get":
                hp.pages(at, n).zero_()
            t0 = time.perf_counter()
            ok = fn()
            spent[name] = time.perf_counter() - t0
            if not ok or not same_bytes(want[:, at * PS:(at + n) * PS], hp.pages(at, n)):
                sys.exit("python_adapter: paired %s %s failed" % (name, op))
        return spent

    ratio = []
    for op in ("set", "get"):
        if op == "get":
            # The pool warm-up, as above, from a third copy of the pages.
            warm = hicache.key_chain(list(range(half * PS)), PS, seed=("paired-warm", None))
            if not all(all(f(warm[at:at + n], idx[at * PS:(at + n) * PS])) for f in (b.batch_set_v1, b.batch_get_v1)
                       for at, n in batches(half, batch)):
                sys.exit("python_adapter: paired warm-up failed")
        tot = {"adapter": 0.0, "bare": 0.0}
        for c in chunks:
            for k, v in timed(op, *c).items():
                tot[k] += v
        ratio.append(tot["bare"] / tot["adapter"])
    b.close()
    return ratio


def loop(hp, d, w):
    """SGLang's HiCacheFile, as SGLang's hicache_storage.py implements it (docs/SGLANG.md), through the same
    slots as the other sides."""
    os.makedirs(d)
    paths = [os.path.join(d, "%s_bench_0_1.bin" % k) for k in w.keys]

    def set_call(at, n, s0):
        for j in range(n):
            p = paths[at + j]
            if os.path.exists(p):
                continue
            tmp = "%s.tmp.%d.%d.%s" % (p, os.getpid(), threading.get_ident(), uuid.uuid4().hex)
            hp.get_data_page((s0 + j) * PS).contiguous().view(torch.uint8).numpy().tofile(tmp)
            os.replace(tmp, p)
        return ()

    def get_call(at, n, s0):
        for j in range(n):
            flat = hp.get_dummy_flat_data_page()
            with open(paths[at + j], "rb", buffering=0) as f:
                if f.readinto(flat.view(torch.uint8).numpy()) != w.page_bytes:
                    sys.exit("python_adapter: short read of %s" % paths[at + j])
            hp.set_from_flat_data_page((s0 + j) * PS, flat)
        return ()

    st = timed_calls(hp, w, set_call, "loop set", fill=True)
    drop_caches()
    return st, timed_calls(hp, w, get_call, "loop get", fill=False)


def make_room(base, done, need):
    """Remove finished runs' directories when the next run would leave
    less than 4 GiB free; then wait out ext4's slow creates after many
    deletes, so that no side's sets pay for them. Stops when that is not
    room enough."""
    if shutil.disk_usage(base).free < need + 4 * GIB and done:
        print("python_adapter: removing %d finished runs' files for room, then waiting 60 s" % len(done),
              file=sys.stderr)
        for d in done:
            shutil.rmtree(d, ignore_errors=True)
        done.clear()
        time.sleep(60)
    if shutil.disk_usage(base).free < need + 4 * GIB:
        sys.exit("python_adapter: %.1f GiB free under %s, a run needs %.1f" % (
            shutil.disk_usage(base).free / GIB, base, need / GIB))


def mean_se(xs):
    m = statistics.mean(xs)
    se = statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else float("nan")
    return "%.3f ± %.3f" % (m, se)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--pages", type=int, default=128, help="pages per call")
    ap.add_argument("--calls", type=int, default=4, help="calls per run and side")
    ap.add_argument("--sizes", default="64K,512K,2M")
    ap.add_argument("--slots", choices=("distinct", "reuse"), default="distinct",
                    help="every page its own pool slot, or every call through the same slots")
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "hicache"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--huge-pages", dest="huge", choices=("thp", "off"), default="thp",
                    help="both pools: transparent huge pages (the C bench's default) or 4 KiB pages")
    ap.add_argument("--kv-one-object-max", dest="one_max", type=size_arg, default=0,
                    help="kv_one_object_max_bytes: pages of at most this size are one object (0 = off)")
    ap.add_argument("--page-tokens", type=int, default=1,
                    help="tokens per page: 1 (default) is the C bench's geometry, 1-byte elements; "
                         "more (SGLang: 64) gives bf16 pages of that many tokens, the same bytes")
    a = ap.parse_args()
    global PS, ONE_OBJECT_MAX
    PS = a.page_tokens
    if a.one_max < 0:
        sys.exit("python_adapter: --kv-one-object-max must be >= 0")
    ONE_OBJECT_MAX = a.one_max
    sizes = [(s, size_arg(s)) for s in a.sizes.split(",")]
    total = a.pages * a.calls
    # C, adapter, the paired halves and the loop, with trailer blocks.
    need = sum(6 * total * (pb + 8192) for _, pb in sizes)
    base = tempfile.mkdtemp(prefix="hicache-pyadapter.", dir=a.dir)
    res, done = {}, []
    try:
        for r in range(a.runs):
            make_room(base, done, need)
            for s, pb in sizes:
                seed = 1000 * r + pb % 997
                keys = hicache.key_chain(list(range(seed * 4096, seed * 4096 + total * PS)), PS)
                hp = HostPool(total, pb, a.huge == "thp")
                w = Work(keys, source_pages(hp, total, seed), pb, a.pages, a.slots == "reuse")
                row = res.setdefault(s, {k: [] for k in ("c_set", "c_get", "py_set", "py_get", "paired_set",
                                                         "paired_get", "loop_set", "loop_get")})
                dirs = {k: os.path.join(base, "%s-%s-%d" % (k, s, r)) for k in ("c", "py", "pair", "loop")}
                done += dirs.values()
                # Alternate which side goes first, so that a disk that slows
                # (or speeds up) within a run favours neither side.
                for side in ("c", "py") if r % 2 == 0 else ("py", "c"):
                    if side == "c":
                        row["c_set"].append(c_bench(a.bin, "set", dirs["c"], w, seed, a.huge == "thp"))
                        row["c_get"].append(c_bench(a.bin, "get", dirs["c"], w, seed, a.huge == "thp"))
                    else:
                        st, gt = adapter(hp, dirs["py"], w)
                        row["py_set"].append(st)
                        row["py_get"].append(gt)
                # A namespace of their own: no other side's keys.
                pkeys = hicache.key_chain(list(range(seed * 4096, seed * 4096 + 2 * total * PS)), PS,
                                          seed=("paired", None))
                hp.pages(0, total).copy_(w.src)
                ps_, pg_ = paired(hp, dirs["pair"], pkeys, a.pages, r % 2)
                row["paired_set"].append(ps_)
                row["paired_get"].append(pg_)
                st, gt = loop(hp, dirs["loop"], w)
                row["loop_set"].append(st)
                row["loop_get"].append(gt)
                del hp, w
        print("%d calls of %d pages, slots %s, O_DIRECT, cold gets, %d runs, kv_one_object_max_bytes %d;"
              " GB/s medians, ratios the mean of the runs' ratios ± its standard error" % (
                  a.calls, a.pages, a.slots, a.runs, ONE_OBJECT_MAX))
        print("| page | op | C bench | adapter | adapter/C | adapter/bare call, paired | SGLang-style loop"
              " | adapter/loop |")
        print("|---|---|---|---|---|---|---|---|")
        med = statistics.median
        for s, row in res.items():
            for op in ("set", "get"):
                c, p, lo = (row["%s_%s" % (k, op)] for k in ("c", "py", "loop"))
                print("| %s | %s | %.2f | %.2f | %s | %s | %.2f | %.2f |" % (
                    s, op, med(c), med(p), mean_se([x / y for x, y in zip(p, c)]),
                    mean_se(row["paired_%s" % op]), med(lo), med([x / y for x, y in zip(p, lo)])))
        if os.environ.get("PYADAPTER_RAW"):
            print(json.dumps(res))
    finally:
        if a.keep:
            print("files kept under %s" % base, file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
