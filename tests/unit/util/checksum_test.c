/*
 * Checksums: util_checksum_copy (hashed while copied, in pieces) gives the
 * checksum util_checksum gives for the whole, copies every byte, and tells
 * a buffer with one flipped bit from the original.
 */
#include "test_util.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

#define LEN ((size_t)5 * 1024 * 1024 + 13)

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
		cmocka_unit_test(test_copy_matches_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
