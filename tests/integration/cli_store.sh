#!/bin/bash
# hicache bench store / fsck / ls / gc against real file stores: every page
# written by a set reads back byte for byte under each engine, O_DIRECT and
# zero-copy setting; misses, exists counts, why a failed run failed (on
# stderr), corruption found and repaired, orphaned temp files, gc down to
# a cap, and usage errors.
# Exit 0 pass, 1 fail, 77 skip.
set -u

BIN=${HICACHE_BIN:-}
PY=${PYTHON3:-python3}
[ -n "$BIN" ] && [ -x "$BIN" ] || { echo "skip: HICACHE_BIN not set or not executable"; exit 77; }
command -v "$PY" >/dev/null 2>&1 || { echo "skip: no python3"; exit 77; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# jtrue FILE EXPR: the Python expression EXPR is true of the JSON object d in FILE.
jtrue() {
	"$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"
}
# jget FILE EXPR: print EXPR of the JSON object d in FILE.
jget() {
	"$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# Every bench --json output: the fields are there, agree with each other and
# with the expected KEY=VALUE pairs. Python starts slowly on small machines,
# so bench() only records what to check and this runs once, at the end, over
# the manifest (lines of NAME<TAB>KEY=VALUE<TAB>...).
cat >"$TMP/consistent.py" <<'EOF'
import json, sys

FIELDS = ['op', 'backend', 'engine', 'direct', 'zero_copy', 'page_bytes', 'pages', 'batch',
          'threads', 'bytes', 'seconds', 'gbps', 'pages_per_s', 'p50_ms', 'p99_ms',
          'verified_pages', 'failed_pages', 'hits', 'misses', 'corrupt', 'errors']

def close(a, b):
    return abs(a - b) <= 1e-3 * max(abs(a), abs(b)) + 1e-6

def batches(d):
    p, t, b = d['pages'], d['threads'], d['batch']
    return sum((p * (i + 1) // t - p * i // t + b - 1) // b for i in range(t))

def problem(d, want):
    missing = [f for f in FIELDS if f not in d]
    if missing:
        return 'missing fields: %s' % missing
    for k, v in want.items():
        if str(d[k]).lower() != v.lower():
            return '%s is %r, expected %s' % (k, d[k], v)
    if d['seconds'] <= 0 or d['p50_ms'] <= 0 or d['p50_ms'] > d['p99_ms']:
        return 'timing: seconds %r p50 %r p99 %r' % (d['seconds'], d['p50_ms'], d['p99_ms'])
    if not close(d['gbps'], d['bytes'] / d['seconds'] / 1e9):
        return 'gbps %r != bytes / seconds / 1e9' % d['gbps']
    if not close(d['pages_per_s'], d['pages'] / d['seconds']):
        return 'pages_per_s %r != pages / seconds' % d['pages_per_s']
    if d['batches'] != batches(d):
        return 'batches %r, expected %r' % (d['batches'], batches(d))
    op = d['op']
    if op == 'set' and d['bytes'] != (d['pages'] - d['failed_pages']) * d['page_bytes']:
        return 'set: bytes %r' % d['bytes']
    if op == 'get':
        if d['bytes'] != d['hits'] * d['page_bytes']:
            return 'get: bytes != hits x page_bytes'
        if d['hits'] + d['misses'] + d['corrupt'] + d['errors'] != d['pages']:
            return 'get: hits + misses + corrupt + errors != pages'
        if d['failed_pages'] != d['misses'] + d['corrupt'] + d['errors'] + d['mismatched_pages']:
            return 'get: failed_pages does not add up'
        if d['verify'] and d['verified_pages'] + d['mismatched_pages'] != d['hits']:
            return 'get: verified + mismatched != hits'
    if op == 'exists' and (d['hits'] + d['misses'] != d['pages'] or d['bytes'] != 0):
        return 'exists: hits + misses != pages, or bytes != 0'
    if op == 'mixed':
        s, g = d.get('set'), d.get('get')
        if not s or not g:
            return 'mixed: no set or get part'
        for k in ('pages', 'bytes', 'batches', 'failed_pages'):
            if s[k] + g[k] != d[k]:
                return 'mixed: set + get %s != the total' % k
        if g['bytes'] != d['hits'] * d['page_bytes']:
            return 'mixed: get bytes != hits x page_bytes'
        if s['bytes'] != (s['pages'] - s['failed_pages']) * d['page_bytes']:
            return 'mixed: set bytes %r' % s['bytes']
        for name, p in (('set', s), ('get', g)):
            if p['seconds'] <= 0 or p['seconds'] > d['seconds'] * (1 + 1e-6):
                return 'mixed: %s seconds %r (total %r)' % (name, p['seconds'], d['seconds'])
            if not close(p['gbps'], p['bytes'] / p['seconds'] / 1e9):
                return 'mixed: %s gbps != bytes / seconds' % name
        if d['threads'] == 1 and not close(d['seconds'], s['seconds'] + g['seconds']):
            return 'mixed: one thread, but set + get seconds != seconds'
    return None

tmp, bad = sys.argv[1], 0
for line in open(tmp + '/manifest'):
    name, *checks = line.rstrip('\n').split('\t')
    text = open('%s/%s.json' % (tmp, name)).read()
    try:
        why = problem(json.loads(text), dict(c.split('=', 1) for c in checks))
    except ValueError as e:
        why = 'not one JSON object (%s)' % e
    if why:
        print('FAIL: %s: %s: %s' % (name, why, text.strip()))
        bad += 1
sys.exit(1 if bad else 0)
EOF

# bench NAME RC KEY=VALUE... -- ARGS: run "bench store ARGS --json" and
# expect exit status RC; consistent.py checks the output at the end.
bench() {
	local name=$1 want_rc=$2 rc checks=""
	shift 2
	while [ "$1" != "--" ]; do
		checks+=$'\t'"$1"
		shift
	done
	shift
	"$BIN" bench store "$@" --json >"$TMP/$name.json" 2>"$TMP/$name.err"
	rc=$?
	if [ "$rc" != "$want_rc" ]; then
		fail "$name: exit $rc, expected $want_rc ($(head -c 600 "$TMP/$name.err"))"
		return 1
	fi
	printf '%s%s\n' "$name" "$checks" >>"$TMP/manifest"
	return 0
}

# ---- probes: what this machine can do ----
mkdir "$TMP/probe"
"$BIN" bench store --op set --pages 1 --page-bytes 4096 --dir "$TMP/probe" --direct on \
	--json >"$TMP/probe.json" 2>"$TMP/probe.err" || { cat "$TMP/probe.err"; echo "FAIL: probe set"; exit 1; }
DIRECT_OK=$(jget "$TMP/probe.json" "str(d['direct']).lower()")
[ "$DIRECT_OK" = true ] || echo "note: O_DIRECT is not available here; direct on falls back"
ENGINES="threads"
if "$BIN" bench store --op set --pages 1 --page-bytes 4096 --dir "$TMP/probe" --engine uring \
	>/dev/null 2>&1; then
	ENGINES="uring threads"
else
	echo "note: io_uring is not available here; testing the thread engine only"
fi

# ---- set then get --verify: sizes x engines x O_DIRECT x zero-copy ----
for size in 65536:200 5000:300; do
	pb=${size%%:*}
	np=${size##*:}
	for engine in $ENGINES; do
		for direct in on off; do
			for zc in on off; do
				tag=s$pb-$engine-d$direct-z$zc
				dir=$TMP/$tag
				mkdir "$dir"
				want_direct=false
				[ "$direct" = on ] && want_direct=$DIRECT_OK
				want=("engine=$engine" "direct=$want_direct" "page_bytes=$pb" "pages=$np" batch=32)
				[ "$zc" = off ] && want+=(zero_copy=false)
				[ "$zc" = on ] && [ "$pb" = 65536 ] && want+=(zero_copy=true)
				args=(--dir "$dir" --page-bytes "$pb" --pages "$np" --batch 32
				      --engine "$engine" --direct "$direct" --zero-copy "$zc")
				bench "$tag.set" 0 op=set failed_pages=0 "${want[@]}" -- \
					--op set "${args[@]}" || continue
				bench "$tag.get" 0 op=get "hits=$np" "verified_pages=$np" failed_pages=0 \
					"${want[@]}" -- --op get --verify "${args[@]}"
				# A set of pages that exist leaves them as they are and
				# succeeds (the store's check, whatever the page size).
				[ "$pb" = 65536 ] &&
					bench "$tag.reset" 0 op=set failed_pages=0 -- --op set "${args[@]}"
			done
		done
	done
done

# ---- misses, exists, threads, layouts, the mem backend ----
A=$TMP/s65536-threads-doff-zon
common=(--dir "$A" --page-bytes 65536 --batch 32 --engine threads --direct off --zero-copy on)
bench never 1 hits=0 misses=200 failed_pages=200 verified_pages=0 -- \
	--op get --verify --pages 200 --seed 99 "${common[@]}"
bench partial 1 hits=200 misses=40 verified_pages=200 failed_pages=40 -- \
	--op get --verify --pages 240 "${common[@]}"
# A failed run says why on stderr, from its counts; a get that found none
# of its pages names where it looked.
grep -qF "hicache bench: 200 of 200 gets failed: 200 misses (nothing stored under $A for --seed 99? run --op set first" \
	"$TMP/never.err" || fail "never: stderr: $(cat "$TMP/never.err")"
grep -qxF "hicache bench: 40 of 240 gets failed: 40 misses" "$TMP/partial.err" ||
	fail "partial: stderr: $(cat "$TMP/partial.err")"
mkdir "$TMP/nothing"
"$BIN" bench store --op get --pages 4 --page-bytes 4096 --dir "$TMP/nothing" \
	>"$TMP/nothing.out" 2>"$TMP/nothing.err"
rc=$?
[ $rc = 1 ] || fail "get from an empty dir: exit $rc, expected 1"
grep -q '^  failed     4$' "$TMP/nothing.out" || fail "get from an empty dir: $(cat "$TMP/nothing.out")"
grep -qF "hicache bench: 4 of 4 gets failed: 4 misses (nothing stored under $TMP/nothing for --seed 0? run --op set first" \
	"$TMP/nothing.err" || fail "get from an empty dir: stderr: $(cat "$TMP/nothing.err")"
# Pages 0..199 exist: every batch's leading run counts them, and only them.
bench exists 0 op=exists hits=200 misses=64 failed_pages=0 -- \
	--op exists --pages 264 "${common[@]}"
bench exists-none 0 op=exists hits=0 misses=100 -- --op exists --pages 100 --seed 7 "${common[@]}"

T=$TMP/threads
mkdir "$T"
targs=(--dir "$T" --page-bytes 5000 --pages 301 --batch 16 --threads 3)
bench threads.set 0 threads=3 failed_pages=0 -- --op set "${targs[@]}"
bench threads.get 0 threads=3 verified_pages=301 failed_pages=0 -- --op get --verify "${targs[@]}"
# One thread reads what three wrote: keys and contents depend on the page only.
bench threads.get1 0 threads=1 verified_pages=301 -- --op get --verify --dir "$T" \
	--page-bytes 5000 --pages 301 --batch 7

# --slots distinct: every page its own pool slot (the pool holds them all),
# in synchronous batches, with threads and in a mixed run; what one slot
# mode stores, the other reads byte for byte.
S=$TMP/slots
mkdir "$S" "$TMP/slots-mixed"
sargs=(--dir "$S" --page-bytes 8192 --pages 90 --batch 16)
bench slots.set 0 slots=distinct failed_pages=0 -- --op set --slots distinct "${sargs[@]}"
bench slots.get 0 slots=reuse verified_pages=90 -- --op get --verify --slots reuse "${sargs[@]}"
bench slots.get2 0 slots=distinct threads=2 verified_pages=90 pool_warmup=true -- \
	--op get --verify --slots distinct --threads 2 --pool-warmup on "${sargs[@]}"
bench slots.pipeline 0 slots=distinct pipeline=3 verified_pages=90 -- \
	--op get --verify --slots distinct --pipeline 3 "${sargs[@]}"
bench slots.mixed 0 op=mixed slots=distinct hits=48 verified_pages=48 failed_pages=0 -- \
	--op mixed --verify --slots distinct --dir "$TMP/slots-mixed" --page-bytes 8192 --pages 90 \
	--batch 16

for layout in layer_first page_first_direct; do
	L=$TMP/$layout
	mkdir "$L"
	largs=(--dir "$L" --page-bytes 8192 --pages 100 --layout "$layout")
	bench "$layout.set" 0 layout=$layout failed_pages=0 -- --op set "${largs[@]}"
	bench "$layout.get" 0 layout=$layout verified_pages=100 -- --op get --verify "${largs[@]}"
done
bench mem.get 0 backend=mem verified_pages=50 failed_pages=0 -- \
	--backend mem --op get --verify --pages 50 --page-bytes 4097 --batch 8 --threads 2

# ---- --op mixed, --total-bytes ----
X=$TMP/mixed
mkdir "$X"
xargs=(--dir "$X" --page-bytes 8192 --batch 16)
# 150 pages in batches of 16: batches 0, 2, 4, 6, 8 (80 pages) get pages stored
# first, untimed; batches 1, 3, 5, 7, 9 (70 pages) set new ones.
bench mixed 0 op=mixed pages=150 hits=80 misses=0 verified_pages=80 failed_pages=0 \
	existing_pages=0 -- --op mixed --verify --pages 150 "${xargs[@]}"
# Both halves are stored now, byte for byte.
bench mixed.after 0 op=get hits=150 verified_pages=150 -- \
	--op get --verify --pages 150 "${xargs[@]}"
# Two threads start on opposite directions (thread 1 with a set): 26 + 24 gets.
# MLA: one object per page, and the pool warm-up is reported.
X2=$TMP/mixed2
mkdir "$X2"
bench mixed.threads 0 op=mixed threads=2 hits=50 verified_pages=50 failed_pages=0 \
	objects_per_page=1 pool_warmup=true -- --op mixed --verify --threads 2 --mla \
	--pool-warmup on --pages 100 --page-bytes 4096 --batch 8 --dir "$X2"
"$BIN" ls --json "$X2" >"$TMP/lsx2.json" || fail "ls mixed2: exit $?"
jtrue "$TMP/lsx2.json" "d['pages'] == 100 and d['objects'] == 100" ||
	fail "ls mixed2: $(cat "$TMP/lsx2.json")"
"$BIN" bench store --op mixed --pages 40 --page-bytes 4096 --batch 8 --backend mem \
	>"$TMP/human-mixed.txt" 2>&1 || fail "human mixed: exit $? ($(cat "$TMP/human-mixed.txt"))"
grep -q '^  set        16 pages' "$TMP/human-mixed.txt" && grep -q '^  get        24 pages' \
	"$TMP/human-mixed.txt" || fail "human mixed: $(cat "$TMP/human-mixed.txt")"
# pages = total bytes / page bytes, rounded down; K/M/G are powers of 1024.
bench total 0 op=set pages=16 page_bytes=65536 -- --backend mem --op set --total-bytes 1M \
	--page-bytes 64K
bench total.floor 0 op=set pages=1 -- --backend mem --op set --total-bytes 100K --page-bytes 65536
bench total.mib 0 op=set pages=3 -- --backend mem --op set --total-bytes 3MiB --page-bytes 1m

# The human summary names what the --json output does.
"$BIN" bench store --op get --verify "${common[@]}" --pages 10 >"$TMP/human.txt" 2>&1 ||
	fail "human get: exit $? ($(cat "$TMP/human.txt"))"
grep -q 'verified   10, mismatched 0' "$TMP/human.txt" || fail "human get: $(cat "$TMP/human.txt")"
grep -q 'cache      warm' "$TMP/human.txt" || fail "human get: no cache note: $(cat "$TMP/human.txt")"

# ---- ls ----
"$BIN" ls --json "$A" >"$TMP/ls.json" || fail "ls: exit $?"
# Zero-copy 64 KiB pages: objects _k and _v of 32 KiB, each + a trailer block
# (the file system's direct-I/O block).
jtrue "$TMP/ls.json" "d['pages'] == 200 and d['objects'] == 400 and d['bytes'] - 400 * 32768 in [400 * b for b in (512, 1024, 2048, 4096)] and d['oldest'] <= d['newest'] and d['oldest'].endswith('Z')" ||
	fail "ls: $(cat "$TMP/ls.json")"
B=$TMP/s5000-threads-doff-zoff
"$BIN" ls --json "$B" >"$TMP/ls5000.json" || fail "ls 5000: exit $?"
# Bounced (--zero-copy off) 5000-byte pages: the same _k and _v objects a
# zero-copy pool writes, of 2500 bytes each + padding + a trailer block.
jtrue "$TMP/ls5000.json" "d['pages'] == 300 and d['objects'] == 600 and d['bytes'] in [600 * ((2500 + b - 1) // b * b + b) for b in (512, 1024, 2048, 4096)]" ||
	fail "ls 5000: $(cat "$TMP/ls5000.json")"
"$BIN" ls --json "$A" "$B" >"$TMP/ls2.json" || fail "ls two dirs: exit $?"
# Both stores used seed 0: pages 0..199 have the same keys in each, so 300 pages.
jtrue "$TMP/ls2.json" "d['pages'] == 300 and d['objects'] == 1000" || fail "ls two dirs: $(cat "$TMP/ls2.json")"
mkdir "$TMP/empty"
"$BIN" ls --json "$TMP/empty" >"$TMP/ls0.json" || fail "ls empty: exit $?"
jtrue "$TMP/ls0.json" "d['pages'] == 0 and d['bytes'] == 0 and d['oldest'] is None" ||
	fail "ls empty: $(cat "$TMP/ls0.json")"
"$BIN" ls "$A" | grep -q '^pages    200$' || fail "ls: human output"

# ---- fsck: clean, corrupt, orphaned temp, repair ----
F=$TMP/fsck
mkdir "$F"
fargs=(--dir "$F" --page-bytes 65536 --pages 200 --batch 32)
bench fsck.set 0 failed_pages=0 -- --op set "${fargs[@]}"
"$BIN" fsck --json "$F" >"$TMP/fsck0.json" 2>"$TMP/fsck0.err"
rc=$?
[ $rc = 0 ] || fail "fsck clean: exit $rc ($(cat "$TMP/fsck0.err"))"
"$BIN" ls --json "$F" >"$TMP/lsf.json"
objects=$(jget "$TMP/lsf.json" "d['objects']")
jtrue "$TMP/fsck0.json" "d['ok'] == $objects and d['corrupt'] == 0 and d['orphaned_temp'] == 0 and d['removed'] == 0" ||
	fail "fsck clean: $(cat "$TMP/fsck0.json")"

# One flipped payload byte in one object; an orphaned temp file; a foreign file.
victim=$(cd "$F" && find . -type f -name '[0-9a-f]*' | sort | head -n 1)
"$PY" -c '
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(100)
    b = f.read(1)
    f.seek(100)
    f.write(bytes([b[0] ^ 0x01]))' "$F/$victim"
bucket=$(dirname "$victim")
orphan=$F/$bucket/.tmp.0123456789abcdef.999999.1
head -c 8192 /dev/zero >"$orphan"
touch -d '2 hours ago' "$orphan"
echo hello >"$F/$bucket/notes.txt"

"$BIN" fsck --json "$F" >"$TMP/fsck1.json" 2>"$TMP/fsck1.err"
rc=$?
[ $rc = 1 ] || fail "fsck corrupt: exit $rc, expected 1"
jtrue "$TMP/fsck1.json" "d['corrupt'] == 1 and d['ok'] == $objects - 1 and d['orphaned_temp'] == 1 and d['foreign'] == 1 and d['removed'] == 0" ||
	fail "fsck corrupt: $(cat "$TMP/fsck1.json")"
grep -q "${victim#./}" "$TMP/fsck1.err" || fail "fsck corrupt: the object is not named: $(cat "$TMP/fsck1.err")"
if [ ! -e "$F/$victim" ] || [ ! -e "$orphan" ]; then
	fail "fsck without --repair removed something"
fi

# Without the store's checksum the page is a hit, and the bench's own check
# finds the wrong byte (nothing is detected, so nothing is removed).
HICACHE_VERIFY_CHECKSUM=off bench fsck.get-nochecksum 1 hits=200 mismatched_pages=1 \
	failed_pages=1 verified_pages=199 -- --op get --verify "${fargs[@]}"
[ -e "$F/$victim" ] || fail "a get without checksums removed the object"
grep -q "^hicache bench: 1 of 200 gets failed: 1 mismatched" "$TMP/fsck.get-nochecksum.err" ||
	fail "fsck.get-nochecksum: stderr: $(cat "$TMP/fsck.get-nochecksum.err")"
# With it, a get sees exactly one corrupt page, and removes the broken
# object so that the next set heals the page.
bench fsck.get-corrupt 1 hits=199 corrupt=1 failed_pages=1 verified_pages=199 -- \
	--op get --verify "${fargs[@]}"
[ ! -e "$F/$victim" ] || fail "the corrupt object found by get is still there"
grep -qxF "hicache bench: 1 of 200 gets failed: 1 corrupt" "$TMP/fsck.get-corrupt.err" ||
	fail "fsck.get-corrupt: stderr: $(cat "$TMP/fsck.get-corrupt.err")"

"$BIN" fsck --repair --json "$F" >"$TMP/fsck2.json" 2>"$TMP/fsck2.err"
rc=$?
[ $rc = 0 ] || fail "fsck --repair: exit $rc, expected 0 (the get removed the corrupt object)"
jtrue "$TMP/fsck2.json" "d['corrupt'] == 0 and d['orphaned_temp'] == 1 and d['removed'] == 1 and d['repair']" ||
	fail "fsck --repair: $(cat "$TMP/fsck2.json")"
[ ! -e "$orphan" ] || fail "fsck --repair: orphaned temp file still there"
[ -e "$F/$bucket/notes.txt" ] || fail "fsck --repair removed a foreign file"

"$BIN" fsck --json "$F" >"$TMP/fsck3.json" 2>"$TMP/fsck3.err"
rc=$?
[ $rc = 0 ] || fail "fsck after repair: exit $rc ($(cat "$TMP/fsck3.err"))"
jtrue "$TMP/fsck3.json" "d['corrupt'] == 0 and d['orphaned_temp'] == 0 and d['ok'] == $objects - 1" ||
	fail "fsck after repair: $(cat "$TMP/fsck3.json")"
"$BIN" fsck "$F" | grep -q '^corrupt        0$' || fail "fsck: human output"
# The repaired page is a miss now; every other page is intact.
bench fsck.get-repaired 1 hits=199 misses=1 corrupt=0 failed_pages=1 verified_pages=199 -- \
	--op get --verify "${fargs[@]}"
# A set heals it.
bench fsck.set-again 0 failed_pages=0 -- --op set "${fargs[@]}"
bench fsck.get-healed 0 hits=200 failed_pages=0 verified_pages=200 -- \
	--op get --verify "${fargs[@]}"

# --temp-age: a temp file 2 minutes old is a live writer's by default (10
# minutes) and kept; with --temp-age 60 it is orphaned and removed.
young=$F/$bucket/.tmp.0123456789abcdef.999999.2
head -c 4096 /dev/zero >"$young"
touch -d '2 minutes ago' "$young"
"$BIN" fsck --repair --json "$F" >"$TMP/fsck-age0.json" 2>"$TMP/fsck-age0.err" ||
	fail "fsck --repair (default age): exit $? ($(cat "$TMP/fsck-age0.err"))"
jtrue "$TMP/fsck-age0.json" "d['orphaned_temp'] == 0 and d['removed'] == 0" ||
	fail "fsck default temp age: $(cat "$TMP/fsck-age0.json")"
[ -e "$young" ] || fail "fsck --repair removed a 2-minute-old temp file (default age 600 s)"
"$BIN" fsck --json --temp-age 60 "$F" >"$TMP/fsck-age1.json" 2>"$TMP/fsck-age1.err" ||
	fail "fsck --temp-age 60: exit $? ($(cat "$TMP/fsck-age1.err"))"
jtrue "$TMP/fsck-age1.json" "d['orphaned_temp'] == 1 and d['removed'] == 0" ||
	fail "fsck --temp-age 60: $(cat "$TMP/fsck-age1.json")"
[ -e "$young" ] || fail "fsck --temp-age 60 without --repair removed the temp file"
"$BIN" fsck --repair --temp-age 60 --json "$F" >"$TMP/fsck-age2.json" 2>"$TMP/fsck-age2.err" ||
	fail "fsck --repair --temp-age 60: exit $? ($(cat "$TMP/fsck-age2.err"))"
jtrue "$TMP/fsck-age2.json" "d['orphaned_temp'] == 1 and d['removed'] == 1 and d['corrupt'] == 0" ||
	fail "fsck --repair --temp-age 60: $(cat "$TMP/fsck-age2.json")"
[ ! -e "$young" ] || fail "fsck --repair --temp-age 60: the temp file is still there"
for bad in 0 x -5 4294967297; do
	"$BIN" fsck --temp-age "$bad" "$F" >/dev/null 2>"$TMP/fsck-age.err"
	rc=$?
	[ $rc = 2 ] || fail "fsck --temp-age $bad: exit $rc, expected 2"
	grep -q "^hicache fsck: --temp-age '$bad' is not " "$TMP/fsck-age.err" ||
		fail "fsck --temp-age $bad: $(cat "$TMP/fsck-age.err")"
done
"$BIN" fsck "$F" --temp-age >/dev/null 2>"$TMP/fsck-age.err"
[ $? = 2 ] && grep -q "option '--temp-age' needs a value" "$TMP/fsck-age.err" ||
	fail "fsck --temp-age without a value: $(cat "$TMP/fsck-age.err")"

# Corruption that fsck finds first: --repair removes it and still exits 1.
victim2=$(cd "$F" && find . -type f -name '[0-9a-f]*' | sort | tail -n 1)
"$PY" -c '
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-20, 2)
    b = f.read(1)
    f.seek(-20, 2)
    f.write(bytes([b[0] ^ 0x80]))' "$F/$victim2"
"$BIN" fsck --repair --json "$F" >"$TMP/fsck4.json" 2>"$TMP/fsck4.err"
rc=$?
[ $rc = 1 ] || fail "fsck --repair of a corrupt object: exit $rc, expected 1"
jtrue "$TMP/fsck4.json" "d['corrupt'] == 1 and d['removed'] == 1" ||
	fail "fsck --repair of a corrupt object: $(cat "$TMP/fsck4.json")"
[ ! -e "$F/$victim2" ] || fail "fsck --repair: corrupt object still there"

# ---- gc: the older half goes ----
G=$TMP/gc
mkdir "$G"
gargs=(--dir "$G" --page-bytes 16384 --pages 100 --batch 32)
bench gc.old 0 failed_pages=0 -- --op set --seed 1 "${gargs[@]}"
find "$G" -type f -exec touch -d '1 hour ago' {} +
bench gc.new 0 failed_pages=0 -- --op set --seed 2 "${gargs[@]}"
"$BIN" ls --json "$G" >"$TMP/lsg.json"
total=$(jget "$TMP/lsg.json" "d['bytes']")
cap_gb=$("$PY" -c "print('%.9f' % ($total / 2 / 1e9))")
"$BIN" gc "$G" --capacity-gb "$cap_gb" --json >"$TMP/gc.json" 2>"$TMP/gc.err"
rc=$?
[ $rc = 0 ] || fail "gc: exit $rc ($(cat "$TMP/gc.err"))"
jtrue "$TMP/gc.json" "d['removed_pages'] == 100 and d['removed_bytes'] == $total // 2 and d['bytes_left'] <= d['capacity_bytes']" ||
	fail "gc: $(cat "$TMP/gc.json")"
"$BIN" ls --json "$G" >"$TMP/lsg2.json"
jtrue "$TMP/lsg2.json" "d['pages'] == 100 and d['bytes'] <= $total / 2" || fail "ls after gc: $(cat "$TMP/lsg2.json")"
bench gc.get-old 1 hits=0 failed_pages=100 -- --op get --verify --seed 1 "${gargs[@]}"
bench gc.get-new 0 verified_pages=100 failed_pages=0 -- --op get --verify --seed 2 "${gargs[@]}"
"$BIN" gc "$G" "$TMP/empty" --capacity-gb 0 >"$TMP/gc0.txt" || fail "gc to 0: exit $?"
grep -q '^removed  100 pages' "$TMP/gc0.txt" || fail "gc to 0: $(cat "$TMP/gc0.txt")"

# ---- a shared store's dirs given in another order, or one dir twice ----
# fsck reports objects that lie where their names do not route them
# (misplaced) apart from corrupt ones and --repair never deletes them; ls
# and gc count pages wherever they lie; the same dir twice, also through a
# symlink, is refused (every object would be counted twice and found
# misplaced in one of them).
M1=$TMP/m1
M2=$TMP/m2
mkdir "$M1" "$M2"
margs=(--dir "$M1" --dir "$M2" --page-bytes 16384 --pages 100 --batch 32)
bench misplaced.set 0 failed_pages=0 -- --op set "${margs[@]}"
"$BIN" ls --json "$M1" "$M2" >"$TMP/lsm.json" || fail "ls two dirs: exit $?"
mobjects=$(jget "$TMP/lsm.json" "d['objects']")
"$BIN" ls --json "$M2" "$M1" >"$TMP/lsm2.json" || fail "ls swapped: exit $?"
jtrue "$TMP/lsm2.json" "d['objects'] == $mobjects and d['pages'] == 100" ||
	fail "ls swapped: $(cat "$TMP/lsm2.json")"
"$BIN" fsck --repair --json "$M2" "$M1" >"$TMP/fsckm.json" 2>"$TMP/fsckm.err"
rc=$?
[ $rc = 0 ] || fail "fsck --repair swapped: exit $rc, expected 0 ($(cat "$TMP/fsckm.err"))"
jtrue "$TMP/fsckm.json" "d['misplaced'] > 0 and d['misplaced'] + d['ok'] == $mobjects and d['corrupt'] == 0 and d['removed'] == 0 and d['gone'] == 0" ||
	fail "fsck --repair swapped: $(cat "$TMP/fsckm.json")"
# One of the two alone: buckets go by the name's hash whatever the dirs,
# and with one dir every object is in the right one: checked, none removed.
"$BIN" fsck --repair --json "$M1" >"$TMP/fsckm1.json" 2>/dev/null
jtrue "$TMP/fsckm1.json" "d['ok'] > 0 and d['corrupt'] == 0 and d['removed'] == 0" ||
	fail "fsck --repair of one of two dirs: $(cat "$TMP/fsckm1.json")"
"$BIN" fsck "$M2" "$M1" | grep -q '^misplaced      [1-9][0-9]* (never removed)$' ||
	fail "fsck swapped: human output has no misplaced line"
bench misplaced.get 0 hits=100 verified_pages=100 failed_pages=0 -- --op get --verify "${margs[@]}"
"$BIN" fsck --json "$M1" "$M2" >"$TMP/fsckm3.json" || fail "fsck in order: exit $?"
jtrue "$TMP/fsckm3.json" "d['ok'] == $mobjects and d['misplaced'] == 0" ||
	fail "fsck in order: $(cat "$TMP/fsckm3.json")"
ln -s "$M1" "$TMP/m1link"
for cmd in "fsck --repair" ls "gc --capacity-gb 0"; do
	for pair in "$M1 $M1" "$M1 $TMP/m1link"; do
		# shellcheck disable=SC2086
		"$BIN" $cmd $pair >"$TMP/twice.out" 2>"$TMP/twice.err"
		rc=$?
		[ $rc = 1 ] || fail "$cmd $pair: exit $rc, expected 1"
		grep -q 'same directory' "$TMP/twice.err" ||
			fail "$cmd $pair: $(cat "$TMP/twice.err")"
	done
done
"$BIN" ls --json "$M1" "$M2" >"$TMP/lsm3.json"
jtrue "$TMP/lsm3.json" "d['objects'] == $mobjects" ||
	fail "a refused fsck/gc deleted objects: $(cat "$TMP/lsm3.json")"
# An orphaned temp file (its mtime 2 hours back) in the shared store:
# reported, removed by --repair; a young one stays.
mb=$(cd "$M1" && ls -d [0-9a-f][0-9a-f] | head -n 1)
old_tmp=$M1/$mb/.tmp.0123456789abcdef.00c0ffee00c0ffee.3
young_tmp=$M1/$mb/.tmp.0123456789abcdef.00c0ffee00c0ffee.4
head -c 8192 /dev/zero >"$old_tmp"
touch -d '2 hours ago' "$old_tmp"
head -c 8192 /dev/zero >"$young_tmp"
"$BIN" fsck --repair --json "$M1" "$M2" >"$TMP/fsckm4.json" || fail "fsck temps: exit $?"
jtrue "$TMP/fsckm4.json" "d['orphaned_temp'] == 1 and d['removed'] == 1 and d['ok'] == $mobjects" ||
	fail "fsck temps: $(cat "$TMP/fsckm4.json")"
[ ! -e "$old_tmp" ] || fail "fsck --repair: the old temp file is still there"
[ -e "$young_tmp" ] || fail "fsck --repair removed a young temp file"

# ---- usage ----
usage_err() { # expected-status args...
	local expect=$1
	shift
	"$BIN" "$@" >"$TMP/u.out" 2>"$TMP/u.err"
	local rc=$?
	[ $rc = "$expect" ] || fail "'$*': exit $rc, expected $expect"
	if [ "$expect" = 2 ] && [ ! -s "$TMP/u.err" ]; then
		fail "'$*': no message on stderr"
	fi
	if [ "$expect" = 0 ] && ! grep -q '^usage:' "$TMP/u.out"; then
		fail "'$*': no usage on stdout"
	fi
}
for cmd in "bench" "bench store" fsck ls gc; do
	# shellcheck disable=SC2086
	usage_err 0 $cmd --help
done
usage_err 2 bench
usage_err 2 bench disk --op set
usage_err 2 bench store --op set --pages 10
usage_err 2 bench store --op frob --pages 10 --page-bytes 4096 --dir "$TMP/empty"
usage_err 2 bench store --op set --pages 10 --page-bytes 0 --dir "$TMP/empty"
usage_err 2 bench store --op set --pages -1 --page-bytes 4096 --dir "$TMP/empty"
usage_err 2 bench store --op set --pages 10 --page-bytes 4096 --batch 0 --dir "$TMP/empty"
usage_err 2 bench store --op set --pages 10 --page-bytes 4096 --direct maybe --dir "$TMP/empty"
usage_err 2 bench store --op set --pages 10 --page-bytes 4096 --zero-copy 1 --dir "$TMP/empty"
usage_err 2 bench store --op set --pages 10 --page-bytes 4096 --engine aio --dir "$TMP/empty"
usage_err 2 bench store --op set --pages 10 --page-bytes 4096 --layout diagonal --dir "$TMP/empty"
usage_err 2 bench store --op set --pages 10 --page-bytes 4096 --threads 0 --dir "$TMP/empty"
usage_err 2 bench store --op set --pages 10 --page-bytes 4096 --verify --dir "$TMP/empty"
usage_err 2 bench store --op set --pages 10 --page-bytes 4096 --bogus --dir "$TMP/empty"
usage_err 2 bench store --op set --pages 10 --page-bytes 4096 --slots some --dir "$TMP/empty"
usage_err 2 bench store --op set --pages 10 --page-bytes 4096 --dir
usage_err 2 bench store --op set --pages 10 --page-bytes 4096 --dir "$TMP/empty" extra
usage_err 2 bench store --op set --pages 10 --total-bytes 1M --page-bytes 4096 --dir "$TMP/empty"
usage_err 2 bench store --op set --total-bytes 1K --page-bytes 4096 --dir "$TMP/empty"
usage_err 2 bench store --op set --total-bytes 1X --page-bytes 4096 --dir "$TMP/empty"
usage_err 2 bench store --op set --total-bytes 1M --page-bytes 4Q --dir "$TMP/empty"
usage_err 2 bench store --op exists --pages 10 --page-bytes 4096 --verify --dir "$TMP/empty"
usage_err 2 bench store --op get --pages 10 --page-bytes 4096 --pool-warmup 1 --dir "$TMP/empty"
# The store creates a missing base dir, but not its parents.
usage_err 1 bench store --op set --pages 10 --page-bytes 4096 --dir "$TMP/missing/sub"
usage_err 2 fsck
usage_err 2 fsck --bogus "$TMP/empty"
usage_err 1 fsck "$TMP/missing"
usage_err 1 ls "$TMP/missing"
usage_err 1 gc "$TMP/missing" --capacity-gb 1
usage_err 2 ls
usage_err 2 ls --bogus "$TMP/empty"
usage_err 2 gc "$TMP/empty"
usage_err 2 gc "$TMP/empty" --capacity-gb -1
usage_err 2 gc "$TMP/empty" --capacity-gb 1x
usage_err 2 gc --capacity-gb 1
usage_err 2 gc "$TMP/empty" --capacity-gb

# stderr was never a terminal here: no progress line (drawn with \r) anywhere.
# One run long enough for several redraws on a terminal, to be sure.
"$BIN" bench store --backend mem --op set --pages 4000 --page-bytes 16384 --batch 16 \
	>"$TMP/long.out" 2>"$TMP/long.err" || fail "long set: exit $?"
if grep -l $'\r' "$TMP"/*.err >/dev/null || grep -q 'so far' "$TMP"/*.err; then
	fail "a progress line on a non-terminal: $(grep -l -e $'\r' -e 'so far' "$TMP"/*.err)"
fi

"$PY" "$TMP/consistent.py" "$TMP" || fails=$((fails + 1))

if [ $fails -ne 0 ]; then
	echo "$fails failure(s)"
	exit 1
fi
echo "ok"
exit 0
