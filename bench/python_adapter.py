#!/usr/bin/python3
"""hicache from Python: the SGLang adapter (hicache.sglang) against the C
benchmark doing the same work, and against a Python loop doing what SGLang's
own file backend does (docs/PERFORMANCE.md, "Python adapter").

One run interleaves, per page size and repetition (C and adapter in turn
going first):
  C        `hicache bench store --op set|get --pages 128*K --batch 128`
  adapter  HiCacheHicache.batch_set_v1 / batch_get_v1 of the same pages, in
           K calls of 128 (--calls K, default 1: a cold 128 x 64 KiB get
           takes milliseconds, so more calls per run steady the ratio)
  paired   the adapter's set and get against the bare hc_store_set and
           hc_store_get through ctypes in one process, call by call in turn
           (see paired())
  loop     per page: get_data_page -> tofile(<path>.tmp.<pid>.<tid>.<uuid>) ->
           os.replace; read back with open(buffering=0).readinto into a flat
           page, then copied into the pool (SGLang's HiCacheFile)
The adapter's pool has the C bench's object geometry: MHA, page_first, one
layer and head, K half then V half of each page (zero-copy: _k and _v objects
of page_bytes / 2), here with SGLang's 64 tokens per page in bf16, so each
call also converts 64 * 128 host indices. O_DIRECT for both hicache sides.
Every get is cold: each repetition writes fresh directories and the page
cache (with dentries and inodes) is dropped before every get, as root.
Directories are removed only at the end (creating files right after deleting
many is slow on this ext4). Only the store calls are timed; GB/s are 10^9
bytes of page payload per second; the median of --runs repetitions.

usage: bench/python_adapter.py [--dir BASE] [--runs N] [--pages N] [--calls K] [--bin HICACHE]
         [--sizes 64K,512K,2M] [--huge-pages thp|off] [--keep]
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
HUGE = 2 << 20


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().rstrip("IB")
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def drop_caches():
    subprocess.run(["sync"], check=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        sys.exit("python_adapter: cannot drop the page cache (%s): run as root" % e)


class HostPool:
    """SGLang's MHATokenToKVPoolHost in page_first layout: kv_buffer
    (2, tokens, layers, heads, head_dim) over page-aligned mmap memory,
    transparent huge pages asked for (as the C bench's default pool)."""

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
        self.kv_buffer = whole[skip:skip + numel * self.esz].view(self.dtype).view(
            2, self.size, 1, 1, self.head_dim)

    def fill(self, seed):
        flat = self.kv_buffer.view(-1).view(torch.uint8)
        g = torch.Generator().manual_seed(seed)
        flat.copy_(torch.randint(0, 256, (flat.numel(),), generator=g, dtype=torch.uint8))

    def get_data_page(self, index):
        return self.kv_buffer[:, index:index + PS].flatten()

    def get_dummy_flat_data_page(self):
        return torch.zeros(2 * PS * self.head_dim, dtype=self.dtype)

    def set_from_flat_data_page(self, index, flat):
        self.kv_buffer[:, index:index + PS] = flat.view(2, PS, 1, 1, self.head_dim)


def config(d):
    extra = {"backend_name": "hicache", "module_path": "hicache.sglang", "class_name": "HiCacheHicache",
             "interface_v1": 1, "backend": "file", "dirs": [d], "use_direct_io": True,
             "l3_cleaner_interval_s": 0}  # as the C bench: no cleaner mid-run
    return hs.HiCacheStorageConfig(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0,
                                   attn_cp_size=1, is_mla_model=False, enable_storage_metrics=False,
                                   is_page_first_layout=True, model_name="bench", extra_config=extra)


def c_bench(binary, op, d, pages, batch, page_bytes, seed, huge):
    cmd = [binary, "bench", "store", "--op", op, "--pages", str(pages), "--batch", str(batch),
           "--page-bytes", str(page_bytes), "--dir", d, "--direct", "on", "--seed", str(seed), "--json",
           "--huge-pages", "thp" if huge else "off"]
    if op == "get":
        # No --verify: it compares each batch's pages between the timed
        # batches, so the disk idles between them, which the adapter's
        # back-to-back calls never get. The store's checksums still reject
        # any wrong object (counted as corrupt), and the adapter side is
        # compared byte for byte.
        cmd += ["--drop-caches", "--pool-warmup", "on"]
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    if r["errors"] or (op == "get" and (r["hits"] != pages or r["corrupt"])):
        sys.exit("python_adapter: C bench %s failed: %s" % (op, r))
    return r["gbps"]


def calls(fn, keys, idx, batch):
    """fn over keys in calls of batch pages; all results, in order."""
    out = []
    for at in range(0, len(keys), batch):
        out += fn(keys[at:at + batch], idx[at * PS:(at + batch) * PS])
    return out


def adapter(hp, d, keys, page_bytes, batch):
    idx = torch.arange(hp.size, dtype=torch.int64)
    b = hs.HiCacheHicache(config(d), {})
    b.register_mem_pool_host(hp)
    if not b.store.pool_info("kv")["zero_copy"]:
        sys.exit("python_adapter: the adapter's pool is not zero-copy")
    want = hp.kv_buffer.clone()
    t0 = time.perf_counter()
    ok = calls(b.batch_set_v1, keys, idx, batch)
    ts = time.perf_counter() - t0
    # As the C bench's --pool-warmup on: every pool slot read into once,
    # untimed (the first device write into a page makes the next CPU touch
    # slow on some VMs; a serving pool is long past that).
    calls(b.batch_get_v1, keys, idx, batch)
    hp.kv_buffer.zero_()
    drop_caches()
    t0 = time.perf_counter()
    got = calls(b.batch_get_v1, keys, idx, batch)
    tg = time.perf_counter() - t0
    if not all(ok) or not all(got) or not torch.equal(want.view(torch.uint8), hp.kv_buffer.view(torch.uint8)):
        sys.exit("python_adapter: adapter round trip failed")
    b.close()
    n = len(keys) * page_bytes / 1e9
    return n / ts, n / tg


def paired(hp, d, keys, page_bytes, batch, flip):
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
    for at in range(0, half, batch):
        n = min(batch, half - at)
        ix = idx[at * PS:(at + n) * PS]
        chunks.append((at, n, ix, hicache._Keys(keys[half + at:half + at + n]), hicache._Pages(ix),
                       (ctypes.c_int * n)()))

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
                hp.kv_buffer[:, at * PS:(at + n) * PS].zero_()
            t0 = time.perf_counter()
            ok = fn()
            spent[name] = time.perf_counter() - t0
            if not ok or not torch.equal(want[:, at * PS:(at + n) * PS].view(torch.uint8),
                                         hp.kv_buffer[:, at * PS:(at + n) * PS].view(torch.uint8)):
                sys.exit("python_adapter: paired %s %s failed" % (name, op))
        return spent

    ratio = []
    for op in ("set", "get"):
        if op == "get":
            # The pool warm-up, as above, from a third copy of the pages.
            warm = hicache.key_chain(list(range(half * PS)), PS, seed=("paired-warm", None))
            if not all(calls(b.batch_set_v1, warm, idx, batch)) or not all(calls(b.batch_get_v1, warm, idx, batch)):
                sys.exit("python_adapter: paired warm-up failed")
        tot = {"adapter": 0.0, "bare": 0.0}
        for c in chunks:
            for k, v in timed(op, *c).items():
                tot[k] += v
        ratio.append(tot["bare"] / tot["adapter"])
    b.close()
    return ratio


def loop(hp, d, keys, page_bytes):
    """SGLang's HiCacheFile, per ENGINES.md section 6."""
    os.makedirs(d)
    paths = [os.path.join(d, "%s_bench_0_1.bin" % k) for k in keys]
    want = hp.kv_buffer.clone()
    t0 = time.perf_counter()
    for i, p in enumerate(paths):
        if os.path.exists(p):
            continue
        tmp = "%s.tmp.%d.%d.%s" % (p, os.getpid(), threading.get_ident(), uuid.uuid4().hex)
        hp.get_data_page(i * PS).contiguous().view(torch.uint8).numpy().tofile(tmp)
        os.replace(tmp, p)
    ts = time.perf_counter() - t0
    hp.kv_buffer.zero_()
    drop_caches()
    t0 = time.perf_counter()
    for i, p in enumerate(paths):
        flat = hp.get_dummy_flat_data_page()
        with open(p, "rb", buffering=0) as f:
            if f.readinto(flat.view(torch.uint8).numpy()) != page_bytes:
                sys.exit("python_adapter: short read of %s" % p)
        hp.set_from_flat_data_page(i * PS, flat)
    tg = time.perf_counter() - t0
    if not torch.equal(want.view(torch.uint8), hp.kv_buffer.view(torch.uint8)):
        sys.exit("python_adapter: loop round trip failed")
    n = len(keys) * page_bytes / 1e9
    return n / ts, n / tg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pages", type=int, default=128, help="pages per call")
    ap.add_argument("--calls", type=int, default=1, help="calls per run and side")
    ap.add_argument("--sizes", default="64K,512K,2M")
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "hicache"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--huge-pages", dest="huge", choices=("thp", "off"), default="thp",
                    help="both pools: transparent huge pages (the C bench's default) or 4 KiB pages")
    ap.add_argument("--page-tokens", type=int, default=1,
                    help="tokens per page: 1 (default) is the C bench's geometry, 1-byte elements; "
                         "more (SGLang: 64) gives bf16 pages of that many tokens, the same bytes")
    a = ap.parse_args()
    global PS
    PS = a.page_tokens
    base = tempfile.mkdtemp(prefix="hicache-pyadapter.", dir=a.dir)
    res = {}
    try:
        for r in range(a.runs):
            for s in a.sizes.split(","):
                pb = size_arg(s)
                seed = 1000 * r + pb % 997
                total = a.pages * a.calls
                keys = hicache.key_chain(list(range(seed * 4096, seed * 4096 + total * PS)), PS)
                hp = HostPool(total, pb, a.huge == "thp")
                hp.fill(seed)
                row = res.setdefault(s, {k: [] for k in ("c_set", "c_get", "py_set", "py_get", "paired_set",
                                                         "paired_get", "loop_set", "loop_get")})
                cd = os.path.join(base, "c-%s-%d" % (s, r))
                # Alternate which side goes first, so that a disk that slows
                # (or speeds up) within a run favours neither side.
                for side in ("c", "py") if r % 2 == 0 else ("py", "c"):
                    if side == "c":
                        row["c_set"].append(c_bench(a.bin, "set", cd, total, a.pages, pb, seed, a.huge == "thp"))
                        row["c_get"].append(c_bench(a.bin, "get", cd, total, a.pages, pb, seed, a.huge == "thp"))
                    else:
                        st, gt = adapter(hp, os.path.join(base, "py-%s-%d" % (s, r)), keys, pb, a.pages)
                        row["py_set"].append(st)
                        row["py_get"].append(gt)
                # A namespace of their own: no other side's keys.
                pkeys = hicache.key_chain(list(range(seed * 4096, seed * 4096 + 2 * total * PS)), PS,
                                          seed=("paired", None))
                ps_, pg_ = paired(hp, os.path.join(base, "pair-%s-%d" % (s, r)), pkeys, pb, a.pages, r % 2)
                row["paired_set"].append(ps_)
                row["paired_get"].append(pg_)
                st, gt = loop(hp, os.path.join(base, "loop-%s-%d" % (s, r)), keys, pb)
                row["loop_set"].append(st)
                row["loop_get"].append(gt)
                del hp
        # Ratios: the median of each run's ratio (the three sides of one
        # run ran within seconds of each other), GB/s: medians.
        print("%d calls of %d pages, O_DIRECT, cold gets, %d runs; GB/s medians, ratios the median"
              " of the runs' ratios" % (a.calls, a.pages, a.runs))
        print("| page | op | C bench | adapter | adapter/C | adapter/bare call, paired | SGLang-style loop"
              " | adapter/loop |")
        print("|---|---|---|---|---|---|---|---|")
        med = statistics.median
        for s, row in res.items():
            for op in ("set", "get"):
                c, p, lo = (row["%s_%s" % (k, op)] for k in ("c", "py", "loop"))
                pair = "%.2f" % med(row["paired_%s" % op])
                print("| %s | %s | %.2f | %.2f | %.2f | %s | %.2f | %.2f |" % (
                    s, op, med(c), med(p), med([x / y for x, y in zip(p, c)]), pair, med(lo),
                    med([x / y for x, y in zip(p, lo)])))
        if os.environ.get("PYADAPTER_RAW"):
            print(json.dumps(res))
    finally:
        if a.keep:
            print("files kept under %s" % base, file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
