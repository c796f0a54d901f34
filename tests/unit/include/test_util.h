/* Shared helpers for the unit tests (cmocka). */
#ifndef HC_TEST_UTIL_H
#define HC_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <hicache/hicache.h>

/* Exit code that ctest reports as "skipped". */
#define TEST_SKIP_CODE 77

/* cmocka's skip() leaves its group's result at 0, so ctest would count a
 * skipped case as passed. Each skip is counted here, and a group that
 * failed nothing but skipped a case makes the program exit 77: ctest then
 * says "Skipped", and cmocka's own lines name the cases that ran. One test
 * program is one translation unit, so the counter is the program's. */
static int test_skips __attribute__((unused));
#undef skip
#define skip()                             \
	do {                               \
		test_skips++;              \
		_skip(__FILE__, __LINE__); \
	} while (0)
static inline int test_group_result(int rc)
{
	return rc == 0 && test_skips ? TEST_SKIP_CODE : rc;
}
#undef cmocka_run_group_tests
#define cmocka_run_group_tests(group_tests, group_setup, group_teardown)                          \
	test_group_result(_cmocka_run_group_tests(#group_tests, group_tests,                      \
						  sizeof(group_tests) / sizeof((group_tests)[0]), \
						  group_setup, group_teardown))

/* The last failure message contains `needle`. */
#define assert_last_error_contains(needle)                                                        \
	do {                                                                                      \
		const char *msg_ = hc_last_error();                                               \
		if (!strstr(msg_, (needle)))                                                      \
			fail_msg("hc_last_error() = \"%s\", expected it to contain \"%s\"", msg_, \
				 (needle));                                                       \
	} while (0)

/* Deterministic pseudo-random bytes (splitmix64). */
static inline uint64_t test_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

#endif
