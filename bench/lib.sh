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
	# Without these an interrupt ends the script without the EXIT trap
	# (or before it ran): a RAM device would stay mounted.
	trap 'exit 130' INT
	trap 'exit 143' TERM HUP
}

bench_cleanup() {
	if [ "$keep" = 1 ] && [ -z "${ram_dir:-}" ]; then
		echo "files kept under $work" >&2
		return 0
	fi
	if [ -n "${ram_dir:-}" ]; then
		ram_device_down
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

# ---- a RAM-backed block device (--ram-device) ----
# ram_device_up NAME BYTES: an ext4 file system of about BYTES on a loop
# device whose backing file lives in a tmpfs of its own: block I/O through
# the whole kernel path (file system, block layer, O_DIRECT) with no disk
# under it, so what a benchmark measures is the CPU side. ext4 with its
# journal (mkfs's default): a journal-less ext4 creates files slowly right
# after many were deleted, which a run that frees room between cases does.
# Sets base to the mounted file system and ram_dir; ram_device_down (on
# exit, from bench_cleanup) takes it all down, whatever was set up.
ram_mem_max=$((6 << 30)) # the most memory a RAM device may take
ram_device_up() {
	local name=$1 bytes=$2
	if [ "$(id -u)" != 0 ]; then
		echo "$name: --ram-device needs root (mount, losetup)" >&2
		exit 1
	fi
	local t
	for t in losetup mkfs.ext4 mount umount fstrim; do
		command -v $t >/dev/null 2>&1 ||
			{ echo "$name: --ram-device needs $t (util-linux, e2fsprogs)" >&2; exit 1; }
	done
	# File system overhead: inode tables (256 bytes per 16 KiB), the journal
	# (up to 256 MiB at these sizes), and the room ext4 keeps back.
	local size=$(((bytes + bytes / 4 + (320 << 20) + (1 << 20) - 1) >> 20 << 20))
	if [ "$size" -gt "$ram_mem_max" ]; then
		echo "$name: --ram-device would need $((size >> 20)) MiB of memory, more than the" \
			"$((ram_mem_max >> 20)) MiB allowed; use fewer or smaller --cases" >&2
		exit 1
	fi
	local avail
	avail=$(awk '/^MemAvailable:/ {print $2 * 1024}' /proc/meminfo)
	if [ "$avail" -lt $((size + (2 << 30))) ]; then
		echo "$name: --ram-device needs $((size >> 20)) MiB of memory and 2 GiB to spare;" \
			"$((avail >> 20)) MiB available" >&2
		exit 1
	fi
	# Each step records what it made before the next may fail: the EXIT
	# trap undoes exactly that.
	trap bench_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM HUP
	ram_dir=$(mktemp -d "/var/tmp/hicache-$name-ram.XXXXXX")
	mkdir "$ram_dir/tmpfs" "$ram_dir/mnt"
	mount -t tmpfs -o "size=$size,mode=0700" hicache-ram "$ram_dir/tmpfs"
	ram_tmpfs=$ram_dir/tmpfs
	truncate -s "$size" "$ram_tmpfs/disk.img"
	ram_loop=$(losetup --find --show "$ram_tmpfs/disk.img")
	mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$ram_loop" >/dev/null
	mount -o noatime "$ram_loop" "$ram_dir/mnt"
	ram_mnt=$ram_dir/mnt
	base=$ram_mnt
	echo "# RAM device: $ram_loop ($((size >> 20)) MiB, ext4) on a file in tmpfs," \
		"mounted at $ram_mnt" >&2
}

# Return the blocks of deleted files to the tmpfs (discard punches holes
# in the backing file), so that one case's files at a time hold memory.
ram_device_trim() {
	sync
	fstrim "$ram_mnt" >/dev/null
}

ram_device_down() {
	[ -n "${ram_dir:-}" ] || return 0
	local ok=1
	if [ -n "${ram_mnt:-}" ]; then
		# Interrupted, the script may get here while the tool it ran
		# still has files open: that ends within one run.
		local tries=0
		until umount "$ram_mnt" 2>/dev/null; do
			tries=$((tries + 1))
			if [ $tries -gt 60 ]; then
				umount "$ram_mnt" || true
				ok=0
				echo "RAM device: umount $ram_mnt failed" >&2
				break
			fi
			sleep 0.5
		done
	fi
	if [ -n "${ram_loop:-}" ] && [ $ok = 1 ]; then
		losetup -d "$ram_loop" || { ok=0; echo "RAM device: losetup -d $ram_loop failed" >&2; }
	fi
	if [ -n "${ram_tmpfs:-}" ] && [ $ok = 1 ]; then
		rm -f "$ram_tmpfs/disk.img"
		umount "$ram_tmpfs" || { ok=0; echo "RAM device: umount $ram_tmpfs failed" >&2; }
	fi
	if [ $ok = 1 ]; then
		rm -rf "$ram_dir"
		echo "RAM device removed" >&2
	else
		echo "RAM device: left under $ram_dir (see above)" >&2
	fi
	ram_dir="" ram_mnt="" ram_loop="" ram_tmpfs=""
}
