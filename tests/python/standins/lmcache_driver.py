"""A stand-in for the part of LMCache's multi-process mode that loads and
drives a "native connector" as its L2 storage tier (the native_plugin L2
adapter). LMCache itself is not installable here; this module follows the
adapter's contract so a connector can be tested and benchmarked the way
LMCache would use it:

  - load_native_plugin(config): what `lmcache server ... --l2-adapter
    '{"type": "native_plugin", "module_path": ..., "class_name": ...,
    "adapter_params": {...}, "max_capacity_gb": N}'` does: import the
    module, build cls(**adapter_params), refuse (TypeError naming the
    method) an object that lacks a required method.
  - Arena: LMCache's pinned L1 arena, one big allocation carved into
    chunk-sized slices; offset_bytes shifts every slice so that none is
    4096-aligned (LMCache promises no alignment).
  - L2Driver: the adapter. Submits under one lock, as LMCache does (so a
    submit that blocks stalls everything; each submit's duration is
    recorded), a demux thread that polls the connector's event_fd for
    readability and calls drain_completions(), checks of the completion
    stream (every future id known, reported exactly once, well-formed),
    per-future waiters, and LMCache's own capacity accounting with LRU
    eviction through submit_batch_delete when the connector has it.

Where the contract is loose the stand-in is strict: a future id the
connector hands out twice (even after the first completed) is a violation,
and completion results must be real bools. ok for a get or set is the
connector's word; result of a get, when given, must hold one bool per key.
"""
import collections
import importlib
import importlib.util
import json
import mmap
import os
import select
import sys
import threading
import time

REQUIRED = ("event_fd", "submit_batch_get", "submit_batch_set", "submit_batch_exists",
            "drain_completions", "close")
OPTIONAL = ("submit_batch_delete",)

GIB = 1 << 30


def key(model, rank, group, chunk_hash_hex, salt=None):
    """An LMCache-style key: model@<rank as 8 hex>@<group>@<chunk hash>[@<salt>].
    chunk_hash_hex may be an int (written in hex) or a hex string."""
    if isinstance(chunk_hash_hex, int):
        chunk_hash_hex = "%x" % chunk_hash_hex
    k = "%s@%08x@%s@%s" % (model, int(rank), group, chunk_hash_hex)
    if salt is not None and salt != "":
        k += "@%s" % salt
    return k


