#!/bin/bash
# hicache's file store against fio on the same file system, side by side in
# one run: the same number of files of the same size, O_DIRECT, io_uring,
# queue depth = batch size, files created on open for writes.
#
#   hicache  bench store --op set|get --mla --zero-copy on --direct on --engine uring
#            --batch B with HICACHE_IO_DEPTH=B: one object (file) per page, written
#            by one chain open -> writev -> close -> rename per page, B chains per
#            io_uring submission
#   fio      ioengine=io_uring direct=1 nrfiles=N filesize=S bs=S iodepth=B
#            openfiles=B create_on_open=1 file_service_type=sequential: one
#            whole-file write (or read) per file, B in flight; fadvise_hint=0
#            invalidate=0: no posix_fadvise calls per file, which O_DIRECT does
#            not need and hicache does not make
#
# A hicache object is the page plus a trailer block (the file system's
# direct-I/O block, docs/FORMAT.md), so it moves a little more per file than
# fio's S: every GB/s here is page
# payload (S per file) for both, 10^9 bytes/s.
#
# Reads are cold for both: O_DIRECT, after sync and a page-cache drop (as root;
# --cold-meta also drops dentries and inodes). Each run has its own fresh
# directory, all created before the first run and deleted only at the very
# end: on a journal-less ext4, creating files right after deleting many is
# several times slower (docs/PERFORMANCE.md, "Measuring here").
#
# With --pipeline K, hicache also runs every case keeping K calls started
# (bench store --pipeline K: hc_store_set_start / get_start, merged by the
# store into one stream of at most B pages in flight), column "pipelined":
# the same queue depth as fio, without a drain at the end of every call.
#
# With --unverified, hicache also reads every case's files (its own, once
# more, cold) with verify_checksum=false, and the table adds that column:
# the I/O path alone, which is the work fio does, against the default that
# also takes the XXH3 checksum of every byte read.
#
# With --ram-device, everything runs on an ext4 file system made for the run
# on a loop device whose backing file lives in tmpfs (root only; taken down
# at the end, also on an error or an interrupt): no disk under the file
# system, so the table shows the CPU side of both tools, the kernel's
# included. Each case's files are deleted (and trimmed back to the tmpfs)
# once its round is over, so memory holds one case's files at a time.
#
# With --compare OLD, a second hicache binary (e.g. the build before a change)
# runs every case too, in the same rotation, and the table adds old/new columns:
# before/after figures measured side by side on the same disk at the same time.
#
# usage: bench/vs_fio.sh [--quick] [--dir DIR] [--out FILE] [--runs N] [--batch B]
#                        [--bin HICACHE] [--compare OLD] [--cases LIST] [--cold-meta] [--keep]
#                        [--huge-pages thp|off|prefer|required] [--unverified]
#                        [--pipeline K] [--ram-device]
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
cases=""
old_bin=""
unverified=0
pipeline=1
cold_meta=0
keep=0
ram=0
huge=thp

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
	cat <<'EOF'
options:
  --quick       1 run per case, 1/8 of the files: a smoke test, not a measurement
  --dir DIR     parent of the run directories (default: a fresh dir under /var/tmp;
                not tmpfs). Only what this script creates under it is removed.
  --out FILE    also write the markdown table to FILE
  --runs N      runs per case (default 3; the median is reported)
  --batch B     pages per store call = fio iodepth = openfiles (default 32)
  --bin PATH    the hicache binary (default $HICACHE_BIN or build/hicache, from make release)
  --compare OLD also run the hicache binary OLD on every case (columns old, new/old)
  --cases LIST  SIZE:FILES pairs (default "64K:2048 512K:512 2M:256 8M:64")
  --unverified  also read with checksum verification off (column "unverified")
  --pipeline K  also run hicache keeping K calls of B pages started
                (hc_store_set_start / get_start; column "pipelined"): still at
                most B pages in flight, as fio's iodepth, without the drain at
                the end of every call
  --cold-meta   drop dentries and inodes too before reads (echo 3, not 1)
  --keep        leave the files in place (not with --ram-device)
  --ram-device  run on ext4 over a loop device backed by a file in tmpfs (root;
                at most 6 GiB of memory, sized from the cases), removed at the end
  --huge-pages M  the memory both tools move pages from and to: thp (the default,
                as hicache's pools): transparent huge pages, for fio through glibc's
                malloc tunable with its buffer aligned to 2 MiB (without the alignment
                fio's buffer gets no huge page); off: 4 KiB pages for both;
                prefer|required: hicache on hugetlb pages, fio as with thp
EOF
}

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--dir) base=${2:?--dir needs a value}; shift ;;
	--out) out=${2:?--out needs a value}; shift ;;
	--runs) runs=${2:?--runs needs a value}; shift ;;
	--batch) batch=${2:?--batch needs a value}; shift ;;
	--bin) bin=${2:?--bin needs a value}; shift ;;
	--compare) old_bin=${2:?--compare needs a value}; shift ;;
	--cases) cases=${2:?--cases needs a value}; shift ;;
	--unverified) unverified=1 ;;
	--pipeline) pipeline=${2:?--pipeline needs a value}; shift ;;
	--cold-meta) cold_meta=1 ;;
	--keep) keep=1 ;;
	--ram-device) ram=1 ;;
	--huge-pages) huge=${2:?--huge-pages needs a value}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "vs_fio.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case $runs in
