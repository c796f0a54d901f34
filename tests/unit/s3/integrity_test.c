/* Integrity on the S3 backend: an object overwritten out of band (same
 * size, garbage), a short object and an object of another geometry are
 * misses, never data; broken objects are deleted so the next set heals
 * the page, while another geometry's object is left alone; a page that
 * exists is not uploaded again. */
#include "s3_test.h"

#include "store/store_types.h"

enum { KV_ID = 1 };

#define N 4
#define PS 8

static void test_corrupt_and_short(void **state)
{
	(void)state;
	struct hc_store *st = s3t_open("corrupt/", true, NULL);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 16);
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_key keys[N];
	uint64_t slots[N] = {0, 1, 2, 3}, back[N] = {8, 9, 10, 11};
	int res[N];
	st_keys(21, N, PS, keys);
	for (uint64_t i = 0; i < N; i++)
		st_fill(pool, i, KV_ID, i);
	assert_int_equal(hc_store_set(st, keys, N, slots, NULL), 0);
	/* page_first: K and V objects of half a page each, bounced as
	 * zero-copy would name them; the K object is damaged. */
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "kv", &info), 0);
	assert_false(info.zero_copy);
	assert_int_equal(info.objects, 2);
	size_t len = st_obj_len(st, hc_pool_page_bytes(pool) / 2);

	/* Page 1: same size, garbage (no valid trailer). Page 2: half of it. */
	uint8_t *junk = malloc(len);
	assert_non_null(junk);
	for (size_t i = 0; i < len; i++)
		junk[i] = (uint8_t)test_mix(i);
	char k1[1024], k2[1024];
	s3t_key("corrupt/", &keys[1], ST_SUFFIX, "_k", k1, sizeof(k1));
	s3t_key("corrupt/", &keys[2], ST_SUFFIX, "_k", k2, sizeof(k2));
	assert_int_equal(s3t_raw("HEAD", k1, NULL, 0), 200);
	assert_int_equal(s3t_raw("HEAD", k2, NULL, 0), 200);
	assert_int_equal(s3t_raw("PUT", k1, junk, len), 200);
	assert_int_equal(s3t_raw("PUT", k2, junk, len / 2), 200);

	assert_int_equal(hc_store_get(st, keys, N, back, res), 1);
	assert_int_equal(res[0], 0);
	assert_int_equal(res[1], -EBADMSG);
	assert_int_equal(res[2], -EBADMSG);
	assert_int_equal(res[3], 0);
	st_assert_page(pool, back[0], KV_ID, 0);
	st_assert_page(pool, back[3], KV_ID, 3);
	struct hc_store_stats s = st_stats(st, NULL);
	assert_int_equal(s.corrupt, 2);
	/* The garbage object was deleted (healing); a short one is "another
	 * size", a miss to exists, and the next set replaces neither blindly. */
	assert_int_equal(s3t_raw("HEAD", k1, NULL, 0), 404);
	assert_int_equal(hc_store_exists(st, keys, N), 1);
	char v1[1024];
	s3t_key("corrupt/", &keys[1], ST_SUFFIX, "_v", v1, sizeof(v1));
	assert_int_equal(s3t_raw("HEAD", v1, NULL, 0), 200); /* V was whole: kept */

	/* Set again: page 1 is written anew and reads back. */
	assert_int_equal(s3t_raw("DELETE", k2, NULL, 0), 204);
	assert_int_equal(hc_store_set(st, keys, N, slots, res), 0);
	s = st_stats(st, NULL);
	assert_int_equal(s.pages_written, N + 2);
	assert_int_equal(s.pages_existing, 2);
	assert_int_equal(hc_store_get(st, keys, N, back, res), N);
	for (uint64_t i = 0; i < N; i++)
		st_assert_page(pool, back[i], KV_ID, i);
	free(junk);
	hc_store_close(st);
	hc_pool_destroy(pool);
}

/* Written with 2 heads of 64, read with 4 heads of 32: same names and
 * sizes, another geometry: a miss, and the object is kept. */
