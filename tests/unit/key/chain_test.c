/* Page key chains against Python's hashlib computing the same chain. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <hicache/key.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pyref.h"
#include "test_util.h"

#define MAX_PAGES 512

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng32(void)
{
	/* xorshift64*: fixed seed, so a failure reproduces. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

/* Random ids, with the edges of the range where byte order shows. */
static uint32_t *random_tokens(size_t n)
{
	uint32_t *t = malloc(n * sizeof(*t) + 1);
	assert_non_null(t);
	for (size_t i = 0; i < n; i++)
		t[i] = rng32();
	if (n > 0)
		t[0] = 0;
	if (n > 1)
		t[1] = UINT32_MAX;
	if (n > 2)
		t[2] = 0x01020304;
	return t;
}

/* Chain in C and in Python; every key must match. Returns the page count. */
static long check_chain(uint32_t ps, const char *extra, const char *salt,
			const struct hc_key *prior, const uint32_t *tok, size_t ntok)
{
	static char hex[MAX_PAGES][HC_KEY_HEX_LEN + 1];
	struct hc_key *keys = calloc(MAX_PAGES, sizeof(*keys));
	bool seeded = extra || salt;
	struct hc_key seed;
	char got[HC_KEY_HEX_LEN + 1];

	assert_non_null(keys);
	if (seeded) {
		assert_null(prior);
		assert_int_equal(hc_key_seed(extra, salt, &seed), 0);
		prior = &seed;
	}
	int64_t n = hc_key_chain(prior, tok, ntok, ps, keys, MAX_PAGES);
	assert_int_equal(n, (int64_t)(ntok / ps));
	long pn = pyref_run(ps, extra, salt, seeded ? NULL : prior, seeded, tok, ntok, hex,
			    MAX_PAGES);
	assert_int_equal(pn, n);
	for (long i = 0; i < pn; i++) {
		hc_key_to_hex(&keys[i], got);
		if (strcmp(got, hex[i]))
			fail_msg("page %ld of %ld (page size %u): C %s, Python %s", i, pn, ps, got,
				 hex[i]);
	}
	free(keys);
	return pn;
}

static void test_page_sizes(void **state)
{
	static const uint32_t sizes[] = {1, 16, 64, 1000};
	(void)state;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint32_t ps = sizes[s];
		size_t pages = ps == 1 ? 300 : ps == 1000 ? 3 : 20;
		size_t ntok = pages * ps + ps - 1; /* a partial last page */
		uint32_t *tok = random_tokens(ntok);
		assert_int_equal(check_chain(ps, NULL, NULL, NULL, tok, ntok), (long)pages);
		free(tok);
	}
}

/* Pinned digest: fails even if Python and C were to agree on a wrong rule. */
static void test_known_vector(void **state)
{
	static const uint32_t tok[] = {1, 2, 3, 4, 5};
	struct hc_key k[3];
	char hex[HC_KEY_HEX_LEN + 1];
	(void)state;

	assert_int_equal(hc_key_chain(NULL, tok, 5, 2, k, 3), 2);
	hc_key_to_hex(&k[0], hex);
	assert_string_equal(hex,
			    "34fb5c825de7ca4aea6e712f19d439c1da0c92c37b423936c5f618545ca4fa1f");
	hc_key_to_hex(&k[1], hex);
	assert_string_equal(hex,
			    "c57b445f90651b9a650e516ab2238c965b21af35608a31c303e6d9e407f2915c");
}

static void test_partial_page_ignored(void **state)
{
	uint32_t *tok = random_tokens(64 * 3 + 63);
	struct hc_key a[4], b[4];
	(void)state;

	assert_int_equal(hc_key_chain(NULL, tok, 63, 64, a, 4), 0);
	assert_int_equal(hc_key_chain(NULL, tok, 64 * 3, 64, a, 4), 3);
	/* Tokens of the partial page change nothing before it. */
	tok[64 * 3 + 5] ^= 1;
	assert_int_equal(hc_key_chain(NULL, tok, 64 * 3 + 63, 64, b, 4), 3);
	assert_memory_equal(a, b, 3 * sizeof(a[0]));
	/* A token of page 1 changes page 1 and, through the chain, page 2. */
	tok[64 + 7] ^= 1;
	assert_int_equal(hc_key_chain(NULL, tok, 64 * 3, 64, b, 4), 3);
	assert_memory_equal(&a[0], &b[0], sizeof(a[0]));
	assert_memory_not_equal(&a[1], &b[1], sizeof(a[0]));
	assert_memory_not_equal(&a[2], &b[2], sizeof(a[0]));
	free(tok);
}

static void test_max_keys(void **state)
{
	uint32_t *tok = random_tokens(16 * 10);
	struct hc_key all[10], some[5];
	(void)state;

	assert_int_equal(hc_key_chain(NULL, tok, 16 * 10, 16, all, 10), 10);
	memset(some, 0xa5, sizeof(some));
	assert_int_equal(hc_key_chain(NULL, tok, 16 * 10, 16, some, 4), 4);
	assert_memory_equal(some, all, 4 * sizeof(all[0]));
	for (size_t i = 0; i < sizeof(some[4]); i++)
		assert_int_equal(some[4].bytes[i], 0xa5);
	assert_int_equal(hc_key_chain(NULL, tok, 16 * 10, 16, some, 0), 0);
	free(tok);
}