'' | *[!0-9]* | 0) echo "vs_fio.sh: --runs must be a number >= 1" >&2; exit 2 ;;
esac
case $batch in
'' | *[!0-9]* | 0) echo "vs_fio.sh: --batch must be a number >= 1" >&2; exit 2 ;;
esac
case $pipeline in
'' | *[!0-9]* | 0) echo "vs_fio.sh: --pipeline must be a number >= 1" >&2; exit 2 ;;
esac
[ "$quick" = 1 ] && runs=1
if [ $ram = 1 ] && [ $keep = 1 ]; then
	echo "vs_fio.sh: --keep and --ram-device: the RAM device goes at the end, files and all" >&2
	exit 2
fi
if [ $ram = 1 ] && [ -n "$base" ]; then
	echo "vs_fio.sh: --dir and --ram-device: the RAM device is the directory" >&2
	exit 2
fi

# ---- tools ----
if [ ! -x "$bin" ]; then
	echo "vs_fio.sh: no hicache binary at $bin; build it first:" >&2
	echo "  make release   (or pass --bin)" >&2
	exit 1
fi
if [ -n "$old_bin" ] && [ ! -x "$old_bin" ]; then
	echo "vs_fio.sh: --compare: no hicache binary at $old_bin" >&2
	exit 1
fi
tools_all="hc fio"
[ -n "$old_bin" ] && tools_all="hc old fio"
[ "$pipeline" -gt 1 ] && tools_all="$tools_all pl"
# nv reads hc's files: it writes nothing.
[ $unverified = 1 ] && tools_all="$tools_all nv"
if ! command -v fio >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "vs_fio.sh: fio is missing; installing the Debian package" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y fio >&2 ||
			{ echo "vs_fio.sh: apt-get install fio failed" >&2; exit 1; }
	else
		echo "vs_fio.sh: fio is not installed. Install it (Debian: apt-get install fio, as root)" \
			"and run again." >&2
		exit 1
	fi
fi
command -v python3 >/dev/null 2>&1 || { echo "vs_fio.sh: needs python3 (JSON)" >&2; exit 1; }
root=0
[ "$(id -u)" = 0 ] && root=1

# size:files. Each case moves 128-512 MiB; --quick moves 1/8 of it.
if [ -z "$cases" ]; then
	cases="64K:2048 512K:512 2M:256 8M:64"
	[ $quick = 1 ] && cases="64K:256 512K:64 2M:32 8M:8"
fi
for c in $cases; do
	case $c in
	[0-9]*[KMG]:[0-9]* | [0-9]*:[0-9]*) ;;
	*) echo "vs_fio.sh: case '$c' is not SIZE:FILES (e.g. 2M:256)" >&2; exit 2 ;;
	esac
done

bytes_of() { # 64K -> 65536
	local n=${1%[KMG]} u=${1##*[0-9]}
	case $u in
	K) echo $((n << 10)) ;;
	M) echo $((n << 20)) ;;
	G) echo $((n << 30)) ;;
	*) echo "$n" ;;
	esac
}

ntools=0
for t in $tools_all; do
	ntools=$((ntools + 1))
