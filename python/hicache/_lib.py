"""ctypes declarations of libhicache's public API (include/hicache/*.h).

Only the calls the Python package uses are declared. Structures mirror the
C headers field by field; every struct that carries struct_size is
initialised through its hc_*_init call, so a newer library that grew the
struct still reads ours correctly.

The library is loaded with ctypes.CDLL, which releases the GIL around every
foreign call: threads calling the store run their I/O in parallel.
"""

import ctypes
import ctypes.util
import os

c_size_t = ctypes.c_size_t
c_u32 = ctypes.c_uint32
c_u64 = ctypes.c_uint64
c_i64 = ctypes.c_int64
c_int = ctypes.c_int
c_bool = ctypes.c_bool
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
POINTER = ctypes.POINTER

KEY_BYTES = 32
KEY_HEX_LEN = 64
MAMBA_MAX_CONV = 8
LAT_BUCKETS = 32
NAME_MAX = 128  # HC_STORE_NAME_MAX

# enum hc_pool_kind
POOL_KV, POOL_MAMBA, POOL_INDEXER, POOL_ANCHOR, POOL_SEGMENTS = range(5)
# enum hc_kv_layout
LAYOUTS = ("layer_first", "page_first", "page_first_direct", "page_head")
# enum hc_component
COMP_PLAIN, COMP_K, COMP_V, COMP_MAMBA_TEMPORAL, COMP_MAMBA_CONV = range(5)
# enum hc_pool_sharing
SHARING_AUTO, RANK_SHARDED, RANK_REPLICATED = range(3)
# enum hc_hit_policy
HIT_ALL_PAGES, HIT_TRAILING_PAGES = range(2)


class Region(ctypes.Structure):
    _fields_ = [("addr", c_void_p), ("len", c_size_t)]


class Key(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint8 * KEY_BYTES)]


class KvGeometry(ctypes.Structure):
    _fields_ = [
        ("layers", c_u32),
        ("heads", c_u32),
        ("head_dim", c_u32),
        ("elem_bytes", c_u32),
        ("page_size", c_u32),
        ("pages", c_u64),
        ("layout", c_int),
        ("mla", c_bool),
    ]


class MambaGeometry(ctypes.Structure):
    _fields_ = [
        ("slots", c_u64),
        ("layers", c_u32),
        ("temporal_bytes", c_u64),
        ("nconv", c_u32),
        ("conv_bytes", c_u64 * MAMBA_MAX_CONV),
    ]


class IndexerGeometry(ctypes.Structure):
    _fields_ = [("pages", c_u64), ("page_size", c_u32), ("page_bytes", c_u64)]


class AnchorGeometry(ctypes.Structure):
    _fields_ = [("pages", c_u64), ("page_size", c_u32)]


class Segment(ctypes.Structure):
    _fields_ = [("addr", c_void_p), ("len", c_size_t), ("component", c_int), ("index", c_u32)]


class SegmentBuffer(ctypes.Structure):
    _fields_ = [
        ("base", c_void_p),
        ("len", c_size_t),
        ("page_stride", c_u64),
        ("seg_len", c_u64),
        ("component", c_int),
        ("index", c_u32),
    ]


class StoreOpts(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("backend", c_char_p),
        ("config", c_void_p),
        ("model", c_char_p),
        ("tp_rank", c_u32),
        ("tp_size", c_u32),
        ("force_bounce", c_bool),
    ]


class PoolReg(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("anchor", c_bool),
        ("sharing", c_int),
        ("suffix", c_char_p),
        ("force_bounce", c_bool),
        ("elem_type", c_char_p),
    ]


class PoolTransfer(ctypes.Structure):
    _fields_ = [
        ("pool", c_char_p),
        ("keys", c_void_p),
        ("n", c_size_t),
        ("pages", c_void_p),
        ("policy", c_int),
        ("results", POINTER(c_int)),
        ("names", c_void_p),
    ]


class ExistsQuery(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("keys", c_void_p),
        ("names", c_void_p),
        ("n", c_size_t),
        ("transfers", POINTER(PoolTransfer)),
        ("nt", c_size_t),
        ("kv_hit_pages", c_u64),
        ("pool_hits", POINTER(c_u64)),
        ("endpoints", POINTER(c_u64)),
        ("endpoints_max", c_size_t),
        ("nendpoints", c_size_t),
    ]


STAT_FIELDS = (
    "pages_written",
    "bytes_written",
    "pages_read",
    "bytes_read",
    "pages_existing",
    "hits",
    "misses",
    "corrupt",
    "failures",
    "set_batches",
    "get_batches",
    "exists_batches",
)


class StoreStats(ctypes.Structure):
    _fields_ = [(f, c_u64) for f in STAT_FIELDS] + [
        ("set_latency_us", c_u64 * LAT_BUCKETS),
        ("get_latency_us", c_u64 * LAT_BUCKETS),
        ("exists_latency_us", c_u64 * LAT_BUCKETS),
        ("set_lookups", c_u64),
        ("bounce_bytes", c_u64),
        ("other_geometry", c_u64),
    ]


