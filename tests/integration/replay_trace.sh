#!/bin/bash
# hicache replay's trace parser and its clean-up (issue 15 item 13): exactly
# one JSON object per line, no key twice, the 64 MiB line limit; SIGINT and
# SIGTERM remove the temporary L3 dir. Exit 0 pass, 1 fail, 77 skip.
set -u

BIN=${HICACHE_BIN:-}
SRC=${HC_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
TRACE=$SRC/data/mooncake_synthetic_trace.jsonl
[ -n "$BIN" ] && [ -x "$BIN" ] || { echo "skip: HICACHE_BIN not set or not executable"; exit 77; }
[ -r "$TRACE" ] || { echo "skip: no $TRACE"; exit 77; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

GOOD='{"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}'
# bad NAME LINE MESSAGE: the trace of one good line then LINE fails on line 2.
bad() {
	printf '%s\n%s\n' "$GOOD" "$2" >"$TMP/$1.jsonl"
	"$BIN" replay "$TMP/$1.jsonl" --no-data --l3 none >/dev/null 2>"$TMP/err"
	rc=$?
	[ $rc -eq 1 ] || fail "$1: exit $rc, want 1"
	grep -q "$1.jsonl:2: $3" "$TMP/err" || fail "$1: message: $(cat "$TMP/err")"
}
bad trailing "$GOOD x" 'text after the JSON object'
bad two "$GOOD$GOOD" 'text after the JSON object'
bad comma "$GOOD," 'text after the JSON object'
bad dupkey '{"timestamp": 5, "input_length": 600, "input_length": 900, "output_length": 1, "hash_ids": [1, 2]}' \
	'a key appears twice'
bad dupother '{"x": 1, "timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [1, 2], "x": 2}' \
	'a key appears twice'
# Integers as written, not as cJSON's doubles hold them: 2^53 + 1 would
# read as 2^53 (two block ids merged), 1.0000000000000001 as 1. Refused,
# with the value named; what a double holds exactly still reads.
bad bigid '{"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [1, 9007199254740993]}' \
	'hash_ids\[1\] is 9007199254740993: ids must be integers in 0\.\.2^53'
bad fracid '{"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [1.0000000000000001, 2]}' \
	'hash_ids\[0\] is 1\.0000000000000001: ids must be integers'
bad fracin '{"timestamp": 5, "input_length": 600.00000000000001, "output_length": 1, "hash_ids": [1, 2]}' \
	'input_length is 600\.00000000000001: input_length must be an integer >= 1'
bad fracout '{"timestamp": 5, "input_length": 600, "output_length": 1.00000000000000001, "hash_ids": [1, 2]}' \
	'output_length is 1\.00000000000000001: output_length must be an integer >= 0'
bad bigts '{"timestamp": 9007199254740993, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}' \
	'timestamp is 9007199254740993: timestamp must be an integer'
printf '%s\n' "$GOOD" '{"timestamp": 1e3, "input_length": 6e2, "output_length": 1.0, "hash_ids": [9007199254740992, 9007199254740991]}' \
	>"$TMP/exact.jsonl"
"$BIN" replay "$TMP/exact.jsonl" --no-data --l3 none >/dev/null 2>"$TMP/err" ||
	fail "exact integers (2^53, 1e3, 1.0) rejected: $(cat "$TMP/err")"
printf '%s\n%s\0 x\n' "$GOOD" "$GOOD" >"$TMP/nul.jsonl"
"$BIN" replay "$TMP/nul.jsonl" --no-data --l3 none >/dev/null 2>"$TMP/err"
grep -q 'nul.jsonl:2: text after the JSON object' "$TMP/err" ||
	fail "NUL byte after the object: $(cat "$TMP/err")"
# Whitespace after the object is fine (CRLF traces).
printf '%s \r\n%s\n\n' "$GOOD" "$GOOD" >"$TMP/ok.jsonl"
"$BIN" replay "$TMP/ok.jsonl" --no-data --l3 none >/dev/null 2>"$TMP/err" ||
	fail "trailing whitespace rejected: $(cat "$TMP/err")"
# A line over 64 MiB is refused with its own message.
{
	echo "$GOOD"
	printf '{"pad": "'
	head -c $((64 << 20)) /dev/zero | tr '\0' a
	printf '", "input_length": 1}\n'
} >"$TMP/long.jsonl"
"$BIN" replay "$TMP/long.jsonl" --no-data --l3 none >/dev/null 2>"$TMP/err"
grep -q 'long.jsonl:2: line longer than 64 MiB' "$TMP/err" ||
	fail "long line: $(cat "$TMP/err")"
rm -f "$TMP/long.jsonl"

# SIGINT / SIGTERM in data mode with the default (temporary) L3: the dir
# goes, and the process dies of the signal.
for sig in TERM INT; do
	mkdir -p "$TMP/tmp.$sig"
	# 16 KV bytes a token: the first L3 object comes sooner (fewer bytes
	# to move before it), and the whole trace still runs for long after.
	TMPDIR="$TMP/tmp.$sig" HICACHE_LOG=off "$BIN" replay "$TRACE" --sequential \
		--l1-tokens 200000 --l2-tokens 600000 --kv-bytes-per-token 16 >/dev/null 2>&1 &
	pid=$!
	# Wait until the store has objects in it (the replay is under way).
	for _ in $(seq 300); do
		[ -n "$(find "$TMP/tmp.$sig" -type f -print -quit 2>/dev/null)" ] && break
		sleep 0.1
	done
	[ -n "$(ls -A "$TMP/tmp.$sig")" ] || fail "$sig: no temporary L3 dir seen"
	kill -"$sig" $pid
	wait $pid
	rc=$?
	want=$((128 + $(kill -l "$sig")))
	[ $rc -eq $want ] || fail "SIG$sig: exit $rc, want $want"
	left=$(ls -A "$TMP/tmp.$sig")
	[ -z "$left" ] || fail "SIG$sig left the temporary L3 dir behind: $left"
done

[ $fails -eq 0 ] && { echo "replay_trace: all checks passed"; exit 0; }
exit 1