done
# Bytes of files on the file system at once: every run's (a RAM device:
# one case of one round, its largest).
need=0
for c in $cases; do
	b=$(((ntools - unverified) * ($(bytes_of "${c%%:*}") + 4096) * ${c##*:}))
	if [ $ram = 1 ]; then
		[ "$b" -gt "$need" ] && need=$b
	else
		need=$((need + runs * b))
	fi
done

# ---- directories: every run's, created now ----
[ $ram = 1 ] && ram_device_up vs-fio "$need"
bench_workdir vs-fio
for c in $cases; do
	for r in $(seq 1 "$runs"); do
		for t in $tools_all; do
			[ "$t" = nv ] || mkdir "$work/$t-${c%%:*}-$r"
		done
	done
done
avail=$(df -P -B1 "$work" | awk 'NR == 2 {print $4}')
if [ "$avail" -lt $((need + need / 10)) ]; then
	echo "vs_fio.sh: needs $((need >> 20)) MiB free under $work, has $((avail >> 20)) MiB" >&2
	exit 1
fi

# ---- one measurement each; prints GB/s of payload ----
settle() { # before every timed run: nothing dirty left to write back meanwhile
	sync
}
drop() { # before reads: page cache (and with --cold-meta dentries and inodes)
	sync
	if [ $root = 1 ]; then
		echo $((cold_meta ? 3 : 1)) >/proc/sys/vm/drop_caches
	fi
}

# jfield FILE EXPR: EXPR of the JSON object d in FILE.
jfield() {
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
		"$1" "$2"
}

hc_run() { # op dir size files [binary [calls started]] -> GB/s
	local op=$1 dir=$2 size=$3 files=$4 exe=${5:-$bin} o=$work/hc.json pipe_args=()
	# Only when asked: a --compare binary may predate the option.
	[ "${6:-1}" = 1 ] || pipe_args=(--pipeline "$6")
	HICACHE_IO_DEPTH=$batch "$exe" bench store --op "$op" --dir "$dir" --pages "$files" \
		--page-bytes "$size" --batch "$batch" --mla --zero-copy on --direct on \
		--engine uring --pool-warmup on --huge-pages "$huge" "${pipe_args[@]}" \
		--json >"$o" 2>"$work/hc.err" ||
		{ echo "hicache bench failed: $(cat "$work/hc.err" "$o")" >&2; return 1; }
	# Anything but a clean cold run would not be comparable.
	local bad
	local ok="d['failed_pages'] == 0 and d['direct'] and d['zero_copy'] and d['engine'] == 'uring'"
	ok+=" and d['objects_per_page'] == 1"
	ok+=" and (d['existing_pages'] == 0 if d['op'] == 'set' else d['cache'] == 'o_direct')"
	bad=$(jfield "$o" "'' if $ok else 'unexpected: ' + json.dumps(d)")
	[ -z "$bad" ] || { echo "hicache bench: $bad" >&2; return 1; }
	jfield "$o" "'%.4f' % d['gbps']"
}

old_run() { # the --compare binary, run the same way
	hc_run "$@" "$old_bin"
}

pl_run() { # --pipeline: calls started ahead
	hc_run "$@" "$bin" "$pipeline"
}

nv_run() { # --unverified: hc's files, read without the checksum
	local dir=${2%/nv-*}/hc-${2##*/nv-}
	HICACHE_VERIFY_CHECKSUM=false hc_run "$1" "$dir" "$3" "$4"
}

fio_run() { # op dir size files -> GB/s
	local op=$1 dir=$2 size=$3 files=$4 o=$work/fio.json extra=()
	if [ "$op" = set ]; then
		extra=(--rw=write --create_on_open=1)
	else
		extra=(--rw=read --allow_file_create=0)
	fi
	local tun=${GLIBC_TUNABLES:-}
	if [ "$huge" != off ]; then
		tun=glibc.malloc.hugetlb=1
		extra+=(--iomem_align=2m)
	fi
	GLIBC_TUNABLES=$tun fio --name=hc --directory="$dir" --ioengine=io_uring --direct=1 \
		--nrfiles="$files" \
		--filesize="$size" --bs="$size" --iodepth="$batch" --openfiles="$batch" \
		--file_service_type=sequential --fadvise_hint=0 --invalidate=0 "${extra[@]}" \
		--output-format=json >"$o" \
		2>"$work/fio.err" || { echo "fio failed: $(cat "$work/fio.err")" >&2; return 1; }
	local dirn=write
	[ "$op" = get ] && dirn="read"
	# bw_bytes = io_bytes / runtime; check that every file was moved once.
	jfield "$o" "(lambda j: '%.4f' % (j['bw_bytes'] / 1e9) if j['io_bytes'] == $size * $files
		else 'short')(d['jobs'][0]['$dirn'])"
}


mnt=$(findmnt -no SOURCE,FSTYPE,OPTIONS -T "$work" 2>/dev/null || echo "?")
echo "# hicache vs fio: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, kernel $(uname -r), $(fio --version)"
echo "# dir $work on $mnt"
echo "# batch = iodepth = openfiles = $batch; $runs run(s) per case, median; GB/s of payload"
echo "# huge pages for both tools' buffers: $huge"
[ "$pipeline" -gt 1 ] && echo "# pipelined: hicache with $pipeline calls started at a time"
[ $root = 1 ] || echo "# not root: page cache not dropped before reads (O_DIRECT reads are still cold)"
echo "# run case tool op GB/s"

declare -A res
for r in $(seq 1 "$runs"); do
	for c in $cases; do
		size=${c%%:*} files=${c##*:}
		sz=$(bytes_of "$size")
		# Alternate which tool goes first, so that neither always meets the
		# other's leftovers (writeback, a warmer CPU).
		tools=$tools_all
		[ $((r % 2)) = 0 ] && tools=$(echo "$tools_all" | awk '{for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? " " : "")}')
		for op in set get; do
			for t in $tools; do
				[ "$t" = nv ] && [ "$op" = set ] && continue
				if [ "$op" = set ]; then settle; else drop; fi
				v=$("${t}_run" "$op" "$work/$t-$size-$r" "$sz" "$files")
				[ "$v" != short ] || { echo "fio moved less than expected" >&2; exit 1; }
				res[$t.$size.$op]+="$v "
				echo "$r $size x $files $t $op $v"
			done
		done
		if [ $ram = 1 ]; then
			for t in $tools_all; do
				[ "$t" = nv ] || rm -rf "${work:?}/$t-$size-$r"
			done
			ram_device_trim
		fi
	done
done

meets() { # ratio target -> yes|no
	if [ "$1" != n/a ] && python3 -c "import sys; sys.exit(float('$1') < $2)"; then
		echo yes
	else
		echo no
	fi
}

table() {
	local oh="" os="" extra o
	[ -n "$old_bin" ] && oh=" old GB/s | old/fio | new/old |" && os="---|---|---|"
	[ "$pipeline" -gt 1 ] && oh+=" pipelined GB/s | pipelined/fio | met |" && os+="---|---|---|"
	[ $unverified = 1 ] && oh+=" unverified GB/s | unverified/fio |" && os+="---|---|"
	echo "| case | op | hicache GB/s | fio GB/s | hicache/fio | target | met |$oh"
	echo "|---|---|---|---|---|---|---|$os"
	for c in $cases; do
		size=${c%%:*} files=${c##*:}
		for op in set get; do
			# shellcheck disable=SC2086
			h=$(median ${res[hc.$size.$op]})
			# shellcheck disable=SC2086
			f=$(median ${res[fio.$size.$op]})
			q=$(ratio "$h" "$f")
			want=0.9
			[ "$size" = 64K ] && [ $op = set ] && want=1.1
			met=$(meets "$q" "$want")
			name="write"
			[ $op = get ] && name="read"
			extra=""
			if [ -n "$old_bin" ]; then
				# shellcheck disable=SC2086
				o=$(median ${res[old.$size.$op]})
				extra=" $o | $(ratio "$o" "$f") | $(ratio "$h" "$o") |"
			fi
			if [ "$pipeline" -gt 1 ]; then
				# shellcheck disable=SC2086
				o=$(median ${res[pl.$size.$op]})
				extra+=" $o | $(ratio "$o" "$f") | $(meets "$(ratio "$o" "$f")" "$want") |"
			fi
			if [ $unverified = 1 ] && [ $op = get ]; then
				# shellcheck disable=SC2086
				o=$(median ${res[nv.$size.$op]})
				extra+=" $o | $(ratio "$o" "$f") |"
			elif [ $unverified = 1 ]; then
				extra+=" - | - |"
			fi
			echo "| $files x $size | $name | $h | $f | $q | >= $want | $met |$extra"
		done
	done
}
echo
echo "hicache/fio, median of $runs run(s); GB/s = 10^9 bytes of page payload per second (hicache"
echo "files also carry a trailer block, not counted). Batch/iodepth $batch, O_DIRECT, io_uring."
echo
table | tee "$work/table.md"
if [ -n "$out" ]; then
	cp "$work/table.md" "$out"
	echo "table written to $out"
fi
