/* A get that names one destination page twice (two keys, or one key, into
 * the same slot; in one transfer or in two transfers of one pool; v1, v2,
 * started) fails whole with -EINVAL naming the page: nothing is read,
 * nothing counted corrupt, no object deleted, and a proper get after it
 * reads the right bytes. One key into two slots and sets from one slot
 * twice stay allowed; a large shuffled batch without repeats passes. On
 * the file and mem stores, zero-copy and bounce. */
#include "store_test.h"

enum { KV_ID = 1 };
#define SLOTS 256
#define BIG 200

struct fx {
	char dir[PATH_MAX];
	bool file;
	struct hc_store *st;
	struct hc_pool *kv;
	struct hc_key keys[BIG];
};

static void fx_open(struct fx *f, bool file, bool bounce)
{
	memset(f, 0, sizeof(*f));
	f->file = file;
	if (file) {
		st_mkdtemp(f->dir);
		f->st = st_open_file(f->dir, true, bounce, NULL);
	} else {
		f->st = st_open_mem(bounce);
	}
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	f->kv = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(f->st, "kv", f->kv, true), 0);
	st_keys(1, BIG, 8, f->keys);
	/* Pages 0..BIG-1 from slots 0..BIG-1, key i holding page i. */
	uint64_t pages[BIG];
	for (uint64_t i = 0; i < BIG; i++) {
		pages[i] = i;
		st_fill(f->kv, i, KV_ID, i);
	}
	assert_int_equal(hc_store_set(f->st, f->keys, BIG, pages, NULL), 0);
}

static void fx_close(struct fx *f)
{
	hc_store_close(f->st);
	hc_pool_destroy(f->kv);
	if (f->file)
		st_rmrf(f->dir);
}

/* Nothing was counted corrupt or read, and keys 0..n-1 still read back
 * whole into fresh slots (no object was deleted). */
static void assert_intact(struct fx *f, size_t n)
{
	struct hc_store_stats s = st_stats(f->st, NULL);
	assert_int_equal(s.corrupt, 0);
	assert_int_equal(s.failures, 0);
	uint64_t pages[BIG];
	for (size_t i = 0; i < n; i++) {
		pages[i] = SLOTS - 1 - i;
		st_clear(f->kv, pages[i]);
	}
	assert_int_equal(hc_store_get(f->st, f->keys, n, pages, NULL), (int64_t)n);
	for (size_t i = 0; i < n; i++)
		st_assert_page(f->kv, pages[i], KV_ID, i);
}

static void dup_case(bool file, bool bounce)
{
	struct fx f;
	fx_open(&f, file, bounce);
	uint64_t before = st_stats(f.st, NULL).hits;

	/* Two keys into one slot (v1, keys and names). */
	uint64_t twice[2] = {3, 3};
	int res[2] = {7, 7};
	assert_int_equal(hc_store_get(f.st, f.keys, 2, twice, res), -EINVAL);
	assert_last_error_contains("page 3 of pool 'kv'");
	assert_last_error_contains("pages[0] and pages[1]");
	assert_int_equal(st_stats(f.st, NULL).hits, before);
	char hex[2][HC_KEY_HEX_LEN + 1];
	hc_key_to_hex(&f.keys[0], hex[0]);
	hc_key_to_hex(&f.keys[1], hex[1]);
	const char *names[2] = {hex[0], hex[1]};
	assert_int_equal(hc_store_get_named(f.st, names, 2, twice, res), -EINVAL);
	/* One key twice into one slot. */
	struct hc_key same[2] = {f.keys[0], f.keys[0]};
	assert_int_equal(hc_store_get(f.st, same, 2, twice, res), -EINVAL);
	/* Not next to each other, in a batch the sort has to decide. */
	uint64_t pages[BIG];
	for (size_t i = 0; i < BIG; i++)
		pages[i] = (i * 7 + 3) % BIG; /* a permutation of 0..BIG-1 */
	pages[BIG - 1] = pages[10];
	assert_int_equal(hc_store_get(f.st, f.keys, BIG, pages, NULL), -EINVAL);
	assert_last_error_contains("pages[10] and pages[199]");
	assert_intact(&f, 4);

	/* Started. */
	struct hc_store_op *op = (struct hc_store_op *)&f;
	assert_int_equal(hc_store_get_start(f.st, f.keys, 2, twice, res, &op), -EINVAL);
	assert_null(op);

	/* v2: in one transfer, and across two transfers of one pool ("kv"
	 * and the anchor's own name are one pool). */
	struct hc_pool_transfer t[2] = {
		{"kv", f.keys, 2, twice, HC_HIT_ALL_PAGES, NULL, NULL},
	};
	assert_int_equal(hc_store_get_v2(f.st, t, 1), -EINVAL);
	uint64_t one = 5;
	t[0] = (struct hc_pool_transfer){"kv", f.keys, 1, &one, HC_HIT_ALL_PAGES, NULL, NULL};
	t[1] = (struct hc_pool_transfer){"kv", f.keys + 1, 1, &one, HC_HIT_ALL_PAGES, NULL, NULL};
	assert_int_equal(hc_store_get_v2(f.st, t, 2), -EINVAL);
	assert_last_error_contains("page 0 of transfer 0 and page 0 of transfer 1");
	op = (struct hc_store_op *)&f;
	assert_int_equal(hc_store_get_v2_start(f.st, t, 2, &op), -EINVAL);
	assert_null(op);
	assert_intact(&f, 4);

	/* Allowed: one key into two slots; a large batch without repeats;
	 * a set from one slot twice (it only reads the slot). */
	uint64_t two[2] = {8, 9};
	st_clear(f.kv, 8);
	st_clear(f.kv, 9);
	assert_int_equal(hc_store_get(f.st, same, 2, two, NULL), 2);
	st_assert_page(f.kv, 8, KV_ID, 0);
	st_assert_page(f.kv, 9, KV_ID, 0);
	for (size_t i = 0; i < BIG; i++)
		pages[i] = (i * 7 + 3) % BIG;
	assert_int_equal(hc_store_get(f.st, f.keys, BIG, pages, NULL), BIG);
	for (size_t i = 0; i < BIG; i++)
		st_assert_page(f.kv, pages[i], KV_ID, i);
	struct hc_key fresh[2];
	st_keys(9, 2, 8, fresh);
	uint64_t from[2] = {0, 0};
	assert_int_equal(hc_store_set(f.st, fresh, 2, from, NULL), 0);
	assert_int_equal(hc_store_exists(f.st, fresh, 2), 2);
	assert_intact(&f, BIG);
	fx_close(&f);
}

static void test_file_zero_copy(void **state)
{
	(void)state;
	dup_case(true, false);
}

static void test_file_bounce(void **state)
{
	(void)state;
	dup_case(true, true);
}

static void test_mem(void **state)
{
	(void)state;
	dup_case(false, false);
	dup_case(false, true);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_zero_copy),
		cmocka_unit_test(test_file_bounce),
		cmocka_unit_test(test_mem),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
