#!/bin/bash
# hicache replay --instances N: one instance is the plain replay; round-robin
# with --l3 none is N single-instance replays of the requests each got; a
# shared L3 in data mode (real file dir, every page checked) gives the hits
# of the no-data key set; an unlimited shared L3 reaches the trace's own
# reuse whatever the router; bad fleet options exit 2 naming the option.
# Exit 0 pass, 1 fail, 77 skip.
set -u

BIN=${HICACHE_BIN:-}
PY=${PYTHON3:-python3}
SRC=${HC_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
TRACE=$SRC/data/mooncake_synthetic_trace.jsonl
[ -n "$BIN" ] && [ -x "$BIN" ] || { echo "skip: HICACHE_BIN not set or not executable"; exit 77; }
command -v "$PY" >/dev/null 2>&1 || { echo "skip: no python3"; exit 77; }
[ -r "$TRACE" ] || { echo "skip: no $TRACE"; exit 77; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# same A B: the two replays agree on every field but wall time and the
# fleet's own fields.
same() {
	"$PY" - "$1" "$2" <<'EOF'
import json, sys
drop = {"seconds", "fleet", "instances", "l3_pages_read", "l3_cross_instance_pages"}
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in drop}
    if isinstance(o, list):
        return [strip(x) for x in o]
    return o
a, b = (strip(json.load(open(p))) for p in sys.argv[1:3])
if a != b:
    print([k for k in a if a[k] != b.get(k)])
    sys.exit(1)
EOF
}
json() {
	"$PY" -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
		"$1" "$2"
}
check() { [ "$(json "$1" "$2" 2>&1)" = True ] || fail "$3: $2 ($(json "$1" "$4" 2>&1))"; }

head -n 600 "$TRACE" >"$TMP/t600.jsonl"
head -n 200 "$TRACE" >"$TMP/t200.jsonl"
# 16 KV bytes a token (8 KiB pages) move an eighth of the default's bytes
# in data mode for the same pages, keys and hits.
CAP="--l1-tokens 300000 --l2-tokens 900000 --kv-bytes-per-token 16"

# One instance is today's replay: no-data sequential and timed (every
# router), multi-turn, and data mode on a file L3.
for args in "--sequential" "" "--speed 10 --l3 none"; do
	# shellcheck disable=SC2086
	"$BIN" replay "$TMP/t200.jsonl" --no-data $CAP $args --json >"$TMP/one.json" ||
		fail "plain replay $args"
	for r in round-robin random prefix ttft; do
		[ "$r" = ttft ] && [ "$args" = --sequential ] && continue
		# shellcheck disable=SC2086
		"$BIN" replay "$TMP/t200.jsonl" --no-data $CAP $args --instances 1 --router $r \
			--json >"$TMP/i1.json" || fail "--instances 1 --router $r $args"
		same "$TMP/one.json" "$TMP/i1.json" || fail "--instances 1 --router $r $args differs"
	done
done
"$BIN" replay --multiturn --clients 16 --no-data --json >"$TMP/one.json" &&
	"$BIN" replay --multiturn --clients 16 --no-data --instances 1 --json >"$TMP/i1.json" &&
	same "$TMP/one.json" "$TMP/i1.json" || fail "multi-turn --instances 1 differs"
mkdir "$TMP/d1" "$TMP/d2"
"$BIN" replay "$TMP/t200.jsonl" --sequential $CAP --l3 "file:$TMP/d1" --json >"$TMP/one.json" &&
	"$BIN" replay "$TMP/t200.jsonl" --sequential $CAP --l3 "file:$TMP/d2" --instances 1 \
		--json >"$TMP/i1.json" || fail "data mode runs"
check "$TMP/i1.json" \
	"[c['hit_tokens'] for c in j['configs']] == $(json "$TMP/one.json" "[c['hit_tokens'] for c in j['configs']]") and j['corrupt_pages'] == 0 and j['verified_pages'] > 0" \
	"data mode --instances 1 = plain" '[c["hit_tokens"] for c in j["configs"]]'

# Round-robin, --l3 none, 3 instances = 3 replays of the sub-traces
# (request i goes to i mod 3), sequential and timed, every configuration.
N=3
for k in 0 1 2; do
	awk -v k=$k -v n=$N '(NR - 1) % n == k' "$TMP/t600.jsonl" >"$TMP/sub$k.jsonl"
done
for sched in --sequential ""; do
	# shellcheck disable=SC2086
	"$BIN" replay "$TMP/t600.jsonl" --no-data $CAP --l3 none $sched --instances $N \
		--router round-robin --json >"$TMP/rr.json" || fail "round-robin fleet $sched"
	for k in 0 1 2; do
		# shellcheck disable=SC2086
		"$BIN" replay "$TMP/sub$k.jsonl" --no-data $CAP --l3 none $sched \
			--json >"$TMP/sub$k.json" || fail "sub-trace $k $sched"
		want=$(json "$TMP/sub$k.json" "[(c['requests'], c['hit_tokens']) for c in j['configs']]")
		check "$TMP/rr.json" \
			"[(c['instances'][$k]['requests'], c['instances'][$k]['hit_tokens']) for c in j['configs']] == $want" \
			"round-robin instance $k = its sub-trace alone ($sched)" \
			"[(c['instances'][$k]['requests'], c['instances'][$k]['hit_tokens']) for c in j['configs']]"
	done
	# The fleet hit rate is token-weighted over all requests.
	check "$TMP/rr.json" \
		"sum(sum(i['hit_tokens'].values()) for i in j['instances']) == sum(j['hit_tokens'].values()) and j['fleet']['router'] == 'round-robin' and j['fleet']['instances'] == $N" \
		"fleet totals ($sched)" 'j["fleet"]'
done

# A shared file L3 in data mode: 3 store handles on one dir, each page
# loaded checked; the hits are those of the no-data key set, and pages one
# instance wrote are read by another.
mkdir "$TMP/d3"
if "$BIN" replay "$TMP/t200.jsonl" --sequential $CAP --instances 3 --l3 "file:$TMP/d3" \
	--json >"$TMP/fd.json" &&
	"$BIN" replay "$TMP/t200.jsonl" --sequential $CAP --instances 3 --no-data \
		--json >"$TMP/fn.json"; then
	want=$(json "$TMP/fn.json" "(j['hit_tokens'], j['l3_pages_read'], j['l3_cross_instance_pages'], [i['hit_tokens'] for i in j['instances']])")
	check "$TMP/fd.json" \
		"(j['hit_tokens'], j['l3_pages_read'], j['l3_cross_instance_pages'], [i['hit_tokens'] for i in j['instances']]) == $want" \
		"data-mode fleet = no-data fleet" '(j["hit_tokens"], j["l3_cross_instance_pages"])'
	check "$TMP/fd.json" "j['corrupt_pages'] == 0 and j['verified_pages'] > 0 and j['l3_cross_instance_pages'] > 0" \
		"data-mode fleet checks pages, reads across instances" \
		'(j["verified_pages"], j["corrupt_pages"], j["l3_cross_instance_pages"])'
else
	fail "data-mode fleet runs"
fi

# An unlimited shared L3: every page computed anywhere is found again, so
# the sequential fleet reaches the trace's own reuse (one unlimited cache)
# with any router; a cap loses some of it (down to what no L3 gives). The
# first 600 requests reuse more than the cap holds, whatever the router.
"$BIN" replay "$TMP/t600.jsonl" --no-data --sequential --l1-tokens unlimited --l2-tokens unlimited \
	--l3 none --json >"$TMP/unl.json" || fail "unlimited run"
unl=$(json "$TMP/unl.json" 'j["hit_rate"]')
for r in round-robin random prefix; do
	"$BIN" replay "$TMP/t600.jsonl" --no-data --sequential --instances 4 --router $r $CAP \
		--json >"$TMP/g.json" || fail "global $r"
	check "$TMP/g.json" "abs(j['hit_rate'] - $unl) < 1e-12 and j['fleet']['router'] == '$r'" \
		"unlimited shared L3 = intrinsic reuse ($r)" 'j["hit_rate"]'
	"$BIN" replay "$TMP/t600.jsonl" --no-data --sequential --instances 4 --router $r $CAP \
		--l3-tokens 2000000 --json >"$TMP/c.json" || fail "capped $r"
	"$BIN" replay "$TMP/t600.jsonl" --no-data --sequential --instances 4 --router $r $CAP \
		--l3 none --json >"$TMP/l.json" || fail "local $r"
	g=$(json "$TMP/g.json" 'j["hit_rate"]')
	l=$(json "$TMP/l.json" 'j["hit_rate"]')
	check "$TMP/c.json" "$l <= j['hit_rate'] < $g" "capped L3 between local and global ($r)" \
		'j["hit_rate"]'
done

# Bad fleet options exit 2 and name what is wrong.
while IFS='|' read -r args want; do
	# shellcheck disable=SC2086
	"$BIN" replay "$TMP/t200.jsonl" $args >/dev/null 2>"$TMP/err"
	rc=$?
	[ $rc -eq 2 ] || fail "'replay $args' exit $rc, want 2"
	grep -q -- "$want" "$TMP/err" || fail "'replay $args' message: $(cat "$TMP/err")"
done <<'EOF'
--instances 0|--instances '0'
--instances 1025|--instances '1025'
--instances x|--instances 'x'
--router nearest|--router 'nearest' is not round-robin, random, prefix or ttft
--router ttft --sequential|--router ttft needs the timed schedule
--instances 2 --l3 mem|--instances > 1 in data mode
--l3 none --l3-tokens 1000|--l3-tokens with --l3 none
--l3-tokens 0|--l3-tokens '0'
--no-data --instances 2 --mamba-bytes 64|--mamba-bytes with --no-data
--seed -1|--seed '-1'
EOF

[ $fails -eq 0 ] && echo "replay fleet: all checks passed"
[ $fails -eq 0 ]
