/* One store, caches opened on it one after another: hc_cache_close()
 * unregisters the pools hc_cache_open() registered ("kv", and "mamba" for
 * a hybrid cache), so the store keeps no pointer to a destroyed pool (a
 * later transfer fails cleanly instead of reading freed memory) and a
 * second cache opens on it and finds the first one's pages in L3. */
#include "controller_helpers.h"

static void reuse(bool hybrid)
{
	struct ct t;
	struct hc_cache_opts o;
	ct_opts(&o, HC_WRITE_THROUGH, 64, 128);
	if (hybrid)
		o.mamba_bytes = 256;
	ct_open_opts(&t, &o, true);
	uint32_t tok[32];
	ct_tokens(tok, 32, 5);
	ct_cycle(&t, tok, 32, HC_STOP_WAIT_COMPLETE, false);
	assert_int_equal(hc_cache_flush(t.c), 0);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(t.st, "kv", &info), 0);
	hc_cache_close(t.c);
	t.c = NULL;

	/* The pools are gone from the store: calls fail, nothing dangles. */
	assert_int_equal(hc_store_pool_info(t.st, "kv", &info), -ENOENT);
	assert_int_equal(hc_store_pool_info(t.st, "mamba", &info), -ENOENT);
	struct hc_key keys[8];
	assert_int_equal(hc_key_chain(NULL, tok, 32, CT_PS, keys, 8), 8);
	uint64_t pages[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	assert_int_equal(hc_store_set(t.st, keys, 8, pages, NULL), -EINVAL);
	assert_last_error_contains("no anchor");
	assert_int_equal(hc_store_get(t.st, keys, 8, pages, NULL), -EINVAL);
	assert_int_equal(hc_store_exists(t.st, keys, 8), -EINVAL);
	struct hc_pool_transfer m = {"mamba", keys, 1, pages, HC_HIT_ALL_PAGES, NULL, NULL};
	assert_int_equal(hc_store_get_v2(t.st, &m, 1), -EINVAL);
	assert_last_error_contains("not registered");

	/* A second cache on the same store registers its pools and finds the
	 * first one's pages (a hybrid prefix also needs Mamba states, which
	 * these requests never wrote: there only the KV pages are seen). */
	assert_int_equal(hc_cache_open(&o, &t.c), 0);
	assert_int_equal(hc_store_pool_info(t.st, "mamba", &info), hybrid ? 0 : -ENOENT);
	assert_int_equal(hc_store_exists(t.st, keys, 8), 8);
	if (!hybrid) {
		struct hc_cache_req_info i = ct_cycle(&t, tok, 32, HC_STOP_WAIT_COMPLETE, true);
		assert_int_equal(i.l3_tokens, 32);
	}
	hc_cache_close(t.c);
	t.c = NULL;
	assert_int_equal(hc_cache_open(&o, &t.c), 0);
	ct_close(&t);
}

static void test_kv(void **state)
{
	(void)state;
	reuse(false);
}

static void test_hybrid(void **state)
{
	(void)state;
	reuse(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kv),
		cmocka_unit_test(test_hybrid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
