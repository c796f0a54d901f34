#!/bin/bash
# hicache's S3 backend side by side with `curl --parallel` doing the same
# requests against the same local S3 gateway (scripts/s3-server.sh: Ceph
# radosgw on 127.0.0.1), in one run:
#
#   PUT and GET of 64 KiB, 1 MiB and 4 MiB pages, with max_inflight 1, 8, 32
#   (curl: --parallel-max 1, 8, 32)
#
# hicache: `hicache bench store --backend s3 --mla` (one object per page:
# the page plus its 512-byte trailer block), the whole run in one store call
# (--batch = pages; the store hands the backend chunks of 128 objects). Its
# set is an exists (parallel HEADs) then the PUTs; its get checks every
# trailer and XXH3 checksum. curl: one process, one request per object of the
# same size (page + 512 bytes), connections reused. Both send
# x-amz-content-sha256: UNSIGNED-PAYLOAD, so neither hashes; the column
# "signed" is hicache's default, which SHA-256-hashes every body.
# MB/s are 10^6 bytes of page payload per second, median of --runs runs; the
# runs of the two clients are interleaved so machine noise falls on both.
#
# The gateway: a fresh one started here (scripts/s3-server.sh, its data in
# RAM: memstore, HC_S3_MEM_BYTES 8 GiB; HC_S3_STORE=bluestore for an OSD on a
# file) and stopped at the end, or with --server DIR the one running there.
# Objects are deleted after each cell (hicache gc s3://...): a full OSD blocks
# writes. curl requests time out after 120 s, as hicache's do after 30 s.
#
# usage: bench/s3_vs_curl.sh [--quick] [--runs N] [--mib M] [--out FILE] [--bin HICACHE]
#                            [--server DIR]
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bin=${HICACHE_BIN:-$repo/build/hicache}
runs=3
mib=128
out=""
quick=0
server=""
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--runs) runs=${2:?--runs needs a value}; shift ;;
	--mib) mib=${2:?--mib needs a value}; shift ;;
	--out) out=${2:?--out needs a value}; shift ;;
	--bin) bin=${2:?--bin needs a value}; shift ;;
	--server) server=${2:?--server needs a value}; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "s3_vs_curl: unknown argument '$1'" >&2; exit 2 ;;
	esac
	shift
done
[ "$quick" = 1 ] && { runs=1; mib=32; }
[ -x "$bin" ] || { echo "s3_vs_curl: no hicache binary at $bin (make, or --bin)" >&2; exit 1; }
command -v curl >/dev/null || { echo "s3_vs_curl: curl is missing" >&2; exit 1; }

