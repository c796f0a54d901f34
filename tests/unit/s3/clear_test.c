/* hc_store_clear on S3: deletes this store's objects right under its
 * prefix (keys' and names'), and leaves another model's objects under the
 * same prefix, another store's under a longer prefix ("<prefix>sub/")
 * and a foreign object alone. */
#include "s3_test.h"

enum { KV_ID = 1 };
#define NP 4

static void put(struct hc_store *st, struct hc_pool *kv, const struct hc_key *keys,
		const char *const *names)
{
	uint64_t w[NP] = {0, 1, 2, 3};
	for (int i = 0; i < NP; i++)
		st_fill(kv, w[i], KV_ID, (uint64_t)i);
	struct hc_pool_transfer t = {"kv", names ? NULL : keys, NP, w, HC_HIT_ALL_PAGES, NULL,
				     names};
	assert_int_equal(hc_store_set_v2(st, &t, 1), 0);
}

static void test_clear(void **state)
{
	(void)state;
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, NP);
	struct hc_pool *kv = st_kv_pool(&g);
	struct hc_key keys[NP];
	st_keys(1, NP, 8, keys);
	static const char *const names[NP] = {"p0", "p 1", "p%2", "p+3"};
	struct hc_store *a = s3t_open("", false, NULL), *sub = s3t_open("sub/", false, NULL), *m;
	char json[512];
	snprintf(json, sizeof(json), "{\"prefix\": \"%s\"}", s3t_prefix);
	assert_int_equal(st_open_json("s3", json, "other/model", 0, 1, false, &m), 0);
	struct hc_store *all[3] = {a, sub, m};
	for (int i = 0; i < 3; i++) {
		assert_int_equal(hc_store_register_pool(all[i], "kv", kv, true), 0);
		put(all[i], kv, keys, NULL);
	}
	put(a, kv, keys, names);
	char foreign[256];
	snprintf(foreign, sizeof(foreign), "%sREADME", s3t_prefix);
	assert_int_equal(s3t_raw("PUT", foreign, "x", 1), 200);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(a, "kv", &info), 0);

	assert_int_equal(hc_store_clear(a), 2 * NP * info.objects);
	assert_int_equal(hc_store_exists(a, keys, NP), 0);
	assert_int_equal(hc_store_exists_named(a, names, NP), 0);
	assert_int_equal(hc_store_exists(sub, keys, NP), NP);
	assert_int_equal(hc_store_exists(m, keys, NP), NP);
	assert_int_equal(s3t_raw("HEAD", foreign, NULL, 0), 200);
	assert_int_equal(hc_store_clear(a), 0);
	/* The store works on. */
	put(a, kv, keys, NULL);
	assert_int_equal(hc_store_exists(a, keys, NP), NP);
	for (int i = 0; i < 3; i++)
		hc_store_close(all[i]);
	hc_pool_destroy(kv);
}

int main(void)
{
	int rc = s3t_setup("clear");
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clear),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
