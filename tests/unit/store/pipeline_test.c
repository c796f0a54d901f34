/*
 * The file store's per-object work inside one batch of more pages than the
 * I/O queue depth: on set, the existence check and the image (checksum,
 * gather) are made object by object as the batch is sent, so pages that
 * exist are skipped and untouched while the others are written; on get,
 * each object is checked as it arrives, so a corrupt object in the middle
 * of a batch is a miss (and is removed, so a later set heals it) while its
 * neighbours are hits. Zero-copy (two objects per page) and bounce.
 */
#include "store_test.h"

enum { KV_ID = 3 };

#define N 40
#define SLOTS (2 * N)
#define CORRUPT_A 17 /* first object's payload flipped */
#define MISSING 23   /* first object deleted */
#define CORRUPT_B 31 /* last object's payload flipped */

static void check_batch(const char *dir, bool bounce)
{
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	struct hc_pool *pool = st_kv_pool(&g);
	struct hc_store *st = st_open_file(dir, st_dir_supports_direct(dir), bounce,
					   "\"io_depth\": 8");
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "kv", &info), 0);
	/* page_first: K and V objects, zero-copy or bounced alike. */
	const char *first = "_k", *last = "_v";

	struct hc_key keys[N];
	st_keys(11, N, 8, keys);
	uint64_t slots[N], back[N];
	int res[N];
	for (uint64_t i = 0; i < N; i++) {
		slots[i] = i;
		back[i] = N + i;
		st_fill(pool, i, KV_ID, i);
	}

	/* Half of the batch exists already: those pages are not rewritten. */
	assert_int_equal(hc_store_set(st, keys, N / 2, slots, NULL), 0);
	char path[PATH_MAX];
	st_obj_path(dir, &keys[0], ST_SUFFIX, first, path);
	struct stat before;
	assert_int_equal(stat(path, &before), 0);
	struct hc_store_stats a = st_stats(st, NULL);
	assert_int_equal(hc_store_set(st, keys, N, slots, res), 0);
	struct hc_store_stats b = st_stats(st, NULL);
	for (int i = 0; i < N; i++)
		assert_int_equal(res[i], 0);
	assert_int_equal(b.pages_existing - a.pages_existing, N / 2);
	assert_int_equal(b.pages_written - a.pages_written, N / 2);
	assert_int_equal(b.bytes_written - a.bytes_written, (N / 2) * hc_pool_page_bytes(pool));
	struct stat after;
	assert_int_equal(stat(path, &after), 0);
	assert_int_equal(after.st_ino, before.st_ino);
	assert_int_equal(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
	assert_int_equal(after.st_mtim.tv_sec, before.st_mtim.tv_sec);

	/* Damage in the middle of the batch. */
	st_obj_path(dir, &keys[CORRUPT_A], ST_SUFFIX, first, path);
	st_flip(path, 100, 0x04);
	st_obj_path(dir, &keys[MISSING], ST_SUFFIX, first, path);
	assert_int_equal(unlink(path), 0);
	st_obj_path(dir, &keys[CORRUPT_B], ST_SUFFIX, last, path);
	st_flip(path, 4000, 0x80);

	for (uint64_t i = 0; i < N; i++)
		st_clear(pool, back[i]);
	a = st_stats(st, NULL);
	assert_int_equal(hc_store_get(st, keys, N, back, res), CORRUPT_A);
	b = st_stats(st, NULL);
	for (int i = 0; i < N; i++) {
		int want = i == CORRUPT_A || i == CORRUPT_B ? -EBADMSG : i == MISSING ? -ENOENT : 0;
		if (res[i] != want)
			fail_msg("bounce %d: page %d: result %d, expected %d", bounce, i, res[i],
				 want);
		if (!want)
			st_assert_page(pool, back[i], KV_ID, (uint64_t)i);
	}
	assert_int_equal(b.corrupt - a.corrupt, 2);
	assert_int_equal(b.hits - a.hits, N - 3);
	assert_int_equal(b.misses - a.misses, 3);

	/* The broken objects were removed; the whole ones of those pages stay. */
	st_obj_path(dir, &keys[CORRUPT_A], ST_SUFFIX, first, path);
	assert_int_equal(st_file_size(path), -1);
	st_obj_path(dir, &keys[CORRUPT_B], ST_SUFFIX, last, path);
	assert_int_equal(st_file_size(path), -1);
	st_obj_path(dir, &keys[CORRUPT_B], ST_SUFFIX, first, path);
	assert_true(st_file_size(path) > 0);

	/* A set of the whole batch heals exactly those three pages. */
	a = st_stats(st, NULL);
	assert_int_equal(hc_store_set(st, keys, N, slots, NULL), 0);
	b = st_stats(st, NULL);
	assert_int_equal(b.pages_written - a.pages_written, 3);
	assert_int_equal(b.pages_existing - a.pages_existing, N - 3);
	for (uint64_t i = 0; i < N; i++)
		st_clear(pool, back[i]);
	assert_int_equal(hc_store_get(st, keys, N, back, res), N);
	for (uint64_t i = 0; i < N; i++)
		st_assert_page(pool, back[i], KV_ID, i);

	struct st_count c = st_count(dir);
	assert_int_equal(c.tmps, 0);
	assert_int_equal(c.files, (size_t)N * info.objects);
	hc_store_close(st);
	hc_pool_destroy(pool);
	st_empty_dir(dir);
}