class PoolInfo(ctypes.Structure):
    _fields_ = [
        ("zero_copy", c_bool),
        ("slot_bytes", c_size_t),
        ("page_bytes", c_size_t),
        ("alignment", c_size_t),
        ("objects", ctypes.c_uint),
    ]


class FsckReport(ctypes.Structure):
    _fields_ = [
        (f, c_u64)
        for f in ("ok", "corrupt", "orphaned_temp", "foreign", "removed", "bytes", "misplaced", "gone")
    ]


class FsckOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("repair", c_bool), ("temp_age_s", c_u64)]


class LsReport(ctypes.Structure):
    _fields_ = [
        ("pages", c_u64),
        ("objects", c_u64),
        ("bytes", c_u64),
        ("oldest_ns", c_i64),
        ("newest_ns", c_i64),
    ]


LOG_FN = ctypes.CFUNCTYPE(None, c_int, c_char_p, c_void_p)

class StoreCqe(ctypes.Structure):
    _fields_ = [("user_data", c_u64), ("result", c_i64)]


# name: (restype, argtypes)
_PROTOS = {
    "hc_version": (c_char_p, []),
    "hc_strerror": (c_char_p, [c_int]),
    "hc_last_error": (c_char_p, []),
    "hc_log_set_handler": (None, [LOG_FN, c_void_p]),
    "hc_log_set_level": (None, [c_int]),
    "hc_log_get_level": (c_int, []),
    "hc_config_create": (c_int, [c_char_p, POINTER(c_void_p)]),
    "hc_config_destroy": (None, [c_void_p]),
    "hc_key_chain": (c_i64, [c_void_p, POINTER(c_u32), c_size_t, c_u32, c_void_p, c_size_t]),
    "hc_key_seed": (c_int, [c_char_p, c_char_p, c_void_p]),
    "hc_key_suffix": (c_int, [c_char_p, c_u32, c_u32, c_bool, c_char_p, c_size_t]),
    "hc_key_sanitize_model": (c_int, [c_char_p, c_char_p, c_size_t]),
    "hc_key_route_hash": (c_u64, [c_char_p]),
    "hc_key_bucket": (ctypes.c_uint, [c_u64]),
    "hc_key_disk": (ctypes.c_uint, [c_u64, ctypes.c_uint]),
    "hc_pool_create_kv": (c_int, [POINTER(KvGeometry), c_void_p, POINTER(c_void_p)]),
    "hc_pool_wrap_kv": (c_int, [POINTER(KvGeometry), POINTER(Region), ctypes.c_uint, POINTER(c_void_p)]),
    "hc_pool_wrap_mamba": (c_int, [POINTER(MambaGeometry), POINTER(Region), POINTER(Region), POINTER(c_void_p)]),
    "hc_pool_wrap_indexer": (c_int, [POINTER(IndexerGeometry), POINTER(Region), POINTER(c_void_p)]),
    "hc_pool_wrap_segments": (c_int, [POINTER(SegmentBuffer), ctypes.c_uint, c_u64, c_u32, POINTER(c_void_p)]),
    "hc_pool_create_anchor": (c_int, [POINTER(AnchorGeometry), POINTER(c_void_p)]),
    "hc_pool_destroy": (None, [c_void_p]),
    "hc_pool_kind": (c_int, [c_void_p]),
    "hc_pool_pages": (c_u64, [c_void_p]),
    "hc_pool_page_tokens": (c_u32, [c_void_p]),
    "hc_pool_page_bytes": (c_size_t, [c_void_p]),
    "hc_pool_contiguous": (c_bool, [c_void_p]),
    "hc_pool_aligned": (c_bool, [c_void_p, c_size_t]),
    "hc_pool_segment_count": (ctypes.c_uint, [c_void_p]),
    "hc_pool_page_segments": (c_int, [c_void_p, c_u64, POINTER(Segment), ctypes.c_uint]),
    "hc_pages_of_slots": (c_int, [c_void_p, c_size_t, c_u32, c_u64, c_void_p]),
    "hc_pool_gather": (c_int, [c_void_p, c_u64, c_void_p, c_size_t]),
    "hc_pool_scatter": (c_int, [c_void_p, c_u64, c_void_p, c_size_t]),
    "hc_store_opts_init": (None, [POINTER(StoreOpts), c_size_t]),
    "hc_store_open": (c_int, [POINTER(StoreOpts), POINTER(c_void_p)]),
    "hc_store_close": (None, [c_void_p]),
    "hc_pool_reg_init": (None, [POINTER(PoolReg), c_size_t]),
    "hc_store_register_pool_ex": (c_int, [c_void_p, c_char_p, c_void_p, POINTER(PoolReg)]),
    "hc_store_unregister_pool": (c_int, [c_void_p, c_char_p]),
    "hc_store_pool_info": (c_int, [c_void_p, c_char_p, POINTER(PoolInfo)]),
    "hc_store_alignment": (c_size_t, [c_void_p]),
    "hc_store_direct_io": (c_bool, [c_void_p]),
    "hc_store_io_engine": (c_char_p, [c_void_p]),
    "hc_store_set": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, POINTER(c_int)]),
    "hc_store_get": (c_i64, [c_void_p, c_void_p, c_size_t, c_void_p, POINTER(c_int)]),
    "hc_store_exists": (c_i64, [c_void_p, c_void_p, c_size_t]),
    "hc_store_set_named": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, POINTER(c_int)]),
    "hc_store_get_named": (c_i64, [c_void_p, c_void_p, c_size_t, c_void_p, POINTER(c_int)]),
    "hc_store_exists_named": (c_i64, [c_void_p, c_void_p, c_size_t]),
    "hc_store_set_v2": (c_int, [c_void_p, POINTER(PoolTransfer), c_size_t]),
    "hc_store_get_v2": (c_int, [c_void_p, POINTER(PoolTransfer), c_size_t]),
    "hc_store_set_start": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, POINTER(c_int), POINTER(c_void_p)]),
    "hc_store_get_start": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, POINTER(c_int), POINTER(c_void_p)]),
    "hc_store_set_v2_start": (c_int, [c_void_p, POINTER(PoolTransfer), c_size_t, POINTER(c_void_p)]),
    "hc_store_get_v2_start": (c_int, [c_void_p, POINTER(PoolTransfer), c_size_t, POINTER(c_void_p)]),
    "hc_store_set_bufs_start": (c_int, [c_void_p, POINTER(PoolTransfer), c_void_p, POINTER(c_void_p)]),
    "hc_store_get_bufs_start": (c_int, [c_void_p, POINTER(PoolTransfer), c_void_p, POINTER(c_void_p)]),
    "hc_store_lookup_start": (c_int, [c_void_p, POINTER(PoolTransfer), c_size_t, POINTER(c_void_p)]),
    "hc_store_delete_start": (c_int, [c_void_p, POINTER(PoolTransfer), c_size_t, POINTER(c_void_p)]),
    "hc_store_lookup": (c_i64, [c_void_p, POINTER(PoolTransfer), c_size_t]),
    "hc_store_delete": (c_i64, [c_void_p, POINTER(PoolTransfer), c_size_t]),
    "hc_store_op_wait": (c_i64, [c_void_p]),
    "hc_store_op_poll": (c_int, [c_void_p]),
    "hc_store_op_cancel": (c_int, [c_void_p]),
    "hc_store_cq_open": (c_int, [c_void_p, POINTER(c_void_p)]),
    "hc_store_cq_fd": (c_int, [c_void_p]),
    "hc_store_op_submit": (c_int, [c_void_p, c_void_p, c_u64]),
    "hc_store_cq_reap": (c_size_t, [c_void_p, POINTER(StoreCqe), c_size_t]),
    "hc_store_cq_pending": (c_size_t, [c_void_p]),
    "hc_store_cq_close": (None, [c_void_p]),
    "hc_exists_query_init": (None, [POINTER(ExistsQuery), c_size_t]),
    "hc_store_exists_query": (c_i64, [c_void_p, POINTER(ExistsQuery)]),
    "hc_store_clear": (c_i64, [c_void_p]),
    "hc_store_stats": (c_int, [c_void_p, c_char_p, POINTER(StoreStats)]),
    "hc_store_latency_quantile": (ctypes.c_double, [POINTER(c_u64), ctypes.c_double]),
    "hc_fsck_opts_init": (None, [POINTER(FsckOpts), c_size_t]),
    "hc_file_fsck_ex": (c_int, [c_void_p, c_size_t, POINTER(FsckOpts), POINTER(FsckReport)]),
    "hc_file_ls": (c_int, [c_void_p, c_size_t, POINTER(LsReport)]),
}


