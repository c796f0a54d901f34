#!/bin/bash
# Page-key hashing: C (libcrypto SHA-256 via hc_key_chain) against a Python
# hashlib loop, on the same tokens, one core each. Prints both in GB/s of
# token bytes and the ratio C/Python; fails if the two chains disagree.
#
#   bench/key_hash.sh [BENCH_BIN] [TOKENS] [PAGE_SIZE]
#
# BENCH_BIN defaults to build-key/bench/bench_key_hash
# (cmake --build build-key --target bench_key_hash). Figures from a
# sanitiser or Debug build understate the C side; use a Release build.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-${BENCH_BIN:-$here/../build-key/bench/bench_key_hash}}
tokens=${2:-67108864}
ps=${3:-64}
py=${PYTHON3:-python3}

[ -x "$bin" ] || { echo "no bench binary at $bin; build target bench_key_hash" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One core each, so the figures are per-core whatever else runs.
pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)

c_line=$("${pin[@]}" "$bin" --tokens "$tokens" --page-size "$ps" --reps 5 --dump "$tmp/tokens")
py_line=$("${pin[@]}" "$py" "$here/key_hash.py" "$tmp/tokens" "$ps" 2)
echo "$c_line"
echo "$py_line"

field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
c_last=$(field "$c_line" last)
py_last=$(field "$py_line" last)
if [ "$c_last" != "$py_last" ]; then
	echo "MISMATCH: C and Python chains end in different keys" >&2
	exit 1
fi
c_gbps=$(field "$c_line" gbps)
py_gbps=$(field "$py_line" gbps)
awk -v c="$c_gbps" -v p="$py_gbps" -v n="$tokens" -v ps="$ps" 'BEGIN {
	printf "key hashing, %d tokens, page size %d: C %.3f GB/s, Python %.3f GB/s, " \
		"C/Python %.1fx (last keys agree)\n", n, ps, c, p, c / p }'