static void test_batch_zero_copy(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	check_batch(dir, false);
	st_rmrf(dir);
}

static void test_batch_bounce(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	check_batch(dir, true);
	st_rmrf(dir);
}

/* Bounce pages of 1 MiB and more are checked while they are copied into
 * the pool, block by block: layer_first (one run per layer and half, so
 * the hash goes across runs) and page_first; damage in the first block and
 * in the last one is a miss, the neighbours are whole. */
static void check_large_bounce(enum hc_kv_layout layout)
{
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	enum { LN = 6, BAD_FIRST = 1, BAD_LAST = 4 };
	/* 4 layers x 2 halves x 8 tokens x 4 heads x 2048 x 2 bytes: 1 MiB. */
	struct hc_kv_geometry g = {.layers = 4,
				   .heads = 4,
				   .head_dim = 2048,
				   .elem_bytes = 2,
				   .page_size = 8,
				   .pages = 2 * LN,
				   .layout = layout};
	struct hc_pool *pool = st_kv_pool(&g);
	size_t pb = hc_pool_page_bytes(pool);
	assert_int_equal(pb, (size_t)1 << 20);
	struct hc_store *st = st_open_file(dir, st_dir_supports_direct(dir), true, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_key keys[LN];
	st_keys(21, LN, 8, keys);
	uint64_t slots[LN], back[LN];
	int res[LN];
	for (uint64_t i = 0; i < LN; i++) {
		slots[i] = i;
		back[i] = LN + i;
		st_fill(pool, i, KV_ID, i);
	}
	assert_int_equal(hc_store_set(st, keys, LN, slots, NULL), 0);
	char path[PATH_MAX];
	/* layer_first: one object of the flat page; page_first: K and V of
	 * half a page each, bounced object by object. */
	bool one = layout == HC_LAYOUT_LAYER_FIRST;
	st_obj_path(dir, &keys[BAD_FIRST], ST_SUFFIX, one ? "" : "_k", path);
	st_flip(path, 10, 0x01);
	st_obj_path(dir, &keys[BAD_LAST], ST_SUFFIX, one ? "" : "_v", path);
	st_flip(path, (long long)(one ? pb : pb / 2) - 1, 0x40);
	for (uint64_t i = 0; i < LN; i++)
		st_clear(pool, back[i]);
	struct hc_store_stats a = st_stats(st, NULL);
	assert_int_equal(hc_store_get(st, keys, LN, back, res), BAD_FIRST);
	struct hc_store_stats b = st_stats(st, NULL);
	for (int i = 0; i < LN; i++) {
		int want = i == BAD_FIRST || i == BAD_LAST ? -EBADMSG : 0;
		if (res[i] != want)
			fail_msg("layout %d: page %d: result %d, expected %d", (int)layout, i,
				 res[i], want);
		if (!want)
			st_assert_page(pool, back[i], KV_ID, (uint64_t)i);
	}
	assert_int_equal(b.corrupt - a.corrupt, 2);
	/* Removed, and healed by the next set. */
	assert_int_equal(st_file_size(path), -1);
	assert_int_equal(hc_store_set(st, keys, LN, slots, NULL), 0);
	for (uint64_t i = 0; i < LN; i++)
		st_clear(pool, back[i]);
	assert_int_equal(hc_store_get(st, keys, LN, back, res), LN);
	for (uint64_t i = 0; i < LN; i++)
		st_assert_page(pool, back[i], KV_ID, i);
	hc_store_close(st);
	hc_pool_destroy(pool);
	st_rmrf(dir);
}

static void test_large_bounce_pages(void **state)
{
	(void)state;
	check_large_bounce(HC_LAYOUT_LAYER_FIRST);
	check_large_bounce(HC_LAYOUT_PAGE_FIRST);
}

/* Sets of objects of 256 KiB and more look them up first only while
 * recent sets found some existing: a stream of new pages stops looking
 * after the first misses, a stream of pages set again starts looking
 * once a chunk's puts met -EEXIST. Either way nothing stored is
 * rewritten. */
static void test_lookups_follow_workload(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	enum { LN = 64 };
	/* MLA, 1 layer x 8 tokens x 32768 x 1 byte: one 256 KiB object. */
	struct hc_kv_geometry g = {.layers = 1,
				   .heads = 1,
				   .head_dim = 32768,
				   .elem_bytes = 1,
				   .page_size = 8,
				   .pages = LN,
				   .layout = HC_LAYOUT_PAGE_FIRST,
				   .mla = true};
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_pool_page_bytes(pool), (size_t)256 << 10);
	struct hc_store *st = st_open_file(dir, st_dir_supports_direct(dir), false, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_key keys[LN];
	st_keys(31, LN, 8, keys);
	uint64_t slots[LN];
	for (uint64_t i = 0; i < LN; i++) {
		slots[i] = i;
		st_fill(pool, i, KV_ID, i);
	}
	struct hc_store_stats a = st_stats(st, NULL);
	assert_int_equal(hc_store_set(st, keys, LN, slots, NULL), 0);
	struct hc_store_stats b = st_stats(st, NULL);
	assert_int_equal(b.pages_written - a.pages_written, LN);
	/* The first lookups found nothing: the rest were written without. */
	assert_true(b.set_lookups - a.set_lookups >= 1);
	assert_true(b.set_lookups - a.set_lookups <= 8);

	char path[PATH_MAX];
	st_obj_path(dir, &keys[LN - 1], ST_SUFFIX_MLA, "_k", path);
	struct stat before, after;
	assert_int_equal(stat(path, &before), 0);
	/* Set again: written without lookups, every put meets -EEXIST (what a
	 * chunk's puts met counts once the chunk is over)... */
	a = b;
	assert_int_equal(hc_store_set(st, keys, LN, slots, NULL), 0);
	b = st_stats(st, NULL);
	assert_int_equal(b.pages_existing - a.pages_existing, LN);
	assert_int_equal(b.pages_written - a.pages_written, 0);
	assert_true(b.set_lookups - a.set_lookups <= 8);
	/* ... so the next set looks every page up and writes none. */
	a = b;
	assert_int_equal(hc_store_set(st, keys, LN, slots, NULL), 0);
	b = st_stats(st, NULL);
	assert_int_equal(b.pages_existing - a.pages_existing, LN);
	assert_int_equal(b.set_lookups - a.set_lookups, LN);
	assert_int_equal(stat(path, &after), 0);
	assert_int_equal(after.st_ino, before.st_ino);
	struct st_count c = st_count(dir);
	assert_int_equal(c.tmps, 0);
	assert_int_equal(c.files, (size_t)LN);
	hc_store_close(st);
	hc_pool_destroy(pool);
	st_rmrf(dir);
}

/* A stream holds at most the three bounce work areas made at
 * registration: with room in flight for more chunks (io_depth 512, chunks
 * of 128 pages), it waits for one to be over rather than make and first
 * touch a fourth, in synchronous and in started calls, and every page
 * still arrives whole. */
static void test_bounce_areas_bounded(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	enum { BN = 640, CALLS = 5 };
	/* MLA, 1 layer x 8 tokens x 8192 x 1 byte: 64 KiB pages. */
	struct hc_kv_geometry g = {.layers = 1,
				   .heads = 1,
				   .head_dim = 8192,
				   .elem_bytes = 1,
				   .page_size = 8,
				   .pages = BN,
				   .layout = HC_LAYOUT_PAGE_FIRST,
				   .mla = true};
	struct hc_pool *pool = st_kv_pool(&g);
	struct hc_store *st = st_open_file(dir, st_dir_supports_direct(dir), true,
					   "\"io_depth\": 512");
	assert_int_equal(st_stats(st, NULL).bounce_bytes, 0);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	uint64_t reserved = st_stats(st, NULL).bounce_bytes;
	assert_true(reserved >= 3 * 128 * hc_pool_page_bytes(pool));
	assert_int_equal(st_stats(st, "kv").bounce_bytes, 0);

	struct hc_key keys[BN];
	st_keys(41, BN, 8, keys);
	uint64_t slots[BN];
	int res[BN];
	for (uint64_t i = 0; i < BN; i++) {
		slots[i] = i;
		st_fill(pool, i, KV_ID, i);
	}
	/* Synchronous: one call, five chunks. */
	assert_int_equal(hc_store_set(st, keys, BN / 2, slots, NULL), 0);
	assert_int_equal(st_stats(st, NULL).bounce_bytes, reserved);
	/* Started: five calls kept in one stream. */
	struct hc_store_op *ops[CALLS];
	size_t per = (BN / 2) / CALLS;
	for (size_t k = 0; k < CALLS; k++)
		assert_int_equal(hc_store_set_start(st, keys + BN / 2 + k * per, per,
						    slots + BN / 2 + k * per, res + k * per,
						    &ops[k]),
				 0);
	for (size_t k = 0; k < CALLS; k++)
		assert_int_equal(hc_store_op_wait(ops[k]), 0);
	for (size_t i = 0; i < BN / 2; i++)
		assert_int_equal(res[i], 0);
	assert_int_equal(st_stats(st, NULL).bounce_bytes, reserved);

	for (uint64_t i = 0; i < BN; i++)
		st_clear(pool, i);
	assert_int_equal(hc_store_get(st, keys, BN, slots, res), BN);
	for (uint64_t i = 0; i < BN; i++)
		st_assert_page(pool, i, KV_ID, i);
	for (uint64_t i = 0; i < BN; i++)
		st_clear(pool, i);
	for (size_t k = 0; k < CALLS; k++)
		assert_int_equal(hc_store_get_start(st, keys + k * (BN / CALLS), BN / CALLS,
						    slots + k * (BN / CALLS), NULL, &ops[k]),
				 0);
	for (size_t k = 0; k < CALLS; k++)
		assert_int_equal(hc_store_op_wait(ops[k]), BN / CALLS);
	for (uint64_t i = 0; i < BN; i++)
		st_assert_page(pool, i, KV_ID, i);
	assert_int_equal(st_stats(st, NULL).bounce_bytes, reserved);
	assert_int_equal(st_count(dir).files, (size_t)BN);
	hc_store_close(st);
	hc_pool_destroy(pool);
	st_rmrf(dir);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_zero_copy),
		cmocka_unit_test(test_batch_bounce),
		cmocka_unit_test(test_large_bounce_pages),
		cmocka_unit_test(test_lookups_follow_workload),
		cmocka_unit_test(test_bounce_areas_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
