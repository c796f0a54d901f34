/* hc_cache_opts is size-tagged (issue 15 item 16): hc_cache_opts_init with
 * an older, smaller size sets struct_size to that size and defaults the
 * fields it holds; hc_cache_open takes such a struct, the missing fields
 * keeping their defaults; an uninitialised struct (struct_size 0) is
 * refused with a message. Before, init left struct_size 0 for any size
 * below sizeof and open refused every smaller struct. */
#include "test_util.h"

#include <hicache/hicache.h>

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* What a caller compiled before the prefetch timeouts existed passes. */
#define OLD_SIZE offsetof(struct hc_cache_opts, prefetch_timeout_base_s)

static void test_init_older_size(void **state)
{
	(void)state;
	struct hc_cache_opts o;
	memset(&o, 0xab, sizeof(o));
	hc_cache_opts_init(&o, OLD_SIZE);
	assert_int_equal(o.struct_size, OLD_SIZE);
	assert_int_equal(o.page_size, 16);
	assert_int_equal(o.prefetch_threshold, 256);
	assert_int_equal(o.write_policy, HC_WRITE_THROUGH);
	/* Bytes past the caller's size are the caller's: left alone. */
	unsigned char tail[sizeof(o) - OLD_SIZE];
	memset(tail, 0xab, sizeof(tail));
	assert_memory_equal((unsigned char *)&o + OLD_SIZE, tail, sizeof(tail));
}

static void test_open_older_struct(void **state)
{
	(void)state;
	struct hc_cache_opts o;
	hc_cache_opts_init(&o, OLD_SIZE);
	o.no_data = true;
	o.device_tokens = 64 * 16;
	o.host_tokens = 256 * 16;
	struct hc_cache *c = NULL;
	assert_int_equal(hc_cache_open(&o, &c), 0);
	assert_non_null(c);
	hc_cache_close(c);
}

static void test_uninitialised_refused(void **state)
{
	(void)state;
	struct hc_cache_opts o;
	memset(&o, 0, sizeof(o));
	o.no_data = true;
	o.page_size = 16;
	o.device_tokens = 64 * 16;
	o.host_tokens = 256 * 16;
	struct hc_cache *c = (struct hc_cache *)&o;
	assert_int_equal(hc_cache_open(&o, &c), -EINVAL);
	assert_null(c);
	assert_non_null(strstr(hc_last_error(), "hc_cache_open: opts"));
	assert_int_equal(hc_cache_open(NULL, &c), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_older_size),
		cmocka_unit_test(test_open_older_struct),
		cmocka_unit_test(test_uninitialised_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
