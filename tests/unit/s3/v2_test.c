/* v2 semantics on the S3 backend: set/get over kv + mamba + indexer in one
 * call, exists_v2 with all_pages and trailing_pages when side pools have
 * gaps, per-page get results for a partly stored prefix, and a logical
 * anchor whose pages are marker objects. */
#include "s3_test.h"

enum { KV_ID = 1, MAMBA_ID = 2, INDEXER_ID = 3 };

#define SLOTS 32
#define N 10
#define PS 8

struct fx {
	struct hc_store *st;
	struct hc_pool *kv, *mamba, *idx;
};

static void fx_open(struct fx *f, const char *sub, bool logical)
{
	f->st = s3t_open(sub, false, NULL);
	struct hc_kv_geometry kg = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	struct hc_mamba_geometry mg = {.slots = SLOTS,
				       .layers = 2,
				       .temporal_bytes = 2048,
				       .nconv = 1,
				       .conv_bytes = {2048}};
	f->kv = logical ? st_anchor_pool(SLOTS, PS) : st_kv_pool(&kg);
	f->mamba = st_mamba_pool(&mg);
	f->idx = st_indexer_pool(SLOTS, PS, 64 * 132);
	assert_int_equal(hc_store_register_pool(f->st, logical ? "anchor" : "kv", f->kv, true), 0);
	assert_int_equal(hc_store_register_pool(f->st, "mamba", f->mamba, false), 0);
	assert_int_equal(hc_store_register_pool(f->st, "indexer", f->idx, false), 0);
}

static void fx_close(struct fx *f)
{
	hc_store_close(f->st);
	hc_pool_destroy(f->kv);
	hc_pool_destroy(f->mamba);
	hc_pool_destroy(f->idx);
}

/* Store the pages i of pool where pattern[i] == '1', from slot i. */
static void put_pattern(struct fx *f, const char *pool, struct hc_pool *p, uint32_t id,
			const struct hc_key *keys, const char *pattern)
{
	struct hc_key sel[N];
	uint64_t slots[N];
	size_t n = 0;
	for (size_t i = 0; pattern[i]; i++) {
		if (pattern[i] != '1')
			continue;
		if (hc_pool_kind(p) != HC_POOL_ANCHOR)
			st_fill(p, i, id, i);
		sel[n] = keys[i];
		slots[n++] = i;
	}
	struct hc_pool_transfer t = {pool, sel, n, slots, HC_HIT_ALL_PAGES, NULL, NULL};
	assert_int_equal(hc_store_set_v2(f->st, &t, 1), 0);
}

