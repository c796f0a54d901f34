/* The element type in a pool's identity (hc_pool_reg.elem_type): two
 * pools of one KV geometry and element width but other element types
 * (bf16 and fp16) read each other's pages as misses, never as data, on
 * the file store (two stores over one dir, zero-copy and bounce) and the
 * mem store (one pool registered again under another type); one type
 * round-trips; NULL and "" are "none", whose geometry tag is the one
 * stores wrote before elem_type existed; bad names fail -EINVAL. */
#include "store_test.h"

enum { KV_ID = 1 };
#define NP 3
#define SLOTS 8

/* The trailer's geometry tag of st_kv_geo(HC_LAYOUT_PAGE_FIRST, false)
 * as the store wrote it before elem_type: pinned, so pages of existing
 * stores stay readable by callers that pass no element type. */
#define UNTYPED_PAGE_FIRST_GEOMETRY 0x24860a6530ff149aull

static int reg(struct hc_store *st, struct hc_pool *pool, const char *elem_type)
{
	struct hc_pool_reg r;
	hc_pool_reg_init(&r, sizeof(r));
	r.anchor = true;
	r.elem_type = elem_type;
	return hc_store_register_pool_ex(st, "kv", pool, &r);
}

static void put(struct hc_store *st, struct hc_pool *pool, const struct hc_key *keys)
{
	uint64_t pages[NP];
	int res[NP];
	for (int i = 0; i < NP; i++) {
		pages[i] = (uint64_t)i;
		st_fill(pool, pages[i], KV_ID, (uint64_t)i);
	}
	assert_int_equal(hc_store_set(st, keys, NP, pages, res), 0);
}

/* A get of keys into slots 4.. that must be a hit (the pages' bytes) or
 * a miss of another geometry; with untouched, the slots must keep the
 * 0x5a they held before (bounce: nothing reaches a page that fails). */
static void get_expect(struct hc_store *st, struct hc_pool *pool, const struct hc_key *keys,
		       bool hit, bool untouched)
{
	size_t len = hc_pool_page_bytes(pool);
	uint8_t *mark = malloc(len), *got = malloc(len);
	assert_non_null(mark);
	assert_non_null(got);
	memset(mark, 0x5a, len);
	uint64_t pages[NP];
	int res[NP];
	for (int i = 0; i < NP; i++) {
		pages[i] = 4 + (uint64_t)i;
		assert_int_equal(hc_pool_scatter(pool, pages[i], mark, len), 0);
	}
	assert_int_equal(hc_store_get(st, keys, NP, pages, res), hit ? NP : 0);
	for (int i = 0; i < NP; i++) {
		if (hit) {
			assert_int_equal(res[i], 0);
			st_assert_page(pool, pages[i], KV_ID, (uint64_t)i);
			continue;
		}
		/* Another geometry: a miss as a corrupt object would be, but
		 * an object another writer uses legitimately. */
		assert_int_equal(res[i], -EBADMSG);
		if (untouched) {
			assert_int_equal(hc_pool_gather(pool, pages[i], got, len), 0);
			assert_memory_equal(got, mark, len);
		}
	}
	free(mark);
	free(got);
}

static uint64_t geometry_of(const char *path)
{
	uint8_t t[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, t, sizeof(t), st_file_size(path) - 64), 64);
	close(fd);
	uint64_t g;
	memcpy(&g, t + 24, sizeof(g)); /* docs/FORMAT.md: the trailer's geometry */
	return g;
}

