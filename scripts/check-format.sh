#!/bin/bash
# List the C files that clang-format, with the tree's .clang-format, would
# change. For CI and before a commit; it never rewrites a file.
#
#   scripts/check-format.sh [--diff] [PATH...]
#
# PATH: files or directories (default: src include tools tests bench),
# relative to the current directory. --diff also prints what would change.
# CLANG_FORMAT names the binary (default: clang-format-14, else
# clang-format; version 14 or later).
#
# Exit status: 0 every file is formatted, 1 some are not (each listed with
# the number of its lines that would change), 2 bad usage or no usable
# clang-format.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
style=$root/.clang-format
show_diff=0
paths=()
for arg in "$@"; do
	case $arg in
	--diff) show_diff=1 ;;
	-h | --help)
		sed -n '2,14s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
		exit 0
		;;
	-*)
		echo "check-format: unknown option '$arg'" >&2
		exit 2
		;;
	*) paths+=("$arg") ;;
	esac
done
if [ ${#paths[@]} -eq 0 ]; then
	cd "$root" || exit 2
	paths=(src include tools tests bench)
fi

cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
	for c in clang-format-14 clang-format; do
		command -v "$c" >/dev/null && { cf=$c; break; }
	done
fi
if [ -z "$cf" ] || ! command -v "$cf" >/dev/null; then
	echo "check-format: no clang-format (set CLANG_FORMAT)" >&2
	exit 2
fi
major=$("$cf" --version | sed -nE 's/.*version ([0-9]+).*/\1/p')
if [ -z "$major" ] || [ "$major" -lt 14 ]; then
	echo "check-format: $cf is version ${major:-unknown}; 14 or later is needed" >&2
	exit 2
fi
[ -f "$style" ] || { echo "check-format: $style is missing" >&2; exit 2; }

files=()
for p in "${paths[@]}"; do
	if [ -d "$p" ]; then
		while IFS= read -r f; do files+=("$f"); done < <(find "$p" -name '*.[ch]' -type f | sort)
	elif [ -f "$p" ]; then
		files+=("$p")
	else
		echo "check-format: no such file or directory: $p" >&2
		exit 2
	fi
done

bad=0
lines=0
for f in "${files[@]}"; do
	if ! out=$("$cf" --style="file:$style" "$f"); then
		echo "check-format: $cf failed on $f" >&2
		exit 2
	fi
	d=$(diff -U0 --label "$f" --label "$f (formatted)" "$f" - <<<"$out")
	[ -z "$d" ] && continue
	n=$(grep -c '^-[^-]\|^-$' <<<"$d")
	echo "$f: $n lines would change"
	[ $show_diff = 1 ] && printf '%s\n' "$d"
	bad=$((bad + 1))
	lines=$((lines + n))
done
if [ $bad -gt 0 ]; then
	echo "check-format: $bad of ${#files[@]} files not formatted ($lines lines);" \
		"run $cf -i --style=file on them"
	exit 1
fi
echo "check-format: ${#files[@]} files formatted"
