#!/bin/bash
# The CLI's option parser (tools/hicache/cli_opts.c) as the commands show
# it: a bad number, a value out of range, a bad size suffix, an unknown
# choice, a bad real number, a missing value and an unknown option each
# exit 2 with one line naming the option and the value; a good value of
# each kind is taken (no message, the command runs). Messages are
# compared whole: scripts parse them.
set -uo pipefail
: "${HICACHE_BIN:?}"
BIN=$HICACHE_BIN
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
bad=0
fail() {
	echo "FAIL: $*"
	bad=1
}

# expect_usage "message" command args...: exit 2, the message the first
# line of stderr.
expect_usage() {
	local want=$1
	shift
	"$BIN" "$@" >"$TMP/out" 2>"$TMP/err"
	local rc=$?
	[ $rc = 2 ] || fail "$*: exit $rc, expected 2"
	[ "$(head -n 1 "$TMP/err")" = "$want" ] ||
		fail "$*: stderr '$(head -n 1 "$TMP/err")', expected '$want'"
	[ -s "$TMP/out" ] && fail "$*: printed on stdout: $(head -c 200 "$TMP/out")"
}

B=(bench store --backend mem)
# Numbers: not a number, out of range below and above, overflow, a sign.
expect_usage "hicache bench: --pages 'ten' is not a number of at least 1" "${B[@]}" --pages ten
expect_usage "hicache bench: --pages '0' is not a number of at least 1" "${B[@]}" --pages 0
expect_usage "hicache bench: --threads '1025' is not a number in 1..1024" "${B[@]}" --threads 1025
expect_usage "hicache bench: --seed '18446744073709551616' is not a number in 0..2^64-1" \
	"${B[@]}" --seed 18446744073709551616
expect_usage "hicache bench: --batch '+5' is not a number in 1..1048576" "${B[@]}" --batch +5
expect_usage "hicache fsck: --temp-age '' is not a number of seconds in 1..4294967296" \
	fsck --temp-age '' "$TMP"
# Sizes: a bad suffix, above the range, overflow through the suffix.
expect_usage "hicache bench: --page-bytes '4X' is not a size in 1..2^30 (K/M/G allowed)" \
	"${B[@]}" --page-bytes 4X
expect_usage "hicache bench: --page-bytes '2G' is not a size in 1..2^30 (K/M/G allowed)" \
	"${B[@]}" --page-bytes 2G
expect_usage "hicache bench: --total-bytes '17179869184G' is not a size of at least 1 (K/M/G/T allowed)" \
	"${B[@]}" --total-bytes 17179869184G
# Choices: an unknown one, case matters, on/off.
expect_usage "hicache bench: --op 'put' is not set, get, exists or mixed" "${B[@]}" --op put
expect_usage "hicache bench: --backend 'MEM' is not file, mem or s3" bench store --backend MEM
expect_usage "hicache bench: --zero-copy 'yes' is not on or off" "${B[@]}" --zero-copy yes
expect_usage "hicache replay: --router 'nearest' is not round-robin, random, prefix or ttft" \
	replay --multiturn --router nearest
# Reals: zero, negative, not a number, trailing junk, above the cap.
for v in 0 -1 nan 2x 1e13; do
	expect_usage "hicache replay: --speed '$v' is not a number > 0" replay --multiturn --speed "$v"
done
# A missing value, an unknown option, a value given to a flag.
expect_usage "hicache bench: option '--op' needs a value" "${B[@]}" --op
expect_usage "hicache bench: option '-n' needs a value" "${B[@]}" -n
expect_usage "hicache fsck: option '--temp-age' needs a value" fsck "$TMP" --temp-age
expect_usage "hicache bench: unknown option '--opp' (see --help)" "${B[@]}" --opp set
expect_usage "hicache fsck: unknown option '--json=yes' (see --help)" fsck --json=yes "$TMP"
# replay words these its own way, then prints its usage.
expect_usage "hicache replay: bad option '--speed'" replay --multiturn --speed
expect_usage "hicache replay: bad or incomplete option '-q'" replay --multiturn -q
grep -q '^usage: hicache replay' "$TMP/err" || fail "replay -q: no usage on stderr"
# config says its synopsis after the common wording (it once let getopt
# speak: "config: invalid option -- 'x'").
expect_usage "hicache config: unknown option '-x' (see --help)" config -x
grep -q '^usage: hicache config' "$TMP/err" || fail "config -x: no usage on stderr"
expect_usage "hicache config: option '--config' needs a value" config --config
# The first bad option is the one named.
expect_usage "hicache bench: --pages 'x' is not a number of at least 1" \
	"${B[@]}" --pages x --threads 0

# Good values of each kind are taken: the run goes ahead.
"$BIN" bench store --backend mem --op set --total-bytes 64KiB --page-bytes 4k --threads 2 \
	--batch 4 --seed 7 --zero-copy off --json >"$TMP/bench.json" 2>"$TMP/bench.err" ||
	fail "bench with good values: exit $? ($(cat "$TMP/bench.err"))"
"$PYTHON3" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert (d["pages"], d["page_bytes"], d["threads"], d["batch"], d["seed"], d["zero_copy"]) == (16, 4096, 2, 4, 7, False), d' "$TMP/bench.json" ||
	fail "bench: the values were not taken: $(cat "$TMP/bench.json")"
"$BIN" replay --multiturn --no-data --clients 2 --rounds 2 --speed 2.5 --router ttft \
	--l1-tokens unlimited --json >"$TMP/replay.json" 2>"$TMP/replay.err" ||
	fail "replay with good values: exit $? ($(cat "$TMP/replay.err"))"

[ $bad = 0 ] && echo "cli_opts: all passed"
exit $bad
