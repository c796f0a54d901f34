# shellcheck shell=bash disable=SC2154 # keep and base are the sourcing script's
# Shared by the storage benchmark scripts (sourced, not run).

# bench_workdir NAME: a fresh run directory under $base (made under /var/tmp
# when $base is empty), refused on tmpfs/ramfs, removed on exit unless
# $keep is 1. Sets base, work and made_base; installs the EXIT trap.
bench_workdir() {
	made_base=0
	if [ -z "$base" ]; then
		base=$(mktemp -d "/var/tmp/hicache-$1.XXXXXX")
		made_base=1
	else
		mkdir -p "$base"
		base=$(cd "$base" && pwd)
	fi
	local fstype
	fstype=$(stat -f -c %T "$base")
	if [ "$fstype" = tmpfs ] || [ "$fstype" = ramfs ]; then
		echo "$1: $base is on $fstype; use --dir on a disk file system" >&2
		[ "$made_base" = 1 ] && rmdir "$base"
		exit 1
	fi
	work=$(mktemp -d "$base/run.XXXXXX")
	trap bench_cleanup EXIT
}

bench_cleanup() {
	if [ "$keep" = 1 ]; then
		echo "files kept under $work" >&2
		return 0
	fi
	rm -rf "$work"
	[ "$made_base" = 1 ] && rmdir "$base" 2>/dev/null
	# ext4 without a journal skips recently freed inodes when it allocates,
	# so a benchmark started right after this one would time that.
	echo "files removed; on ext4 without a journal, creating files is slow for a few" \
		"minutes after this (run back to back with --keep on the first run)" >&2
	return 0
}

median() {
	python3 -c 'import statistics, sys; print("%.3f" % statistics.median(map(float, sys.argv[1:])))' \
		"$@"
}

ratio() {
	python3 -c 'import sys; a, b = map(float, sys.argv[1:]); print("%.2f" % (a / b) if b else "n/a")' \
		"$1" "$2"
}
