#!/bin/bash
# hicache file store: the costs around the I/O, each as a ratio measured in one
# run (median of 3 runs each, runs interleaved so that machine noise falls on
# both sides alike):
#   1. zero-copy vs bounce     set and get, --zero-copy on vs off
#   2. io_uring vs threads     set and get, --engine uring vs threads
#   3. exists                  keys/s for present keys and for absent keys
#   4. checksum verification   get with verify_checksum on vs off
#                              (HICACHE_VERIFY_CHECKSUM=1 / 0), cold (O_DIRECT) and warm
#                              (buffered, from the page cache: the CPU cost alone)
# Every run uses an MLA pool (--mla: one object, i.e. one file, per page), O_DIRECT
# unless said, batch = io_depth = 32, pages of 64 KiB and 2 MiB. GB/s are 10^9 bytes
# of page payload per second; objects also carry a trailer block.
#
# Each set writes into a fresh directory; all are created first and deleted only at
# the end (creating files right after deleting many is slow on a journal-less ext4:
# docs/PERFORMANCE.md, "Measuring here"). Gets read what the set of the same
# variant wrote, after sync and a page-cache drop (as root).
#
# With --pipeline K, the sets and gets of 1 and 2 keep K calls started (bench store
# --pipeline K: one stream of at most io_depth pages in flight across calls, no drain
# at the end of each call); 3 and 4 stay synchronous.
#
# usage: bench/store_extras.sh [--quick] [--dir DIR] [--out FILE] [--runs N] [--bin HICACHE] [--keep]
#                              [--pipeline K]
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bin=${HICACHE_BIN:-$repo/build/hicache}
runs=3
batch=32
quick=0
base=""
out=""
keep=0
pipe=()

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--dir) base=${2:?--dir needs a value}; shift ;;
	--out) out=${2:?--out needs a value}; shift ;;
	--runs) runs=${2:?--runs needs a value}; shift ;;
	--bin) bin=${2:?--bin needs a value}; shift ;;
	--keep) keep=1 ;;
	--pipeline) pipe=(--pipeline "${2:?--pipeline needs a value}"); shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "store_extras.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case $runs in '' | *[!0-9]* | 0) echo "store_extras.sh: --runs must be a number >= 1" >&2; exit 2 ;; esac
[ $quick = 1 ] && runs=1
[ -x "$bin" ] || { echo "store_extras.sh: no hicache binary at $bin (make release, or pass --bin)" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "store_extras.sh: needs python3 (JSON)" >&2; exit 1; }
root=0
[ "$(id -u)" = 0 ] && root=1

bench_workdir store-extras

cases="64K:2048 2M:256"
[ $quick = 1 ] && cases="64K:256 2M:32"
# name: engine zero-copy
variants=(uring-zc uring-bounce threads-zc)
eng_of() { echo "${1%%-*}"; }
zc_of() { [ "${1#*-}" = zc ] && echo on || echo off; }

for c in $cases; do
	for v in "${variants[@]}"; do
		for r in $(seq 1 "$runs"); do
			mkdir "$work/$v-${c%%:*}-$r"
		done
	done
done

drop() {
	sync
	[ $root = 1 ] && echo 1 >/proc/sys/vm/drop_caches
	return 0
}

# hc VAR FIELD ARGS...: run bench store --json, print the JSON field FIELD.
hc() {
	local var=$1 field=$2 o=$work/b.json
	shift 2
	HICACHE_IO_DEPTH=$batch "$bin" bench store --mla --batch "$batch" --engine "$(eng_of "$var")" \
		--zero-copy "$(zc_of "$var")" --pool-warmup on --json "$@" >"$o" 2>"$work/b.err" || {
		# exists exits 0 with misses; set and get exit 1 on a failed page
		echo "hicache bench $* failed: $(cat "$work/b.err" "$o")" >&2
		return 1
	}
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print("%.4f" % d[sys.argv[2]])' "$o" "$field"
}

