#!/bin/bash
# The CLI's manual: every command main.c dispatches has a page
# docs/man/hicache-<command>.1 (and there is no page without a command);
# 'hicache help CMD', 'hicache CMD --help' and 'hicache CMD -h' print the
# same text, which starts its synopsis with "usage: hicache CMD", fits 80
# columns and shows no roff left unrendered; every long option in the
# command's getopt table is documented and every documented one exists;
# man(1) (or groff) renders each page without a warning; and the install
# puts the pages in share/man/man1. Exits 77 only when neither man nor
# groff is there to render the pages, after every other check passed.
set -uo pipefail
: "${HICACHE_BIN:?}" "${HC_SOURCE_DIR:?}" "${HC_BUILD_DIR:?}"
BIN=$HICACHE_BIN
MAN_DIR=$HC_SOURCE_DIR/docs/man
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
bad=0
fail() {
	echo "FAIL: $*"
	bad=1
}

# The dispatched commands, as 'hicache --help' lists them.
"$BIN" --help >"$TMP/top" || fail "hicache --help: exit $?"
mapfile -t commands < <(awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}' "$TMP/top")
[ ${#commands[@]} -ge 8 ] || fail "hicache --help lists ${#commands[@]} commands: ${commands[*]}"

# Rendered text: within 80 columns, no request or escape left over.
check_text() { # file what
	awk -v w="$2" 'length($0) > 80 {printf "%s: line %d has %d columns\n", w, NR, length($0)}' "$1"
	grep -nE '^ *[.'"'"'][A-Za-z\\]|\\[-f(*e&]' "$1" | sed "s|^|$2: roff left: |"
}

# Long options of a command's option tables, from its source: getopt_long
# entries {"name", required_argument, ...} and the table-driven parser's
# CLI_OPT_*("name", ...) (tools/hicache/cli_opts.h). --help: every command
# (main.c answers 'hicache CMD --help' for all of them).
code_options() { # command
	local src=$HC_SOURCE_DIR/tools/hicache
	{
		echo --help
		cat "$src/$1.c" "$src/$1"/*.c 2>/dev/null |
			grep -oE '\{"[a-z0-9-]+", *(no|required|optional)_argument|CLI_OPT_[A-Z0-9_]+\("[a-z0-9-]+"' |
			sed -E 's/^[^"]*"([a-z0-9-]+)".*/--\1/'
	} | sort -u
}

# Long options a page documents: the tags of its OPTIONS section.
doc_options() { # rendered text
	awk '/^[A-Z]/ {on = ($0 == "OPTIONS")} on && /^    -/ {print}' "$1" |
		grep -oE -- '--[a-z0-9-]+' | sort -u
}

for c in "${commands[@]}"; do
	page=$MAN_DIR/hicache-$c.1
	[ -f "$page" ] || { fail "$c: no page $page"; continue; }
	"$BIN" help "$c" >"$TMP/$c.help" 2>"$TMP/$c.err" || fail "help $c: exit $?"
	[ -s "$TMP/$c.err" ] && fail "help $c: stderr: $(cat "$TMP/$c.err")"
	grep -q "^usage: hicache $c" "$TMP/$c.help" || fail "help $c: no 'usage: hicache $c' line"
	grep -q '^OPTIONS$' "$TMP/$c.help" || fail "help $c: no OPTIONS"
	grep -q '^EXIT STATUS$' "$TMP/$c.help" || fail "help $c: no EXIT STATUS"
	grep -q '^ENVIRONMENT$' "$TMP/$c.help" || [ "$c" = help ] || fail "help $c: no ENVIRONMENT"
	for flag in --help -h; do
		"$BIN" "$c" "$flag" >"$TMP/$c.flag" 2>/dev/null || fail "$c $flag: exit $?"
		cmp -s "$TMP/$c.help" "$TMP/$c.flag" || fail "$c $flag differs from 'help $c'"
	done
	out=$(check_text "$TMP/$c.help" "help $c")
	[ -z "$out" ] || fail "$out"
	code_options "$c" >"$TMP/$c.code"
	doc_options "$TMP/$c.help" >"$TMP/$c.doc"
	missing=$(comm -23 "$TMP/$c.code" "$TMP/$c.doc" | tr '\n' ' ')
	[ -z "$missing" ] || fail "$c: options not in its OPTIONS: $missing"
	extra=$(comm -13 "$TMP/$c.code" "$TMP/$c.doc" | tr '\n' ' ')
	[ -z "$extra" ] || fail "$c: OPTIONS documents options the code lacks: $extra"
done
# An option documented inside another command's parser (bench store).
"$BIN" bench store --help >"$TMP/bs.help" 2>/dev/null || fail "bench store --help: exit $?"
cmp -s "$TMP/bs.help" "$TMP/bench.help" || fail "bench store --help differs from 'help bench'"

# The top page: 'hicache help' lists every command, and nothing else has a page.
"$BIN" help >"$TMP/hicache.help" || fail "help: exit $?"
out=$(check_text "$TMP/hicache.help" "help")
[ -z "$out" ] || fail "$out"
for c in "${commands[@]}"; do
	grep -q "^    $c\b" "$TMP/hicache.help" || fail "hicache(1) does not list '$c'"
done
for page in "$MAN_DIR"/*.1; do
	name=$(basename "$page" .1)
	[ "$name" = hicache ] && continue
	printf '%s\n' "${commands[@]}" | grep -qx "${name#hicache-}" ||
		fail "page $name has no command"
done
"$BIN" help no-such-command >/dev/null 2>&1
[ $? = 2 ] || fail "help of an unknown command: not exit 2"

# make install: the pages land in share/man/man1, as they are.
prefix=$TMP/prefix
cmake --install "$HC_BUILD_DIR" --prefix "$prefix" >/dev/null || fail "install: exit $?"
for page in "$MAN_DIR"/*.1; do
	cmp -s "$page" "$prefix/share/man/man1/$(basename "$page")" ||
		fail "install: $(basename "$page") missing or different in share/man/man1"
done

# Rendering: no warning from man(1) or groff, and 80 columns.
rendered=0
for page in "$MAN_DIR"/*.1; do
	name=$(basename "$page")
	if command -v man >/dev/null; then
		MANWIDTH=80 man --warnings -l "$page" >"$TMP/man.out" 2>"$TMP/man.err" ||
			fail "man -l $name: exit $?"
		[ -s "$TMP/man.err" ] && fail "man -l $name: $(cat "$TMP/man.err")"
		out=$(awk -v w="man $name" 'length($0) > 80 {printf "%s: line %d has %d columns\n", w, NR, length($0)}' "$TMP/man.out")
		[ -z "$out" ] || fail "$out"
		rendered=1
	fi
	if command -v groff >/dev/null; then
		groff -man -Tutf8 -ww -z "$page" 2>"$TMP/groff.err" || fail "groff $name: exit $?"
		[ -s "$TMP/groff.err" ] && fail "groff $name: $(cat "$TMP/groff.err")"
		rendered=1
	fi
done

[ $bad = 0 ] || exit 1
if [ $rendered = 0 ]; then
	echo "SKIP: neither man nor groff to render the pages (the other checks passed)"
	exit 77
fi
echo "cli help: ${#commands[@]} commands, pages and help text consistent"
