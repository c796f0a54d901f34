"""hicache from Python: stores, pools over your own memory, page keys.

A thin ctypes layer over libhicache (no compile step). Every C call
releases the GIL, so several threads calling one store run their I/O at
once. The library is found through HICACHE_LIB, then next to this package
(the installed layout), then the system loader.

    import hicache
    with hicache.Store({"backend": "file", "dirs": ["/mnt/l3"], "model": "m"}) as st:
        pool = hicache.Pool.wrap_kv(kv_buffer, layers=L, heads=H, head_dim=D,
                                    elem_bytes=2, page_size=64, pages=P,
                                    layout="page_first")
        st.register("kv", pool, anchor=True)
        st.set(keys, pages)            # keys: 64-hex strings, 32-byte keys or names
        hits, results = st.get(keys, pages)

Errors of the C library raise hicache.Error (an OSError) carrying errno
and the library's message (hc_last_error()).

The SGLang storage backend is hicache.sglang.HiCacheHicache.
"""

# One module per concern; this one only gathers the public names. The
# underscored ones are re-exported for the adapters and the tests, which
# reach below the public surface on purpose (the library handle, the
# argument checks).
from . import _lib  # noqa: F401
from ._lib import KEY_BYTES, KEY_HEX_LEN, LAYOUTS  # noqa: F401
from ._native import _C, _LIB, _LIB_PATH, _check  # noqa: F401
from ._native import Error, last_error, library_path, set_log_level, version
from ._life import _Life  # noqa: F401
from ._args import _Mem, _Pages, _cstr, _index, _no_nul, _region  # noqa: F401
from .keys import _Keys, _model_name  # noqa: F401
from .keys import key_chain, key_seed, keys_to_bytes, route, suffix
from .pool import Pool
from .store import Store, Transfer
from .tools import fsck, ls
from .completions import Completions

__all__ = [
    "Error",
    "Store",
    "Pool",
    "Transfer",
    "Completions",
    "last_error",
    "route",
    "version",
    "library_path",
    "keys_to_bytes",
    "key_chain",
    "key_seed",
    "suffix",
    "fsck",
    "ls",
    "set_log_level",
]

