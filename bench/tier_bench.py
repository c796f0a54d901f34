"""What the tier benches (vllm_tier.py, lmcache_connector.py) share: the
process's CPU time, the pure-Python spinner that shows whether a tier holds
the GIL, and one fio job over files of one size as the disk's reference."""
import contextlib
import resource
import subprocess
import threading
import time

FIO_DEPTH = 32  # fio's iodepth and openfiles


def process_cpu_s():
    """User + system CPU seconds of the whole process (every thread)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class Spinner:
    """A pure-Python thread spinning `while not stop: n += 1` from enter to
    exit of a with block: its iterations, the wall time, its own CPU time
    and the whole process's CPU time over that window."""

    def __init__(self):
        self._stop = False
        self._result = (0, 0.0)

    def _spin(self):
        n = 0
        c0 = time.thread_time()
        while not self._stop:
            n += 1
        self._result = (n, time.thread_time() - c0)

    def __enter__(self):
        self._stop = False
        self._thread = threading.Thread(target=self._spin, name="spinner", daemon=True)
        self._cpu0 = process_cpu_s()
        self._t0 = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop = True
        self._thread.join()
        self.wall_s = time.perf_counter() - self._t0
        self.process_cpu_s = process_cpu_s() - self._cpu0
        self.n, self.cpu_s = self._result
        return False

    def rate(self):
        return self.n / self.wall_s if self.wall_s > 0 else 0.0


def spin_window(on):
    """A Spinner when on, else a with block that yields None."""
    return Spinner() if on else contextlib.nullcontext()


def solo_spin(seconds=1.0):
    """The spinner alone, this thread asleep: (iterations per second, % of
    the time it was on a CPU)."""
    with Spinner() as sp:
        time.sleep(seconds)
    return sp.rate(), 100.0 * sp.cpu_s / sp.wall_s


def spin_fields(solo, windows):
    """The spinner's figures over the (name, Spinner) windows of one run;
    {} when a window is missing (not measured or not reached)."""
    if not solo or any(sp is None or not hasattr(sp, "wall_s") for _, sp in windows):
        return {}
    out = {}
    for name, sp in windows:
        out["spin_%s_pct" % name] = 100.0 * sp.rate() / solo
    wall = sum(sp.wall_s for _, sp in windows)
    out["spin_pct"] = 100.0 * sum(sp.n for _, sp in windows) / wall / solo if wall > 0 else None
    out["spin_wall_s"] = wall
    out["spin_cpu_s"] = sum(sp.cpu_s for _, sp in windows)
    out["spin_oncpu_pct"] = 100.0 * out["spin_cpu_s"] / wall if wall > 0 else None
    out["cpu_s"] = sum(sp.process_cpu_s for _, sp in windows)
    return out


def fio_job(d, size, nfiles, rw, extra=(), timeout=600):
    """One fio job over nfiles files of size bytes under d, each moved by
    one whole-file I/O; (GB/s, fio's runtime s, wall s of the fio process)."""
    argv = ["fio", "--name=fio", "--directory=" + d, "--ioengine=io_uring", "--direct=1",
            "--rw=" + rw, "--bs=%d" % size, "--filesize=%d" % size, "--nrfiles=%d" % nfiles,
            "--openfiles=%d" % FIO_DEPTH, "--iodepth=%d" % FIO_DEPTH,
            "--file_service_type=sequential", "--minimal"]
    argv.append("--create_on_open=1" if rw == "write" else "--allow_file_create=0")
    argv += list(extra)
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError("fio --rw=%s exited %d: %s" % (rw, p.returncode, p.stderr.strip()[-400:]))
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("3;")]
    if not lines:
        raise RuntimeError("fio --rw=%s printed no terse v3 line: %r" % (rw, p.stdout[-400:]))
    f = lines[-1].split(";")
    if len(f) < 50 or f[4] != "0":
        raise RuntimeError("fio --rw=%s: error field %r" % (rw, f[4] if len(f) > 4 else None))
    # terse v3, 1-based: read KiB 6, bandwidth 7 (KiB/s), runtime 9 (ms);
    # write KiB 47, bandwidth 48, runtime 50
    kib, bw, ms = (f[46], f[47], f[49]) if rw == "write" else (f[5], f[6], f[8])
    moved, bps = int(kib) << 10, int(bw) * 1024
    if moved != size * nfiles:
        raise RuntimeError("fio --rw=%s moved %d bytes, not %d" % (rw, moved, size * nfiles))
    if bps <= 0 or moved / bps > wall:
        raise RuntimeError("fio --rw=%s: %d KiB/s over %d bytes takes longer than fio ran (%.3f s)"
                           % (rw, int(bw), moved, wall))
    return bps / 1e9, int(ms) / 1e3, wall
