#!/usr/bin/python3
"""vLLM secondary tiers (multi-tier offloading) side by side: each tier class
is registered with SecondaryTierFactory.register_tier, built with
create_secondary_tier({"type": T, "root_dir": DIR, ...--tier-arg}) and driven
the way vLLM's scheduler drives it, through the stand-in in
tests/python/standins (vllm + vllm_driver.py; vLLM itself is not needed).
The default tier is the baseline bench/vllm_fs_tier.py:FsPythonTier (vLLM's
own file-system tier's I/O pattern); hicache's is
`--tier hicache.vllm:HicacheTier:hicache`.

Per round, block size and tier (tiers take turns going first, round by
round; every tier of a block size runs back to back, so their ratios come
from runs seconds apart):
  - the primary tier: a /dev/shm file of 2 * N blocks of the block size
    (N = --total-mib / block), blocks 0..N-1 filled with a pattern of their
    key, N..2N-1 poisoned (untimed);
  - store: every job of the run submitted (--job-mib per job, one key per
    block, fresh keys per run), then get_finished() polled about every
    millisecond until all are reported; the time from the first submit to
    the step that reports the last job. Then a sync, timed apart (a tier
    that leaves dirty pages pays it there);
  - lookup: every key looked up (all must say True) and one absent key
    (False); the median call is printed;
  - the page cache is dropped (as root: sync and 3 > drop_caches; else
    posix_fadvise DONTNEED on every file under the tier's directory);
  - cold load: every key loaded into blocks N..2N-1, the same way, timed
    the same way; then every byte compared with the key's pattern.
Then, per tier and round, call latency: --inflight one-block store jobs
(--latency-kib blocks) submitted without polling, each submit_store timed,
then drained, each get_finished timed; the page cache dropped; the same for
loads. Max and median of each call are printed.

With --fio, fio runs in the same rotation as the tiers, at every block
size, on the same kind of files: N files of exactly the block size in a
fresh directory (<dir>/r<round>/fio/<KiB>k), written by one fio job
(io_uring, O_DIRECT, bs = filesize = the block size, nrfiles N, openfiles
and iodepth 32, file_service_type=sequential, create_on_open=1: each file
created when first opened, inside the timed part, as the tiers create
theirs; without it fio lays every file out, fallocated, before it starts
its clock), then a sync (timed apart), the page cache dropped and the
files read back by the same job with --rw=read. GB/s come from fio's terse
(v3) output: write bandwidth field 48, read bandwidth field 7, KiB/s (fio's
runtime, in ms, excludes its start-up; the wall time of each fio process
is in the JSON). The table adds a row "fio" and, for every tier, columns
store/fio and load/fio: medians of the per-round ratios tier / fio. More
fio options: --fio-arg (repeatable; a later option overrides an earlier).

With --spinner, a pure-Python thread spinning `while not stop: n += 1` is
timed alone for about a second before the rounds (its solo rate), then runs
again during every throughput run's timed store and timed load (from the
first submit to the last job reported; not the sync, lookups or checks).
spin % = its rate then / its solo rate * 100: 100 when the tier (and the
driver's polling) leave the interpreter free, lower the more they hold the
GIL. On a machine with few cores the tier's C I/O threads (and the
kernel's io_uring workers) also take CPU from the spinner, so spin % mixes
GIL holding and CPU sharing; cpu s (the process's user + system CPU time
over the same windows, from getrusage: every thread, the spinner's own
included; the spinner's alone is spin_cpu_s in the JSON) separates them:
near wall time * CPUs means the CPUs were full. oncpu % is the spinner's
own CPU time / the windows' wall time * 100 (about 100 alone): unlike
spin %, it does not move with the CPU's speed, which on a shared virtual
machine can vary 2-3x from one second to the next (a sibling hyperthread
busy or not) and then swamps spin %. The spinner competes for the GIL
with the tier's Python threads and the driver's polling, so the GB/s of a
run with --spinner are not those of a run without it.

Every run writes a fresh directory (<dir>/r<round>/<type>/<KiB>k); nothing is
deleted before the end (then everything, unless --keep). GB/s are 10^9 bytes
of block payload per second; table GB/s are medians over rounds, ratios
(vs the first --tier) means of the per-round ratios.

usage: bench/vllm_tier.py [--tier MODULE:CLASS[:TYPE]]... [--tier-arg [TYPE:]KEY=VALUE]...
         [--block-kib 64,512,2048] [--total-mib 512] [--job-mib 8] [--rounds N]
         [--inflight 1000] [--latency-kib K] [--dir BASE] [--keep] [--json FILE]
         [--fio [--fio-arg ARG]...] [--spinner]
Measuring holds /tmp/hicache-bench.lock (flock), as the other benchmarks do.
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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
for _p in (HERE, os.path.join(REPO, "tests", "python", "standins"), os.path.join(REPO, "python")):
    if _p not in sys.path:
        sys.path.insert(0, _p)
os.environ.setdefault("HICACHE_LIB", os.path.join(REPO, "build", "libhicache.so"))
os.environ.setdefault("HICACHE_LOG", "off")

import vllm_driver as vd  # noqa: E402
from tier_bench import FIO_DEPTH, fio_job, solo_spin, spin_fields, spin_window  # noqa: E402
from vllm.plugins import load_general_plugins  # noqa: E402
from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory  # noqa: E402

LOCK = "/tmp/hicache-bench.lock"
DEFAULT_TIER = "vllm_fs_tier:FsPythonTier:fs_python"
FIO = {"module": None, "class": None, "type": "fio"}  # fio's place in the rotation


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_tier(text):
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise argparse.ArgumentTypeError("--tier wants MODULE:CLASS[:TYPE], got %r" % text)
    module, cls = parts[0], parts[1]
    return {"module": module, "class": cls, "type": parts[2] if len(parts) == 3 else cls.lower()}


def parse_value(v):
    try:
        return json.loads(v)
    except ValueError:
        return v


def parse_tier_args(items, types):
    """[TYPE:]KEY=VALUE -> {type: {key: value}}; VALUE as JSON when it parses."""
    out = {t: {} for t in types}
    for item in items:
        if "=" not in item:
            raise SystemExit("--tier-arg wants [TYPE:]KEY=VALUE, got %r" % item)
        key, value = item.split("=", 1)
        targets = types
        if ":" in key:
            t, key = key.split(":", 1)
            if t not in out:
                raise SystemExit("--tier-arg %r: no tier of type %r" % (item, t))
            targets = [t]
        if key in ("type", "root_dir"):
            raise SystemExit("--tier-arg cannot set %r" % key)
        for t in targets:
            out[t][key] = parse_value(value)
    return out


def fs_type(path):
    try:
        return subprocess.run(["stat", "-f", "-c", "%T", path], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def drop_page_cache(dirs):
    """Drop the page cache: all of it as root, else the files under dirs.
    Returns the method used."""
    os.sync()
    if os.geteuid() == 0:
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            return "drop_caches"
        except OSError:
            pass
    for d in dirs:
        for root, _, files in os.walk(d):
            for name in files:
                try:
                    fd = os.open(os.path.join(root, name), os.O_RDONLY)
                except OSError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
    return "fadvise"


def run_fio(kib, rnd, args, n, work):
    """fio at one block size: N block-sized files written, synced, the page
    cache dropped, read back; a result dict like a tier's."""
    size = kib << 10
    d = os.path.join(work, "r%d" % rnd, "fio", "%dk" % kib)
    res = {"round": rnd, "tier": "fio", "block_kib": kib, "blocks": n, "errors": []}
    try:
        os.makedirs(d)
        res["store_gbps"], res["store_s"], res["store_wall_s"] = fio_job(d, size, n, "write", args.fio_arg, args.timeout)
        t0 = time.perf_counter()
        os.sync()
        res["sync_s"] = time.perf_counter() - t0
        res["drop"] = drop_page_cache([d])
        res["load_gbps"], res["load_s"], res["load_wall_s"] = fio_job(d, size, n, "read", args.fio_arg, args.timeout)
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        res["errors"].append("%s: %s" % (type(e).__name__, e))
    return res


