#!/usr/bin/python3
"""LMCache native connectors (the native_plugin L2 adapter) side by side,
each loaded and driven through the LMCache stand-in
(tests/python/standins/lmcache_driver.py) as `lmcache server --l2-adapter
'{"type": "native_plugin", ...}'` would.

Per round, chunk size and connector (connectors take turns inside a round,
so the ratios compare runs seconds apart):
  set     --total-mib of chunks from an unaligned arena (offset 512 bytes),
          submitted --batch keys per submit, all at once; GB/s from the
          first submit to the last completion. "+sync" adds the os.sync()
          that follows (buffered connectors leave their data dirty).
  get     page cache dropped (as root), then every chunk read back into a
          second, zeroed arena the same way; GB/s to the last completion;
          every byte compared afterwards (untimed).
  exists  --exists-calls submits of --batch keys, half stored and half
          never stored, all at once; calls per second; answers checked.
  submit  page cache dropped, then 1000 get submits back to back over the
          stored keys, then 1000 more, each made once fewer than 1000 are
          outstanding (waiting, untimed, for the oldest): the median and
          max time of one of these 1000 submit calls, and how many futures
          were in flight then (median, min). Each get has
          min(--batch, --burst-mib / 2000 / chunk) keys, at least 1.
          LMCache submits under its lock, so a slow submit stalls every
          request.
--fio adds fio to every round and chunk size, in the same rotation as the
connectors, on the same kind of files: N files of exactly the chunk size
(N = --total-mib / chunk) in a fresh directory of the run's, written by one
fio job (io_uring, O_DIRECT, bs = filesize = the chunk size, nrfiles N,
openfiles and iodepth 32, file_service_type=sequential, create_on_open=1:
each file created when first opened, inside fio's clock, as the connectors
create theirs; without it fio lays every file out, fallocated, before its
clock starts), an os.sync() (timed: "+sync"), the page cache dropped (as
root), and the files read back with --rw=read. GB/s come from fio's terse
(v3) output: write bandwidth field 48, read bandwidth field 7, in KiB/s
(fio's runtime excludes its start-up; each fio process's wall time is in the
JSON). The table adds a row "fio" and, for every connector, columns
store/fio (set GB/s / fio's) and load/fio (get GB/s / fio's), medians of
the per-round ratios. --fio-arg adds a fio option to both jobs (repeatable).

--spinner: before the rounds a pure-Python thread spinning
`while not stop: n += 1` is timed alone for about a second (its solo rate);
then it spins during every set and every cold get (from the first submit
to the last completion; not the sync, exists or submit burst). spin % = its
rate then / its solo rate * 100: 100 when the connector (and the stand-in's
demux thread) leave the interpreter free, lower the more they hold the GIL.
With few cores the connector's C I/O threads (and the kernel's io_uring
workers) also take CPU from the spinner, so spin % mixes GIL holding and
CPU sharing; cpu s, the process's user + system CPU time over the same
windows (getrusage: every thread, the spinner's own included; its alone is
spin_cpu_s in the JSON), separates them: near wall time * CPUs means the
CPUs were full. oncpu % is the spinner's own CPU time / the windows' wall
time * 100 (about 100 alone): unlike spin %, it does not move with the
CPU's speed, which on a shared virtual machine can vary 2-3x from one
second to the next (a sibling hyperthread busy or not) and then swamps
spin %. The spinner competes with the connector's Python threads and the
demux thread, so GB/s measured with --spinner are not those of a run
without it.

Every connector is built as CLASS(root_dir=<its own directory>, **params)
with --param key=value (value JSON when it parses, else a string; a key
written CLASS:key applies to that class only). Directories stay until the
end of the run (removed then unless --keep). GB/s are 10^9 bytes per second;
with several rounds the table gives medians, ratios vs the first connector
are medians of per-round ratios.

usage: bench/lmcache_connector.py [--connector MODULE:CLASS ...] [--param K=V ...]
         [--chunk-kib 64,512,2048] [--total-mib 512] [--batch 16] [--rounds N]
         [--exists-calls N] [--burst-mib N] [--dir BASE] [--json FILE] [--keep]
         [--fio [--fio-arg ARG]...] [--spinner]
It takes an exclusive flock on /tmp/hicache-bench.lock while measuring.
"""
import argparse
import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (HERE, os.path.join(ROOT, "tests", "python", "standins"), os.path.join(ROOT, "python")):
    if p not in sys.path:
        sys.path.insert(0, p)

