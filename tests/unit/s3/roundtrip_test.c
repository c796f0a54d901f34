/* Round trips through a real S3 gateway: KV MHA and MLA in every layout,
 * zero-copy and bounce (object names and sizes as the file backend's,
 * under the prefix), and the side pools (Mamba temporal + conv, an indexer
 * whose pages are not a multiple of 4096, SWA) in both modes through v2;
 * pages read back into other slots than they were written from. */
#include "s3_test.h"

enum { KV_ID = 1, MAMBA_ID = 2, INDEXER_ID = 3, SWA_ID = 4 };

#define NPAGES 6
#define NSLOTS 16

/* HEAD status of an object of page key under the test prefix + sub. */
static long head(const char *sub, const struct hc_key *key, const char *suffix,
		 const char *component)
{
	char k[1024];
	s3t_key(sub, key, suffix, component, k, sizeof(k));
	return s3t_raw("HEAD", k, NULL, 0);
}

static void kv_case(enum hc_kv_layout layout, bool mla, bool bounce)
{
	char sub[64];
	snprintf(sub, sizeof(sub), "kv-%d-%d-%d/", (int)layout, mla, bounce);
	struct hc_store *st = s3t_open(sub, bounce, NULL);
	assert_int_equal(hc_store_alignment(st), 1);
	assert_false(hc_store_direct_io(st));
	assert_string_equal(hc_store_io_engine(st), "curl");
	struct hc_kv_geometry g = st_kv_geo(layout, mla, NSLOTS);
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "kv", &info), 0);
	/* The objects follow from the layout alone: K and V (MLA: K) for
	 * page_first and page_first_direct, one of the flat page for
	 * layer_first, zero-copy or bounced. No alignment to keep: every
	 * split layout is zero-copy unless bounce is forced. */
	bool split = layout != HC_LAYOUT_LAYER_FIRST;
	bool zero_copy = !bounce && split;
	assert_int_equal(info.zero_copy, zero_copy);
	assert_int_equal(info.objects, split ? (mla ? 1 : 2) : 1);

	struct hc_key keys[NPAGES];
	st_keys(300 + (uint32_t)layout * 4 + mla * 2 + bounce, NPAGES, g.page_size, keys);
	uint64_t wslots[NPAGES], rslots[NPAGES];
	int res[NPAGES];
	for (uint64_t p = 0; p < NPAGES; p++) {
		wslots[p] = 2 + p;
		rslots[p] = NSLOTS - 1 - 2 * p;
		st_fill(pool, wslots[p], KV_ID, p);
	}
	assert_int_equal(hc_store_exists(st, keys, NPAGES), 0);
	assert_int_equal(hc_store_set(st, keys, NPAGES, wslots, res), 0);
	for (int p = 0; p < NPAGES; p++)
		assert_int_equal(res[p], 0);
	assert_int_equal(hc_store_exists(st, keys, NPAGES), NPAGES);
	for (uint64_t s = 0; s < NSLOTS; s++)
		st_clear(pool, s);
	assert_int_equal(hc_store_get(st, keys, NPAGES, rslots, res), NPAGES);
	for (uint64_t p = 0; p < NPAGES; p++) {
		assert_int_equal(res[p], 0);
		st_assert_page(pool, rslots[p], KV_ID, p);
	}
	struct hc_store_stats s = st_stats(st, NULL);
	assert_int_equal(s.pages_written, NPAGES);
	assert_int_equal(s.pages_read, NPAGES);
	assert_int_equal(s.corrupt, 0);
	assert_int_equal(s.failures, 0);

	/* The names of the file backend, under the prefix; nothing else. */
	const char *suffix = mla ? ST_SUFFIX_MLA : ST_SUFFIX;
	for (int p = 0; p < NPAGES; p += NPAGES - 1) {
		assert_int_equal(head(sub, &keys[p], suffix, "_k"), split ? 200 : 404);
		assert_int_equal(head(sub, &keys[p], suffix, "_v"), split && !mla ? 200 : 404);
		assert_int_equal(head(sub, &keys[p], suffix, ""), split ? 404 : 200);
		assert_int_equal(head(NULL, &keys[p], suffix, split ? "_k" : ""), 404);
	}
	hc_store_close(st);
	hc_pool_destroy(pool);
}

static void test_kv_matrix(void **state)
{
	(void)state;
	const enum hc_kv_layout layouts[] = {HC_LAYOUT_LAYER_FIRST, HC_LAYOUT_PAGE_FIRST,
					     HC_LAYOUT_PAGE_FIRST_DIRECT};
	for (int l = 0; l < 3; l++)
		for (int mla = 0; mla < 2; mla++)
			for (int bounce = 0; bounce < 2; bounce++)
				kv_case(layouts[l], mla, bounce);
}

