#!/bin/bash
# hicache replay: the Mooncake synthetic trace's hit-rate anchors (--no-data),
# data mode through L1, L2 and a file L3 with every loaded page checked, the
# multi-turn generator, hybrid (Mamba) state offload, a bad trace line, bad flags.
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

# json FILE EXPR: evaluate a Python expression over the JSON object j.
json() {
	"$PY" -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
		"$1" "$2"
}
# check FILE EXPR WHAT: fail unless EXPR is True.
check() { [ "$(json "$1" "$2" 2>&1)" = True ] || fail "$3: $2 ($(json "$1" "$4" 2>&1))"; }

# Anchor 1: unlimited capacity = the trace's intrinsic reuse (0.651).
if "$BIN" replay "$TRACE" --no-data --sequential --page-tokens 512 --l1-tokens unlimited \
	--l2-tokens unlimited --l3 none --json >"$TMP/a1.json"; then
	check "$TMP/a1.json" 'abs(j["hit_rate"] - 0.651) <= 0.005' "unlimited hit rate" \
		'j["hit_rate"]'
	check "$TMP/a1.json" 'j["requests"] == 3993 and j["input_tokens"] == 61194628' \
		"request and token counts" '(j["requests"], j["input_tokens"])'
else
	fail "anchor 1 run"
fi

# Anchor 2: LRU over 1e7 tokens (0.577 +- 0.03). Write-through keeps every
# device page on host too, so L2 adds nothing when it is not larger than L1:
# the 1e7 is the device tier (configs[0], L1 only) and the L1+L2 run.
if "$BIN" replay "$TRACE" --no-data --sequential --page-tokens 512 --l1-tokens 10000000 \
	--l2-tokens 10000000 --l3 none --json >"$TMP/a2.json"; then
	check "$TMP/a2.json" 'abs(j["configs"][0]["hit_rate"] - 0.577) <= 0.03' "L1 1e7 hit rate" \
		'j["configs"][0]["hit_rate"]'
	check "$TMP/a2.json" 'abs(j["hit_rate"] - 0.577) <= 0.03' "L1+L2 1e7 hit rate" \
		'j["hit_rate"]'
	check "$TMP/a2.json" 'len(j["configs"]) == 2' "two configs with --l3 none" 'j["configs"]'
else
	fail "anchor 2 run"
fi

# Timed replay (the default): requests overlap, and one in flight does not
# see another's pages until it ends. With arrivals far apart and one server
# it is the sequential replay; at the trace's pace it can only lose hits;
# ten times the load queues requests longer.
UNL="--no-data --page-tokens 512 --l1-tokens unlimited --l2-tokens unlimited --l3 none --json"
# shellcheck disable=SC2086
if "$BIN" replay "$TRACE" $UNL --speed 0.000001 --concurrency 1 >"$TMP/t0.json" &&
	"$BIN" replay "$TRACE" $UNL >"$TMP/t1.json" &&
	"$BIN" replay "$TRACE" $UNL --speed 10 >"$TMP/t10.json"; then
	seq=$(json "$TMP/a1.json" 'j["hit_rate"]')
	check "$TMP/t0.json" "abs(j['hit_rate'] - $seq) < 1e-9 and j['schedule'] == 'timed'" \
		"timed, no overlap = sequential" 'j["hit_rate"]'
	check "$TMP/t1.json" "0.6 < j['hit_rate'] <= $seq and j['requests'] == 3993" \
		"timed at trace pace" '(j["hit_rate"], j["requests"])'
	t1=$(json "$TMP/t1.json" 'j["ttft_no_cache_s"]["p90"]')
	check "$TMP/t10.json" "j['ttft_no_cache_s']['p90'] > $t1 and j['concurrency'] == 16" \
		"10x load queues longer" 'j["ttft_no_cache_s"]'
else
	fail "timed runs"
fi

# Data mode on the first 300 requests, capacities small enough that every
# tier serves hits; every page loaded from L2 or L3 is compared byte for byte
# (8 KiB pages: 16 KV bytes a token, the same pages and hits as the default).
head -n 300 "$TRACE" >"$TMP/t300.jsonl"
mkdir "$TMP/l3" "$TMP/l3t"
if "$BIN" replay "$TMP/t300.jsonl" --sequential --l1-tokens 200000 --l2-tokens 600000 \
	--kv-bytes-per-token 16 --l3 "file:$TMP/l3" --json >"$TMP/d.json"; then
	for f in requests input_tokens hit_tokens hit_rate verified_pages corrupt_pages configs \
		bytes l3_read_gbps ttft_s ttft_no_cache_s; do
		check "$TMP/d.json" "'$f' in j" "field $f" 'list(j)'
	done
	check "$TMP/d.json" 'all(j["hit_tokens"][t] > 0 for t in ("l1", "l2", "l3"))' \
		"hits in every tier" 'j["hit_tokens"]'
	check "$TMP/d.json" 'j["verified_pages"] > 0 and j["corrupt_pages"] == 0' "verified pages" \
		'(j["verified_pages"], j["corrupt_pages"])'
	check "$TMP/d.json" '[c["name"] for c in j["configs"]] == ["L1", "L1+L2", "L1+L2+L3"]' \
		"configs" '[c["name"] for c in j["configs"]]'
	check "$TMP/d.json" 'all(c["corrupt_pages"] == 0 for c in j["configs"])' \
		"no corrupt page in any config" 'j["configs"]'
	check "$TMP/d.json" 'j["bytes"]["l3_read"] > 0 and j["bytes"]["l3_write"] > 0' \
		"L3 bytes" 'j["bytes"]'
