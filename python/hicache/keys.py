"""Page keys and names: the batch a call passes (packed hc_key or names),
SGLang's chained keys, name suffixes and routes."""
import array
import ctypes

from . import _lib
from ._args import _cstr, _index
from ._lib import KEY_BYTES, KEY_HEX_LEN
from ._native import _C, _check

# ---- keys ----


class _Keys:
    """Keys for one call: a packed hc_key array when every key is a 64-digit
    lowercase hex string (or 32 raw bytes), else an array of names. Holds
    the buffers the C call reads. keys is a list (or tuple, or any other
    iterable but a str or bytes-like object of names) of str or of bytes;
    a lone str is refused, never read as one key per character."""

    __slots__ = ("n", "keys", "names", "ref")

    def __init__(self, keys):
        self.keys = None
        self.names = None
        self.ref = None
        if isinstance(keys, str):
            raise TypeError("hicache: keys must be a list of keys, not one str (wrap a single key in a list)")
        if isinstance(keys, (bytes, bytearray, memoryview)):
            raw = bytes(keys)
            if len(raw) % KEY_BYTES:
                raise ValueError("hicache: packed keys: %d bytes is not a multiple of 32" % len(raw))
            self.n = len(raw) // KEY_BYTES
            self._packed(raw)
            return
        if keys is None:
            raise TypeError("hicache: keys must be a list of keys, not None")
        keys = keys if isinstance(keys, list) else list(keys)
        self.n = n = len(keys)
        if n == 0:
            return
        if isinstance(keys[0], str):
            try:
                joined = "".join(keys)
            except TypeError:
                bad = next(k for k in keys if not isinstance(k, str))
                raise TypeError("hicache: keys mix str and %s" % type(bad).__name__) from None
            if "\0" in joined:
                i = next(i for i, k in enumerate(keys) if "\0" in k)
                raise ValueError("hicache: key %d (%r) holds a NUL byte" % (i, keys[i]))
            # SGLang's keys: one join and one fromhex for the whole batch.
            # Only lowercase 64-digit keys are hc_keys (a name of other
            # text is used verbatim); lengths are checked per key in C.
            if len(joined) == KEY_HEX_LEN * n and set(map(len, keys)) == {KEY_HEX_LEN}:
                try:
                    raw = bytes.fromhex(joined)
                except ValueError:
                    raw = None
                if raw is not None and len(raw) == KEY_BYTES * n and joined == joined.lower():
                    self._packed(raw)
                    return
            self._named([k.encode() for k in keys])
            return
        if all(isinstance(k, (bytes, bytearray)) for k in keys):
            if set(map(len, keys)) == {KEY_BYTES}:
                self._packed(b"".join(keys))
                return
            enc = [bytes(k) for k in keys]
            for i, k in enumerate(enc):
                if b"\0" in k:
                    raise ValueError("hicache: key %d (%r) holds a NUL byte" % (i, k))
            self._named(enc)
            return
        bad = next(k for k in keys if not isinstance(k, (str, bytes, bytearray)))
        raise TypeError("hicache: keys must be str or bytes, not %s" % type(bad).__name__)

    def _packed(self, raw):
        buf = ctypes.create_string_buffer(raw, len(raw))
        self.ref = buf
        self.keys = ctypes.cast(buf, ctypes.c_void_p)

    def _named(self, encoded):
        arr = (ctypes.c_char_p * len(encoded))(*encoded)
        self.ref = (arr, encoded)
        self.names = ctypes.cast(arr, ctypes.c_void_p)


def keys_to_bytes(keys):
    """64-hex keys -> one bytes object of n x 32 (hc_key[n])."""
    if isinstance(keys, str):
        raise TypeError("hicache: keys must be a list of keys, not one str")
    joined = "".join(keys)
    raw = bytes.fromhex(joined)
    if len(raw) != KEY_BYTES * len(keys) or set(map(len, keys)) - {KEY_HEX_LEN}:
        raise ValueError("hicache: keys must be 64 hex digits each")
    return raw