def _candidates():
    env = os.environ.get("HICACHE_LIB")
    if env:
        # Given explicitly: that file or nothing (a silent fallback would
        # hide a wrong path).
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    # Installed layout: PREFIX/lib/python3/dist-packages/hicache/ next to
    # PREFIX/lib/libhicache.so (and multiarch PREFIX/lib/<triplet>/).
    libdir = os.path.normpath(os.path.join(here, "..", "..", ".."))
    for d in (here, libdir):
        out.append(os.path.join(d, "libhicache.so"))
        out.append(os.path.join(d, "libhicache.so.0"))
    try:
        for name in sorted(os.listdir(libdir)):
            sub = os.path.join(libdir, name, "libhicache.so.0")
            if "-linux-" in name and os.path.exists(sub):
                out.append(sub)
    except OSError:
        pass
    found = ctypes.util.find_library("hicache")
    out.append(found or "libhicache.so.0")
    return out, False


def load():
    """Load libhicache: HICACHE_LIB, then next to the package, then the
    system loader. Raises OSError naming every place tried."""
    paths, explicit = _candidates()
    errors = []
    for p in paths:
        if (os.sep in p) and not os.path.exists(p) and not explicit:
            continue
        try:
            lib = ctypes.CDLL(p)
        except OSError as e:
            errors.append("%s: %s" % (p, e))
            continue
        for name, (res, args) in _PROTOS.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        return lib, p
    raise OSError(
        "hicache: cannot load libhicache (set HICACHE_LIB to its path); tried: "
        + ("; ".join(errors) or ", ".join(paths))
    )
