"""The ctypes mirrors in hicache._lib against the C headers.

A field added to a public struct without its mirror makes the library
write past a struct Python allocated (hc_file_fsck once cleared 64 bytes of
a 48-byte report). abi_layout.c prints sizeof and offsetof of every
mirrored struct as the compiler sees the headers; every mirror must agree
field by field and in size."""
import os
import subprocess

import pytest

from hicache import _lib

MIRRORS = {
    "hc_region": _lib.Region,
    "hc_key": _lib.Key,
    "hc_kv_geometry": _lib.KvGeometry,
    "hc_mamba_geometry": _lib.MambaGeometry,
    "hc_indexer_geometry": _lib.IndexerGeometry,
    "hc_anchor_geometry": _lib.AnchorGeometry,
    "hc_segment": _lib.Segment,
    "hc_segment_buffer": _lib.SegmentBuffer,
    "hc_store_opts": _lib.StoreOpts,
    "hc_pool_reg": _lib.PoolReg,
    "hc_pool_transfer": _lib.PoolTransfer,
    "hc_exists_query": _lib.ExistsQuery,
    "hc_store_stats": _lib.StoreStats,
    "hc_store_pool_info": _lib.PoolInfo,
    "hc_fsck_report": _lib.FsckReport,
    "hc_fsck_opts": _lib.FsckOpts,
    "hc_ls_report": _lib.LsReport,
    "hc_store_cqe": _lib.StoreCqe,
}


def c_layouts():
    tool = os.environ.get("HICACHE_ABI_LAYOUT")
    if not tool:
        pytest.skip("HICACHE_ABI_LAYOUT is not set (ctest sets it to the build's py_abi_layout)")
    out = subprocess.run([tool], check=True, capture_output=True, text=True).stdout
    layouts = {}
    for line in out.splitlines():
        struct, field, value = line.split()
        entry = layouts.setdefault(struct, {"size": None, "fields": {}})
        if field == ".":
            entry["size"] = int(value)
        else:
            entry["fields"][field] = int(value)
    return layouts


def test_every_mirror_matches_its_header():
    layouts = c_layouts()
    assert set(layouts) == set(MIRRORS), "abi_layout.c and MIRRORS list different structs"
    wrong = []
    for struct, mirror in MIRRORS.items():
        c = layouts[struct]
        py_fields = {name: getattr(mirror, name).offset for name, *_ in mirror._fields_}
        if py_fields != c["fields"]:
            wrong.append(f"{struct}: fields {sorted(set(c['fields']) ^ set(py_fields))} "
                         f"or offsets differ (C {c['fields']}, Python {py_fields})")
        if ctypes_size(mirror) != c["size"]:
            wrong.append(f"{struct}: sizeof is {c['size']} in C, {ctypes_size(mirror)} in Python")
    assert not wrong, "\n".join(wrong)


def ctypes_size(mirror):
    import ctypes

    return ctypes.sizeof(mirror)
