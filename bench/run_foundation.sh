#!/bin/bash
# Foundation benchmarks, side by side in one run (this machine is noisy:
# compare the ratios, not absolute numbers across runs):
#   1. page-key hashing on one core: C (hc_key_chain) vs a Python hashlib loop
#   2. pre-fault of a 4 GiB host region: 1 thread vs 2 threads
# Needs a release build (make release, or BUILD=dir). Prints a markdown
# section for docs/PERFORMANCE.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../build}
if [ ! -x "$build/bench/bench_key_hash" ] || [ ! -x "$build/bench/bench_prefault" ]; then
	echo "build the benches first: make release (or set BUILD=dir)" >&2
	exit 1
fi
export PYTHON3=${PYTHON3:-/usr/bin/python3}

echo "## Foundation ($(date -u +%Y-%m-%d), $(nproc) CPUs, kernel $(uname -r))"
echo
echo '```'
"$here/key_hash.sh" "$build/bench/bench_key_hash" 67108864 64
echo
"$build/bench/bench_prefault" 4 7 2
echo '```'
