#!/bin/bash
# The library's manual: every function declared HC_API in
# include/hicache/*.h has a section-3 page in the build (man3/, made by
# scripts/gen-man.py from the headers' comments) and no page names a
# function that does not exist. The function list comes from the headers
# by grep, not from the generator. Each page has NAME (the function, then
# a summary), SYNOPSIS (the header that declares it and the function
# called by name), DESCRIPTION (from a comment: a declaration without one
# fails here) and SEE ALSO, and groff renders it without a warning.
# Exits 77 only when groff is not there to render the pages, after every
# other check passed.
set -uo pipefail
: "${HC_SOURCE_DIR:?}" "${HC_BUILD_DIR:?}"
HEADERS=("$HC_SOURCE_DIR"/include/hicache/*.h)
PAGES=$HC_BUILD_DIR/man3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
bad=0
fail() {
	echo "FAIL: $*"
	bad=1
}

[ -f "$PAGES/hicache.3" ] || {
	echo "FAIL: no $PAGES/hicache.3: build the man3 target (part of 'make') first"
	exit 1
}

# The functions: a declaration starts "HC_API <type> <name>(" at the start
# of a line. Any other line that uses HC_API, apart from its #define, would
# be a declaration this list misses.
grep -ho '^HC_API[^(]*(' "${HEADERS[@]}" | sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | sort >"$TMP/funcs"
odd=$(grep -n 'HC_API' "${HEADERS[@]}" | grep -vE ':HC_API[^(]*\(|#define HC_API|#if.*HC_API')
[ -z "$odd" ] || fail "HC_API used where this check cannot read the name: $odd"
dups=$(uniq -d "$TMP/funcs" | tr '\n' ' ')
[ -z "$dups" ] || fail "declared twice: $dups"
sort -u -o "$TMP/funcs" "$TMP/funcs"
nfuncs=$(wc -l <"$TMP/funcs")
[ "$nfuncs" -ge 100 ] || fail "only $nfuncs HC_API functions found: is the grep still right?"

# Every page at once, one line each (a process per page would make this
# test slow), the fields apart by US (\037): file, .TH title, the line
# under NAME, the sections, the header SYNOPSIS includes, the functions
# SYNOPSIS declares in bold, the words of text in DESCRIPTION, and whether
# it says "Not documented".
awk '
function flush() {
	if (file != "")
		printf "%s\037%s\037%s\037%s\037%s\037%s\037%d\037%d\n", file, th, nameline, secs, inc, decl, words, undoc
}
FNR == 1 {
	flush()
	file = FILENAME; sub(/.*\//, "", file); sub(/\.3$/, "", file)
	th = nameline = secs = inc = decl = ""; words = undoc = 0; sec = ""
}
/^\.TH / { th = $2 " " $3 }
/^\.SH / { sec = substr($0, 5); gsub(/"/, "", sec); secs = secs "," sec; next }
sec == "NAME" && nameline == "" { nameline = $0 }
sec == "SYNOPSIS" && /^\\fB#include </ { inc = $0; sub(/^\\fB#include </, "", inc); sub(/>.*/, "", inc) }
sec == "SYNOPSIS" && /\\fB[a-z_0-9]+\\fR\(/ {
	d = $0; sub(/^.*\\fB/, "", d); sub(/\\fR\(.*/, "", d); decl = decl "," d
}
sec == "DESCRIPTION" && !/^\./ { words += NF }
/Not documented in/ { undoc = 1 }
END { flush() }
' "$PAGES"/*.3 >"$TMP/pages"

# The header of each function, by the same grep.
grep -o '^HC_API[^(]*(' "${HEADERS[@]}" |
	sed -E 's|^.*/([a-z_0-9]+\.h):.*[ *]([a-z_0-9]+)\($|\2 \1|' >"$TMP/decls"
declare -A header_of page_of
while read -r f h; do header_of[$f]=$h; done <"$TMP/decls"
US=$'\037' # the fields' separator: a byte no page holds
while IFS= read -r row; do page_of[${row%%"$US"*}]=$row; done <"$TMP/pages"

want_secs=",NAME,LIBRARY,SYNOPSIS,DESCRIPTION,"
while read -r f; do
	row=${page_of[$f]:-}
	[ -n "$row" ] || { fail "$f: no page $PAGES/$f.3"; continue; }
	IFS=$US read -r _ th name_line secs inc decl words undoc <<<"$row"
	[ "$th" = "${f^^} 3" ] || fail "$f: .TH is '$th', not '${f^^} 3'"
	case "$name_line" in
	"$f \\- "?*) ;;
	*) fail "$f: NAME line is '$name_line'" ;;
	esac
	case "$secs," in
	"$want_secs"*"SEE ALSO,") ;;
	*) fail "$f: sections are '${secs#,}', not NAME, LIBRARY, SYNOPSIS, DESCRIPTION, ..., SEE ALSO" ;;
	esac
	[ "$inc" = "hicache/${header_of[$f]}" ] || fail "$f: SYNOPSIS includes <$inc>, not <hicache/${header_of[$f]}>"
	[ "$decl" = ",$f" ] || fail "$f: SYNOPSIS declares '${decl#,}', not $f"
	[ "$undoc" = 0 ] || fail "$f: no comment above its declaration in <hicache/${header_of[$f]}>"
	[ "$words" -ge 3 ] || fail "$f: DESCRIPTION has $words words"
done <"$TMP/funcs"

# No page without a function (hicache.3 is the overview), the overview
# lists every function, and the pages' cross-references lead to pages
# that exist.
pages=("$PAGES"/*.3)
pages=("${pages[@]##*/}")
printf '%s\n' "${pages[@]%.3}" | grep -vx hicache | sort >"$TMP/have"
extra=$(comm -13 "$TMP/funcs" "$TMP/have" | tr '\n' ' ')
[ -z "$extra" ] || fail "pages without an HC_API function in include/hicache: $extra"
refs() { # files...
	grep -ohE '\\fB[a-z_0-9]+\\fR\(3\)' "$@" | sed -E 's/\\fB(.*)\\fR\(3\)/\1/' | sort -u
}
missing=$(refs "$PAGES/hicache.3" | comm -13 - "$TMP/funcs" | tr '\n' ' ')
[ -z "$missing" ] || fail "hicache(3) does not list: $missing"
dangling=$(refs "$PAGES"/*.3 | grep -vx hicache | comm -23 - "$TMP/have" | tr '\n' ' ')
[ -z "$dangling" ] || fail "pages refer to pages that do not exist: $dangling"

# Rendering: groff, every warning on, says nothing (its messages name the
# page and line). One run for all pages.
have_groff=0
if command -v groff >/dev/null; then
	have_groff=1
	groff -man -Tutf8 -ww -z "$PAGES"/*.3 2>"$TMP/err" || fail "groff: exit $?"
	[ -s "$TMP/err" ] && fail "groff: $(cat "$TMP/err")"
fi

[ $bad = 0 ] || exit 1
if [ $have_groff = 0 ]; then
	echo "SKIP: no groff to render the pages (the other checks passed)"
	exit 77
fi
echo "man pages: $nfuncs functions, each with its page; hicache(3) lists them"