def us(ns_list, fn):
    return round(fn(ns_list) / 1e3, 1) if ns_list else None


def make_scheduler(tier, root, tier_args, view, spec):
    os.makedirs(root, exist_ok=True)
    cfg = {"type": tier["type"], "root_dir": root}
    cfg.update(tier_args)
    return vd.Scheduler(tier_config=cfg, primary_view=view, spec=spec)


def run_throughput(tier, tier_args, kib, rnd, args, view, n, spec, work):
    """One store + cold load of N blocks of `kib` KiB; a result dict."""
    row = kib << 10
    per_job = max(1, (args.job_mib << 20) // row)
    salt = ("tp/%d/%s/%d" % (rnd, tier["type"], kib)).encode()
    keys = [vd.block_key(i, salt=salt) for i in range(n)]
    vd.fill_blocks(view, range(n), keys)
    vd.poison_blocks(view, range(n, 2 * n))
    root = os.path.join(work, "r%d" % rnd, tier["type"], "%dk" % kib)
    res = {"round": rnd, "tier": tier["type"], "block_kib": kib, "blocks": n,
           "jobs": (n + per_job - 1) // per_job, "errors": []}
    s = make_scheduler(tier, root, tier_args, view, spec)
    sp_store = sp_load = None
    try:
        with spin_window(args.spinner) as sp_store:
            t0 = time.perf_counter()
            jobs = [s.store(keys[i:i + per_job], range(i, min(n, i + per_job))) for i in range(0, n, per_job)]
            done = s.wait(jobs, timeout=args.timeout, poll_s=args.poll_ms / 1e3)
            t_store = time.perf_counter() - t0
        t0 = time.perf_counter()
        os.sync()
        res["sync_s"] = time.perf_counter() - t0
        failed = sum(1 for ok in done.values() if not ok)
        if failed:
            res["errors"].append("%d store job(s) failed" % failed)
        res["store_s"] = t_store
        res["store_gbps"] = n * row / t_store / 1e9

        s.reset_timing()
        misses = sum(1 for k in keys if s.lookup(k) is not True)
        if misses:
            res["errors"].append("%d stored key(s) not found by lookup" % misses)
        # None means "being looked up, ask again" (the contract allows it):
        # asked once per step, as the scheduler would, until it settles.
        absent = vd.block_key(-1, salt=salt)
        answer, deadline = s.lookup(absent), time.monotonic() + 5
        while answer is None and time.monotonic() < deadline:
            s.step()
            time.sleep(args.poll_ms / 1e3)
            answer = s.lookup(absent)
        if answer is not False:
            res["errors"].append("lookup of an absent key said %r, not False" % (answer,))
        res["lookup_us_median"] = us(s.call_ns["lookup"], statistics.median)

        res["drop"] = drop_page_cache([root])
        with spin_window(args.spinner) as sp_load:
            t0 = time.perf_counter()
            jobs = [s.load(keys[i:i + per_job], range(n + i, n + min(n, i + per_job)))
                    for i in range(0, n, per_job)]
            done = s.wait(jobs, timeout=args.timeout, poll_s=args.poll_ms / 1e3)
            t_load = time.perf_counter() - t0
        failed = sum(1 for ok in done.values() if not ok)
        if failed:
            res["errors"].append("%d load job(s) failed" % failed)
        res["load_s"] = t_load
        res["load_gbps"] = n * row / t_load / 1e9
        res["steps"] = s.steps
        bad = vd.check_blocks(view, range(n, 2 * n), keys)
        if bad:
            res["errors"].append("%d loaded block(s) differ (first: key %d)" % (len(bad), bad[0]))
    except Exception as e:  # noqa: BLE001 -- report the tier's failure and go on
        res["errors"].append("%s: %s" % (type(e).__name__, e))
    finally:
        s.shutdown()
    if args.spinner:
        res.update(spin_fields(args.spin_solo, [("store", sp_store), ("load", sp_load)]))
    return res


def run_latency(tier, tier_args, rnd, args, view, spec, work):
    """--inflight one-block stores, then loads, each submit and get_finished
    call timed."""
    j = args.inflight
    salt = ("lat/%d/%s" % (rnd, tier["type"])).encode()
    keys = [vd.block_key(i, salt=salt) for i in range(j)]
    vd.fill_blocks(view, range(j), keys)
    vd.poison_blocks(view, range(j, 2 * j))
    root = os.path.join(work, "r%d" % rnd, tier["type"], "latency")
    res = {"round": rnd, "tier": tier["type"], "block_kib": args.latency_kib, "jobs": j, "errors": []}
    s = make_scheduler(tier, root, tier_args, view, spec)
    try:
        stores = [s.store([keys[i]], [i]) for i in range(j)]
        done = s.wait(stores, timeout=args.timeout, poll_s=args.poll_ms / 1e3)
        if not all(done.values()):
            res["errors"].append("%d store job(s) failed" % sum(1 for v in done.values() if not v))
        gf_store = list(s.call_ns["get_finished"])
        drop_page_cache([root])
        s.call_ns["get_finished"].clear()
        loads = [s.load([keys[i]], [j + i]) for i in range(j)]
        done = s.wait(loads, timeout=args.timeout, poll_s=args.poll_ms / 1e3)
        if not all(done.values()):
            res["errors"].append("%d load job(s) failed" % sum(1 for v in done.values() if not v))
        gf = gf_store + s.call_ns["get_finished"]
        bad = vd.check_blocks(view, range(j, 2 * j), keys)
        if bad:
            res["errors"].append("%d loaded block(s) differ" % len(bad))
        for name, vals in (("submit_store", s.call_ns["submit_store"]),
                           ("submit_load", s.call_ns["submit_load"]), ("get_finished", gf)):
            res[name + "_us_max"] = us(vals, max)
            res[name + "_us_median"] = us(vals, statistics.median)
            res[name + "_calls"] = len(vals)
    except Exception as e:  # noqa: BLE001
        res["errors"].append("%s: %s" % (type(e).__name__, e))
    finally:
        s.shutdown()
    return res


def fmt(v, spec="%.2f"):
    return "-" if v is None else spec % v


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def summarize(tiers, blocks, runs, lats, fio_runs=(), args=None):
    first = tiers[0]["type"]
    with_fio = bool(args and args.fio)
    with_spin = bool(args and args.spinner)
    rows = []
    for kib in blocks:
        for t in tiers:
            mine = [r for r in runs if r["tier"] == t["type"] and r["block_kib"] == kib]
            st = [r["store_gbps"] for r in mine if "store_gbps" in r]
            ld = [r["load_gbps"] for r in mine if "load_gbps" in r]
            ratios = {"store": [], "load": []}
            for r in mine:
                base = [b for b in runs if b["tier"] == first and b["block_kib"] == kib
                        and b["round"] == r["round"]]
                for k in ratios:
                    if base and ("%s_gbps" % k) in r and ("%s_gbps" % k) in base[0]:
                        ratios[k].append(r["%s_gbps" % k] / base[0]["%s_gbps" % k])
            lk = [r["lookup_us_median"] for r in mine if r.get("lookup_us_median") is not None]
            rows.append({
                "tier": t["type"], "block_kib": kib, "rounds": len(mine),
                "store_gbps": statistics.median(st) if st else None,
                "load_gbps": statistics.median(ld) if ld else None,
                "store_ratio": statistics.mean(ratios["store"]) if ratios["store"] else None,
                "load_ratio": statistics.mean(ratios["load"]) if ratios["load"] else None,
                "lookup_us": statistics.median(lk) if lk else None,
                "errors": sum(len(r["errors"]) for r in mine),
            })
            if with_fio:  # medians of the per-round ratios tier / fio
                vs = {"store": [], "load": []}
                for r in mine:
                    f = [b for b in fio_runs if b["block_kib"] == kib and b["round"] == r["round"]]
                    for k in vs:
                        g = "%s_gbps" % k
                        if f and g in r and f[0].get(g):
                            vs[k].append(r[g] / f[0][g])
                rows[-1]["store_vs_fio"] = med(vs["store"])
                rows[-1]["load_vs_fio"] = med(vs["load"])
            if with_spin:
                rows[-1]["spin_pct"] = med(r.get("spin_pct") for r in mine)
                rows[-1]["spin_oncpu_pct"] = med(r.get("spin_oncpu_pct") for r in mine)
                rows[-1]["cpu_s"] = med(r.get("cpu_s") for r in mine)
        if with_fio:
            mine = [r for r in fio_runs if r["block_kib"] == kib]
            rows.append({
                "tier": "fio", "block_kib": kib, "rounds": len(mine),
                "store_gbps": med(r.get("store_gbps") for r in mine),
                "load_gbps": med(r.get("load_gbps") for r in mine),
                "store_ratio": None, "load_ratio": None, "lookup_us": None,
                "errors": sum(len(r["errors"]) for r in mine),
                "store_vs_fio": None, "load_vs_fio": None,
            })
            if with_spin:
                rows[-1].update(spin_pct=None, spin_oncpu_pct=None, cpu_s=None)
    lat_rows = []
    for t in tiers:
        mine = [r for r in lats if r["tier"] == t["type"] and "get_finished_us_max" in r]
        if not mine:
            lat_rows.append({"tier": t["type"]})
            continue
        row = {"tier": t["type"]}
        for name in ("submit_store", "submit_load", "get_finished"):
            row[name + "_us_max"] = max(r[name + "_us_max"] for r in mine)
            row[name + "_us_median"] = statistics.median(r[name + "_us_median"] for r in mine)
        lat_rows.append(row)
    return rows, lat_rows


def print_tables(rows, lat_rows, args, first):
    print()
    print("throughput: %d MiB per run, %d MiB jobs, %d round(s); ratio = tier / %s, same round"
          % (args.total_mib, args.job_mib, args.rounds, first))
    if args.fio:
        print("fio: io_uring, O_DIRECT, iodepth = openfiles = %d, one file per block, created on open;"
              " store/fio, load/fio = tier / fio, same round (median)" % FIO_DEPTH)
    if args.spinner:
        print("spin %%: a pure-Python spinner's rate during the timed store + load / its solo rate"
              " (%.1f M/s); oncpu %%: the spinner's CPU time / wall time; cpu s: the process's"
              " user + system CPU then; %d CPUs; every GB/s with the spinner running"
              % (args.spin_solo / 1e6, os.cpu_count() or 0))
    hdr = "%-12s %8s %11s %11s %8s %8s %10s %6s" % (
        "tier", "block", "store GB/s", "load GB/s", "store x", "load x", "lookup us", "errors")
    if args.fio:
        hdr += " %9s %9s" % ("store/fio", "load/fio")
    if args.spinner:
        hdr += " %7s %8s %7s" % ("spin %", "oncpu %", "cpu s")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        line = "%-12s %7dK %11s %11s %8s %8s %10s %6d" % (
            r["tier"], r["block_kib"], fmt(r["store_gbps"]), fmt(r["load_gbps"]),
            fmt(r["store_ratio"]), fmt(r["load_ratio"]), fmt(r["lookup_us"], "%.1f"), r["errors"])
        if args.fio:
            line += " %9s %9s" % (fmt(r.get("store_vs_fio")), fmt(r.get("load_vs_fio")))
        if args.spinner:
            line += " %7s %8s %7s" % (fmt(r.get("spin_pct"), "%.0f"), fmt(r.get("spin_oncpu_pct"), "%.0f"),
                                      fmt(r.get("cpu_s")))
        print(line)
    print()
    print("call latency, us: %d one-block jobs of %d KiB in flight (max / median)"
          % (args.inflight, args.latency_kib))
    hdr = "%-12s %19s %19s %19s" % ("tier", "submit_store", "submit_load", "get_finished")
    print(hdr)
    print("-" * len(hdr))
    for r in lat_rows:
        cells = []
        for name in ("submit_store", "submit_load", "get_finished"):
            cells.append("%9s / %-7s" % (fmt(r.get(name + "_us_max"), "%.1f"),
                                         fmt(r.get(name + "_us_median"), "%.1f")))
        print("%-12s %s" % (r["tier"], " ".join(cells)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tier", action="append", type=parse_tier,
                    help="MODULE:CLASS[:TYPE], repeatable (default %s)" % DEFAULT_TIER)
    ap.add_argument("--tier-arg", action="append", default=[],
                    help="[TYPE:]KEY=VALUE: a constructor keyword (VALUE as JSON when it parses)")
    ap.add_argument("--block-kib", default="64,512,2048")
    ap.add_argument("--total-mib", type=int, default=512)
    ap.add_argument("--job-mib", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--inflight", type=int, default=1000, help="jobs in flight for the call latency")
    ap.add_argument("--latency-kib", type=int, default=None, help="default: the smallest --block-kib")
    ap.add_argument("--poll-ms", type=float, default=1.0, help="sleep between get_finished steps")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a run's jobs may take")
    ap.add_argument("--dir", default=None, help="base directory (default: a new one under /var/tmp)")
    ap.add_argument("--keep", action="store_true", help="leave the files at the end")
    ap.add_argument("--json", default=None, help="write every result here")
    ap.add_argument("--fio", action="store_true",
                    help="also run fio at every block size, in the same rotation: row fio, columns "
                         "store/fio and load/fio (described at the top of this file)")
    ap.add_argument("--fio-arg", action="append", default=[], metavar="ARG",
                    help="one more fio option for both fio jobs, e.g. --fio-arg=--create_on_open=0 "
                         "(fio's own layout before its clock starts); repeatable")
    ap.add_argument("--spinner", action="store_true",
                    help="run a pure-Python spinner thread during the timed store and load; "
                         "column spin %% (its rate / its solo rate: 100 = the tier leaves the GIL "
                         "free) and cpu s (the process's CPU then). With few cores the C I/O "
                         "threads compete with the spinner for CPU, so spin %% mixes GIL holding "
                         "and CPU sharing; cpu s near wall time * CPUs means the CPUs were full; "
                         "oncpu %% (the spinner's CPU time / wall) does not move with the CPU's speed")
    args = ap.parse_args()

    tiers = args.tier or [parse_tier(DEFAULT_TIER)]
    types = [t["type"] for t in tiers]
    if len(set(types)) != len(types):
        raise SystemExit("two --tier of the same type: %s" % types)
    blocks = [int(x) for x in args.block_kib.split(",") if x.strip()]
    if not blocks or any(b <= 0 for b in blocks) or args.total_mib <= 0 or args.rounds <= 0:
        raise SystemExit("--block-kib, --total-mib and --rounds want positive numbers")
    for b in blocks:
        if (args.total_mib << 20) < (b << 10):
            raise SystemExit("--total-mib %d is less than one %d KiB block" % (args.total_mib, b))
    if args.latency_kib is None:
        args.latency_kib = min(blocks)
    tier_args = parse_tier_args(args.tier_arg, types)
    if args.fio and "fio" in types:
        raise SystemExit("--fio: a tier has type 'fio'; give it another TYPE")
    if args.fio and shutil.which("fio") is None:
        log("fio is not installed (not on PATH); --fio skipped")
        args.fio = False
    args.spin_solo = None

    # Plugins first, as every vLLM process does; then what --tier names.
    plugins = load_general_plugins()
    if plugins:
        log("vllm.general_plugins called: %s" % ", ".join(sorted(plugins)))
    for t in tiers:
        if t["type"] in SecondaryTierFactory._registry:
            log("tier type %r is already registered (by a plugin); using that registration" % t["type"])
        else:
            SecondaryTierFactory.register_tier(t["type"], t["module"], t["class"])
        try:  # an import error fails here, before anything is measured
            SecondaryTierFactory.get_tier_class(t["type"])
        except (ImportError, AttributeError) as e:
            raise SystemExit("--tier %s:%s: %s: %s" % (t["module"], t["class"], type(e).__name__, e))

    made_base = args.dir is None
    if made_base:
        base = tempfile.mkdtemp(prefix="hicache-vllm-tier.", dir="/var/tmp")
    else:
        base = os.path.abspath(args.dir)
        made_dir = not os.path.isdir(base)
        os.makedirs(base, exist_ok=True)
    fst = fs_type(base)
    if fst in ("tmpfs", "ramfs"):
        if made_base or made_dir:
            os.rmdir(base)
        raise SystemExit("%s is on %s (O_DIRECT is refused there, and it is memory); "
                         "use --dir on a disk file system" % (base, fst))
    work = tempfile.mkdtemp(prefix="run.", dir=base)
    need = args.rounds * len(tiers) * (len(blocks) * (args.total_mib << 20)
                                       + 2 * args.inflight * (args.latency_kib << 10))
    if args.fio:
        need += args.rounds * len(blocks) * (args.total_mib << 20)
    free = shutil.disk_usage(base).free
    if need > free * 0.9:
        shutil.rmtree(work, ignore_errors=True)
        raise SystemExit("%s has %.1f GiB free; the runs write %.1f GiB (fewer --rounds or --total-mib)"
                         % (base, free / 2**30, need / 2**30))
    log("files under %s (%s); %.1f GiB will be written" % (work, fst, need / 2**30))

    lockf = open(LOCK, "a+")
    runs, lats, fio_runs = [], [], []
    try:
        try:
            fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("waiting for %s (another benchmark runs)" % LOCK)
            fcntl.flock(lockf, fcntl.LOCK_EX)
        spec = vd.make_spec()
        if args.spinner:
            args.spin_solo, oncpu = solo_spin()
            log("spinner alone: %.2f M iterations/s, on a CPU %.0f%% of the time" % (args.spin_solo / 1e6, oncpu))
        rotation = tiers + [FIO] if args.fio else tiers
        for rnd in range(1, args.rounds + 1):
            k = (rnd - 1) % len(rotation)
            order = rotation[k:] + rotation[:k]  # who goes first turns round by round
            for kib in blocks:
                row = kib << 10
                n = (args.total_mib << 20) // row
                mm, view, _ = vd.make_primary(2 * n, row)
                try:
                    for t in order:
                        if t is FIO:
                            r = run_fio(kib, rnd, args, n, work)
                            fio_runs.append(r)
                            log("round %d %5d KiB %-12s store %s GB/s (%.2f s, fio ran %.2f s, sync %.0f ms)"
                                "  cold load %s GB/s (%.2f s, fio ran %.2f s, %s)  %s"
                                % (rnd, kib, "fio", fmt(r.get("store_gbps")), r.get("store_s", 0),
                                   r.get("store_wall_s", 0), r.get("sync_s", 0) * 1e3,
                                   fmt(r.get("load_gbps")), r.get("load_s", 0), r.get("load_wall_s", 0),
                                   r.get("drop", "-"), "; ".join(r["errors"]) or "%d files" % n))
                            continue
                        r = run_throughput(t, tier_args[t["type"]], kib, rnd, args, view, n, spec, work)
                        runs.append(r)
                        log("round %d %5d KiB %-12s store %s GB/s (%.2f s, sync %.0f ms)  cold load %s GB/s"
                            " (%.2f s, %s)  lookup %s us  %s%s"
                            % (rnd, kib, t["type"], fmt(r.get("store_gbps")), r.get("store_s", 0),
                               r.get("sync_s", 0) * 1e3, fmt(r.get("load_gbps")), r.get("load_s", 0),
                               r.get("drop", "-"), fmt(r.get("lookup_us_median"), "%.1f"),
                               "; ".join(r["errors"]) or "verified %d blocks" % n,
                               "  spin %s%% (store %s%%, load %s%%), on a CPU %s%%, cpu %s s"
                               % (fmt(r.get("spin_pct"), "%.0f"), fmt(r.get("spin_store_pct"), "%.0f"),
                                  fmt(r.get("spin_load_pct"), "%.0f"), fmt(r.get("spin_oncpu_pct"), "%.0f"),
                                  fmt(r.get("cpu_s")))
                               if args.spinner else ""))
                finally:
                    vd.close_primary(mm, view)
            mm, view, _ = vd.make_primary(2 * args.inflight, args.latency_kib << 10)
            try:
                for t in order:
                    if t is FIO:
                        continue
                    r = run_latency(t, tier_args[t["type"]], rnd, args, view, spec, work)
                    lats.append(r)
                    log("round %d latency %-12s submit_store %s/%s us  submit_load %s/%s us  "
                        "get_finished %s/%s us (max/median)  %s"
                        % (rnd, t["type"], fmt(r.get("submit_store_us_max"), "%.1f"),
                           fmt(r.get("submit_store_us_median"), "%.1f"),
                           fmt(r.get("submit_load_us_max"), "%.1f"), fmt(r.get("submit_load_us_median"), "%.1f"),
                           fmt(r.get("get_finished_us_max"), "%.1f"), fmt(r.get("get_finished_us_median"), "%.1f"),
                           "; ".join(r["errors"]) or "verified"))
            finally:
                vd.close_primary(mm, view)
    finally:
        if args.keep:
            log("files kept under %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
            if made_base:
                shutil.rmtree(base, ignore_errors=True)
            log("files removed (on ext4 without a journal, creating files is slow for a few minutes "
                "after this; run back to back with --keep on the first run)")
        fcntl.flock(lockf, fcntl.LOCK_UN)
        lockf.close()

    rows, lat_rows = summarize(tiers, blocks, runs, lats, fio_runs, args)
    print_tables(rows, lat_rows, args, tiers[0]["type"])
    if args.json:
        out = {"args": {k: v for k, v in vars(args).items() if k != "tier"},
               "tiers": tiers, "tier_args": tier_args, "work": work,
               "runs": runs, "latency": lats, "summary": rows, "latency_summary": lat_rows}
        if args.fio:
            out["fio"] = fio_runs
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    errors = sum(len(r["errors"]) for r in runs + lats + fio_runs)
    if errors:
        log("%d error(s); see above" % errors)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