import lmcache_driver as lm  # noqa: E402
from tier_bench import FIO_DEPTH, fio_job, solo_spin, spin_fields, spin_window  # noqa: E402

LOCK = "/tmp/hicache-bench.lock"
OFFSET = 512
BURST = 1000
WAIT_S = 600.0
FIO = "fio"  # fio's place in the rotation


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def fs_type(path):
    """The file system type of the mount holding path (/proc/self/mountinfo)."""
    path = os.path.realpath(path)
    best, fstype = "", "?"
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            mnt = left.split()[4].encode().decode("unicode_escape")
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, fstype = mnt, right.split()[0]
    return fstype


def drop_caches():
    os.sync()
    if os.geteuid() != 0:
        return False
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    return True


def run_fio(base, tag, chunk, n, args):
    """fio at one chunk size: n chunk-sized files written, synced, the page
    cache dropped, read back."""
    d = os.path.join(base, tag)
    r = {"connector": "fio", "chunk_kib": chunk >> 10, "chunks": n, "bytes": n * chunk}
    try:
        os.makedirs(d)
        r["set_gbs"], r["set_s"], r["set_wall_s"] = fio_job(d, chunk, n, "write", args.fio_arg, WAIT_S)
        t0 = time.perf_counter()
        os.sync()
        r["sync_s"] = time.perf_counter() - t0
        r["set_sync_gbs"] = n * chunk / (n * chunk / (r["set_gbs"] * 1e9) + r["sync_s"]) / 1e9
        r["cold"] = drop_caches()
        r["get_gbs"], r["get_s"], r["get_wall_s"] = fio_job(d, chunk, n, "read", args.fio_arg, WAIT_S)
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        r["error"] = "%s: %s" % (type(e).__name__, e)
    return r


def parse_params(items):
    out = []
    for it in items:
        if "=" not in it:
            sys.exit("--param wants key=value, not %r" % it)
        k, v = it.split("=", 1)
        cls = None
        if ":" in k:
            cls, k = k.split(":", 1)
        try:
            v = json.loads(v)
        except ValueError:
            pass
        out.append((cls, k, v))
    return out


def config_for(spec, root, params):
    module, _, cls = spec.partition(":")
    if not module or not cls:
        sys.exit("--connector wants MODULE:CLASS, not %r" % spec)
    ap = {"root_dir": root}
    for c, k, v in params:
        if c is None or c == cls:
            ap[k] = v
    return {"type": "native_plugin", "module_path": module, "class_name": cls, "adapter_params": ap}


def wait(futs, what):
    for f in futs:
        ok, err, res = f.result(WAIT_S)
        if not ok:
            raise RuntimeError("%s failed: %s" % (what, err))
        if f.op == "get" and res is not None and not all(res):
            raise RuntimeError("%s: a key was not read" % what)
    return futs[-1].t_done if futs else time.perf_counter()


def batches(n, batch):
    return [(i, min(n, i + batch)) for i in range(0, n, batch)]


