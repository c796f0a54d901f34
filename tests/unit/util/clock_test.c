/*
 * The deadline helpers: a deadline is its start plus the timeout, a timeout
 * too large for 64 bits of nanoseconds (or infinite) is no deadline rather
 * than a wrapped one in the past, a NaN or negative timeout is already
 * over, and a time on another clock lands where asked with its nanoseconds
 * normalised.
 */
#include "test_util.h"
#include "util/clock.h"

#include <math.h>
#include <stdint.h>

static void test_deadline(void **state)
{
	(void)state;
	assert_true(util_deadline_ns(1000, 1.5) == 1000 + 1500000000ull);
	assert_true(util_deadline_ns(5, 0) == 5);
	assert_true(util_deadline_ns(5, -1) == 5);
	assert_true(util_deadline_ns(5, NAN) == 5);
	assert_true(util_deadline_ns(5, INFINITY) == UINT64_MAX);
	assert_true(util_deadline_ns(5, 1e12) == UINT64_MAX);
	/* Near the top, the sum saturates instead of wrapping. */
	assert_true(util_deadline_ns(UINT64_MAX - 10, 1.0) == UINT64_MAX);
}

static void test_monotonic(void **state)
{
	(void)state;
	uint64_t a = util_mono_ns(), b = util_mono_ns();
	assert_true(a > 0);
	assert_true(b >= a);
}

static void test_clock_after(void **state)
{
	(void)state;
	struct timespec before, at, after;
	clock_gettime(CLOCK_REALTIME, &before);
	at = util_clock_after(CLOCK_REALTIME, 2500000000ull);
	clock_gettime(CLOCK_REALTIME, &after);
	assert_true(at.tv_nsec >= 0 && at.tv_nsec < 1000000000L);
	int64_t at_ns = (int64_t)at.tv_sec * 1000000000ll + at.tv_nsec;
	int64_t lo = (int64_t)before.tv_sec * 1000000000ll + before.tv_nsec + 2500000000ll;
	int64_t hi = (int64_t)after.tv_sec * 1000000000ll + after.tv_nsec + 2500000000ll;
	assert_true(at_ns >= lo && at_ns <= hi);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_monotonic),
		cmocka_unit_test(test_clock_after),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
