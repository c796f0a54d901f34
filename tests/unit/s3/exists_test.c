/* exists on the S3 backend: present, absent and half-present batches (v1
 * leading hits, v2 per pool), a zero-copy page missing one of its two
 * objects, and an object of the wrong size: both are absent. Many HEADs of
 * one batch run in parallel; results stay per object. */
#include "s3_test.h"

enum { KV_ID = 1 };

#define N 200
#define PS 8

static void test_present_absent_half(void **state)
{
	(void)state;
	struct hc_store *st = s3t_open("half/", false, NULL);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, N);
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_key keys[N], even[N / 2];
	uint64_t slots[N];
	st_keys(11, N, PS, keys);
	for (uint64_t i = 0; i < N; i++) {
		slots[i] = i;
		st_fill(pool, i, KV_ID, i);
	}
	/* Absent: nothing stored yet. */
	assert_int_equal(hc_store_exists(st, keys, N), 0);
	/* Half present: the even pages. */
	for (int i = 0; i < N / 2; i++)
		even[i] = keys[2 * i];
	assert_int_equal(hc_store_set(st, even, N / 2, slots, NULL), 0);
	assert_int_equal(hc_store_exists(st, even, N / 2), N / 2);
	assert_int_equal(hc_store_exists(st, keys, N), 1); /* page 1 is missing */
	assert_int_equal(hc_store_exists(st, keys + 1, N - 1), 0);
	/* v2 trailing_pages sees the half: every prefix ending at an even page. */
	struct hc_pool_transfer t = {"kv", NULL, 1, NULL, HC_HIT_TRAILING_PAGES, NULL, NULL};
	uint64_t kv_hits, hits[1];
	assert_int_equal(hc_store_exists_v2(st, keys, N, &t, 1, &kv_hits, hits), 1);
	/* Present: the first 150 pages, all stored (and page 150, even). */
	assert_int_equal(hc_store_set(st, keys, 150, slots, NULL), 0);
	assert_int_equal(hc_store_exists(st, keys, N), 151);
	assert_int_equal(hc_store_exists(st, keys, 150), 150);
	struct hc_store_stats s = st_stats(st, NULL);
	assert_int_equal(s.pages_written, N / 2 + 75); /* odd pages below 150 were new */
	assert_int_equal(s.pages_existing, 75);

	/* One object of a zero-copy page gone: the page is gone. */
	char k[1024];
	s3t_key("half/", &keys[10], ST_SUFFIX, "_v", k, sizeof(k));
	assert_int_equal(s3t_raw("DELETE", k, NULL, 0), 204);
	assert_int_equal(hc_store_exists(st, keys, N), 10);
	/* An object of another size (another geometry): absent. */
	s3t_key("half/", &keys[5], ST_SUFFIX, "_k", k, sizeof(k));
	static const char small[100];
	assert_int_equal(s3t_raw("DELETE", k, NULL, 0), 204);
	assert_int_equal(s3t_raw("PUT", k, small, sizeof(small)), 200);
	assert_int_equal(hc_store_exists(st, keys, N), 5);
	hc_store_close(st);
	hc_pool_destroy(pool);
}

int main(void)
{
	int rc = s3t_setup("exists");
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_present_absent_half),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