static void test_other_geometry(void **state)
{
	(void)state;
	struct hc_kv_geometry gw = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 8);
	struct hc_kv_geometry gr = gw;
	gr.heads = 4;
	gr.head_dim = 32;
	struct hc_pool *pw = st_kv_pool(&gw), *pr = st_kv_pool(&gr);
	struct hc_key keys[N];
	uint64_t slots[N] = {0, 1, 2, 3};
	int res[N];
	st_keys(22, N, PS, keys);
	for (uint64_t i = 0; i < N; i++)
		st_fill(pw, i, KV_ID, i);
	struct hc_store *st = s3t_open("geometry/", false, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", pw, true), 0);
	assert_int_equal(hc_store_set(st, keys, N, slots, NULL), 0);
	hc_store_close(st);
	st = s3t_open("geometry/", false, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", pr, true), 0);
	assert_int_equal(hc_store_get(st, keys, N, slots, res), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(res[i], -EBADMSG);
	assert_int_equal(st_stats(st, NULL).corrupt, 2 * N);
	char k[1024];
	s3t_key("geometry/", &keys[0], ST_SUFFIX, "_k", k, sizeof(k));
	assert_int_equal(s3t_raw("HEAD", k, NULL, 0), 200);
	hc_store_close(st);
	hc_pool_destroy(pw);
	hc_pool_destroy(pr);
}

/* The store asks the backend to delete an object it found damaged; that
 * verdict may come from the reader's own memory (a zero-copy payload the
 * caller changed while it was read), or a good copy may have come since.
 * The S3 backend reads the object again and deletes it only when that copy
 * is not valid: a valid one stays (-EEXIST), garbage of the same size goes. */
static void test_heal_rechecks(void **state)
{
	(void)state;
	struct hc_store *st = s3t_open("healcheck/", false, NULL);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 16);
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_key keys[N];
	uint64_t slots[N] = {0, 1, 2, 3};
	st_keys(23, N, PS, keys);
	for (uint64_t i = 0; i < N; i++)
		st_fill(pool, i, KV_ID, i);
	assert_int_equal(hc_store_set(st, keys, N, slots, NULL), 0);

	char name[HC_NAME_MAX], k[1024];
	assert_true(hc_key_name(&keys[0], ST_SUFFIX, "_k", name, sizeof(name)) > 0);
	s3t_key("healcheck/", &keys[0], ST_SUFFIX, "_k", k, sizeof(k));
	size_t len = st_obj_len(st, hc_pool_page_bytes(pool) / 2);
	struct store_obj o = {.name = name, .route = hc_key_route_hash(name), .len = len};

	assert_int_equal(st->ops->remove(st->be, &o, 1), 0);
	assert_int_equal(o.result, -EEXIST);
	assert_int_equal(s3t_raw("HEAD", k, NULL, 0), 200);

	uint8_t *junk = malloc(len);
	assert_non_null(junk);
	for (size_t i = 0; i < len; i++)
		junk[i] = (uint8_t)test_mix(i + 7);
	assert_int_equal(s3t_raw("DELETE", k, NULL, 0), 204);
	assert_int_equal(s3t_raw("PUT", k, junk, len), 200);
	o.result = 1;
	assert_int_equal(st->ops->remove(st->be, &o, 1), 0);
	assert_int_equal(o.result, 0);
	assert_int_equal(s3t_raw("HEAD", k, NULL, 0), 404);

	/* Another size under the name: another geometry's, kept. */
	assert_int_equal(s3t_raw("PUT", k, junk, len / 2), 200);
	o.result = 1;
	assert_int_equal(st->ops->remove(st->be, &o, 1), 0);
	assert_int_equal(o.result, -EEXIST);
	assert_int_equal(s3t_raw("HEAD", k, NULL, 0), 200);
	free(junk);
	hc_store_close(st);
	hc_pool_destroy(pool);
}

int main(void)
{
	int rc = s3t_setup("integrity");
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_corrupt_and_short),
		cmocka_unit_test(test_other_geometry),
		cmocka_unit_test(test_heal_rechecks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
