/*
 * Checksums: util_checksum is XXH3-64 with seed 0 (known answers at the
 * lengths where XXH3 changes code path), util_checksum_copy (hashed while
 * copied, in pieces) gives the same known answers and the checksum
 * util_checksum gives for the whole, copies every byte, and tells a buffer
 * with one flipped bit from the original.
 */
#include "test_util.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

#define LEN ((size_t)5 * 1024 * 1024 + 13)

/* xxHash's sanity-check buffer (XSUM_fillTestBuffer in xxHash's
 * cli/xsum_sanity_check.c): byte i is the top byte of 2654435761 *
 * 11400714785074694797^i mod 2^64. */
static void fill_xxh_sanity(uint8_t *buf, size_t len)
{
	uint64_t gen = 2654435761u;
	for (size_t i = 0; i < len; i++) {
		buf[i] = (uint8_t)(gen >> 56);
		gen *= 11400714785074694797ull;
	}
}

/*
 * XXH3-64, seed 0, of the first len bytes of that buffer. Two sources that
 * agree wherever both give a value: xxHash's own test vectors
 * (XSUM_XXH3_testdata in cli/xsum_sanity_check.c, v0.8.x: lengths 0, 1, 6,
 * 12, 24, 48, 80, 195, 403, 512, 2048, 2099, 2240, 2367), and Debian's
 * xxhash 0.8.1 `xxhsum -H3` over files holding those bytes (every length
 * here). The lengths straddle XXH3's code paths: 0, 1-3, 4-8, 9-16, 17-128
 * (16/17, 128/129), 129-240 (240/241), and longer inputs (64-byte stripes
 * in 1024-byte blocks, partial last ones), up to past the 64 KiB blocks
 * util_checksum_copy hashes at a time.
 */
static const struct {
	size_t len;
	uint64_t xxh3;
} golden[] = {
	{0, 0x2d06800538d394c2ull},      {1, 0xc44bdff4074eecdbull},
	{6, 0x27b56a84cd2d7325ull},      {12, 0xa713daf0dfbb77e7ull},
	{16, 0x981b17d36c7498c9ull},     {17, 0x796f5acd3a60f862ull},
	{24, 0xa3fe70bf9d3510ebull},     {48, 0x397da259ecba1f11ull},
	{80, 0xbcdefbbb2c47c90aull},     {128, 0xfcff24126754d861ull},
	{129, 0x98f1b0a679a2ca29ull},    {195, 0xcd94217ee362ec3aull},
	{240, 0x81c3c2b67f568ccfull},    {241, 0xc5a639ecd2030e5eull},
	{403, 0xcdeb804d65c6dea4ull},    {512, 0x617e49599013cb6bull},
	{1024, 0xdd85c9b5c1109c5cull},   {2048, 0xdd59e2c3a5f038e0ull},
	{2099, 0xc6b9d9b3fc9ac765ull},   {2367, 0xcb37aeb9e5d361edull},
	{4161, 0xefb6ccb06c0b206aull},   {65536, 0x918f7f0f912ca480ull},
	{65537, 0xe42d29d5d26c06c2ull},  {135175, 0x8620cf89cac95f25ull},
	{200000, 0x813794d4fbda666aull},
};
#define GOLDEN_MAX 200000

static void test_known_answers(void **state)
{
	(void)state;
	uint8_t *src = malloc(GOLDEN_MAX), *dst = malloc(GOLDEN_MAX);
	assert_non_null(src);
	assert_non_null(dst);
	fill_xxh_sanity(src, GOLDEN_MAX);
	for (size_t i = 0; i < sizeof(golden) / sizeof(golden[0]); i++) {
		size_t len = golden[i].len;
		assert_true(len <= GOLDEN_MAX);
		uint64_t got = util_checksum(src, len);
		if (got != golden[i].xxh3)
			fail_msg("length %zu: 0x%016llx, expected 0x%016llx", len,
				 (unsigned long long)got, (unsigned long long)golden[i].xxh3);

		/* Streamed: whole (hashed in 64 KiB blocks), then in uneven
		 * pieces that cross XXH3's 256-byte input buffer. */
		struct util_checksum_copy c;
		util_checksum_copy_init(&c);
		memset(dst, 0, len);
		util_checksum_copy_add(&c, dst, src, len);
		assert_true(util_checksum_copy_end(&c) == golden[i].xxh3);
		assert_memory_equal(dst, src, len);

		const size_t step[] = {1, 7, 255, 257, 65535, 3};
		util_checksum_copy_init(&c);
		memset(dst, 0, len);
		for (size_t off = 0, k = 0; off < len; k++) {
			size_t n = step[k % 6] < len - off ? step[k % 6] : len - off;
			util_checksum_copy_add(&c, dst + off, src + off, n);
			off += n;
		}
		got = util_checksum_copy_end(&c);
		if (got != golden[i].xxh3)
			fail_msg("length %zu in pieces: 0x%016llx, expected 0x%016llx", len,
				 (unsigned long long)got, (unsigned long long)golden[i].xxh3);
		assert_memory_equal(dst, src, len);
	}
	free(src);
	free(dst);
}

static void fill(uint8_t *buf, size_t len)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
}

static uint64_t copy_in_pieces(uint8_t *dst, const uint8_t *src, const size_t *pieces, size_t n)
{
	struct util_checksum_copy c;
	util_checksum_copy_init(&c);
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		util_checksum_copy_add(&c, dst + off, src + off, pieces[i]);
		off += pieces[i];
	}
	assert_int_equal(off, LEN);
	return util_checksum_copy_end(&c);
}

static void test_copy_matches_whole(void **state)
{
	(void)state;
	uint8_t *src = malloc(LEN), *dst = malloc(LEN);
	assert_non_null(src);
	assert_non_null(dst);
	fill(src, LEN);
	uint64_t whole = util_checksum(src, LEN);

	/* Around the copy's block size (64 KiB), and one piece for the rest. */
	const size_t around[] = {1, 65535, 65536, 65537, 0, LEN - 1 - 65535 - 65536 - 65537};
	memset(dst, 0, LEN);
	assert_true(copy_in_pieces(dst, src, around, 6) == whole);
	assert_memory_equal(dst, src, LEN);

	const size_t one[] = {LEN};
	memset(dst, 0, LEN);
	assert_true(copy_in_pieces(dst, src, one, 1) == whole);
	assert_memory_equal(dst, src, LEN);

	/* One bit anywhere changes it (the copy still copies). */
	src[LEN / 3] ^= 0x10;
	memset(dst, 0, LEN);
	assert_true(copy_in_pieces(dst, src, one, 1) != whole);
	assert_memory_equal(dst, src, LEN);
	free(src);
	free(dst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_answers),
		cmocka_unit_test(test_copy_matches_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