static void test_exists_policies(void **state)
{
	(void)state;
	struct fx f;
	fx_open(&f, "policies/", false);
	struct hc_key keys[N];
	st_keys(7, N, PS, keys);
	put_pattern(&f, "kv", f.kv, KV_ID, keys, "1111111100");          /* kv: 8 pages */
	put_pattern(&f, "mamba", f.mamba, MAMBA_ID, keys, "0001001100"); /* mamba at 3, 6, 7 */
	put_pattern(&f, "indexer", f.idx, INDEXER_ID, keys, "1111101111");

	/* all_pages on the indexer: its first gap (page 5) limits the prefix. */
	struct hc_pool_transfer all = {"indexer", NULL, 0, NULL, HC_HIT_ALL_PAGES, NULL, NULL};
	uint64_t kv_hits = 0, hits[2];
	assert_int_equal(hc_store_exists_v2(f.st, keys, N, &all, 1, &kv_hits, hits), 5);
	assert_int_equal(kv_hits, 8);
	assert_int_equal(hits[0], 5);
	/* trailing_pages, 1 page: the longest prefix <= 8 whose last page has mamba. */
	struct hc_pool_transfer trail[2] = {
		{"mamba", NULL, 1, NULL, HC_HIT_TRAILING_PAGES, NULL, NULL},
		{"indexer", NULL, 0, NULL, HC_HIT_ALL_PAGES, NULL, NULL},
	};
	assert_int_equal(hc_store_exists_v2(f.st, keys, N, trail, 1, &kv_hits, hits), 8);
	assert_int_equal(hits[0], 8);
	/* Two trailing pages: pages 6, 7 -> 8; with the indexer: min(8, 5). */
	trail[0].n = 2;
	assert_int_equal(hc_store_exists_v2(f.st, keys, N, trail, 2, &kv_hits, hits), 5);
	assert_int_equal(hits[0], 8);
	assert_int_equal(hits[1], 5);
	/* Three trailing pages exist nowhere in a row. */
	trail[0].n = 3;
	assert_int_equal(hc_store_exists_v2(f.st, keys, N, trail, 1, &kv_hits, hits), 0);
	/* An unregistered pool gives 0. */
	struct hc_pool_transfer ghost = {"ghost", NULL, 0, NULL, HC_HIT_ALL_PAGES, NULL, NULL};
	assert_int_equal(hc_store_exists_v2(f.st, keys, N, &ghost, 1, &kv_hits, hits), 0);
	/* v1 exists stops at the first kv miss. */
	assert_int_equal(hc_store_exists(f.st, keys, N), 8);

	/* get_v2: per-page results follow what is stored; hits are leading kv. */
	for (uint64_t s = 0; s < SLOTS; s++) {
		st_clear(f.kv, s);
		st_clear(f.mamba, s);
	}
	uint64_t rslots[N];
	int kres[N], mres[N];
	for (int i = 0; i < N; i++)
		rslots[i] = 20 + (uint64_t)i;
	struct hc_pool_transfer get[2] = {
		{"kv", keys, N, rslots, HC_HIT_ALL_PAGES, kres, NULL},
		{"mamba", keys, N, rslots, HC_HIT_ALL_PAGES, mres, NULL},
	};
	assert_int_equal(hc_store_get_v2(f.st, get, 2), 8);
	for (int i = 0; i < N; i++) {
		assert_int_equal(kres[i], i < 8 ? 0 : -ENOENT);
		bool m = i == 3 || i == 6 || i == 7;
		assert_int_equal(mres[i], m ? 0 : -ENOENT);
		if (i < 8)
			st_assert_page(f.kv, rslots[i], KV_ID, (uint64_t)i);
		if (m)
			st_assert_page(f.mamba, rslots[i], MAMBA_ID, (uint64_t)i);
	}
	fx_close(&f);
}

static void test_logical_anchor(void **state)
{
	(void)state;
	struct fx f;
	fx_open(&f, "anchor/", true);
	struct hc_key keys[N];
	st_keys(8, N, PS, keys);
	put_pattern(&f, "anchor", f.kv, KV_ID, keys, "1111110000");
	put_pattern(&f, "mamba", f.mamba, MAMBA_ID, keys, "1111111111");
	/* Markers gate the side pools. */
	assert_int_equal(hc_store_exists(f.st, keys, N), 6);
	struct hc_pool_transfer m = {"mamba", NULL, 0, NULL, HC_HIT_ALL_PAGES, NULL, NULL};
	uint64_t kv_hits, hits[1];
	assert_int_equal(hc_store_exists_v2(f.st, keys, N, &m, 1, &kv_hits, hits), 6);
	/* The marker object is one trailer block. */
	char k[1024];
	s3t_key("anchor/", &keys[0], ST_SUFFIX, "", k, sizeof(k));
	assert_int_equal(s3t_raw("HEAD", k, NULL, 0), 200);
	/* v1 get on a logical anchor is refused. */
	uint64_t slots[1] = {0};
	assert_int_equal(hc_store_get(f.st, keys, 1, slots, NULL), -EINVAL);
	fx_close(&f);
}

int main(void)
{
	int rc = s3t_setup("v2");
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exists_policies),
		cmocka_unit_test(test_logical_anchor),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
