"""Checks of what a caller hands the library, shared by the package and
the engine adapters: strings (no NUL), integers (no wrap, no float),
memory (buffer protocol, writability, moved tensors) and page indices."""
import ctypes
import operator

from . import _lib

def _cstr(s, what):
    """s (str or bytes) as the NUL-terminated bytes a C call reads: a NUL
    inside would silently cut the name short in C, so it is refused."""
    if isinstance(s, str):
        b = s.encode()
    elif isinstance(s, (bytes, bytearray)):
        b = bytes(s)
    else:
        raise TypeError("hicache: %s must be a str, not %s" % (what, type(s).__name__))
    if b"\0" in b:
        raise ValueError("hicache: %s %r holds a NUL byte" % (what, s))
    return b


def _no_nul(obj, what):
    """Every string inside a JSON-able config: cJSON would read "\u0000" as
    the end of the string."""
    if isinstance(obj, str):
        if "\0" in obj:
            raise ValueError("hicache: %s: %r holds a NUL byte" % (what, obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _no_nul(k, what)
            _no_nul(v, "%s.%s" % (what, k))
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _no_nul(v, what)


def _index(v, what, limit=None):
    """An integer index (int, numpy or 0-d torch integer; never a float or
    a bool) in [0, limit) (limit None: [0, 2**63))."""
    if isinstance(v, bool):
        raise TypeError("hicache: %s must be an integer, not a bool" % what)
    try:
        i = operator.index(v)
    except TypeError:
        raise TypeError("hicache: %s must be an integer, not %s" % (what, type(v).__name__)) from None
    top = (1 << 63) if limit is None else limit
    if not 0 <= i < top:
        raise ValueError("hicache: %s %d is outside [0, %d)" % (what, i, top))
    return i


# ---- memory of Python objects ----


class _Mem:
    """(address, length) of a contiguous host buffer, holding what keeps it
    alive. Accepts CPU torch tensors (data_ptr/numel/element_size), numpy
    arrays, (address, length) tuples and buffer-protocol objects (mmap,
    bytearray, memoryview; bytes only where nothing is written into it).
    writable: the library will write into it (get targets, pool memory):
    read-only memory is refused, never written."""

    __slots__ = ("addr", "len", "ref", "tensor")

    def __init__(self, obj, what="buffer", writable=True):
        self.ref = obj
        self.tensor = None
        if isinstance(obj, tuple) and len(obj) == 2:
            addr, n = _index(obj[0], what + " address"), _index(obj[1], what + " length")
            if addr + n >= 1 << 64 or (n and not addr):
                raise ValueError("hicache: %s: address 0x%x + %d bytes is not a buffer" % (what, addr, n))
            self.addr, self.len = addr, n
            return
        if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):
            dev = getattr(obj, "device", None)
            if dev is not None and getattr(dev, "type", "cpu") != "cpu":
                raise ValueError("hicache: %s: a %s tensor is not host memory" % (what, dev))
            if hasattr(obj, "is_contiguous") and not obj.is_contiguous():
                raise ValueError("hicache: %s: tensor is not contiguous" % what)
            self.addr = int(obj.data_ptr())
            self.len = int(obj.numel()) * int(obj.element_size())
            # Checked per call (moved()): an engine that reallocates or
            # resizes the tensor would leave this address behind.
            self.tensor = obj
            return
        if hasattr(obj, "__array_interface__") and hasattr(obj, "ctypes"):
            if not obj.flags["C_CONTIGUOUS"]:
                raise ValueError("hicache: %s: array is not C-contiguous" % what)
            if writable and not obj.flags["WRITEABLE"]:
                raise ValueError("hicache: %s: array is read-only" % what)
            self.addr = int(obj.ctypes.data)
            self.len = int(obj.nbytes)
            return
        mv = memoryview(obj)
        if not mv.contiguous:
            raise ValueError("hicache: %s: buffer is not contiguous" % what)
        n = mv.nbytes
        if mv.readonly:
            if writable:
                raise ValueError("hicache: %s: buffer is read-only" % what)
            if isinstance(obj, bytes):
                self.addr = ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value or 0
                self.len = n
                return
            raise ValueError("hicache: %s: read-only buffer of type %s" % (what, type(obj).__name__))
        if n == 0:
            self.addr, self.len = 0, 0
            return
        carr = (ctypes.c_char * n).from_buffer(mv.cast("B"))
        self.ref = (obj, carr)
        self.addr = ctypes.addressof(carr)
        self.len = n

    def moved(self):
        """Why this tensor's memory is no longer where it was wrapped, or
        None (a resize_ or set_ moves it; the old block may be freed)."""
        t = self.tensor
        if t is None:
            return None
        addr, n = int(t.data_ptr()), int(t.numel()) * int(t.element_size())
        if addr != self.addr or n != self.len:
            return "tensor moved from 0x%x (%d bytes) to 0x%x (%d bytes)" % (self.addr, self.len, addr, n)
        return None


def _region(mem):
    return _lib.Region(mem.addr, mem.len)


_INDEX_MAX = (1 << 63) - 1


class _Pages:
    """int64 page indices for one call, without per-page Python work for
    tensors and numpy arrays. Integers only (a float index is refused, not
    truncated), never wrapped: lists and arrays are checked to [0, 2**63),
    and the store checks every index against its pool (-EFAULT)."""

    __slots__ = ("n", "ptr", "ref")

    def __init__(self, pages):
        if isinstance(pages, (str, bytes, bytearray)) or pages is None:
            raise TypeError("hicache: pages must be integers, not %s" % type(pages).__name__)
        if hasattr(pages, "data_ptr") and hasattr(pages, "element_size"):
            import torch

            if pages.dtype.is_floating_point or pages.dtype.is_complex or pages.dtype == torch.bool:
                raise TypeError("hicache: pages must be an integer tensor, not %s" % pages.dtype)
            # Every integer dtype converts to int64 exactly, and a negative
            # index reaches C as one past any pool (-EFAULT): no check here,
            # on the engines' path.
            t = pages.reshape(-1).to(device="cpu", dtype=torch.int64).contiguous()
            self.ref = t
            self.n = int(t.numel())
            self.ptr = ctypes.c_void_p(t.data_ptr() if self.n else 0)
            return
        if hasattr(pages, "__array_interface__"):
            import numpy as np

            a = np.asarray(pages).reshape(-1)
            if a.dtype.kind not in "iu":
                raise TypeError("hicache: pages must be an integer array, not %s" % a.dtype)
            # Signed indices reach C as they are, a negative one as one past
            # any pool (-EFAULT); only uint64 can hold 2**63 and more, which
            # int64 would wrap into range.
            if a.size and a.dtype.kind == "u" and a.dtype.itemsize == 8 and int(a.max()) > _INDEX_MAX:
                raise ValueError("hicache: a page index outside [0, 2**63)")
            a = np.ascontiguousarray(a, dtype=np.int64)
            self.ref = a
            self.n = int(a.size)
            self.ptr = ctypes.c_void_p(a.ctypes.data if self.n else 0)
            return
        pages = [_index(p, "page index") for p in pages]
        self.n = len(pages)
        arr = (ctypes.c_int64 * self.n)(*pages)
        self.ref = arr
        self.ptr = ctypes.cast(arr, ctypes.c_void_p)
