/* Routing: XXH3-64 of the physical name, bucket = low 8 bits as two
 * lowercase hex digits, disk = (h >> 16) % number of dirs. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <hicache/key.h>

#include <stdio.h>
#include <string.h>
#include <xxhash.h>

static void make_name(unsigned i, char name[HC_NAME_MAX])
{
	struct hc_key k;
	uint32_t tok[2] = {i, i * 2654435761u};

	assert_int_equal(hc_key_chain(NULL, tok, 2, 2, &k, 1), 1);
	assert_true(hc_key_name(&k, "_model_0_1", (i & 1) ? "_k" : "_v", name, HC_NAME_MAX) > 0);
}

static void test_against_xxh3(void **state)
{
	char name[HC_NAME_MAX], hex[3], want[3];
	(void)state;

	for (unsigned i = 0; i < 5000; i++) {
		make_name(i, name);
		uint64_t h = XXH3_64bits(name, strlen(name));
		assert_int_equal(hc_key_route_hash(name), h);
		assert_int_equal(hc_key_bucket(h), (unsigned)(h & 0xff));
		hc_key_bucket_hex(h, hex);
		snprintf(want, sizeof(want), "%02x", (unsigned)(h & 0xff));
		assert_string_equal(hex, want);
		for (unsigned n = 1; n <= 7; n++)
			assert_int_equal(hc_key_disk(h, n), (unsigned)((h >> 16) % n));
		assert_int_equal(hc_key_disk(h, 0), 0);
	}
	/* Only the name's bytes count; the empty name is hashed too. */
	assert_int_equal(hc_key_route_hash(""), XXH3_64bits("", 0));
	assert_true(hc_key_route_hash("a") != hc_key_route_hash("b"));
}

static void test_bucket_hex_edges(void **state)
{
	static const struct {
		uint64_t h;
		const char *hex;
	} cases[] = {
		{0, "00"},
		{0x0f, "0f"},
		{0xa0, "a0"},
		{0xff, "ff"},
		{0xffffffffffffff00ull, "00"},
		{0x12345678abcdefabull, "ab"},
	};
	char hex[3];
	(void)state;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		hc_key_bucket_hex(cases[c].h, hex);
		assert_string_equal(hex, cases[c].hex);
	}
	assert_int_equal(hc_key_bucket(0x1ff), 0xff);
	/* Disk uses bits 16 and up, not the bucket bits. */
	assert_int_equal(hc_key_disk(0xffff, 2), 0);
	assert_int_equal(hc_key_disk(0x10000, 2), 1);
	assert_int_equal(hc_key_disk(0x30000, 3), 0);
	assert_int_equal(hc_key_disk(UINT64_MAX, 1u << 31),
			 (unsigned)((UINT64_MAX >> 16) % (1u << 31)));
}

/* 256 buckets from 51200 names: every bucket hit, none far from the mean
 * (200, sd ~14); disks within 10% of even. */
static void test_distribution(void **state)
{
	enum { N = 51200 };
	unsigned buckets[256] = {0}, disks[3] = {0};
	char name[HC_NAME_MAX];
	(void)state;

	for (unsigned i = 0; i < N; i++) {
		make_name(i, name);
		uint64_t h = hc_key_route_hash(name);
		buckets[hc_key_bucket(h)]++;
		disks[hc_key_disk(h, 3)]++;
	}
	for (int b = 0; b < 256; b++) {
		if (buckets[b] < 100 || buckets[b] > 300)
			fail_msg("bucket %02x got %u of %d names", b, buckets[b], N);
	}
	for (int d = 0; d < 3; d++)
		assert_true(disks[d] > N / 3 * 9 / 10 && disks[d] < N / 3 * 11 / 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_xxh3),
		cmocka_unit_test(test_bucket_hex_edges),
		cmocka_unit_test(test_distribution),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
