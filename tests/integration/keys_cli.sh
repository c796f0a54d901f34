#!/bin/bash
# hicache keys: output against Python's hashlib, shared prefixes, error exits.
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

# The reference: reads tokens from a file, prints "<i> <hash> <name>" per full page.
# args: tokens-file page-size suffix [extra|-] [salt|-]  (a value is "=text" when present)
cat >"$TMP/ref.py" <<'EOF'
import sys, hashlib, array
path, ps, suffix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def opt(x): return None if x == '-' else x[1:].encode()
extra = opt(sys.argv[4]) if len(sys.argv) > 4 else None
salt = opt(sys.argv[5]) if len(sys.argv) > 5 else None
toks = array.array('I', [int(t) for t in open(path).read().split()])
if sys.byteorder != 'little':
    toks.byteswap()
data = toks.tobytes()
prior = b''
if extra is not None or salt is not None:
    h = hashlib.sha256(b'sglang-cache-namespace-v1')
    for v in (extra, salt):
        h.update(b'\x00' if v is None else b'\x01' + len(v).to_bytes(8, 'little') + v)
    prior = h.digest()
out = []
step = 4 * ps
for i in range(len(toks) // ps):
    prior = hashlib.sha256(prior + data[i * step:(i + 1) * step]).digest()
    hx = prior.hex()
    out.append('%d %s %s%s' % (i, hx, hx, suffix))
sys.stdout.write(''.join(l + '\n' for l in out))
EOF

# Random token ids (fixed seed), with both ends of the range.
gen() { # count seed
	"$PY" -c "
import random, sys
r = random.Random($2)
t = [r.randrange(0, 2**32) for _ in range($1)]
if $1 > 2: t[0], t[1] = 0, 4294967295
print(' '.join(map(str, t)))" >"$3"
}

# Compare "hicache keys" (minus the bucket column) with the reference, and
# check every bucket is two lowercase hex digits.
check() { # name tokens-file page-size suffix ref-extra ref-salt -- hicache args
	local name=$1 toks=$2 ps=$3 suf=$4 rex=$5 rsalt=$6
	shift 7
	if ! "$BIN" keys "$@" <"$toks" >"$TMP/out" 2>"$TMP/err"; then
		fail "$name: exit $? ($(cat "$TMP/err"))"
		return
	fi
	"$PY" "$TMP/ref.py" "$toks" "$ps" "$suf" "$rex" "$rsalt" >"$TMP/want"
	cut -d' ' -f1-3 "$TMP/out" >"$TMP/got"
	if ! cmp -s "$TMP/got" "$TMP/want"; then
		fail "$name: output differs from hashlib"
		diff "$TMP/got" "$TMP/want" | head -5
	fi
	if ! awk 'NF != 4 || $4 !~ /^[0-9a-f][0-9a-f]$/ { exit 1 }' "$TMP/out"; then
		fail "$name: malformed bucket column"
	fi
	[ -s "$TMP/out" ] || [ ! -s "$TMP/want" ] || fail "$name: no output"
}

gen 3217 1 "$TMP/t1"
check "page 64, TP" "$TMP/t1" 64 "_meta-llama-Llama-3.1-8B_1_4" - - -- \
	--page-size 64 --model meta-llama/Llama-3.1-8B --tp-rank 1 --tp-size 4
check "page 16, MLA" "$TMP/t1" 16 "_deepseek-ai-DeepSeek-V3" - - -- \
	-p 16 -m deepseek-ai/DeepSeek-V3 --tp-rank 2 --tp-size 8 --mla
check "page 1, no model" "$TMP/t1" 1 "" - - -- --page-size 1
check "tp without model" "$TMP/t1" 64 "_0_2" - - -- --page-size 64 --tp-size 2
check "hostile model" "$TMP/t1" 64 "__.-._-etc-passwd_0_1" - - -- \
	--page-size 64 --model ../../etc/passwd --tp-rank 0 --tp-size 1
check "salt" "$TMP/t1" 64 "" - "=tenant-42" -- --page-size 64 --salt tenant-42
check "empty salt" "$TMP/t1" 64 "" - "=" -- --page-size 64 --salt ""
check "extra key" "$TMP/t1" 64 "" "=lora-7" - -- --page-size 64 --extra-key lora-7
check "both" "$TMP/t1" 64 "" "=lora-7" "=tenant-42" -- \
	--page-size 64 --extra-key lora-7 --salt tenant-42

# Absent, empty and present salts are three namespaces.
"$BIN" keys -p 64 <"$TMP/t1" | head -1 >"$TMP/n0"
"$BIN" keys -p 64 --salt "" <"$TMP/t1" | head -1 >"$TMP/n1"
"$BIN" keys -p 64 --salt x <"$TMP/t1" | head -1 >"$TMP/n2"
[ "$(sort -u "$TMP/n0" "$TMP/n1" "$TMP/n2" | wc -l)" = 3 ] || fail "salt namespaces collide"

# Whitespace of every kind, no final newline; a partial page prints nothing.
printf '  1\t2\r\n3   4\n\n5\v6\f7 8' >"$TMP/ws"
check "whitespace" "$TMP/ws" 3 "" - - -- --page-size 3
[ "$(wc -l <"$TMP/out")" = 2 ] || fail "whitespace: want 2 pages, got $(wc -l <"$TMP/out")"
printf '1 2 3' | "$BIN" keys -p 4 >"$TMP/out" || fail "partial page: exit $?"
[ ! -s "$TMP/out" ] || fail "partial page printed something"
: | "$BIN" keys -p 4 >"$TMP/out" || fail "empty input: exit $?"
[ ! -s "$TMP/out" ] || fail "empty input printed something"

# Two prompts sharing 3.5 pages: the first 3 keys (and names, buckets) agree,
# every key after differs.
"$PY" -c "
import random
r = random.Random(7)
common = [r.randrange(2**32) for _ in range(3 * 64 + 32)]
a = common + [r.randrange(2**32) for _ in range(5 * 64)]
b = common + [r.randrange(2**32) for _ in range(5 * 64)]
open('$TMP/pa', 'w').write(' '.join(map(str, a)))
open('$TMP/pb', 'w').write(' '.join(map(str, b)))"
"$BIN" keys -p 64 -m m --tp-size 1 <"$TMP/pa" >"$TMP/ka" || fail "prefix a: exit $?"
"$BIN" keys -p 64 -m m --tp-size 1 <"$TMP/pb" >"$TMP/kb" || fail "prefix b: exit $?"
same=$(paste -d'|' "$TMP/ka" "$TMP/kb" | awk -F'|' '$1 == $2 { n++ } END { print n + 0 }')
lead=$(paste -d'|' "$TMP/ka" "$TMP/kb" | awk -F'|' '$1 != $2 { print NR - 1; exit }')
[ "$(wc -l <"$TMP/ka")" = 8 ] || fail "prefix: want 8 pages"
[ "$same" = 3 ] && [ "$lead" = 3 ] ||
	fail "prefix: want 3 shared leading keys, got $same (first difference at $lead)"

# A large input streams through quickly and matches the reference.
gen 2000000 3 "$TMP/big"
start=$(date +%s%N)
check "2M tokens" "$TMP/big" 64 "_m" - - -- --page-size 64 --model m
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$(wc -l <"$TMP/out")" = 31250 ] || fail "2M tokens: want 31250 pages"
echo "2M tokens (with the Python reference): ${ms} ms"

# Bad tokens: exit 2, message names the token and its position.
bad_token() { # input token index
	printf '%s' "$1" | "$BIN" keys -p 1 >/dev/null 2>"$TMP/err"
	local rc=$?
	[ $rc = 2 ] || fail "bad token '$2': exit $rc, want 2"
	grep -q -- "$2" "$TMP/err" && grep -q "token $3" "$TMP/err" ||
		fail "bad token '$2': message '$(cat "$TMP/err")' lacks the token or position $3"
}
bad_token "1 2 12a 4" "12a" 2
bad_token "-1" "-1" 0
bad_token "5 4294967296" "4294967296" 1
bad_token "1.5" "1.5" 0
bad_token "0x10" "0x10" 0
bad_token "7 8 9 +3" "+3" 3
printf '1 2 \001\n' | "$BIN" keys -p 1 >/dev/null 2>"$TMP/err"
[ $? = 2 ] || fail "control byte token: want exit 2"
printf '4294967295 0' | "$BIN" keys -p 1 >/dev/null 2>&1 || fail "max token id rejected"

# Flags: help on stdout with 0, bad flags exit 2 with a message on stderr.
"$BIN" keys --help >"$TMP/out" 2>/dev/null || fail "--help: exit $?"
grep -q "usage: hicache keys" "$TMP/out" || fail "--help: no usage on stdout"
bad_flags() {
	"$BIN" keys "$@" </dev/null >"$TMP/out" 2>"$TMP/err"
	local rc=$?
	[ $rc = 2 ] || fail "flags '$*': exit $rc, want 2"
	[ -s "$TMP/err" ] || fail "flags '$*': no message on stderr"
	[ ! -s "$TMP/out" ] || fail "flags '$*': wrote to stdout"
}
bad_flags
bad_flags --model m
bad_flags --page-size 0
bad_flags --page-size abc
bad_flags --page-size -4
bad_flags --page-size 64 --bogus
bad_flags --page-size
bad_flags --page-size 64 --tp-rank 4 --tp-size 4
bad_flags --page-size 64 --tp-rank 1
bad_flags --page-size 64 --tp-size 0
bad_flags --page-size 64 extra-arg
bad_flags --page-size 64 --model "$(printf 'x%.0s' $(seq 200))"
bad_flags --page-size 64 --model ""
true

if [ $fails -gt 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "keys_cli: all checks passed"
exit 0