/* Two stores over one dir, one per element type, and more after them. */
static void file_case(bool bounce)
{
	char dir[PATH_MAX], path[PATH_MAX];
	st_mkdtemp(dir);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	struct hc_pool *a = st_kv_pool(&g), *b = st_kv_pool(&g);
	struct hc_store *bf = st_open_file(dir, true, bounce, NULL);
	struct hc_store *fp = st_open_file(dir, true, bounce, NULL);
	assert_int_equal(reg(bf, a, "bfloat16"), 0);
	assert_int_equal(reg(fp, b, "float16"), 0);
	struct hc_key keys[NP], keys2[NP];
	st_keys(1, NP, 8, keys);
	st_keys(2, NP, 8, keys2);

	/* bf16 pages are misses to the fp16 pool and stay stored. */
	put(bf, a, keys);
	get_expect(fp, b, keys, false, bounce);
	struct hc_store_stats s = st_stats(fp, NULL);
	assert_int_equal(s.hits, 0);
	for (int i = 0; i < NP; i++) {
		st_obj_path(dir, &keys[i], ST_SUFFIX, "_k", path);
		assert_true(st_file_size(path) > 0);
	}
	/* ... and the other way round. */
	put(fp, b, keys2);
	get_expect(bf, a, keys2, false, bounce);
	/* The same type round-trips, in this store and another one. */
	get_expect(bf, a, keys, true, false);
	struct hc_store *bf2 = st_open_file(dir, true, bounce, NULL);
	struct hc_pool *c = st_kv_pool(&g);
	assert_int_equal(reg(bf2, c, "bfloat16"), 0);
	get_expect(bf2, c, keys, true, false);
	hc_store_close(bf2);

	/* NULL and "" are one identity, the one stores had before: the
	 * geometry tag is the untyped one; a typed pool misses them. */
	struct hc_key keys3[NP];
	st_keys(3, NP, 8, keys3);
	struct hc_store *none = st_open_file(dir, true, bounce, NULL);
	struct hc_store *empty = st_open_file(dir, true, bounce, NULL);
	struct hc_pool *d = st_kv_pool(&g), *e = st_kv_pool(&g);
	assert_int_equal(reg(none, d, NULL), 0);
	assert_int_equal(reg(empty, e, ""), 0);
	put(none, d, keys3);
	st_obj_path(dir, &keys3[0], ST_SUFFIX, "_k", path);
	assert_true(geometry_of(path) == UNTYPED_PAGE_FIRST_GEOMETRY);
	get_expect(empty, e, keys3, true, false);
	get_expect(bf, a, keys3, false, bounce);
	/* A typed pool's tag is another one. */
	st_obj_path(dir, &keys[0], ST_SUFFIX, "_k", path);
	assert_true(geometry_of(path) != UNTYPED_PAGE_FIRST_GEOMETRY);

	hc_store_close(none);
	hc_store_close(empty);
	hc_store_close(bf);
	hc_store_close(fp);
	hc_pool_destroy(a);
	hc_pool_destroy(b);
	hc_pool_destroy(c);
	hc_pool_destroy(d);
	hc_pool_destroy(e);
	st_rmrf(dir);
}

static void test_file_bounce(void **state)
{
	(void)state;
	file_case(true);
}

static void test_file_zero_copy(void **state)
{
	(void)state;
	file_case(false);
}

/* The mem store lives in one store: the pool goes and comes back under
 * another type (its objects stay when it is unregistered). */
static void mem_case(bool bounce)
{
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	struct hc_pool *p = st_kv_pool(&g);
	struct hc_store *st = st_open_mem(bounce);
	struct hc_key keys[NP], keys2[NP];
	st_keys(1, NP, 8, keys);
	st_keys(2, NP, 8, keys2);
	assert_int_equal(reg(st, p, "bfloat16"), 0);
	put(st, p, keys);
	assert_int_equal(hc_store_unregister_pool(st, "kv"), 0);
	assert_int_equal(reg(st, p, "float16"), 0);
	get_expect(st, p, keys, false, bounce);
	put(st, p, keys2);
	assert_int_equal(hc_store_unregister_pool(st, "kv"), 0);
	/* Back to bf16: its pages were not deleted by the misses. */
	assert_int_equal(reg(st, p, "bfloat16"), 0);
	get_expect(st, p, keys, true, false);
	get_expect(st, p, keys2, false, bounce);
	assert_int_equal(hc_store_unregister_pool(st, "kv"), 0);
	/* NULL and "" are one identity. */
	struct hc_key keys3[NP];
	st_keys(3, NP, 8, keys3);
	assert_int_equal(reg(st, p, NULL), 0);
	put(st, p, keys3);
	assert_int_equal(hc_store_unregister_pool(st, "kv"), 0);
	assert_int_equal(reg(st, p, ""), 0);
	get_expect(st, p, keys3, true, false);
	get_expect(st, p, keys, false, bounce);
	hc_store_close(st);
	hc_pool_destroy(p);
}

static void test_mem(void **state)
{
	(void)state;
	mem_case(false);
	mem_case(true);
}

static void test_bad_names(void **state)
{
	(void)state;
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	struct hc_pool *p = st_kv_pool(&g);
	struct hc_store *st = st_open_mem(false);
	const char *bad[] = {"bf 16", "bf-16", "float8/e4m3", "bf16\n",
			     "a_name_of_thirty_two_characters_"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(reg(st, p, bad[i]), -EINVAL);
		assert_last_error_contains("element type");
	}
	/* 31 bytes is the longest. */
	assert_int_equal(reg(st, p, "a_name_of_thirty_one_characters"), 0);
	assert_int_equal(hc_store_unregister_pool(st, "kv"), 0);
	assert_int_equal(reg(st, p, "float8_e4m3fn"), 0);
	hc_store_close(st);
	hc_pool_destroy(p);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_bounce),
		cmocka_unit_test(test_file_zero_copy),
		cmocka_unit_test(test_mem),
		cmocka_unit_test(test_bad_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
