/* Host pool sizing from bytes, from a ratio, and against available memory. */
#include "test_util.h"

#include <errno.h>
#include <stdlib.h>

#define GIB (1ull << 30)

static void test_from_bytes_and_ratio(void **state)
{
	(void)state;
	struct hc_pool_sizing s;
	hc_pool_sizing_init(&s, sizeof(s));
	assert_true(s.ratio == 2.0);
	assert_int_equal(s.reserve_bytes, 10 * GIB);
	uint64_t pages;
	s.bytes = 1000000;
	assert_int_equal(hc_pool_size_pages_avail(&s, 4096, 20 * GIB, &pages), 0);
	assert_int_equal(pages, 244);
	s.bytes = 0;
	s.device_pages = 1000;
	s.ratio = 2.5;
	assert_int_equal(hc_pool_size_pages_avail(&s, 4096, 20 * GIB, &pages), 0);
	assert_int_equal(pages, 2500);
}

static void test_too_big_fails_clearly(void **state)
{
	(void)state;
	struct hc_pool_sizing s;
	hc_pool_sizing_init(&s, sizeof(s));
	s.bytes = 12 * GIB;
	uint64_t pages = 0;
	/* 20 GiB available - 10 GiB reserve = 10 GiB < 12 GiB. */
	assert_int_equal(hc_pool_size_pages_avail(&s, 1 << 20, 20 * GIB, &pages), -ENOMEM);
	assert_last_error_contains("does not fit");
	assert_last_error_contains("reserve");
	assert_int_equal(pages, 0);
	s.reserve_bytes = 4 * GIB;
	assert_int_equal(hc_pool_size_pages_avail(&s, 1 << 20, 20 * GIB, &pages), 0);
	assert_int_equal(pages, 12 * 1024);
	/* Less available than the reserve. */
	assert_int_equal(hc_pool_size_pages_avail(&s, 1 << 20, 2 * GIB, &pages), -ENOMEM);
}

static void test_bad_input(void **state)
{
	(void)state;
	struct hc_pool_sizing s;
	hc_pool_sizing_init(&s, sizeof(s));
	uint64_t pages;
	assert_int_equal(hc_pool_size_pages_avail(&s, 4096, 20 * GIB, &pages), -EINVAL);
	assert_last_error_contains("device_pages");
	s.bytes = 100;
	assert_int_equal(hc_pool_size_pages_avail(&s, 4096, 20 * GIB, &pages), -EINVAL);
	assert_last_error_contains("0 pages");
	assert_int_equal(hc_pool_size_pages_avail(&s, 0, 20 * GIB, &pages), -EINVAL);
	s.bytes = 0;
	s.device_pages = UINT64_MAX;
	s.ratio = 4;
	assert_int_equal(hc_pool_size_pages_avail(&s, 4096, 20 * GIB, &pages), -EINVAL);
	assert_last_error_contains("overflow");
	assert_int_equal(hc_pool_size_pages_avail(NULL, 4096, 20 * GIB, &pages), -EINVAL);
}

static void test_real_machine(void **state)
{
	(void)state;
	struct hc_pool_sizing s;
	hc_pool_sizing_init(&s, sizeof(s));
	uint64_t avail;
	assert_int_equal(hc_mem_available(&avail), 0);
	s.reserve_bytes = 0;
	s.bytes = avail + GIB;
	uint64_t pages;
	assert_int_equal(hc_pool_size_pages(&s, 4096, &pages), -ENOMEM);
	s.bytes = 1 << 20;
	assert_int_equal(hc_pool_size_pages(&s, 4096, &pages), 0);
	assert_int_equal(pages, 256);
}

static void test_from_config(void **state)
{
	(void)state;
	struct hc_config *cfg;
	assert_int_equal(hc_config_create("{\"hicache_size\": 2, \"host_memory_reserve_gb\": 1}",
					  &cfg),
			 0);
	struct hc_pool_sizing s;
	hc_pool_sizing_init(&s, sizeof(s));
	assert_int_equal(hc_pool_sizing_from_config(&s, cfg), 0);
	assert_int_equal(s.bytes, 2000000000ull);
	assert_int_equal(s.reserve_bytes, GIB);
	assert_true(s.ratio == 2.0);
	hc_config_destroy(cfg);
}

int main(void)
{
	unsetenv("HICACHE_SIZE");
	unsetenv("HICACHE_RATIO");
	unsetenv("HICACHE_HOST_MEMORY_RESERVE_GB");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_from_bytes_and_ratio),
		cmocka_unit_test(test_too_big_fails_clearly),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_real_machine),
		cmocka_unit_test(test_from_config),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