# ---- keys, names, tools ----


def _u32s(values, what):
    """values as a uint32 array; an out-of-range or non-integer value is
    refused (array.array checks each in C), never wrapped or truncated."""
    try:
        arr = array.array("I", values if isinstance(values, (list, tuple, range)) else list(values))
    except (OverflowError, TypeError, ValueError) as e:
        raise ValueError("hicache: a %s is not an integer in [0, 2**32): %s" % (what, e)) from None
    n = len(arr)
    out = (ctypes.c_uint32 * max(n, 1))()
    if n:
        ctypes.memmove(out, arr.buffer_info()[0], n * 4)
    return out, n


def _seed_key(extra_key, cache_salt):
    k = _lib.Key()
    ek = _cstr(extra_key, "extra_key") if extra_key is not None else None
    salt = _cstr(cache_salt, "cache_salt") if cache_salt is not None else None
    _check(_C.hc_key_seed(ek, salt, ctypes.byref(k)), "key seed")
    return k


def key_chain(tokens, page_size, prior=None, seed=None):
    """SGLang's page keys (hex) of the full pages of tokens. prior: the key
    (hex) of the page before tokens[0]; seed: (extra_key, cache_salt) for a
    namespace seed."""
    toks, ntok = _u32s(tokens, "token")
    page_size = _index(page_size, "page_size", 1 << 32)
    n = ntok // page_size if page_size else 0
    out = (_lib.Key * max(n, 1))()
    pk = None
    if prior is not None:
        raw = bytes.fromhex(prior) if isinstance(prior, str) else bytes(prior)
        if len(raw) != KEY_BYTES:
            raise ValueError("hicache: prior key must be 32 bytes (64 hex digits)")
        pk = _lib.Key.from_buffer_copy(raw)
    elif seed is not None:
        pk = _seed_key(*seed)
    got = _check(_C.hc_key_chain(ctypes.byref(pk) if pk is not None else None, toks, ntok,
                                 page_size, out, n), "key chain")
    return [bytes(out[i].bytes).hex() for i in range(got)]


def key_seed(extra_key=None, cache_salt=None):
    return bytes(_seed_key(extra_key, cache_salt).bytes).hex()


_MODEL_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-/")


def _model_name(model):
    """model as the store's C layer names it: '/' becomes '-' (SGLang's
    rule; so "org/m" and "org-m" share pages, in SGLang too). A name the
    C sanitiser would alter any further (another byte becomes '_', a
    leading '.' or a '..') is refused: "my model" and "my_model" must not
    share pages. Such a model names its pages through register(suffix=)."""
    b = _cstr(model, "model name")
    bad = sorted(set(b) - _MODEL_BYTES)
    if bad or b.startswith(b".") or b".." in b:
        raise ValueError(
            "hicache: model name %r would be altered to fit a file name (%s): name it with "
            "[A-Za-z0-9._-/] only, or pass register(suffix=...)"
            % (model, "byte %r" % bytes([bad[0]]) if bad else "a leading '.' or '..'"))
    return b


def suffix(model, tp_rank=0, tp_size=1, replicated=False):
    """The object name suffix: '_<model>' or '_<model>_<tp_rank>_<tp_size>'."""
    buf = ctypes.create_string_buffer(256)
    _check(_C.hc_key_suffix(_model_name(model) if model else None, _index(tp_rank, "tp_rank", 1 << 32),
                            _index(tp_size, "tp_size", 1 << 32), bool(replicated), buf, 256), "suffix")
    return buf.value.decode()


def route(name, ndirs=1):
    """(bucket 0..255, disk index) of an object name."""
    h = _C.hc_key_route_hash(_cstr(name, "name"))
    return int(_C.hc_key_bucket(h)), int(_C.hc_key_disk(h, _index(ndirs, "ndirs", 1 << 32)))