tmp=$(mktemp -d /tmp/hicache-s3-bench.XXXXXX)
started=""
cleanup() {
	if [ -n "$started" ]; then bash "$repo/scripts/s3-server.sh" stop "$started"; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

dir=$server
if [ -z "$dir" ]; then
	dir=$tmp/server
	started=$dir
	HC_S3_MEM_BYTES=${HC_S3_MEM_BYTES:-8589934592} bash "$repo/scripts/s3-server.sh" start "$dir"
elif ! bash "$repo/scripts/s3-server.sh" status "$dir"; then
	echo "s3_vs_curl: no gateway answers for $dir" >&2
	exit 1
fi
# shellcheck disable=SC1091
. "$dir/env"
export HICACHE_LOG=warn
bucket=$AWS_DEFAULT_BUCKET
run_prefix="bench-$(date +%s)-$$"

# curl's config: one block per request; the credentials stay in a 0600 file.
curl_config() { # method bytes count prefix file
	local method=$1 bytes=$2 count=$3 prefix=$4 i name
	umask 077
	: >"$5"
	for ((i = 0; i < count; i++)); do
		name=$(printf '%064x_curl' "$i")
		{
			echo "url = \"$HICACHE_S3_ENDPOINT/$bucket/$prefix$name\""
			echo "aws-sigv4 = \"aws:amz:$HICACHE_S3_REGION:s3\""
			echo "user = \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\""
			echo "header = \"x-amz-content-sha256: UNSIGNED-PAYLOAD\""
			echo "output = \"/dev/null\""
			echo "fail"
			[ "$method" = PUT ] && echo "upload-file = \"$tmp/body.$bytes\""
			[ $i -lt $((count - 1)) ] && echo "next"
		} >>"$5"
	done
}

# MB/s, median of the arguments (lib.sh's median rounds to 3 decimals).
med() {
	python3 -c 'import statistics, sys; print("%.1f" % statistics.median(map(float, sys.argv[1:])))' \
		"$@"
}

# curl --parallel: prints MB/s of page payload.
curl_run() { # method page_bytes pages inflight prefix
	local cfg=$tmp/curl.cfg t0 t1
	curl_config "$1" $(($2 + 512)) "$3" "$5" "$cfg"
	t0=$(date +%s%N)
	curl --parallel --parallel-max "$4" --no-progress-meter --max-time 120 -K "$cfg" \
		2>"$tmp/curl.err" ||
		{ echo "s3_vs_curl: curl $1 failed" >&2; exit 1; }
	t1=$(date +%s%N)
	python3 -c 'import sys; b, p, ns = map(int, sys.argv[1:]); print("%.2f" % (b * p / ns * 1e3))' \
		"$2" "$3" $((t1 - t0))
}

hicache_run() { # op page_bytes pages inflight prefix unsigned(0|1)
	local json verify=""
	[ "$1" = get ] && verify=--verify
	json=$(HICACHE_S3_UNSIGNED_PAYLOAD=$6 "$bin" bench store --backend s3 --mla --json \
		--op "$1" --page-bytes "$2" --pages "$3" --batch "$3" --max-inflight "$4" \
		--prefix "$5" ${verify:+"$verify"}) ||
		{ echo "s3_vs_curl: hicache $1 failed" >&2; exit 1; }
	python3 -c 'import json, sys; print("%.2f" % (json.loads(sys.argv[1])["gbps"] * 1e3))' "$json"
}

sizes=(65536 1048576 4194304)
names=(64K 1M 4M)
inflights=(1 8 32)
rows=()
for si in 0 1 2; do
	bytes=${sizes[$si]}
	pages=$((mib * 1048576 / bytes))
	head -c $((bytes + 512)) /dev/urandom >"$tmp/body.$((bytes + 512))"
	for inflight in "${inflights[@]}"; do
		declare -a hp=() hg=() cp=() cg=() sp=()
		for ((r = 0; r < runs; r++)); do
			p="$run_prefix/${names[$si]}-$inflight-$r"
			hp+=("$(hicache_run set "$bytes" "$pages" "$inflight" "$p/h/" 1)")
			cp+=("$(curl_run PUT "$bytes" "$pages" "$inflight" "$p/c/")")
			hg+=("$(hicache_run get "$bytes" "$pages" "$inflight" "$p/h/" 1)")
			cg+=("$(curl_run GET "$bytes" "$pages" "$inflight" "$p/c/")")
			sp+=("$(hicache_run set "$bytes" "$pages" "$inflight" "$p/s/" 0)")
		done
		row="| ${names[$si]} | $inflight | $(med "${hp[@]}") | $(med "${cp[@]}") | $(ratio "$(med "${hp[@]}")" "$(med "${cp[@]}")") | $(med "${hg[@]}") | $(med "${cg[@]}") | $(ratio "$(med "${hg[@]}")" "$(med "${cg[@]}")") | $(med "${sp[@]}") |"
		echo "$row" >&2
		rows+=("$row")
		"$bin" gc "s3://$bucket/$run_prefix/" --capacity-gb 0 >/dev/null
	done
done

{
	echo "S3 PUT/GET, hicache vs curl --parallel: $mib MiB per cell, median of $runs run(s), gateway $HICACHE_S3_ENDPOINT (radosgw, ${HC_S3_STORE:-memstore}), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
	echo
	echo "| page | in flight | hicache PUT MB/s | curl PUT MB/s | PUT ratio | hicache GET MB/s | curl GET MB/s | GET ratio | hicache PUT MB/s, signed |"
	echo "|---|---|---|---|---|---|---|---|---|"
	printf '%s\n' "${rows[@]}"
} | if [ -n "$out" ]; then tee "$out"; else cat; fi
