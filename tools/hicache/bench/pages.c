/*
 * hicache bench store: the key and the contents of page i (see bench.h),
 * so that a later run can check what an earlier one stored, byte for byte.
 */
#define _GNU_SOURCE
#include "bench.h"

#include "../commands.h"

#include <errno.h>
#include <string.h>

/* ---- keys and contents ---- */

static uint64_t splitmix64(uint64_t x)
{
	uint64_t z = x + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int bench_page_key(uint64_t seed, uint64_t page, struct hc_key *out)
{
	const uint32_t tokens[BENCH_KEY_TOKENS] = {
		(uint32_t)seed,
		(uint32_t)(seed >> 32),
		(uint32_t)page,
		(uint32_t)(page >> 32),
	};
	int64_t n = hc_key_chain(NULL, tokens, BENCH_KEY_TOKENS, BENCH_KEY_TOKENS, out, 1);
	return n == 1 ? 0 : n < 0 ? (int)n : -EIO;
}

static uint64_t to_le(uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return __builtin_bswap64(v);
#else
	return v;
#endif
}

static uint64_t content_base(uint64_t seed, uint64_t page)
{
	return splitmix64(seed ^ splitmix64(page));
}

void bench_fill_page(uint64_t seed, uint64_t page, uint8_t *buf, size_t len)
{
	uint64_t base = content_base(seed, page), w = 0;

	for (; (w + 1) * 8 <= len; w++) {
		uint64_t v = to_le(splitmix64(base + w));
		memcpy(buf + w * 8, &v, 8);
	}
	if (w * 8 < len) {
		uint64_t v = to_le(splitmix64(base + w));
		memcpy(buf + w * 8, &v, len - w * 8);
	}
}

bool bench_page_matches(uint64_t seed, uint64_t page, const uint8_t *buf, size_t len)
{
	uint64_t base = content_base(seed, page), w = 0;

	for (; (w + 1) * 8 <= len; w++) {
		uint64_t v = to_le(splitmix64(base + w));
		if (memcmp(buf + w * 8, &v, 8))
			return false;
	}
	if (w * 8 < len) {
		uint64_t v = to_le(splitmix64(base + w));
		if (memcmp(buf + w * 8, &v, len - w * 8))
			return false;
	}
	return true;
}
