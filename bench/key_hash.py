#!/usr/bin/env python3
"""Page-key chain in Python's hashlib, the way SGLang computes it, as the
baseline for bench_key_hash.

usage: key_hash.py TOKENS_FILE PAGE_SIZE [REPS]

TOKENS_FILE holds little-endian u32 token ids (bench_key_hash --dump). Each
page is hashed straight from a memoryview of the file bytes (no per-token
packing), which is the fastest a pure-Python loop gets; a per-token
to_bytes() loop, as the reference writes it, is several times slower still.
"""
import hashlib
import sys
import time


def chain(mv, npages, step):
    sha256 = hashlib.sha256
    prior = None
    for i in range(npages):
        h = sha256(prior) if prior is not None else sha256()
        h.update(mv[i * step:(i + 1) * step])
        prior = h.digest()
    return prior


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    path, ps = sys.argv[1], int(sys.argv[2])
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    with open(path, "rb") as f:
        data = f.read()
    step = 4 * ps
    npages = len(data) // step
    if npages == 0:
        sys.exit("key_hash.py: fewer tokens than one page")
    mv = memoryview(data)
    best = best_cpu = float("inf")
    last = None
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        last = chain(mv, npages, step)
        t1, c1 = time.perf_counter(), time.process_time()
        best, best_cpu = min(best, t1 - t0), min(best_cpu, c1 - c0)
    nbytes = npages * step
    print("impl=python tokens=%d page_size=%d pages=%d reps=%d best_s=%.4f gbps=%.3f "
          "cpu_gbps=%.3f pages_per_s=%.0f last=%s"
          % (npages * ps, ps, npages, reps, best, nbytes / best / 1e9,
             nbytes / best_cpu / 1e9, npages / best, last.hex()))


if __name__ == "__main__":
    main()
