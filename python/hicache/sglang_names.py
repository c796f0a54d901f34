"""What SGLang's pages are called, and what else tells them apart.

Everything that makes two pages' bytes mean different things must reach
either the object name or the geometry tag in the object's trailer; a
collision hands one deployment another's KV.

Names (the suffix after the page key) follow SGLang's own rule, the one its
HiCacheFile and fixed NIXL backends share, so a PP=1/CP=1 deployment keeps
the names it always had:

    _<model>                    '/' in the model name becomes '-'
    _<tp_rank>_<tp_size>        unless the pool is rank-replicated (MLA)
    _<pp_size>_<pp_rank>        when pp_size > 1
    _cp<cp_rank>_<cp_size>      when attn_cp_size > 1

A newer SGLang's `canonical_suffix` (a string) replaces all of it verbatim,
as HiCacheFile uses it; its `model_identity_hash` is appended to the model
as `@<hash>`. Data-parallel ranks share pages: they hold the same weights.

The element type (bf16 vs fp16, fp8 variants of one width) is not in the
name, as SGLang does not name by it: it goes into the geometry tag
(hc_pool_reg.elem_type), so a page of another element type is a miss.
"""

import re

# Bytes a suffix may not hold: the store refuses '/' and control bytes, and
# a NUL would cut the name short.
_BAD_SUFFIX = re.compile(r"[\x00-\x1f\x7f/]")
_ELEM_TYPE = re.compile(r"[A-Za-z0-9_]{1,31}\Z")


class NamingError(ValueError):
    """A configuration whose pages cannot be named apart safely."""


def _field(cfg, name, default=None):
    v = getattr(cfg, name, default)
    return default if v is None else v


def _rank(cfg, rank_field, size_field):
    rank, size = _field(cfg, rank_field, 0), _field(cfg, size_field, 1)
    if isinstance(rank, bool) or isinstance(size, bool) or not isinstance(rank, int) or not isinstance(size, int):
        raise NamingError("%s/%s must be integers, got %r/%r" % (rank_field, size_field, rank, size))
    if size < 1 or not 0 <= rank < size:
        raise NamingError("%s %d is not a rank of %s %d" % (rank_field, rank, size_field, size))
    return rank, size


def model_part(model):
    """SGLang's model part of a name: '/' becomes '-', nothing else
    changes (so "my model" and "my_model" stay apart, and "org/m" and
    "org-m" share pages, as they do in SGLang)."""
    if model is None or model == "":
        return ""
    if not isinstance(model, str):
        raise NamingError("model_name must be a str, got %s" % type(model).__name__)
    m = model.replace("/", "-")
    if _BAD_SUFFIX.search(m):
        raise NamingError("model_name %r holds a control byte" % model)
    return m


def check_supported(cfg):
    """Refuse, at open, what the adapter cannot name or move correctly."""
    canon = getattr(cfg, "canonical_suffix", None)
    if canon is not None and not isinstance(canon, str):
        raise NamingError(
            "canonical_suffix %r is a fan-out over several cells (heterogeneous TP); hicache "
            "moves one cell per page: run with homogeneous TP" % (canon,))
    if _field(cfg, "should_split_heads", False):
        raise NamingError("should_split_heads (heterogeneous TP, page_head split) is not supported: "
                          "a page would be named as one rank's while holding another rank's heads")
    lcm = getattr(cfg, "tp_lcm_size", None)
    tp_size = _field(cfg, "tp_size", 1)
    if lcm is not None and lcm != tp_size:
        raise NamingError("tp_lcm_size %r differs from tp_size %r (heterogeneous TP) and is not supported"
                          % (lcm, tp_size))


def suffix(cfg, replicated):
    """The name suffix of one pool's pages under SGLang's storage config
    cfg; replicated: every TP rank holds the same bytes (MLA KV)."""
    canon = getattr(cfg, "canonical_suffix", None)
    tp = _rank(cfg, "tp_rank", "tp_size")
    if isinstance(canon, str) and canon:
        out = "_" + canon
        if _BAD_SUFFIX.search(canon):
            raise NamingError("canonical_suffix %r holds '/' or a control byte" % canon)
        return out
    pp = _rank(cfg, "pp_rank", "pp_size")
    cp = _rank(cfg, "attn_cp_rank", "attn_cp_size")
    model = model_part(getattr(cfg, "model_name", None))
    ident = getattr(cfg, "model_identity_hash", None)
    out = "_" + model if model else ""
    if ident:
        ident = str(ident)
        if _BAD_SUFFIX.search(ident):
            raise NamingError("model_identity_hash %r holds '/' or a control byte" % ident)
        out += "@" + ident
    if not replicated:
        out += "_%d_%d" % tp
    if pp[1] > 1:
        out += "_%d_%d" % (pp[1], pp[0])
    if cp[1] > 1:
        out += "_cp%d_%d" % cp
    return out


def dtype_name(dtype):
    """torch.bfloat16 -> "bfloat16"; a string passes through."""
    s = str(dtype)
    return s[len("torch."):] if s.startswith("torch.") else s


def elem_type(cfg, buffers, kv=True):
    """The element type a pool's pages are tagged with: SGLang's
    kv_cache_dtype for KV pools when it passes one (fp8 KV is stored as
    uint8, so only it tells e4m3 from e5m2), else the buffers' dtypes.
    None when there are no buffers (a logical anchor)."""
    names = []
    kcd = getattr(cfg, "kv_cache_dtype", None) if kv else None
    if kcd is not None and str(kcd) not in ("", "auto"):
        names.append(dtype_name(kcd))
    else:
        for b in buffers:
            d = dtype_name(getattr(b, "dtype", "")) if b is not None else ""
            if d and d not in names:
                names.append(d)
    if not names:
        return None
    tag = "_".join(re.sub(r"[^A-Za-z0-9_]", "_", n) for n in names)
    if not _ELEM_TYPE.match(tag):
        # Still an identity, just shorter: a stable digest of the names.
        import hashlib

        tag = "t" + hashlib.sha256(tag.encode()).hexdigest()[:30]
    return tag
