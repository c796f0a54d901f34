#!/bin/bash
# `make install` end to end for the Python package: install into a temporary
# prefix, then, with only PYTHONPATH set (no HICACHE_LIB), import hicache from
# PREFIX/lib/python3/dist-packages. It must load the library installed beside
# it (../../libhicache.so from the package, or the multiarch
# PREFIX/lib/<triplet>/), not the build tree's or a system copy, and a store
# over a temporary dir must round-trip pages and pass fsck. Needs no torch:
# the pool is the library's own.
set -euo pipefail
: "${HC_BUILD_DIR:?}"
py=${PYTHON3:-/usr/bin/python3}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
cmake --install "$HC_BUILD_DIR" --prefix "$prefix" >/dev/null
site="$prefix/lib/python3/dist-packages"
[ -f "$site/hicache/__init__.py" ] || { echo "missing after install: $site/hicache/__init__.py"; exit 1; }
[ -f "$site/hicache/sglang.py" ] || { echo "missing after install: $site/hicache/sglang.py"; exit 1; }

# A sanitized library needs its runtime loaded first into the interpreter.
preload=""
if [ "${HC_SANITIZE:-OFF}" = "ON" ]; then
	preload=$(cc -print-file-name=libasan.so)
fi
if [ "${HC_TSAN:-OFF}" = "ON" ]; then
	preload=$(cc -print-file-name=libtsan.so)
fi

mkdir "$tmp/store"
cd "$tmp" # not the source tree: its python/ must not be found
env -i PATH=/usr/bin:/bin HOME="$tmp" PYTHONPATH="$site" HICACHE_LOG=off \
	${preload:+LD_PRELOAD=$preload} ASAN_OPTIONS=detect_leaks=0 \
	"$py" - "$prefix" "$tmp/store" <<'PY'
import os
import sys

prefix, store_dir = sys.argv[1], sys.argv[2]
import hicache

# vLLM finds the tier through the installed entry point, by group.
from importlib.metadata import entry_points
eps = entry_points()
eps = eps.select(group="vllm.general_plugins") if hasattr(eps, "select") else eps.get("vllm.general_plugins", [])
ours = [e for e in eps if e.name == "hicache"]
assert ours and ours[0].value == "hicache.vllm:register", list(eps)
import hicache.vllm
assert ours[0].load() is hicache.vllm.register
hicache.vllm.register()  # harmless without vLLM

pkg = os.path.realpath(os.path.dirname(hicache.__file__))
assert pkg.startswith(os.path.realpath(prefix)), "hicache imported from %s, not the prefix" % pkg
lib = os.path.realpath(hicache._LIB_PATH)
assert lib.startswith(os.path.realpath(prefix)), "library loaded from %s, not the prefix" % lib

pool = hicache.Pool.create_kv(layers=2, heads=2, head_dim=16, elem_bytes=2, page_size=4, pages=8)
pages = [bytes((p * 31 + i) % 251 for i in range(pool.page_bytes)) for p in range(3)]
for p, data in enumerate(pages):
    pool.scatter(p, data)
keys = hicache.key_chain(list(range(12)), 4)
with hicache.Store({"dirs": [store_dir]}, model="install") as st:
    st.register("kv", pool, anchor=True)
    st_objects = st.pool_info("kv")["objects"]  # per page: 2 zero-copy (_k, _v), 1 bounce
    assert st.set(keys, [0, 1, 2]) == [0, 0, 0]
with hicache.Store({"dirs": [store_dir]}, model="install") as st:
    st.register("kv", pool, anchor=True)
    assert st.exists(keys) == 3
    hits, res = st.get(keys, [5, 6, 7])
    assert hits == 3 and res == [0, 0, 0], (hits, res)
    for p, data in enumerate(pages):
        assert bytes(pool.gather(5 + p)) == data, "page %d differs after the round trip" % p
rep = hicache.fsck([store_dir])
assert rep["ok"] == 3 * st_objects and rep["corrupt"] == 0, rep
pool.close()
print("installed package: %s, library: %s" % (pkg, lib))
PY