def run_one(spec, params, base, tag, chunk, args, src, dst, keys):
    """One connector at one chunk size: set, cold get, exists, submit burst."""
    n = len(keys)
    nbytes = n * chunk
    root = os.path.join(base, tag)
    try:
        drv = lm.open_driver(config_for(spec, root, params))
    except (ImportError, OSError, TypeError, AttributeError) as e:
        sys.exit("cannot load connector %s: %s" % (spec, e))
    r = {"connector": spec, "chunk_kib": chunk >> 10, "chunks": n, "bytes": nbytes}
    try:
        bs = batches(n, args.batch)
        # set
        with spin_window(args.spinner) as sp_set:
            t0 = time.perf_counter()
            futs = [drv.set(keys[a:b], [src.slice(i) for i in range(a, b)]) for a, b in bs]
            t1 = wait(futs, "set")
        t2 = time.perf_counter()
        os.sync()
        t3 = time.perf_counter()
        r["set_gbs"] = nbytes / (t1 - t0) / 1e9
        r["set_sync_gbs"] = nbytes / ((t1 - t0) + (t3 - t2)) / 1e9
        r["set_submit_max_ms"] = max(f.submit_s for f in futs) * 1e3

        # cold get
        np.frombuffer(dst.whole, dtype=np.uint8)[:nbytes] = 0
        r["cold"] = drop_caches()
        with spin_window(args.spinner) as sp_get:
            t0 = time.perf_counter()
            futs = [drv.get(keys[a:b], [dst.slice(i) for i in range(a, b)]) for a, b in bs]
            t1 = wait(futs, "get")
        r["get_gbs"] = nbytes / (t1 - t0) / 1e9
        if args.spinner:
            r.update(spin_fields(args.spin_solo, [("set", sp_set), ("get", sp_get)]))
        r["get_submit_max_ms"] = max(f.submit_s for f in futs) * 1e3
        a = np.frombuffer(src.whole, dtype=np.uint8)[:nbytes]
        b = np.frombuffer(dst.whole, dtype=np.uint8)[:nbytes]
        if not np.array_equal(a, b):
            bad = int(np.nonzero(a != b)[0][0])
            raise RuntimeError("%s %dK: byte %d (chunk %d) differs after get" % (spec, chunk >> 10, bad, bad // chunk))
        del a, b

        # exists: half stored, half never stored
        half = max(1, args.batch // 2)
        calls = []
        for c in range(args.exists_calls):
            at = (c * half) % n
            present = [keys[(at + j) % n] for j in range(half)]
            absent = [lm.key("bench", 0, "absent", "%x%08x" % (c, j)) for j in range(args.batch - half)]
            calls.append(present + absent)
        t0 = time.perf_counter()
        futs = [drv.exists(ks) for ks in calls]
        t1 = time.perf_counter()
        for f in futs:
            ok, err, res = f.result(WAIT_S)
            want = [True] * half + [False] * (args.batch - half)
            if not ok or res != want:
                raise RuntimeError("exists gave %r (%s), wanted %r" % (res, err, want))
        t2 = max(f.t_done for f in futs)
        r["exists_calls_s"] = len(futs) / (t2 - t0)
        r["exists_submit_max_ms"] = max(f.submit_s for f in futs) * 1e3
        del t1

        # submit latency with 1000 gets in flight: 1000 submits to get
        # there, then 1000 timed ones, each made when fewer than 1000 are
        # outstanding (the oldest waited for, untimed)
        per = max(1, min(args.batch, (args.burst_mib << 20) // (2 * BURST * chunk)))
        per = min(per, n)
        r["burst_keys"] = per
        futs, ramp, timed, inflight = [], [], [], []
        oldest = 0
        drop_caches()
        for c in range(2 * BURST):
            if c >= BURST:
                while drv.outstanding() >= BURST:
                    futs[oldest].result(WAIT_S)
                    oldest += 1
                inflight.append(drv.outstanding())
            at = (c * per) % (n - per + 1)
            f = drv.get(keys[at:at + per], [dst.slice(i) for i in range(at, at + per)])
            futs.append(f)
            (timed if c >= BURST else ramp).append(f.submit_s)
        wait(futs, "burst get")
        timed.sort()
        r["submit_med_us"] = statistics.median(timed) * 1e6
        r["submit_max_ms"] = timed[-1] * 1e3
        r["burst_inflight_med"] = statistics.median(inflight)
        r["burst_inflight_min"] = min(inflight)
        r["ramp_submit_med_us"] = statistics.median(ramp) * 1e6
        r["ramp_submit_max_ms"] = max(ramp) * 1e3
        if not np.array_equal(np.frombuffer(src.whole, dtype=np.uint8)[:nbytes],
                              np.frombuffer(dst.whole, dtype=np.uint8)[:nbytes]):
            raise RuntimeError("%s %dK: data differs after the burst" % (spec, chunk >> 10))
        drv.check()
    finally:
        drv.close()
    drv.check()
    return r


METRICS = [  # (key, header, format, with a ratio column)
    ("set_gbs", "set GB/s", "%.2f", True),
    ("set_sync_gbs", "+sync", "%.2f", True),
    ("get_gbs", "get GB/s", "%.2f", True),
    ("exists_calls_s", "exists/s", "%.0f", True),
    ("submit_med_us", "sub med us", "%.1f", True),
    ("submit_max_ms", "sub max ms", "%.2f", True),
    ("burst_inflight_med", "in flight", "%.0f", False),
]


def labels(specs):
    return [s if specs.count(s) == 1 else "%s#%d" % (s, i) for i, s in enumerate(specs)]


def median_of(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def table(results, specs, chunks, fio_results=(), args=None):
    names = labels(specs)
    with_fio = bool(args and args.fio)
    with_spin = bool(args and args.spinner)
    rows = []
    hdr = ["chunk", "connector"] + [h for _, h, _, _ in METRICS] + ["ratio " + h for _, h, _, r in METRICS if r]
    if with_fio:
        hdr += ["store/fio", "load/fio"]
    if with_spin:
        hdr += ["spin %", "oncpu %", "cpu s"]
    for chunk in chunks:
        for ci in range(len(specs)):
            rs = [r for r in results if r["ci"] == ci and r["chunk_kib"] == chunk]
            if not rs:
                continue
            row = ["%dK" % chunk, names[ci]]
            for k, _, fmt, _ in METRICS:
                row.append(fmt % statistics.median(r[k] for r in rs))
            for k, _, _, with_ratio in METRICS:
                if not with_ratio:
                    continue
                ratios = []
                for r in rs:
                    base = [q for q in results if q["ci"] == 0 and q["chunk_kib"] == chunk
                            and q["round"] == r["round"]]
                    if base and base[0][k] > 0:
                        ratios.append(r[k] / base[0][k])
                row.append("%.2fx" % statistics.median(ratios) if ratios else "-")
            if with_fio:  # medians of the per-round ratios connector / fio
                for k in ("set_gbs", "get_gbs"):
                    ratios = []
                    for r in rs:
                        f = [q for q in fio_results if q["chunk_kib"] == chunk and q["round"] == r["round"]]
                        if f and f[0].get(k):
                            ratios.append(r[k] / f[0][k])
                    row.append("%.2fx" % statistics.median(ratios) if ratios else "-")
            if with_spin:
                for k in ("spin_pct", "spin_oncpu_pct"):
                    v = median_of(r.get(k) for r in rs)
                    row.append("-" if v is None else "%.0f" % v)
                v = median_of(r.get("cpu_s") for r in rs)
                row.append("-" if v is None else "%.2f" % v)
            rows.append(row)
        if with_fio:
            fs = [q for q in fio_results if q["chunk_kib"] == chunk]
            row = ["%dK" % chunk, "fio"]
            for k, _, fmt, _ in METRICS:
                v = median_of(q.get(k) for q in fs) if k in ("set_gbs", "set_sync_gbs", "get_gbs") else None
                row.append("-" if v is None else fmt % v)
            row += ["-"] * (len(hdr) - len(row))
            rows.append(row)
    widths = [max(len(str(x)) for x in col) for col in zip(hdr, *rows)]
    out = ["  ".join(str(x).rjust(w) if i > 1 else str(x).ljust(w) for i, (x, w) in enumerate(zip(r, widths)))
           for r in [hdr] + rows]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connector", action="append", metavar="MODULE:CLASS",
                    help="repeatable; default lmcache_plain:PlainFileConnector")
    ap.add_argument("--param", action="append", default=[], metavar="[CLASS:]KEY=VALUE")
    ap.add_argument("--chunk-kib", default="64,512,2048")
    ap.add_argument("--total-mib", type=int, default=512)
    ap.add_argument("--batch", type=int, default=16, help="keys per submit")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--exists-calls", type=int, default=2000)
    ap.add_argument("--burst-mib", type=int, default=2048,
                    help="bytes the 2000 burst gets read at most (keys per get shrink to fit)")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--fio", action="store_true",
                    help="also run fio at every chunk size, in the same rotation: row fio, columns "
                         "store/fio and load/fio (described at the top of this file)")
    ap.add_argument("--fio-arg", action="append", default=[], metavar="ARG",
                    help="one more fio option for both fio jobs, e.g. --fio-arg=--create_on_open=0 "
                         "(fio's own layout before its clock starts); repeatable")
    ap.add_argument("--spinner", action="store_true",
                    help="run a pure-Python spinner thread during every set and cold get; column "
                         "spin %% (its rate / its solo rate: 100 = the connector leaves the GIL free) "
                         "and cpu s (the process's CPU then). With few cores the C I/O threads "
                         "compete with the spinner for CPU, so spin %% mixes GIL holding and CPU "
                         "sharing; cpu s near wall time * CPUs means the CPUs were full; oncpu %% "
                         "(the spinner's CPU time / wall) does not move with the CPU's speed")
    args = ap.parse_args()

    specs = args.connector or ["lmcache_plain:PlainFileConnector"]
    params = parse_params(args.param)
    chunks = [int(x) for x in args.chunk_kib.split(",") if x]
    if args.batch < 1 or args.rounds < 1 or not chunks:
        sys.exit("need --batch >= 1, --rounds >= 1 and chunk sizes")
    os.makedirs(args.dir, exist_ok=True)
    fst = fs_type(args.dir)
    if fst in ("tmpfs", "ramfs"):
        sys.exit("--dir %s is on %s: gets would never touch a disk; pick a disk-backed directory" % (args.dir, fst))
    total = args.total_mib << 20
    for c in chunks:
        if (c << 10) > total:
            sys.exit("chunk %d KiB is larger than --total-mib" % c)
    if args.fio and shutil.which("fio") is None:
        log("fio is not installed (not on PATH); --fio skipped")
        args.fio = False
    args.spin_solo = None
    free = shutil.disk_usage(args.dir).free
    need = total * len(chunks) * (len(specs) + (1 if args.fio else 0)) * args.rounds
    if need > free * 0.9:
        sys.exit("needs %d MiB on %s, %d MiB free" % (need >> 20, args.dir, free >> 20))

    lockf = open(LOCK, "a")
    try:
        fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log("waiting for %s ..." % LOCK)
        fcntl.flock(lockf, fcntl.LOCK_EX)
    base = tempfile.mkdtemp(prefix="lmcache-bench.", dir=args.dir)
    log("dir %s (%s), %d MiB per run, chunks %s KiB, batch %d, %d round(s), connectors %s%s"
        % (base, fst, args.total_mib, args.chunk_kib, args.batch, args.rounds, ", ".join(specs),
           "" if os.geteuid() == 0 else "; NOT root: gets are not cold"))
    results, fio_results = [], []
    rng = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))
    try:
        if args.spinner:
            args.spin_solo, oncpu = solo_spin()
            log("spinner alone: %.2f M iterations/s, on a CPU %.0f%% of the time" % (args.spin_solo / 1e6, oncpu))
        for rnd in range(args.rounds):
            for ck in chunks:
                chunk = ck << 10
                n = total // chunk
                src = lm.Arena(n * chunk, chunk, offset_bytes=OFFSET)
                dst = lm.Arena(n * chunk, chunk, offset_bytes=OFFSET)
                np.frombuffer(src.whole, dtype=np.uint8)[:] = rng.integers(0, 256, n * chunk, dtype=np.uint8)
                order = list(range(len(specs))) + ([FIO] if args.fio else [])
                if rnd % 2:
                    order.reverse()
                for ci in order:
                    if ci == FIO:
                        r = run_fio(base, "r%d-fio-%dk" % (rnd, ck), chunk, n, args)
                        r["round"] = rnd
                        fio_results.append(r)
                        if "error" in r:
                            log("round %d %4dK %-36s %s" % (rnd, ck, "fio", r["error"]))
                        else:
                            log("round %d %4dK %-36s set %.2f (+sync %.2f) get %.2f GB/s%s "
                                "(fio ran %.2f s, %.2f s)"
                                % (rnd, ck, "fio", r["set_gbs"], r["set_sync_gbs"], r["get_gbs"],
                                   "" if r["cold"] else " (warm)", r["set_wall_s"], r["get_wall_s"]))
                        continue
                    spec = specs[ci]
                    tag = "r%d-c%d-%dk" % (rnd, ci, ck)
                    # distinct keys per run, as distinct LMCache chunk hashes
                    keys = [lm.key("bench-model", ci, "r%d" % rnd, "%08x%08x" % (ck, i), salt=None)
                            for i in range(n)]
                    r = run_one(spec, params, base, tag, chunk, args, src, dst, keys)
                    r["round"] = rnd
                    r["ci"] = ci
                    r["label"] = labels(specs)[ci]
                    results.append(r)
                    log("round %d %4dK %-36s set %.2f (+sync %.2f) get %.2f GB/s%s, exists %.0f/s, "
                        "submit med %.1f us max %.2f ms (%d keys, in flight median %d, min %d)"
                        % (rnd, ck, r["label"], r["set_gbs"], r["set_sync_gbs"], r["get_gbs"],
                           "" if r["cold"] else " (warm)", r["exists_calls_s"], r["submit_med_us"],
                           r["submit_max_ms"], r["burst_keys"], r["burst_inflight_med"],
                           r["burst_inflight_min"])
                        + (", spin %.0f%% (set %.0f%%, get %.0f%%), on a CPU %.0f%%, cpu %.2f s"
                           % (r["spin_pct"], r["spin_set_pct"], r["spin_get_pct"], r["spin_oncpu_pct"],
                              r["cpu_s"])
                           if args.spinner else ""))
                src.close()
                dst.close()
    finally:
        if args.keep:
            log("kept %s" % base)
        else:
            shutil.rmtree(base, ignore_errors=True)
        fcntl.flock(lockf, fcntl.LOCK_UN)
        lockf.close()

    print(table(results, specs, chunks, fio_results, args))
    print("ratios are this connector / %s; GB/s and exists/s: higher is better, submit times: lower"
          % labels(specs)[0])
    if args.fio:
        print("fio: io_uring, O_DIRECT, iodepth = openfiles = %d, one file per chunk, created on open;"
              " store/fio = set GB/s / fio's, load/fio = get GB/s / fio's, same round (median)" % FIO_DEPTH)
    if args.spinner:
        print("spin %%: a pure-Python spinner's rate during set + cold get / its solo rate (%.1f M/s);"
              " oncpu %%: the spinner's CPU time / wall time; cpu s: the process's user + system CPU"
              " then; %d CPUs; every set/get GB/s with the spinner running"
              % (args.spin_solo / 1e6, os.cpu_count() or 0))
    if args.json:
        out = {"args": vars(args), "fs": fst, "results": results}
        if args.fio:
            out["fio"] = fio_results
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
