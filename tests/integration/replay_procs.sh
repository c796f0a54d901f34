#!/bin/bash
# hicache replay --processes: the fleet with each instance in its own OS
# process gives the in-process fleet's hits exactly (sequential data mode
# on a shared file dir, every page loaded verified; no-data with --l3 none,
# sequential and timed); no child outlives the replay, whether it ends,
# is stopped by SIGTERM or SIGINT (temporary L3 dir removed) or killed; a
# child that dies fails the run naming it; bad combinations exit 2 naming
# the flags. 'replay_procs.sh s3' (integration.replay_procs_s3, on the
# s3_server ctest fixture) checks the same equality on a shared bucket.
# Exit 0 pass, 1 fail, 77 skip.
set -u

BIN=${HICACHE_BIN:-}
PY=${PYTHON3:-python3}
SRC=${HC_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
[ -n "$BIN" ] && [ -x "$BIN" ] || { echo "skip: HICACHE_BIN not set or not executable"; exit 77; }
command -v "$PY" >/dev/null 2>&1 || { echo "skip: no python3"; exit 77; }
command -v pgrep >/dev/null 2>&1 || { echo "skip: no pgrep"; exit 77; }
[ -r "$SRC/data/mooncake_synthetic_trace.jsonl" ] || { echo "skip: no trace"; exit 77; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# Every replay below reads a trace under $TMP: its processes (children are
# forks, with the parent's command line) are found by that path.
procs() { pgrep -f -- "$TMP/" | wc -l; }
none_left() { [ "$(procs)" -eq 0 ] || fail "$1: $(procs) replay processes left"; }

# same A B: the replays agree on every field but those of wall time (and
# of measured transfer times in data mode) and the processes flag.
same() {
	"$PY" - "$1" "$2" <<'EOF'
import json, sys
drop = {"seconds", "processes", "virtual_seconds", "ttft_s", "l3_read_gbps"}
if json.load(open(sys.argv[1]))["mode"] == "no_data":
    drop = {"seconds", "processes"}
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in drop}
    if isinstance(o, list):
        return [strip(x) for x in o]
    return o
a, b = (strip(json.load(open(p))) for p in sys.argv[1:3])
if a != b:
    print("differ:", [k for k in a if a[k] != b.get(k)])
    sys.exit(1)
EOF
}
json() {
	"$PY" -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
		"$1" "$2"
}
check() { [ "$(json "$1" "$2" 2>&1)" = True ] || fail "$3: $2 ($(json "$1" "$4" 2>&1))"; }

head -n 200 "$SRC/data/mooncake_synthetic_trace.jsonl" >"$TMP/t200.jsonl"
# 16 KV bytes a token (8 KiB pages) move an eighth of the default's bytes
# for the same pages, keys and hits: the same checks, in less time.
CAP="--l1-tokens 300000 --l2-tokens 900000 --kv-bytes-per-token 16"

# The shared bucket: the data-mode equality, the pages read across
# instances verified, nothing left running.
if [ "${1:-}" = s3 ]; then
	DIR=${HC_S3_DIR:-}
	[ -n "$DIR" ] || { echo "skip: HC_S3_DIR not set (run through ctest)"; exit 77; }
	if [ -f "$DIR/skip" ]; then
		echo "SKIPPED: scripts/s3-server.sh cannot run here: $(cat "$DIR/skip")"
		exit 77
	fi
	[ -f "$DIR/env" ] || { echo "FAIL: no server in $DIR (did s3.server_start fail?)"; exit 1; }
	# shellcheck disable=SC1091
	. "$DIR/env"
	P="replay-$$-$(date +%s%N)"
	# Every object is a request to the gateway (and one more to remove it
	# after): the first 60 requests already read pages across instances.
	head -n 60 "$TMP/t200.jsonl" >"$TMP/t60.jsonl"
	# shellcheck disable=SC2086
	if "$BIN" replay "$TMP/t60.jsonl" --sequential $CAP --instances 3 \
		--l3 "s3://$AWS_DEFAULT_BUCKET/$P/in/" --json >"$TMP/in.json" &&
		"$BIN" replay "$TMP/t60.jsonl" --sequential $CAP --instances 3 \
			--l3 "s3://$AWS_DEFAULT_BUCKET/$P/pr/" --processes --json >"$TMP/pr.json"; then
		same "$TMP/in.json" "$TMP/pr.json" || fail "s3: --processes differs from one process"
		check "$TMP/pr.json" "j['corrupt_pages'] == 0 and j['verified_pages'] > 0 and j['l3_cross_instance_pages'] > 0" \
			"s3 --processes verifies pages read across instances" \
			'(j["verified_pages"], j["corrupt_pages"], j["l3_cross_instance_pages"])'
	else
		fail "s3 fleet runs"
	fi
	none_left "s3"
	"$BIN" gc --capacity-gb 0 "s3://$AWS_DEFAULT_BUCKET/$P/" >/dev/null 2>&1 || true
	[ $fails -eq 0 ] && echo "replay --processes on S3: all checks passed"
	[ $fails -eq 0 ]
	exit
fi

head -n 300 "$SRC/data/mooncake_synthetic_trace.jsonl" >"$TMP/t300.jsonl"
head -n 600 "$SRC/data/mooncake_synthetic_trace.jsonl" >"$TMP/t600.jsonl"
cp "$SRC/data/mooncake_synthetic_trace.jsonl" "$TMP/full.jsonl"

# Data mode, sequential, 3 instances on one file dir: the same hits, bytes
# and L3 traffic as in one process; every page loaded from L2 or L3 is
# verified (one check per page), none corrupt, some read across instances.
mkdir "$TMP/d1" "$TMP/d2"
# shellcheck disable=SC2086
if "$BIN" replay "$TMP/t200.jsonl" --sequential $CAP --instances 3 --l3 "file:$TMP/d1" \
	--json >"$TMP/in.json" &&
	"$BIN" replay "$TMP/t200.jsonl" --sequential $CAP --instances 3 --l3 "file:$TMP/d2" \
		--processes --json >"$TMP/pr.json"; then
	same "$TMP/in.json" "$TMP/pr.json" || fail "data mode: --processes differs from one process"
	check "$TMP/pr.json" "j['fleet']['processes'] and j['corrupt_pages'] == 0 and j['l3_pages_read'] > 0 and j['l3_cross_instance_pages'] > 0 and all(c['verified_pages'] == (c['hit_tokens']['l2'] + c['hit_tokens']['l3']) // 512 for c in j['configs']) and j['verified_pages'] > 0" \
		"data mode --processes verifies every page loaded" \
		'(j["verified_pages"], j["corrupt_pages"], j["hit_tokens"], j["l3_pages_read"])'
else
	fail "data-mode fleet runs (in-process, --processes)"
fi
none_left "data mode"

# No data, --l3 none: every field but wall time, sequential and timed.
for sched in --sequential ""; do
	for r in round-robin prefix; do
		# shellcheck disable=SC2086
		"$BIN" replay "$TMP/t300.jsonl" --no-data $CAP --l3 none $sched --instances 4 \
			--router $r --json >"$TMP/in.json" &&
			"$BIN" replay "$TMP/t300.jsonl" --no-data $CAP --l3 none $sched \
				--instances 4 --router $r --processes --json >"$TMP/pr.json" &&
			same "$TMP/in.json" "$TMP/pr.json" ||
			fail "no-data $r $sched: --processes differs or fails"
	done
done
none_left "no-data runs"

# Stopped: SIGTERM and SIGINT end the children too, remove the temporary
# L3 dir, and the replay dies of the signal. Killed outright: the children
# still end (their parent's death and their closed sockets).
mkdir "$TMP/tmpdir"
for sig in TERM INT KILL; do
	# shellcheck disable=SC2086
	TMPDIR=$TMP/tmpdir "$BIN" replay "$TMP/full.jsonl" --sequential $CAP --instances 3 \
		--processes >/dev/null 2>"$TMP/err" &
	pid=$!
	for _ in $(seq 300); do
		[ "$(procs)" -ge 4 ] && break
		sleep 0.1
	done
	[ "$(procs)" -ge 4 ] || fail "SIG$sig: the children did not start ($(procs))"
	sleep 0.5
	kill -"$sig" $pid
	wait $pid
	rc=$?
	case $sig in TERM) want=143 ;; INT) want=130 ;; KILL) want=137 ;; esac
	[ $rc -eq $want ] || fail "SIG$sig: exit $rc, want $want ($(head -c 300 "$TMP/err"))"
	for _ in $(seq 100); do
		[ "$(procs)" -eq 0 ] && break
		sleep 0.1
	done
	none_left "SIG$sig"
	if [ $sig != KILL ] && [ -n "$(ls -A "$TMP/tmpdir")" ]; then
		fail "SIG$sig: temporary L3 dir left: $(ls "$TMP/tmpdir")"
	fi
	rm -rf "${TMP:?}/tmpdir/"*
