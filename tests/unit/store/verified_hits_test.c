/* A page counts as a hit only once its checksum was checked: in one get
 * of many pages (several chunks, more pages than the io depth, so that
 * checks of earlier pages run while later ones are still being read), a
 * few objects with one flipped payload byte each fail, and only their
 * pages; every other page is a hit with the right bytes. Each engine
 * (io_uring checks a page in its arrived hook between reaping others,
 * the threads on their workers), a shallow and a deep queue, zero-copy
 * and bounce, one object per page (MLA) and two (K and V). */
#include "store_test.h"

enum { KV_ID = 7, NP = 300 };

/* Damaged pages: the first and last of the call and of a chunk, and a few
 * between (a chunk holds 128 objects: page_first MHA pages have 2). */
static const uint64_t victims[] = {0, 1, 63, 64, 127, 128, 200, 255, 256, NP - 1};
#define NVICTIMS (sizeof(victims) / sizeof(victims[0]))

static bool is_victim(uint64_t i)
{
	for (size_t v = 0; v < NVICTIMS; v++)
		if (victims[v] == i)
			return true;
	return false;
}

struct variant {
	const char *engine;
	unsigned depth;
	bool bounce, mla;
};

/* Whether a store with this engine opens here (io_uring may be refused:
 * an old kernel, seccomp); false says why on stderr. */
static bool engine_opens(const char *engine)
{
	char dir[PATH_MAX], extra[64];
	st_mkdtemp(dir);
	snprintf(extra, sizeof(extra), "\"io_engine\": \"%s\"", engine);
	char json[PATH_MAX + 128];
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s\"], %s}", dir, extra);
	struct hc_store *st;
	int rc = st_open_json("file", json, ST_MODEL, 0, 1, false, &st);
	hc_store_close(st);
	st_rmrf(dir);
	if (rc)
		fprintf(stderr, "engine %s unavailable (%s): its cases skipped\n", engine,
			hc_last_error());
	return rc == 0;
}

static void check_variant(const struct variant *v)
{
	char dir[PATH_MAX], extra[128];
	st_mkdtemp(dir);
	snprintf(extra, sizeof(extra), "\"io_engine\": \"%s\", \"io_depth\": %u", v->engine,
		 v->depth);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, v->mla, 2 * NP);
	struct hc_pool *pool = st_kv_pool(&g);
	struct hc_store *st = st_open_file(dir, true, v->bounce, extra);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "kv", &info), 0);
	assert_int_equal(info.objects, v->mla ? 1 : 2);

	struct hc_key *keys = malloc(NP * sizeof(*keys));
	uint64_t *slots = malloc(NP * sizeof(*slots)), *back = malloc(NP * sizeof(*back));
	int *res = malloc(NP * sizeof(*res));
	assert_true(keys && slots && back && res);
	st_keys(11, NP, 8, keys);
	for (uint64_t i = 0; i < NP; i++) {
		slots[i] = i;
		back[i] = NP + i;
		st_fill(pool, i, KV_ID, i);
	}
	int64_t set = hc_store_set(st, keys, NP, slots, NULL);
	if (set)
		fail_msg("set: %lld (%s)", (long long)set, hc_last_error());
	/* One payload byte of one object of each victim: K of even ones, V
	 * of odd ones where a page has both. */
	for (size_t k = 0; k < NVICTIMS; k++) {
		uint64_t i = victims[k];
		const char *comp = !v->mla && i % 2 ? "_v" : "_k";
		char path[PATH_MAX];
		st_obj_path(dir, &keys[i], v->mla ? ST_SUFFIX_MLA : ST_SUFFIX, comp, path);
		if (st_file_size(path) <= 4096)
			fail_msg("%s depth %u bounce %d mla %d: no object %s", v->engine, v->depth,
				 v->bounce, v->mla, path);
		st_flip(path, 100 + (long long)i, 0x04);
	}
	for (uint64_t i = 0; i < NP; i++)
		st_clear(pool, back[i]);
	struct hc_store_stats a = st_stats(st, NULL);
	int64_t lead = hc_store_get(st, keys, NP, back, res);
	struct hc_store_stats b = st_stats(st, NULL);
	assert_int_equal(lead, 0); /* page 0 is a victim */
	for (uint64_t i = 0; i < NP; i++) {
		int want = is_victim(i) ? -EBADMSG : 0;
		if (res[i] != want)
			fail_msg("%s depth %u bounce %d mla %d: page %llu result %d, expected %d",
				 v->engine, v->depth, v->bounce, v->mla, (unsigned long long)i,
				 res[i], want);
		if (!want)
			st_assert_page(pool, back[i], KV_ID, i);
	}
	assert_int_equal(b.hits - a.hits, NP - NVICTIMS);
	assert_int_equal(b.corrupt - a.corrupt, NVICTIMS);
	assert_int_equal(b.misses - a.misses, NVICTIMS);
	assert_int_equal(b.failures - a.failures, 0);
	hc_store_close(st);
	hc_pool_destroy(pool);
	free(keys);
	free(slots);
	free(back);
	free(res);
	st_rmrf(dir);
}

static void test_only_corrupt_pages_fail(void **state)
{
	(void)state;
	static const char *const engines[] = {"uring", "threads"};
	static const unsigned depths[] = {2, 64};
	for (size_t e = 0; e < 2; e++) {
		if (!engine_opens(engines[e]))
			continue;
		for (size_t d = 0; d < 2; d++)
			for (int bounce = 0; bounce < 2; bounce++)
				for (int mla = 0; mla < 2; mla++) {
					struct variant v = {engines[e], depths[d], bounce, mla};
					check_variant(&v);
				}
	}
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_only_corrupt_pages_fail),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