else
	fail "data mode run"
fi
# The same timed, with four requests at once: overlapping requests, the
# same integrity checks.
if "$BIN" replay "$TMP/t300.jsonl" --concurrency 4 --speed 4 --l1-tokens 200000 \
	--l2-tokens 600000 --kv-bytes-per-token 16 --l3 "file:$TMP/l3t" --json >"$TMP/dt.json"; then
	check "$TMP/dt.json" 'j["requests"] == 300 and j["schedule"] == "timed"' "timed data run" \
		'(j["requests"], j["schedule"])'
	check "$TMP/dt.json" 'all(c["corrupt_pages"] == 0 for c in j["configs"])' \
		"timed: no corrupt page" '[c["corrupt_pages"] for c in j["configs"]]'
	check "$TMP/dt.json" 'j["verified_pages"] > 0' "timed: verified pages" \
		'j["verified_pages"]'
else
	fail "timed data mode run"
fi
# The human summary prints the table.
"$BIN" replay "$TMP/t300.jsonl" --no-data --l1-tokens 200000 --l2-tokens 600000 --l3 mem \
	>"$TMP/h.txt" 2>&1 || fail "summary run"
grep -q '^L1+L2+L3 ' "$TMP/h.txt" || fail "summary table: $(cat "$TMP/h.txt")"

# Multi-turn: round k reuses its whole conversation so far.
if "$BIN" replay --multiturn --clients 4 --rounds 3 --request-tokens 512 --output-tokens 128 \
	--page-tokens 64 --l3 mem --json >"$TMP/m.json"; then
	check "$TMP/m.json" 'j["requests"] == 12 and j["hit_rate"] > 0.5' "multi-turn" \
		'(j["requests"], j["hit_rate"])'
	check "$TMP/m.json" 'j["corrupt_pages"] == 0' "multi-turn corrupt pages" \
		'j["corrupt_pages"]'
else
	fail "multi-turn run"
fi

# Hybrid (Mamba) multi-turn: a host state pool too small for every state,
# without and with the states offloaded to L3. A hit ends at the deepest
# cached state, so losing states loses hits; L3 brings them back.
MT="--multiturn --clients 8 --rounds 4 --request-tokens 512 --output-tokens 128 --page-tokens 64"
MT="$MT --l1-tokens 4096 --l2-tokens 32768 --mamba-bytes 4096 --mamba-host-states 16"
# shellcheck disable=SC2086
if "$BIN" replay $MT --l3 none --json >"$TMP/h0.json" &&
	"$BIN" replay $MT --l3 mem --json >"$TMP/h1.json"; then
	check "$TMP/h0.json" 'j["corrupt_pages"] == 0 and j["verified_pages"] > 0' \
		"hybrid corrupt pages" '(j["verified_pages"], j["corrupt_pages"])'
	check "$TMP/h1.json" 'j["corrupt_pages"] == 0 and j["hit_tokens"]["l3"] > 0' \
		"hybrid L3 hits" '(j["hit_tokens"], j["corrupt_pages"])'
	h0=$(json "$TMP/h0.json" 'j["hit_rate"]')
	h1=$(json "$TMP/h1.json" 'j["hit_rate"]')
	echo "hybrid multi-turn hit rate: no state offload $h0, offload to L2/L3 $h1"
	"$PY" -c 'import sys; sys.exit(0 if float(sys.argv[2]) > float(sys.argv[1]) else 1)' \
		"$h0" "$h1" || fail "hybrid: Mamba offload hit rate $h1 not above $h0"
else
	fail "hybrid multi-turn runs"
fi

# A bad line names its line number; exit 1.
head -n 2 "$TRACE" >"$TMP/bad.jsonl"
echo '{"timestamp": 5, "input_length": 1000, "output_length": 1, "hash_ids": [1]}' \
	>>"$TMP/bad.jsonl"
"$BIN" replay "$TMP/bad.jsonl" --no-data >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] || fail "bad trace exit $rc"
grep -q 'bad.jsonl:3: hash_ids' "$TMP/err" || fail "bad trace message: $(cat "$TMP/err")"
echo 'not json' >"$TMP/bad2.jsonl"
"$BIN" replay "$TMP/bad2.jsonl" --no-data >/dev/null 2>"$TMP/err"
grep -q 'bad2.jsonl:1: not a JSON object' "$TMP/err" || fail "non-JSON line: $(cat "$TMP/err")"
"$BIN" replay "$TMP/missing.jsonl" --no-data >/dev/null 2>&1
[ $? -eq 1 ] || fail "missing trace should exit 1"

# Bad usage exits 2.
for args in "--bogus $TRACE" "" "--page-tokens 0 $TRACE" "--l3 foo $TRACE" "--l1-tokens x $TRACE" \
	"--kv-bytes-per-token 3 $TRACE" "--multiturn $TRACE" "$TRACE $TRACE" "--l3 file: $TRACE" \
	"--prefill-tokens-per-s 0 $TRACE" "--l2-tokens" "--mamba-bytes x $TRACE" \
	"--mamba-host-states 0 $TRACE" "--concurrency 0 $TRACE" "--speed 0 $TRACE" \
	"--speed x $TRACE"; do
	# shellcheck disable=SC2086
	"$BIN" replay $args >/dev/null 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "'replay $args' exit $rc, want 2"
done
"$BIN" replay --help | grep -q 'usage: hicache replay' || fail "--help"

[ $fails -eq 0 ] && { echo "replay: all checks passed"; exit 0; }
exit 1