rotate() { # rotate N WORDS...: the words, starting at the N-th (mod count)
	local n=$1
	shift
	local words=("$@") i
	for ((i = 0; i < ${#words[@]}; i++)); do echo "${words[$(((i + n) % ${#words[@]}))]}"; done
}

declare -A res
echo "# hicache store extras: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, kernel $(uname -r)"
echo "# dir $work on $(findmnt -no SOURCE,FSTYPE,OPTIONS -T "$work" 2>/dev/null || echo '?')"
echo "# batch = io_depth = $batch, MLA pool (one file per page); $runs run(s), median"
[ ${#pipe[@]} = 0 ] || echo "# sets and gets of 1 and 2: ${pipe[*]} (calls kept started)"
[ $root = 1 ] || echo "# not root: page cache not dropped before cold reads (O_DIRECT reads are still cold)"

for r in $(seq 1 "$runs"); do
	for c in $cases; do
		size=${c%%:*} files=${c##*:}
		common=(--pages "$files" --page-bytes "$size" --direct on)
		# ---- 1, 2: set, then cold get, per variant (order rotated per run) ----
		for v in $(rotate "$r" "${variants[@]}"); do
			sync
			res[$v.$size.set]+="$(hc "$v" gbps --op set --dir "$work/$v-$size-$r" "${common[@]}" "${pipe[@]}") "
		done
		for v in $(rotate "$r" "${variants[@]}"); do
			drop
			res[$v.$size.get]+="$(hc "$v" gbps --op get --dir "$work/$v-$size-$r" "${common[@]}" "${pipe[@]}") "
		done
		# ---- 4: verify on / off, cold then warm ----
		d=$work/uring-zc-$size-$r
		for vc in $(rotate "$r" 1 0); do
			drop
			res[verify$vc.$size.cold]+="$(HICACHE_VERIFY_CHECKSUM=$vc hc uring-zc gbps --op get --dir "$d" "${common[@]}") "
		done
		# Buffered: one untimed get fills the page cache, then every get is warm.
		hc uring-zc gbps --op get --dir "$d" --pages "$files" --page-bytes "$size" --direct off >/dev/null
		for vc in $(rotate "$r" 1 0); do
			res[verify$vc.$size.warm]+="$(HICACHE_VERIFY_CHECKSUM=$vc hc uring-zc gbps --op get --dir "$d" --pages "$files" --page-bytes "$size" --direct off) "
		done
	done
	# ---- 3: exists, on the 64 KiB pages of this run (a second seed is absent) ----
	c=${cases%% *}
	d=$work/uring-zc-${c%%:*}-$r
	e=(--op exists --dir "$d" --pages "${c##*:}" --page-bytes "${c%%:*}" --direct on)
	res[exists.present]+="$(hc uring-zc pages_per_s "${e[@]}") "
	res[exists.absent32]+="$(hc uring-zc pages_per_s "${e[@]}" --seed 1) "
	res[exists.absent1]+="$(hc uring-zc pages_per_s "${e[@]}" --seed 1 --batch 1) "
	echo "# run $r done"
done

m() { # m KEY: the median of res[KEY]
	# shellcheck disable=SC2086
	median ${res[$1]}
}
report() {
	echo "| comparison | case | op | A | B | A/B |"
	echo "|---|---|---|---|---|---|"
	for c in $cases; do
		size=${c%%:*} files=${c##*:}
		for op in set get; do
			a=$(m "uring-zc.$size.$op") b=$(m "uring-bounce.$size.$op")
			echo "| A zero-copy / B bounce (GB/s) | $files x $size | $op | $a | $b | $(ratio "$a" "$b") |"
		done
	done
	for c in $cases; do
		size=${c%%:*} files=${c##*:}
		for op in set get; do
			a=$(m "uring-zc.$size.$op") b=$(m "threads-zc.$size.$op")
			echo "| A io_uring / B threads (GB/s) | $files x $size | $op | $a | $b | $(ratio "$a" "$b") |"
		done
	done
	for c in $cases; do
		size=${c%%:*} files=${c##*:}
		for t in cold warm; do
			a=$(m "verify1.$size.$t") b=$(m "verify0.$size.$t")
			echo "| A verify on / B off, $t get (GB/s) | $files x $size | get | $a | $b | $(ratio "$a" "$b") |"
		done
	done
	c=${cases%% *}
	p=$(m exists.present) a32=$(m exists.absent32) a1=$(m exists.absent1)
	echo "| exists, present keys, batch $batch (keys/s) | ${c##*:} keys | exists | $p | | |"
	echo "| exists, absent keys, batch $batch (calls stop at the first miss; keys/s) | ${c##*:} keys | exists | $a32 | | |"
	echo "| exists, absent keys, batch 1 (one lookup per key; keys/s) | ${c##*:} keys | exists | $a1 | | |"
}
echo
report | tee "$work/extras.md"
if [ -n "$out" ]; then
	cp "$work/extras.md" "$out"
	echo "table written to $out"
fi