def _import_module(module_path):
    """module_path is a dotted module name, or a path to a .py file."""
    if module_path.endswith(".py") or os.sep in module_path:
        name = "lmcache_native_plugin_" + os.path.splitext(os.path.basename(module_path))[0]
        spec = importlib.util.spec_from_file_location(name, module_path)
        if spec is None or spec.loader is None:
            raise ImportError("cannot load native plugin module from %r" % module_path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(module_path)


def _missing_methods(obj):
    return [m for m in REQUIRED if not callable(getattr(obj, m, None))]


def parse_config(config):
    """The --l2-adapter value (JSON string or dict), checked and with the
    defaults filled in."""
    if isinstance(config, (str, bytes)):
        config = json.loads(config)
    if not isinstance(config, dict):
        raise TypeError("l2 adapter config must be a JSON object, not %s" % type(config).__name__)
    cfg = dict(config)
    if cfg.get("type", "native_plugin") != "native_plugin":
        raise ValueError("l2 adapter type %r is not native_plugin" % cfg.get("type"))
    for field in ("module_path", "class_name"):
        if not isinstance(cfg.get(field), str) or not cfg[field]:
            raise ValueError("native_plugin config needs a %s string" % field)
    params = cfg.get("adapter_params") or {}
    if not isinstance(params, dict):
        raise TypeError("adapter_params must be a JSON object")
    cfg["adapter_params"] = params
    cap = cfg.get("max_capacity_gb")
    if cap is not None and (not isinstance(cap, (int, float)) or cap <= 0):
        raise ValueError("max_capacity_gb must be a positive number")
    return cfg


def load_native_plugin(config):
    """Import config["module_path"], build class_name(**adapter_params) and
    check it has every required method. Returns the connector object; a
    missing method raises TypeError naming it (checked on the class before
    constructing, and on the object after)."""
    cfg = parse_config(config)
    mod = _import_module(cfg["module_path"])
    cls = getattr(mod, cfg["class_name"], None)
    if cls is None:
        raise AttributeError("module %r has no class %r" % (cfg["module_path"], cfg["class_name"]))
    missing = _missing_methods(cls)
    if missing:
        raise TypeError("native connector %s.%s lacks required method(s): %s"
                        % (cfg["module_path"], cfg["class_name"], ", ".join(missing)))
    obj = cls(**cfg["adapter_params"])
    missing = _missing_methods(obj)
    if missing:
        if callable(getattr(obj, "close", None)):
            obj.close()
        raise TypeError("native connector %s.%s lacks required method(s): %s"
                        % (cfg["module_path"], cfg["class_name"], ", ".join(missing)))
    return obj


def open_driver(config):
    """load_native_plugin plus an L2Driver with the config's max_capacity_gb."""
    cfg = parse_config(config)
    return L2Driver(load_native_plugin(cfg), max_capacity_gb=cfg.get("max_capacity_gb"))


class Arena:
    """One anonymous mmap carved into nbytes // chunk_bytes slices of
    chunk_bytes, every slice starting offset_bytes after a multiple of
    chunk_bytes (so with offset_bytes % 4096 != 0 no slice is page-aligned).
    slice(i) is a writable memoryview."""

    def __init__(self, nbytes, chunk_bytes, offset_bytes=0):
        if chunk_bytes <= 0 or nbytes < chunk_bytes or offset_bytes < 0:
            raise ValueError("Arena needs nbytes >= chunk_bytes > 0 and offset_bytes >= 0")
        self.chunk_bytes = int(chunk_bytes)
        self.offset_bytes = int(offset_bytes)
        self.nslots = int(nbytes) // self.chunk_bytes
        self.nbytes = self.nslots * self.chunk_bytes
        size = self.offset_bytes + self.nbytes
        size = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
        self._map = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                              prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self._mv = memoryview(self._map)
        self.whole = self._mv[self.offset_bytes:self.offset_bytes + self.nbytes]

    def __len__(self):
        return self.nslots

    def slice(self, i):
        if not 0 <= i < self.nslots:
            raise IndexError("arena slot %d of %d" % (i, self.nslots))
        at = self.offset_bytes + i * self.chunk_bytes
        return self._mv[at:at + self.chunk_bytes]

    def close(self):
        """Unmaps when no slice is still referenced; otherwise leaves the
        mapping to the garbage collector."""
        try:
            self.whole.release()
            self._mv.release()
            self._map.close()
        except BufferError:
            pass


class L2Future:
    """One submitted batch. result(timeout) -> (ok, error, result); raises
    TimeoutError when it has not completed in time."""

    def __init__(self, op, keys, fid, submit_s, t_submit):
        self.op = op
        self.keys = keys
        self.id = fid
        self.submit_s = submit_s          # how long the submit call took
        self.t_submit = t_submit          # perf_counter when the submit began
        self.t_done = None                # perf_counter when the demux thread resolved it
        self._event = threading.Event()
        self._value = None

    def done(self):
        return self._event.is_set()

    def result(self, timeout=None):
        if not self._event.wait(timeout):
            raise TimeoutError("%s future %r (%d keys) not completed after %ss"
                               % (self.op, self.id, len(self.keys), timeout))
        return self._value

    def _resolve(self, value):
        self._value = value
        self.t_done = time.perf_counter()
        self._event.set()

    def __repr__(self):
        return "L2Future(%s, id=%r, keys=%d, done=%s)" % (self.op, self.id, len(self.keys), self.done())


class L2Driver:
    """Drives a loaded native connector as LMCache's L2 adapter does.

    get/set/exists/delete submit under the driver's lock (LMCache calls the
    connector while holding its own lock) and return an L2Future; delete
    returns None when the connector has no submit_batch_delete. Every
    submit's duration is kept in submit_times as (op, nkeys, seconds).

    A demux thread polls connector.event_fd() for readability, calls
    drain_completions() and resolves the futures; anything off in the
    completion stream is recorded in violations, and check() raises
    AssertionError listing them.

    max_capacity_gb (GiB, LMCache's accounting): bytes stored through
    successful sets are counted per key; over capacity, the least recently
    set or read keys are forgotten and, when the connector has
    submit_batch_delete, deleted (futures in evictions)."""

    POLL_MS = 200

    def __init__(self, connector, max_capacity_gb=None):
        missing = _missing_methods(connector)
        if missing:
            raise TypeError("native connector lacks required method(s): %s" % ", ".join(missing))
        self.connector = connector
        self.has_delete = callable(getattr(connector, "submit_batch_delete", None))
        self.capacity_bytes = None if max_capacity_gb is None else int(max_capacity_gb * GIB)
        self._lock = threading.Lock()       # the submit lock (LMCache's)
        self._reg = threading.Lock()        # futures, completions, accounting
        self._pending = {}                  # id -> L2Future not yet completed
        self._done_ids = set()              # ids completed (reported once)
        self._handed_out = set()            # every id a submit returned
        self._early = {}                    # id -> completion seen before its submit returned
        self.violations = []
        self.submit_times = []
        self.evictions = []
        self.completions = 0
        self.drains = 0
        self.empty_drains = 0
        self._lru = collections.OrderedDict()   # key -> bytes
        self.stored_bytes = 0
        self._closed = False
        self._fd = connector.event_fd()
        if not isinstance(self._fd, int) or self._fd < 0:
            raise TypeError("event_fd() returned %r, not a file descriptor" % (self._fd,))
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._stop = False
        self._thread = threading.Thread(target=self._demux, name="lmcache-l2-demux", daemon=True)
        self._thread.start()

    # ---- submits ----------------------------------------------------

    def _submit(self, op, keys, views=None):
        keys = list(keys)
        if views is not None:
            views = list(views)
            if len(views) != len(keys):
                raise ValueError("%d keys but %d buffers" % (len(keys), len(views)))
        meth = getattr(self.connector, "submit_batch_" + op)
        with self._lock:
            if self._closed:
                raise RuntimeError("L2Driver is closed")
            t0 = time.perf_counter()
            fid = meth(keys, views) if views is not None else meth(keys)
            dt = time.perf_counter() - t0
            fut = L2Future(op, keys, fid, dt, t0)
            if op in ("set", "get"):
                fut.nbytes = [len(v) for v in views]
            self.submit_times.append((op, len(keys), dt))
            with self._reg:
                early = None
                if fid in self._handed_out:
                    self._violate("submit_batch_%s returned future id %r, already handed out" % (op, fid))
                else:
                    self._handed_out.add(fid)
                    early = self._early.pop(fid, None)
                    if early is None:
                        self._pending[fid] = fut
                    else:
                        self._done_ids.add(fid)
        if early is not None:
            self._complete([(fut, early)])
        return fut

    def get(self, keys, views):
        return self._submit("get", keys, views)

    def set(self, keys, views):
        return self._submit("set", keys, views)

    def exists(self, keys):
        return self._submit("exists", keys)

    def delete(self, keys):
        if not self.has_delete:
            return None
        return self._submit("delete", keys)

    # ---- the demux thread -------------------------------------------

    def _violate(self, msg):
        self.violations.append(msg)

    def _demux(self):
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        stuck = 0
        while not self._stop:
            try:
                events = poller.poll(self.POLL_MS)
            except InterruptedError:
                continue
            ready = False
            for fd, ev in events:
                if fd == self._fd:
                    if ev & (select.POLLERR | select.POLLNVAL):
                        self._violate("event_fd %d polled with error events 0x%x" % (fd, ev))
                        return
                    ready = True
            if self._stop:
                break
            if not ready:
                continue
            try:
                batch = self.connector.drain_completions()
            except Exception as e:  # a connector bug; LMCache's thread would log it
                self._violate("drain_completions raised %r" % (e,))
                time.sleep(0.01)
                continue
            self.drains += 1
            if not isinstance(batch, (list, tuple)):
                self._violate("drain_completions returned %s, not a list" % type(batch).__name__)
                continue
            if not batch:
                self.empty_drains += 1
                stuck += 1
                if stuck == 1000:
                    self._violate("event_fd stays readable though drain_completions returns nothing")
                if stuck >= 1000:
                    time.sleep(0.001)
                continue
            stuck = 0
            self._handle(batch)

    def _handle(self, batch):
        matched = []
        with self._reg:
            for c in batch:
                if not isinstance(c, (tuple, list)) or len(c) != 4:
                    self._violate("completion %r is not (future_id, ok, error, result)" % (c,))
                    continue
                fid = c[0]
                try:
                    hash(fid)
                except TypeError:
                    self._violate("completion future id %r is not hashable" % (fid,))
                    continue
                self.completions += 1
                fut = self._pending.pop(fid, None)
                if fut is not None:
                    self._done_ids.add(fid)
                    matched.append((fut, c))
                elif fid in self._done_ids:
                    self._violate("future %r reported more than once" % (fid,))
                elif fid in self._early:
                    self._violate("future %r reported more than once (before its submit returned)" % (fid,))
                else:
                    # its submit may still be running under the submit lock
                    self._early[fid] = c
        self._complete(matched)

    def _complete(self, matched):
        """Check each completion, do the accounting, then wake the waiters
        (evictions are submitted before the set that caused them resolves)."""
        for fut, (_fid, ok, error, result) in matched:
            value = self._check(fut, ok, error, result)
            if self.capacity_bytes is not None:
                self._account(fut, value)
            fut._resolve(value)

    def _check(self, fut, ok, error, result):
        where = "%s future %r" % (fut.op, fut.id)
        if not isinstance(ok, bool):
            self._violate("%s: ok is %r, not a bool" % (where, ok))
            ok = bool(ok)
        if error is None:
            error = ""
        if not isinstance(error, str):
            self._violate("%s: error is %r, not a str" % (where, error))
            error = str(error)
        if result is not None:
            if not isinstance(result, (list, tuple)):
                self._violate("%s: result is %r, not a list" % (where, type(result).__name__))
                result = None
            else:
                result = list(result)
                if any(not isinstance(r, bool) for r in result):
                    self._violate("%s: result holds non-bool values" % where)
                    result = [bool(r) for r in result]
                if fut.op in ("exists", "get") and len(result) != len(fut.keys):
                    self._violate("%s: result has %d entries for %d keys" % (where, len(result), len(fut.keys)))
        if fut.op == "exists" and ok and result is None:
            self._violate("%s: ok but no per-key result" % where)
        if not ok and not error:
            self._violate("%s: failed with an empty error" % where)
        return (ok, error, result)

    def _account(self, fut, value):
        ok, _err, result = value
        victims = []
        with self._reg:
            if fut.op == "set" and ok:
                for k, n in zip(fut.keys, fut.nbytes):
                    old = self._lru.pop(k, None)
                    if old is not None:
                        self.stored_bytes -= old
                    self._lru[k] = n
                    self.stored_bytes += n
                while self.stored_bytes > self.capacity_bytes and self._lru:
                    k, n = self._lru.popitem(last=False)
                    self.stored_bytes -= n
                    victims.append(k)
            elif fut.op == "get":
                hits = result if result is not None else [ok] * len(fut.keys)
                for k, hit in zip(fut.keys, hits):
                    if hit and k in self._lru:
                        self._lru.move_to_end(k)
            elif fut.op == "delete" and ok:
                for k in fut.keys:
                    n = self._lru.pop(k, None)
                    if n is not None:
                        self.stored_bytes -= n
        if victims and self.has_delete:
            try:
                self.evictions.append(self._submit("delete", victims))
            except RuntimeError:
                pass  # closing

    # ---- inspection and shutdown ------------------------------------

    def outstanding(self):
        with self._reg:
            return len(self._pending)

    def lru_keys(self):
        with self._reg:
            return list(self._lru)

    def wait_all(self, timeout=None):
        """Waits for every future submitted so far; False on timeout."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._reg:
                futs = list(self._pending.values())
            if not futs:
                return True
            for f in futs:
                left = None if end is None else max(0.0, end - time.monotonic())
                if not f._event.wait(left):
                    return False

    def max_submit_s(self, op=None):
        ts = [t for o, _n, t in self.submit_times if op is None or o == op]
        return max(ts) if ts else 0.0

    def check(self):
        """Raises AssertionError when the completion stream broke the
        contract: unknown or repeated future ids, malformed completions."""
        with self._lock:
            with self._reg:
                problems = list(self.violations)
                for fid in self._early:
                    problems.append("future %r reported but never returned by a submit" % (fid,))
        if problems:
            raise AssertionError("native connector broke the L2 contract:\n  " + "\n  ".join(problems))

    def close(self, wait_s=30.0):
        """Waits (up to wait_s) for outstanding futures, stops the demux
        thread, then closes the connector. Futures left over are recorded
        as violations."""
        if self._closed:
            return
        if wait_s and not self.wait_all(wait_s):
            self._violate("%d futures not completed %ss into close()" % (self.outstanding(), wait_s))
        with self._lock:
            self._closed = True
        self._stop = True
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        self._thread.join()
        os.close(self._wake_r)
        os.close(self._wake_w)
        self.connector.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