/* Hashing in two calls, the second from the first's last key, equals one
 * call; the prior may be the very slot being written. */
static void test_continuation(void **state)
{
	uint32_t *tok = random_tokens(16 * 12);
	struct hc_key one[12], two[12];
	(void)state;

	assert_int_equal(hc_key_chain(NULL, tok, 16 * 12, 16, one, 12), 12);
	assert_int_equal(hc_key_chain(NULL, tok, 16 * 5, 16, two, 12), 5);
	assert_int_equal(hc_key_chain(&two[4], tok + 16 * 5, 16 * 7, 16, two + 5, 7), 7);
	assert_memory_equal(one, two, sizeof(one));

	two[0] = one[3];
	assert_int_equal(hc_key_chain(&two[0], tok + 16 * 4, 16, 16, &two[0], 1), 1);
	assert_memory_equal(&two[0], &one[4], sizeof(one[4]));
	free(tok);
}

static void test_prior_key(void **state)
{
	uint32_t *tok = random_tokens(16 * 8 + 3);
	struct hc_key prior;
	(void)state;

	for (size_t i = 0; i < sizeof(prior.bytes); i++)
		prior.bytes[i] = (uint8_t)rng32();
	assert_int_equal(check_chain(16, NULL, NULL, &prior, tok, 16 * 8 + 3), 8);
	assert_int_equal(check_chain(1, NULL, NULL, &prior, tok, 40), 40);
	free(tok);
}

static void test_namespace_seed(void **state)
{
	static const struct {
		const char *extra, *salt;
	} cases[] = {
		{"", NULL},
		{NULL, ""},
		{"", ""},
		{"lora-adapter-7", NULL},
		{NULL, "tenant-42"},
		{"lora-adapter-7", "tenant-42"},
		{"tenant-42", "lora-adapter-7"},
		{"\xe6\xa8\xa1\xe5\x9e\x8b \xe2\x80\x94 \x01\x7f", "\xff\xfe"},
	};
	uint32_t *tok = random_tokens(64 * 4 + 10);
	char hex[1][HC_KEY_HEX_LEN + 1];
	char got[HC_KEY_HEX_LEN + 1];
	struct hc_key seed, seeds[sizeof(cases) / sizeof(cases[0])];
	(void)state;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		assert_int_equal(hc_key_seed(cases[c].extra, cases[c].salt, &seeds[c]), 0);
		assert_int_equal(pyref_run(0, cases[c].extra, cases[c].salt, NULL, true, NULL, 0,
					   hex, 1),
				 1);
		hc_key_to_hex(&seeds[c], got);
		assert_string_equal(got, hex[0]);
		assert_int_equal(check_chain(64, cases[c].extra, cases[c].salt, NULL, tok,
					     64 * 4 + 10),
				 4);
		/* Present-but-empty, swapped or different: never the same seed. */
		for (size_t d = 0; d < c; d++)
			assert_memory_not_equal(&seeds[c], &seeds[d], sizeof(seed));
	}

	/* Both absent is still a seed (the tag alone), not "no prior". */
	assert_int_equal(hc_key_seed(NULL, NULL, &seed), 0);
	assert_int_equal(pyref_run(0, NULL, NULL, NULL, true, NULL, 0, hex, 1), 1);
	hc_key_to_hex(&seed, got);
	assert_string_equal(got, hex[0]);

	/* A long salt: the u64 length field must carry more than one byte
	 * (60000 bytes: its hex still fits in one exec argument). */
	char *longsalt = malloc(60000);
	assert_non_null(longsalt);
	memset(longsalt, 's', 59999);
	longsalt[59999] = '\0';
	assert_int_equal(hc_key_seed(NULL, longsalt, &seed), 0);
	assert_int_equal(pyref_run(0, NULL, longsalt, NULL, true, NULL, 0, hex, 1), 1);
	hc_key_to_hex(&seed, got);
	assert_string_equal(got, hex[0]);
	free(longsalt);
	free(tok);
}

static void test_errors(void **state)
{
	uint32_t tok[4] = {1, 2, 3, 4};
	struct hc_key k[4];
	(void)state;

	assert_int_equal(hc_key_chain(NULL, tok, 4, 0, k, 4), -EINVAL);
	assert_last_error_contains("page size is 0");
	assert_int_equal(hc_key_chain(NULL, NULL, 4, 2, k, 4), -EINVAL);
	assert_int_equal(hc_key_chain(NULL, tok, 4, 2, NULL, 4), -EINVAL);
	assert_int_equal(hc_key_chain(NULL, tok, 0, 2, k, 4), 0);
	assert_int_equal(hc_key_chain(NULL, tok, 1, 2, k, 4), 0);
	assert_int_equal(hc_key_seed("a", "b", NULL), -EINVAL);
	assert_last_error_contains("NULL output key");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_page_sizes),           cmocka_unit_test(test_known_vector),
		cmocka_unit_test(test_partial_page_ignored), cmocka_unit_test(test_max_keys),
		cmocka_unit_test(test_continuation),         cmocka_unit_test(test_prior_key),
		cmocka_unit_test(test_namespace_seed),       cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
