/*
 * hc_pages_of_slots: only whole pages of the pool are pages; anything else
 * is -EINVAL naming the page.
 */
#include "test_util.h"

#include <errno.h>
#include <stdint.h>

static void test_whole_pages(void **state)
{
	(void)state;
	int64_t slots[12] = {8, 9, 10, 11, 0, 1, 2, 3, 28, 29, 30, 31};
	uint64_t pages[3] = {0};
	assert_int_equal(hc_pages_of_slots(slots, 3, 4, 8, pages), 0);
	assert_int_equal(pages[0], 2);
	assert_int_equal(pages[1], 0);
	assert_int_equal(pages[2], 7);
	int64_t one[3] = {5, 0, 7};
	assert_int_equal(hc_pages_of_slots(one, 3, 1, 8, pages), 0);
	assert_int_equal(pages[0], 5);
	assert_int_equal(hc_pages_of_slots(NULL, 0, 4, 8, NULL), 0);
}

static void test_not_whole_pages(void **state)
{
	(void)state;
	uint64_t pages[2];
	int64_t misaligned[4] = {1, 2, 3, 4};
	assert_int_equal(hc_pages_of_slots(misaligned, 1, 4, 8, pages), -EINVAL);
	assert_last_error_contains("not the start of a page");
	int64_t gap[8] = {0, 1, 2, 3, 4, 5, 7, 6};
	assert_int_equal(hc_pages_of_slots(gap, 2, 4, 8, pages), -EINVAL);
	assert_last_error_contains("page 1: slot 2 is 7, not 6");
	int64_t past[4] = {32, 33, 34, 35};
	assert_int_equal(hc_pages_of_slots(past, 1, 4, 8, pages), -EINVAL);
	assert_last_error_contains("outside the pool's 8 pages");
	int64_t negative[4] = {-4, -3, -2, -1};
	assert_int_equal(hc_pages_of_slots(negative, 1, 4, 8, pages), -EINVAL);
	int64_t wrapped[1] = {INT64_MIN};
	assert_int_equal(hc_pages_of_slots(wrapped, 1, 1, 8, pages), -EINVAL);
	assert_int_equal(hc_pages_of_slots(past, 1, 0, 8, pages), -EINVAL);
	assert_int_equal(hc_pages_of_slots(NULL, 1, 4, 8, pages), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_pages),
		cmocka_unit_test(test_not_whole_pages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