/* Side pools through v2, in zero-copy and bounce mode. */
static void side_case(bool bounce)
{
	char sub[32];
	snprintf(sub, sizeof(sub), "side-%d/", bounce);
	struct hc_store *st = s3t_open(sub, bounce, NULL);
	struct hc_kv_geometry kg = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, NSLOTS);
	struct hc_kv_geometry sg = st_kv_geo(HC_LAYOUT_PAGE_FIRST_DIRECT, false, NSLOTS);
	struct hc_mamba_geometry mg = {.slots = NSLOTS,
				       .layers = 2,
				       .temporal_bytes = 3000,
				       .nconv = 2,
				       .conv_bytes = {1000, 5000}};
	struct hc_pool *kv = st_kv_pool(&kg), *swa = st_kv_pool(&sg), *mamba = st_mamba_pool(&mg),
		       *idx = st_indexer_pool(NSLOTS, 8, 64 * 132);
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	assert_int_equal(hc_store_register_pool(st, "mamba", mamba, false), 0);
	assert_int_equal(hc_store_register_pool(st, "indexer", idx, false), 0);
	assert_int_equal(hc_store_register_pool(st, "swa", swa, false), 0);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "mamba", &info), 0);
	assert_int_equal(info.zero_copy, !bounce);
	assert_int_equal(info.objects, 3); /* temporal + 2 conv, bounced or not */

	struct hc_pool *pools[4] = {kv, mamba, idx, swa};
	const char *names[4] = {"kv", "mamba", "indexer", "swa"};
	uint32_t ids[4] = {KV_ID, MAMBA_ID, INDEXER_ID, SWA_ID};
	struct hc_key keys[NPAGES];
	st_keys(400 + bounce, NPAGES, 8, keys);
	uint64_t wslots[NPAGES], rslots[NPAGES];
	int res[4][NPAGES];
	struct hc_pool_transfer t[4];
	for (int i = 0; i < 4; i++) {
		for (uint64_t p = 0; p < NPAGES; p++) {
			wslots[p] = p;
			rslots[p] = NSLOTS - 1 - p;
			st_fill(pools[i], p, ids[i], p);
		}
		t[i] = (struct hc_pool_transfer){names[i],         keys,   NPAGES, wslots,
						 HC_HIT_ALL_PAGES, res[i], NULL};
	}
	assert_int_equal(hc_store_set_v2(st, t, 4), 0);
	uint64_t kv_hits, hits[3];
	assert_int_equal(hc_store_exists_v2(st, keys, NPAGES, &t[1], 3, &kv_hits, hits), NPAGES);
	assert_int_equal(kv_hits, NPAGES);
	for (int i = 0; i < 4; i++) {
		for (uint64_t s = 0; s < NSLOTS; s++)
			st_clear(pools[i], s);
		t[i].pages = rslots;
	}
	assert_int_equal(hc_store_get_v2(st, t, 4), NPAGES);
	for (int i = 0; i < 4; i++)
		for (uint64_t p = 0; p < NPAGES; p++) {
			assert_int_equal(res[i][p], 0);
			st_assert_page(pools[i], rslots[p], ids[i], p);
		}
	/* The same names zero-copy or bounced: one object per buffer, and
	 * none of a whole page ("", "_mamba", "_swa"). */
	static const char *const there[] =
		{"_k",       "_v",     "_mamba_temporal", "_mamba_conv_0", "_mamba_conv_1",
		 "_indexer", "_swa_k", "_swa_v"};
	static const char *const absent[] = {"", "_mamba", "_swa"};
	for (size_t i = 0; i < sizeof(there) / sizeof(there[0]); i++)
		if (head(sub, &keys[0], ST_SUFFIX, there[i]) != 200)
			fail_msg("bounce %d: no object '%s'", bounce, there[i]);
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		if (head(sub, &keys[0], ST_SUFFIX, absent[i]) != 404)
			fail_msg("bounce %d: an object '%s'", bounce, absent[i]);
	hc_store_close(st);
	for (int i = 0; i < 4; i++)
		hc_pool_destroy(pools[i]);
}

static void test_side_pools(void **state)
{
	(void)state;
	side_case(false);
	side_case(true);
}

int main(void)
{
	int rc = s3t_setup("roundtrip");
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kv_matrix),
		cmocka_unit_test(test_side_pools),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
