#!/bin/bash
# The CLI against the real S3 gateway of the s3_server ctest fixture:
# hicache bench store --backend s3 writes pages that read back byte for
# byte (zero-copy and bounce), exists counts hits and misses, hicache ls
# s3://bucket/prefix counts pages, objects and bytes, hicache gc deletes the
# oldest pages down to a cap, and usage errors are named.
# Exit 0 pass, 1 fail, 77 skip (only when the server script cannot run here).
set -u

BIN=${HICACHE_BIN:-}
PY=${PYTHON3:-python3}
[ -n "$BIN" ] && [ -x "$BIN" ] || { echo "skip: HICACHE_BIN not set or not executable"; exit 77; }
DIR=${HC_S3_DIR:-}
[ -n "$DIR" ] || { echo "skip: HC_S3_DIR not set (run through ctest, which starts the server)"; exit 77; }
if [ -f "$DIR/skip" ]; then
	echo "SKIPPED: scripts/s3-server.sh cannot run here: $(cat "$DIR/skip")"
	exit 77
fi
[ -f "$DIR/env" ] || { echo "FAIL: no server in $DIR (did s3.server_start fail?)"; exit 1; }
# shellcheck disable=SC1091
. "$DIR/env"
export HICACHE_LOG=warn

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
jget() {
	"$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
B=$AWS_DEFAULT_BUCKET
P="cli-$$-$(date +%s%N)"

# bench set then get --verify, zero-copy and bounce: page_first pages, K
# and V objects either way.
for zc in on off; do
	"$BIN" bench store --backend s3 --prefix "$P/$zc/" --bucket "$B" \
		--endpoint "$HICACHE_S3_ENDPOINT" --max-inflight 8 --zero-copy $zc --op set \
		--pages 40 --page-bytes 64K --batch 16 --json >"$TMP/set.json" ||
		fail "bench set (zero-copy $zc)"
	[ "$(jget "$TMP/set.json" "d['backend'], d['failed_pages'], d['pages']")" = "('s3', 0, 40)" ] ||
		fail "bench set (zero-copy $zc): $(cat "$TMP/set.json")"
	"$BIN" bench store --backend s3 --prefix "$P/$zc/" --zero-copy $zc --op get --verify \
		--pages 40 --page-bytes 64K --batch 16 --json >"$TMP/get.json" ||
		fail "bench get (zero-copy $zc)"
	[ "$(jget "$TMP/get.json" "d['verified_pages'], d['failed_pages'], d['cache']")" = "(40, 0, 's3')" ] ||
		fail "bench get --verify (zero-copy $zc): $(cat "$TMP/get.json")"
done
# Both modes write the same objects: each reads the other's pages.
for zc in on off; do
	other=$([ $zc = on ] && echo off || echo on)
	"$BIN" bench store --backend s3 --prefix "$P/$other/" --zero-copy $zc --op get --verify \
		--pages 40 --page-bytes 64K --batch 16 --json >"$TMP/get.json" ||
		fail "bench get (zero-copy $zc) of $other/"
	[ "$(jget "$TMP/get.json" "d['verified_pages'], d['failed_pages'], d['cache']")" = "(40, 0, 's3')" ] ||
		fail "bench get --verify (zero-copy $zc) of $other/: $(cat "$TMP/get.json")"
done
# exists over 60 pages of which 40 are stored.
"$BIN" bench store --backend s3 --prefix "$P/on/" --op exists --pages 60 --page-bytes 64K \
	--batch 60 --json >"$TMP/exists.json" || fail "bench exists"
[ "$(jget "$TMP/exists.json" "d['hits'], d['misses']")" = "(40, 20)" ] ||
	fail "bench exists: $(cat "$TMP/exists.json")"

# ls: 40 pages under on/ and 40 under off/, each a K and a V object of
# 32 KiB (half the 64 KiB page) + a trailer block (512 bytes on S3: no
# direct-I/O alignment to keep), bounced or not.
obj=$((32768 + 512))
"$BIN" ls --json "s3://$B/$P/" >"$TMP/ls.json" || fail "ls s3://"
[ "$(jget "$TMP/ls.json" "d['pages'], d['objects'], d['bytes']")" = "(80, 160, $((160 * obj)))" ] ||
	fail "ls: $(cat "$TMP/ls.json")"
for zc in on off; do
	"$BIN" ls --json "s3://$B/$P/$zc/" >"$TMP/ls.json" || fail "ls s3:// prefix $zc/"
	[ "$(jget "$TMP/ls.json" "d['pages'], d['objects'], d['bytes']")" = "(40, 80, $((80 * obj)))" ] ||
		fail "ls $zc/: $(cat "$TMP/ls.json")"
done

# gc down to 10 pages' worth of on/, then everything.
cap=$(python3 -c "print($((10 * 2 * obj)) / 1e9)")
"$BIN" gc --json "s3://$B/$P/on/" --capacity-gb "$cap" >"$TMP/gc.json" || fail "gc s3://"
[ "$(jget "$TMP/gc.json" "d['removed_pages'], d['pages_left']")" = "(30, 10)" ] ||
	fail "gc: $(cat "$TMP/gc.json")"
"$BIN" gc "s3://$B/$P/" --capacity-gb 0 >/dev/null || fail "gc to 0"
"$BIN" ls --json "s3://$B/$P/" >"$TMP/ls.json" || fail "ls after gc"
[ "$(jget "$TMP/ls.json" "d['pages'], d['objects']")" = "(0, 0)" ] || fail "ls after gc: $(cat "$TMP/ls.json")"

# Usage and configuration errors are named.
"$BIN" bench store --backend file --bucket x --op set --pages 1 --page-bytes 4K 2>"$TMP/err"
[ $? -eq 2 ] && grep -q "need --backend s3" "$TMP/err" || fail "--bucket without s3: $(cat "$TMP/err")"
"$BIN" ls "s3://$B/x" /tmp 2>"$TMP/err"
[ $? -eq 1 ] && grep -q "only location" "$TMP/err" || fail "ls s3:// and a dir: $(cat "$TMP/err")"
AWS_SECRET_ACCESS_KEY=not-the-secret-Q4w8 "$BIN" ls "s3://$B/" 2>"$TMP/err"
[ $? -eq 1 ] && grep -q "access denied" "$TMP/err" && ! grep -q "not-the-secret" "$TMP/err" ||
	fail "ls with a wrong secret: $(cat "$TMP/err")"
"$BIN" ls "s3://no-such-bucket-$$/" 2>"$TMP/err"
[ $? -eq 1 ] && grep -q "does not exist" "$TMP/err" || fail "ls of a missing bucket: $(cat "$TMP/err")"

[ $fails -eq 0 ] && echo "s3 cli: ok" && exit 0
echo "s3 cli: $fails failure(s)"
exit 1
