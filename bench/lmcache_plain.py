"""A plain one-file-per-key native connector for LMCache's native_plugin L2
adapter: the baseline bench/lmcache_connector.py measures others against.

  set     write the buffer to <name>.tmp.<pid>.<n> (os.pwritev), rename over <name>
  get     open <name>, check its size is the buffer's, os.preadv into the buffer
  exists  os.path.exists(<name>)
  delete  os.unlink(<name>) (a missing file counts as deleted)

<name> is the key percent-quoted (letters, digits, '@', '.', '_', '-' kept),
or the sha256 of the key when that is longer than 200 bytes. One flat
directory, buffered I/O (LMCache's buffers are not aligned, so no O_DIRECT),
no fsync. A ThreadPoolExecutor of Python threads does the I/O, one task per
key of a get, set or delete and one per exists batch; submits only queue
tasks, so they do not block. Each finished batch appends
(future_id, ok, error, result) to a queue and writes 1 to an eventfd
(EFD_NONBLOCK | EFD_CLOEXEC), both under one lock; drain_completions reads
the eventfd, clearing it, and takes the queue under that lock.

ok is True when every key of the batch succeeded; otherwise error says
which failed. result: per-key success for get, per-key presence for
exists, None for set and delete."""
import collections
import hashlib
import itertools
import os
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

_SAFE = "@._-"


def file_name(key):
    name = urllib.parse.quote(key, safe=_SAFE)
    if len(name) > 200 or name.startswith("."):
        name = "sha256-" + hashlib.sha256(key.encode()).hexdigest()
    return name


def _write_all(fd, view):
    n = len(view)
    done = 0
    while done < n:
        w = os.pwritev(fd, [view[done:]], done)
        if w <= 0:
            raise OSError("pwritev wrote %d" % w)
        done += w


def _read_all(fd, view):
    n = len(view)
    done = 0
    while done < n:
        r = os.preadv(fd, [view[done:]], done)
        if r <= 0:
            raise EOFError("file shorter than the buffer")
        done += r


class _Batch:
    """A batch of per-key tasks; the last one to finish posts the completion."""
    __slots__ = ("fid", "left", "oks", "errors", "lock", "per_key")

    def __init__(self, fid, n, per_key):
        self.fid = fid
        self.left = n
        self.oks = [False] * n
        self.errors = []
        self.lock = threading.Lock()
        self.per_key = per_key


class PlainFileConnector:
    def __init__(self, root_dir, threads=16):
        self.root = os.path.abspath(root_dir)
        os.makedirs(self.root, exist_ok=True)
        self._pool = ThreadPoolExecutor(max_workers=int(threads), thread_name_prefix="plainfile")
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._lock = threading.Lock()
        self._queue = collections.deque()
        self._ids = itertools.count(1)
        self._tmp = itertools.count(1)
        self._closed = False

    # ---- the contract -----------------------------------------------

    def event_fd(self):
        return self._efd

    def submit_batch_set(self, keys, memoryviews):
        return self._per_key(keys, memoryviews, self._set_one, per_key=False)

    def submit_batch_get(self, keys, memoryviews):
        return self._per_key(keys, memoryviews, self._get_one, per_key=True)

    def submit_batch_delete(self, keys):
        return self._per_key(keys, [None] * len(keys), self._delete_one, per_key=False)

    def submit_batch_exists(self, keys):
        keys = list(keys)
        fid = self._new_id()
        self._pool.submit(self._exists_batch, fid, keys)
        return fid

    def drain_completions(self):
        # queue and counter change together under the lock, so an empty
        # queue means a clear eventfd: no wake-ups with nothing to drain
        with self._lock:
            try:
                os.eventfd_read(self._efd)
            except BlockingIOError:
                pass
            out = list(self._queue)
            self._queue.clear()
        return out

    def close(self):
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.shutdown(wait=True)
        os.close(self._efd)

    # ---- plumbing ---------------------------------------------------

    def _new_id(self):
        with self._lock:
            if self._closed:
                raise RuntimeError("PlainFileConnector is closed")
            return next(self._ids)

    def _post(self, fid, ok, error, result):
        with self._lock:
            self._queue.append((fid, ok, error, result))
            os.eventfd_write(self._efd, 1)

    def _per_key(self, keys, views, fn, per_key):
        keys = list(keys)
        views = list(views)
        if len(keys) != len(views):
            raise ValueError("%d keys but %d buffers" % (len(keys), len(views)))
        fid = self._new_id()
        if not keys:
            self._post(fid, True, "", [] if per_key else None)
            return fid
        b = _Batch(fid, len(keys), per_key)
        submit = self._pool.submit
        for i, (k, v) in enumerate(zip(keys, views)):
            submit(self._run_one, b, i, fn, k, v)
        return fid

    def _run_one(self, b, i, fn, k, v):
        try:
            fn(k, v)
            ok, err = True, None
        except FileNotFoundError:
            ok, err = False, "%s: not found" % k
        except Exception as e:
            ok, err = False, "%s: %s" % (k, e)
        with b.lock:
            b.oks[i] = ok
            if err is not None:
                b.errors.append(err)
            b.left -= 1
            last = b.left == 0
        if last:
            all_ok = not b.errors
            error = "" if all_ok else "%d of %d keys failed: %s" % (
                len(b.errors), len(b.oks), "; ".join(b.errors[:4]))
            self._post(b.fid, all_ok, error, b.oks if b.per_key else None)

    def _path(self, k):
        return os.path.join(self.root, file_name(k))

    def _set_one(self, k, view):
        path = self._path(k)
        tmp = "%s.tmp.%d.%d" % (path, os.getpid(), next(self._tmp))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            _write_all(fd, view)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.close(fd)
        os.replace(tmp, path)

    def _get_one(self, k, view):
        fd = os.open(self._path(k), os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            if size != len(view):
                raise ValueError("stored %d bytes, buffer holds %d" % (size, len(view)))
            _read_all(fd, view)
        finally:
            os.close(fd)

    def _delete_one(self, k, _view):
        try:
            os.unlink(self._path(k))
        except FileNotFoundError:
            pass

    def _exists_batch(self, fid, keys):
        try:
            res = [os.path.exists(self._path(k)) for k in keys]
            self._post(fid, True, "", res)
        except Exception as e:
            self._post(fid, False, "exists: %s" % e, None)
