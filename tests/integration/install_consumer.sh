#!/bin/bash
# Test the installed product: install into a temporary prefix, check the
# files, compile every public header alone as C11 and C++, build a small
# program through pkg-config against the shared and the static library,
# run it, check that the shared library exports hc_* symbols only, each
# declared in a public header, and that the manual has a section-3 page
# per public function where man(1) finds it.
set -euo pipefail
: "${HC_BUILD_DIR:?}" "${HC_SOURCE_DIR:?}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
cmake --install "$HC_BUILD_DIR" --prefix "$prefix" >/dev/null

libdir="$prefix/lib"
[ -d "$libdir" ] || libdir=$(dirname "$(find "$prefix" -name libhicache.a | head -1)")
for f in "$prefix/include/hicache/hicache.h" "$libdir/libhicache.a" "$libdir/libhicache.so" \
	"$prefix/bin/hicache" "$libdir/pkgconfig/hicache.pc"; do
	[ -e "$f" ] || { echo "missing after install: $f"; exit 1; }
done
# The manual: hicache(3) and one page per HC_API function of the installed
# headers (tests/integration/man_pages.sh checks the pages themselves).
man3="$prefix/share/man/man3"
grep -ho '^HC_API[^(]*(' "$prefix"/include/hicache/*.h | sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' |
	sort -u >"$tmp/api"
for page in hicache $(cat "$tmp/api"); do
	[ -f "$man3/$page.3" ] || { echo "missing after install: $man3/$page.3"; exit 1; }
done
npages=$(find "$man3" -name '*.3' | wc -l)
[ "$npages" -eq $(($(wc -l <"$tmp/api") + 1)) ] ||
	{ echo "$npages pages in $man3 for $(wc -l <"$tmp/api") functions and hicache(3)"; exit 1; }
if command -v man >/dev/null; then
	found=$(MANPATH="$prefix/share/man" man -w 3 hc_store_open 2>/dev/null || true)
	[ "$found" = "$man3/hc_store_open.3" ] || { echo "man -w 3 hc_store_open found '$found'"; exit 1; }
fi
soname=$(objdump -p "$libdir/libhicache.so" | awk '/SONAME/ {print $2}')
[ "$soname" = "libhicache.so.0" ] || { echo "SONAME is '$soname'"; exit 1; }

san=()
if [ "${HC_SANITIZE:-OFF}" = "ON" ]; then
	san=(-fsanitize=address,undefined)
fi
if [ "${HC_TSAN:-OFF}" = "ON" ]; then
	san=(-fsanitize=thread)
fi

# Every public header compiles on its own, as C11 with -pedantic and as C++.
for h in "$prefix"/include/hicache/*.h; do
	name=$(basename "$h")
	printf '#include <hicache/%s>\nint main(void) { return 0; }\n' "$name" >"$tmp/h.c"
	cc -std=c11 -Wall -Wextra -Werror -pedantic -I"$prefix/include" -c "$tmp/h.c" -o "$tmp/h.o" ||
		{ echo "header $name does not compile alone as C11"; exit 1; }
	if command -v g++ >/dev/null; then
		g++ -x c++ -std=c++17 -Wall -Wextra -Werror -I"$prefix/include" -c "$tmp/h.c" -o "$tmp/h.o" ||
			{ echo "header $name does not compile as C++"; exit 1; }
	fi
done

cat >"$tmp/consumer.c" <<'C'
#include <hicache/hicache.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	unsigned int tokens[4] = {1, 2, 3, 4};
	struct hc_key key;
	if (hc_key_chain(NULL, tokens, 4, 4, &key, 1) != 1)
		return 1;
	char hex[HC_KEY_HEX_LEN + 1];
	hc_key_to_hex(&key, hex);
	struct hc_kv_geometry g;
	memset(&g, 0, sizeof(g));
	g.layers = 2; g.heads = 1; g.head_dim = 64; g.elem_bytes = 2; g.page_size = 4; g.pages = 8;
	g.layout = HC_LAYOUT_PAGE_FIRST;
	struct hc_pool *pool = NULL;
	if (hc_pool_create_kv(&g, NULL, &pool) != 0)
		return 2;
	printf("%s %s %zu\n", hc_version(), hex, hc_pool_page_bytes(pool));
	hc_pool_destroy(pool);
	return 0;
}
C
export PKG_CONFIG_PATH="$libdir/pkgconfig"
want="$($HC_SOURCE_DIR/tests/integration/sha_chain.py 4 1 2 3 4 2>/dev/null || true)"
check_output() {
	local out="$1" what="$2"
	case "$out" in
	"0.1.0 "*" 2048") ;;
	*) echo "$what printed '$out'"; exit 1 ;;
	esac
	if [ -n "$want" ] && [ "${out#0.1.0 }" != "$want 2048" ]; then
		echo "$what key differs from hashlib: '$out' vs '$want'"; exit 1
	fi
}

# shellcheck disable=SC2046
cc "${san[@]}" -std=c11 "$tmp/consumer.c" -o "$tmp/consumer_shared" $(pkg-config --cflags --libs hicache)
check_output "$(LD_LIBRARY_PATH="$libdir" "$tmp/consumer_shared")" "C consumer (shared)"
# shellcheck disable=SC2046
cc "${san[@]}" -std=c11 "$tmp/consumer.c" -o "$tmp/consumer_static" $(pkg-config --cflags hicache) \
	"$libdir/libhicache.a" $(pkg-config --static --libs hicache | sed 's/-lhicache//')
check_output "$("$tmp/consumer_static")" "C consumer (static)"
if command -v g++ >/dev/null; then
	# shellcheck disable=SC2046
	g++ "${san[@]}" -x c++ "$tmp/consumer.c" -o "$tmp/consumer_cxx" $(pkg-config --cflags --libs hicache)
	check_output "$(LD_LIBRARY_PATH="$libdir" "$tmp/consumer_cxx")" "C++ consumer"
fi

# Exports: hc_* only, each declared in a public header.
bad=0
nm -D --defined-only "$libdir/libhicache.so" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sed 's/@.*//' |
	sort -u >"$tmp/exports"
while read -r sym; do
	case "$sym" in
	hc_*) grep -qw "$sym" "$prefix"/include/hicache/*.h || { echo "exported but undeclared: $sym"; bad=1; } ;;
	*) echo "exported non-hc symbol: $sym"; bad=1 ;;
	esac
done <"$tmp/exports"
# ...and every function declared HC_API is exported.
while read -r sym; do
	grep -qx "$sym" "$tmp/exports" || { echo "declared but not exported: $sym"; bad=1; }
done < <(grep -ho '^HC_API[^(]*(' "$prefix"/include/hicache/*.h | sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | sort -u)
[ $bad -eq 0 ] || exit 1
echo "install_consumer: ok"