done

# A child that dies fails the replay, which names the instance and
# leaves nothing behind. The replay runs its configurations one after the
# other and goes on after one fails, so the child dies in the last one
# (L1+L2+L3: the first with objects in the temporary L3 dir), while the
# replay stands stopped, so that it cannot end first.
# shellcheck disable=SC2086
TMPDIR=$TMP/tmpdir "$BIN" replay "$TMP/t600.jsonl" --sequential $CAP --instances 3 \
	--processes >/dev/null 2>"$TMP/err" &
pid=$!
for _ in $(seq 600); do
	[ -n "$(find "$TMP/tmpdir" -type f -name '[0-9a-f]*' -print -quit 2>/dev/null)" ] && break
	sleep 0.05
done
kill -STOP $pid
victim=$(pgrep -P $pid | head -n 1)
if [ -n "$victim" ]; then
	kill -KILL "$victim"
	kill -CONT $pid
	wait $pid
	rc=$?
	[ $rc -eq 1 ] || fail "a dead child: exit $rc, want 1"
	grep -q "instance [0-9]* (pid $victim) is gone" "$TMP/err" ||
		fail "a dead child is not named: $(head -c 300 "$TMP/err")"
	none_left "a dead child"
	[ -z "$(ls -A "$TMP/tmpdir")" ] || fail "a dead child: temporary L3 dir left"
else
	fail "no child to kill"
	kill -CONT $pid
	kill $pid
	wait $pid
fi

# Bad combinations exit 2 and name the flags.
while IFS='|' read -r args want; do
	# shellcheck disable=SC2086
	"$BIN" replay "$TMP/t200.jsonl" $args >/dev/null 2>"$TMP/err"
	rc=$?
	[ $rc -eq 2 ] || fail "'replay $args' exit $rc, want 2"
	grep -q -- "$want" "$TMP/err" || fail "'replay $args' message: $(cat "$TMP/err")"
done <<'EOF'
--processes --l3 mem|--processes with --l3 mem
--processes --instances 2 --l3 mem|--processes with --l3 mem
--processes --no-data --instances 2|--processes with --no-data and a shared or capped L3
--processes --no-data --l3-tokens 100000|--processes with --no-data and a shared or capped L3
--l3 s3 --l3-tokens 100000|--l3-tokens with --l3 s3
--l3 s3://|--l3 's3://' is not none, mem, file:DIR or s3
--processes=1|bad option '--processes=1'
EOF
none_left "bad usage"

[ $fails -eq 0 ] && echo "replay --processes: all checks passed"
[ $fails -eq 0 ]
