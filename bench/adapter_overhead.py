#!/usr/bin/python3
"""The SGLang adapter's own cost per call, without a disk: batch_set_v1 and
batch_get_v1 of 128 pages on the mem backend against the bare Store.set /
Store.get of the same pages, call by call in turn in one process (which
goes first alternates), so both see the same machine. Reports per op the
median time of each side and their difference (what the adapter adds per
call: argument checks, index conversion, bookkeeping).

usage: bench/adapter_overhead.py [--calls N] [--pages N] [--page-tokens T]
Run it with PYTHONPATH pointing at the package to measure (and HICACHE_LIB
at its library) to compare two versions of the adapter on one machine.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("HC_PYTHONPATH", os.path.join(os.path.dirname(HERE), "python")))
os.environ.setdefault("HICACHE_LIB", os.path.join(os.path.dirname(HERE), "build", "libhicache.so"))
os.environ.setdefault("HICACHE_LOG", "off")

import torch  # noqa: E402

import hicache  # noqa: E402
import hicache.sglang as hs  # noqa: E402


class Pool:
    """SGLang's MHA host pool in page_first layout: (2, size, L, H, D)."""

    def __init__(self, pages, ps, layers=1, heads=1, dim=64):
        self.layout, self.page_size, self.size = "page_first", ps, pages * ps
        self.kv_buffer = torch.zeros((2, pages * ps, layers, heads, dim), dtype=torch.bfloat16)
        self.dtype = torch.bfloat16


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--pages", type=int, default=128)
    ap.add_argument("--page-tokens", type=int, default=64)
    a = ap.parse_args()
    ps, n = a.page_tokens, a.pages
    hp = Pool(2 * n, ps)
    c = hs.HiCacheStorageConfig(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                                is_mla_model=False, enable_storage_metrics=False, is_page_first_layout=True,
                                model_name="bench", extra_config={"interface_v1": 1, "backend": "mem",
                                                                  "mem_capacity_bytes": 1 << 34})
    b = hs.HiCacheHicache(c, {})
    b.register_mem_pool_host(hp)
    idx = torch.arange(hp.size, dtype=torch.int64)
    times = {(op, side): [] for op in ("set", "get") for side in ("adapter", "bare")}
    for call in range(a.calls):
        ka = hicache.key_chain([call * 10 ** 6 + i for i in range(n * ps)], ps)
        kb = hicache.key_chain([call * 10 ** 6 + 500000 + i for i in range(n * ps)], ps)
        # The bare call takes page indices, the adapter host (token) indices.
        host, pages = idx[: n * ps], list(range(n))
        for op in ("set", "get"):
            sides = [("adapter", lambda: b.batch_set_v1(ka, host) if op == "set" else b.batch_get_v1(ka, host)),
                     ("bare", lambda: b.store.set(kb, pages) if op == "set" else b.store.get(kb, pages))]
            for side, fn in sides[:: 1 if call % 2 == 0 else -1]:
                t0 = time.perf_counter()
                r = fn()
                times[(op, side)].append(time.perf_counter() - t0)
                ok = all(r) if side == "adapter" else (not any(r) if op == "set" else r[0] == n)
                if not ok:
                    sys.exit("adapter_overhead: %s %s failed" % (side, op))
    print("%d calls of %d pages of %d tokens, mem backend (%s)" % (a.calls, n, ps, hicache.__file__))
    print("| op | adapter, us | bare Store call, us | adapter adds, us |")
    print("|---|---|---|---|")
    for op in ("set", "get"):
        ad = statistics.median(times[(op, "adapter")]) * 1e6
        bare = statistics.median(times[(op, "bare")]) * 1e6
        print("| %s | %.0f | %.0f | %.0f |" % (op, ad, bare, ad - bare))
    b.close()


if __name__ == "__main__":
    main()
