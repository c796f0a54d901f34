/*
 * The open-addressing set: what is added is found, what is not is not,
 * an element added twice is there once, and all of it stays true as the
 * set grows from a small start and when every element hashes alike (the
 * probe chain is the whole set).
 */
#include "test_util.h"
#include "util/hashset.h"

#include <stdint.h>
#include <string.h>

static size_t hash_low(const void *e)
{
	uint64_t v;
	memcpy(&v, e, sizeof(v));
	return (size_t)v;
}

static size_t hash_same(const void *e)
{
	(void)e;
	return 7;
}

static bool eq_u64(const void *a, const void *b)
{
	return !memcmp(a, b, sizeof(uint64_t));
}

static void fill_and_check(size_t (*hash)(const void *), uint64_t n)
{
	struct hashset s;
	assert_int_equal(hashset_init(&s, sizeof(uint64_t), 2, hash, eq_u64), 0);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t v = i * 3; /* multiples of 3 in; the others never */
		assert_int_equal(hashset_add(&s, &v), 0);
		assert_int_equal(hashset_add(&s, &v), 0);
		assert_true(hashset_has(&s, &v));
	}
	assert_int_equal(s.n, n);
	assert_true(2 * s.n <= s.cap); /* at most half full */
	for (uint64_t v = 0; v < 3 * n; v++)
		assert_int_equal(hashset_has(&s, &v), v % 3 == 0);
	hashset_free(&s);
}

static void test_grows(void **state)
{
	(void)state;
	fill_and_check(hash_low, 5000);
}

static void test_one_chain(void **state)
{
	(void)state;
	fill_and_check(hash_same, 300);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grows),
		cmocka_unit_test(test_one_chain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
