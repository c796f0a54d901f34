/* v2 semantics (docs/SGLANG.md: v2 interface and hit policies) on the file and mem backends: set/get over
 * kv + mamba + swa + indexer in one call, pool isolation, exists_v2 with
 * all_pages and trailing_pages (gaps at the start, middle and end; kv
 * limiting; unregistered pools; the minimum), v1 exists stopping at the
 * first miss, per-page get results, and a logical anchor's markers. */
#include "store_test.h"

enum { KV_ID = 1, MAMBA_ID = 2, SWA_ID = 3, INDEXER_ID = 4 };

#define SLOTS 64
#define PS 8 /* tokens per page */

struct fx {
	bool file;
	char dir[PATH_MAX];
	struct hc_store *st;
	struct hc_pool *kv, *mamba, *swa, *idx;
};

/* A store with kv (or a logical anchor "anchor"), mamba, swa and indexer. */
static void fx_open(struct fx *f, bool file, bool logical)
{
	memset(f, 0, sizeof(*f));
	f->file = file;
	if (file) {
		st_mkdtemp(f->dir);
		f->st = st_open_file(f->dir, true, false, NULL);
	} else {
		f->st = st_open_mem(false);
	}
	struct hc_kv_geometry kg = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	struct hc_kv_geometry sg = st_kv_geo(HC_LAYOUT_PAGE_FIRST_DIRECT, false, SLOTS);
	struct hc_mamba_geometry mg = {.slots = SLOTS,
				       .layers = 2,
				       .temporal_bytes = 2048,
				       .nconv = 1,
				       .conv_bytes = {2048}};
	f->kv = logical ? st_anchor_pool(SLOTS, PS) : st_kv_pool(&kg);
	f->swa = st_kv_pool(&sg);
	f->mamba = st_mamba_pool(&mg);
	f->idx = st_indexer_pool(SLOTS, PS, 64 * 132);
	assert_int_equal(hc_store_register_pool(f->st, logical ? "anchor" : "kv", f->kv, true), 0);
	assert_int_equal(hc_store_register_pool(f->st, "mamba", f->mamba, false), 0);
	assert_int_equal(hc_store_register_pool(f->st, "swa", f->swa, false), 0);
	assert_int_equal(hc_store_register_pool(f->st, "indexer", f->idx, false), 0);
}

static void fx_close(struct fx *f)
{
	hc_store_close(f->st);
	hc_pool_destroy(f->kv);
	hc_pool_destroy(f->mamba);
	hc_pool_destroy(f->swa);
	hc_pool_destroy(f->idx);
	if (f->file)
		st_rmrf(f->dir);
}

static struct hc_pool *fx_pool(struct fx *f, const char *name, uint32_t *id)
{
	if (!strcmp(name, "kv") || !strcmp(name, "anchor")) {
		*id = KV_ID;
		return f->kv;
	}
	if (!strcmp(name, "mamba")) {
		*id = MAMBA_ID;
		return f->mamba;
	}
	if (!strcmp(name, "swa")) {
		*id = SWA_ID;
		return f->swa;
	}
	*id = INDEXER_ID;
	return f->idx;
}

/* Store page i of keys in pool where pattern[i] == '1' (from slot i). */
static void put_pattern(struct fx *f, const char *pool, const struct hc_key *keys,
			const char *pattern)
{
	uint32_t id;
	struct hc_pool *p = fx_pool(f, pool, &id);
	struct hc_key sel[SLOTS];
	uint64_t slots[SLOTS];
	size_t n = 0;
	for (size_t i = 0; pattern[i]; i++) {
		if (pattern[i] != '1')
			continue;
		if (hc_pool_page_bytes(p))
			st_fill(p, i, id, i);
		sel[n] = keys[i];
		slots[n++] = i;
	}
	int res[SLOTS];
	struct hc_pool_transfer t = {pool, sel, n, slots, HC_HIT_ALL_PAGES, res, NULL};
	assert_int_equal(hc_store_set_v2(f->st, &t, 1), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(res[i], 0);
}

/* exists_v2 of one transfer; returns the result, *kvh and *ph set. */
static int64_t exists1(struct fx *f, const struct hc_key *keys, size_t n, const char *pool,
		       enum hc_hit_policy policy, size_t tn, uint64_t *kvh, uint64_t *ph)
{
	struct hc_pool_transfer t = {pool, keys, tn, NULL, policy, NULL, NULL};
	*kvh = 12345;
	*ph = 12345;
	return hc_store_exists_v2(f->st, keys, n, &t, 1, kvh, ph);
}

/* ---- one call over four pools; isolation ---- */

static void v2_all_pools(bool file)
{
	struct fx f;
	fx_open(&f, file, false);
	struct hc_key keys[5];
	st_keys(1, 5, PS, keys);
	static const char *const pools[4] = {"kv", "mamba", "swa", "indexer"};
	uint64_t w[5] = {0, 1, 2, 3, 4}, r[5] = {40, 30, 20, 10, 5};
	int res[4][5];
	struct hc_pool_transfer t[4];
	for (int i = 0; i < 4; i++) {
		uint32_t id;
		struct hc_pool *p = fx_pool(&f, pools[i], &id);
		for (int j = 0; j < 5; j++)
			st_fill(p, w[j], id, (uint64_t)j);
		t[i] = (struct hc_pool_transfer){pools[i],         keys,   5,   w,
						 HC_HIT_ALL_PAGES, res[i], NULL};
	}
	assert_int_equal(hc_store_set_v2(f.st, t, 4), 0);
	for (int i = 0; i < 4; i++)
		t[i].pages = r;
	memset(res, 0x55, sizeof(res));
	assert_int_equal(hc_store_get_v2(f.st, t, 4), 5);
	for (int i = 0; i < 4; i++) {
		uint32_t id;
		struct hc_pool *p = fx_pool(&f, pools[i], &id);
		for (int j = 0; j < 5; j++) {
			assert_int_equal(res[i][j], 0);
			st_assert_page(p, r[j], id, (uint64_t)j);
		}
		struct hc_store_stats s = st_stats(f.st, pools[i]);
		assert_int_equal(s.pages_written, 5);
		assert_int_equal(s.pages_read, 5);
		assert_int_equal(s.hits, 5);
	}
	/* Per store = sum over pools. */
	struct hc_store_stats s = st_stats(f.st, NULL);
	assert_int_equal(s.pages_written, 20);
	assert_int_equal(s.pages_read, 20);
	assert_int_equal(s.set_batches, 1);
	assert_int_equal(s.get_batches, 1);
	uint64_t kvh, ph[4];
	for (int i = 0; i < 4; i++)
		t[i].policy = i == 1 ? HC_HIT_TRAILING_PAGES : HC_HIT_ALL_PAGES;
	t[1].n = 1;
	assert_int_equal(hc_store_exists_v2(f.st, keys, 5, t, 4, &kvh, ph), 5);
	assert_int_equal(kvh, 5);
	for (int i = 0; i < 4; i++)
		assert_int_equal(ph[i], 5);
	fx_close(&f);
}

static void test_all_pools(void **state)
{
	(void)state;
	v2_all_pools(true);
	v2_all_pools(false);
}

/* The same key under mamba and swa is two objects: one can be missing (or
 * deleted) while the other hits, and neither reads the other's bytes. */
static void v2_isolation(bool file)
{
	struct fx f;
	fx_open(&f, file, false);
	struct hc_key keys[3];
	st_keys(2, 3, PS, keys);
	put_pattern(&f, "kv", keys, "111");
	put_pattern(&f, "mamba", keys, "111");
	uint64_t kvh, ph;
	/* swa has nothing under the same keys. */
	assert_int_equal(exists1(&f, keys, 3, "swa", HC_HIT_ALL_PAGES, 3, &kvh, &ph), 0);
	assert_int_equal(kvh, 3);
	assert_int_equal(ph, 0);
	assert_int_equal(exists1(&f, keys, 3, "mamba", HC_HIT_ALL_PAGES, 3, &kvh, &ph), 3);
	uint64_t r[3] = {50, 51, 52};
	int res[3];
	struct hc_pool_transfer t = {"swa", keys, 3, r, HC_HIT_ALL_PAGES, res, NULL};
	assert_int_equal(hc_store_get_v2(f.st, &t, 1), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(res[i], -ENOENT);
	put_pattern(&f, "swa", keys, "111");
	assert_int_equal(exists1(&f, keys, 3, "swa", HC_HIT_ALL_PAGES, 3, &kvh, &ph), 3);

	if (file) {
		/* Delete mamba's objects of page 1: swa still hits there. */
		char path[PATH_MAX];
		st_obj_path(f.dir, &keys[1], ST_SUFFIX, "_mamba_temporal", path);
		assert_int_equal(unlink(path), 0);
		assert_int_equal(exists1(&f, keys, 3, "mamba", HC_HIT_ALL_PAGES, 3, &kvh, &ph), 1);
		assert_int_equal(exists1(&f, keys, 3, "swa", HC_HIT_ALL_PAGES, 3, &kvh, &ph), 3);
		t.pool = "mamba";
		t.pages = r;
		assert_int_equal(hc_store_get_v2(f.st, &t, 1), 1);
		assert_int_equal(res[0], 0);
		assert_int_equal(res[1], -ENOENT);
		assert_int_equal(res[2], 0);
		st_assert_page(f.mamba, r[0], MAMBA_ID, 0);
		st_assert_page(f.mamba, r[2], MAMBA_ID, 2);
	}
	/* Each pool reads its own bytes. */
	t.pool = "swa";
	assert_int_equal(hc_store_get_v2(f.st, &t, 1), 3);
	for (int i = 0; i < 3; i++)
		st_assert_page(f.swa, r[i], SWA_ID, (uint64_t)i);
	fx_close(&f);
}

static void test_isolation(void **state)
{
	(void)state;
	v2_isolation(true);
	v2_isolation(false);
}

/* ---- exists_v2 ---- */

struct pattern_case {
	const char *side; /* which pages of the side pool exist */
	int64_t all;      /* all_pages */
	int64_t trail1;   /* trailing_pages, N = 1 */
	int64_t trail3;   /* trailing_pages, N = 3 */
};

/* kv has all 10 pages. */
static const struct pattern_case patterns[] = {
	{"1111111111", 10, 10, 10}, {"0111111111", 0, 10, 10}, /* gap at the start */
	{"1111011111", 4, 10, 10},                             /* gap in the middle */
	{"1111111110", 9, 9, 9},                               /* gap at the end */
	{"1101101100", 2, 8, 2}, /* no run of 3; [0, 2) is the whole prefix */
	{"0011100000", 0, 5, 5}, /* [2, 5) */
	{"0110000000", 0, 3, 0}, /* [0, 3) misses page 0 */
	{"1110000000", 3, 3, 3},    {"0000000001", 0, 10, 0},  {"0000000000", 0, 0, 0},
};

static void v2_exists_patterns(bool file)
{
	struct fx f;
	fx_open(&f, file, false);
	for (size_t c = 0; c < sizeof(patterns) / sizeof(patterns[0]); c++) {
		const struct pattern_case *pc = &patterns[c];
		struct hc_key keys[10];
		st_keys(100 + (uint32_t)c, 10, PS, keys);
		put_pattern(&f, "kv", keys, "1111111111");
		put_pattern(&f, "swa", keys, pc->side);
		uint64_t kvh, ph;
		int64_t r = exists1(&f, keys, 10, "swa", HC_HIT_ALL_PAGES, 10, &kvh, &ph);
		if (r != pc->all || (int64_t)ph != pc->all || kvh != 10)
			fail_msg("%s all_pages: %lld (pool %llu, kv %llu), expected %lld", pc->side,
				 (long long)r, (unsigned long long)ph, (unsigned long long)kvh,
				 (long long)pc->all);
		r = exists1(&f, keys, 10, "swa", HC_HIT_TRAILING_PAGES, 1, &kvh, &ph);
		if (r != pc->trail1 || (int64_t)ph != pc->trail1 || kvh != 10)
			fail_msg("%s trailing N=1: %lld (pool %llu), expected %lld", pc->side,
				 (long long)r, (unsigned long long)ph, (long long)pc->trail1);
		/* N = max(1, keys in the transfer): 0 keys means 1. */
		r = exists1(&f, keys, 10, "swa", HC_HIT_TRAILING_PAGES, 0, &kvh, &ph);
		assert_int_equal(r, pc->trail1);
		r = exists1(&f, keys, 10, "swa", HC_HIT_TRAILING_PAGES, 3, &kvh, &ph);
		if (r != pc->trail3 || (int64_t)ph != pc->trail3)
			fail_msg("%s trailing N=3: %lld (pool %llu), expected %lld", pc->side,
				 (long long)r, (unsigned long long)ph, (long long)pc->trail3);
	}
	fx_close(&f);
}

static void test_exists_patterns(void **state)
{
	(void)state;
	v2_exists_patterns(true);
	v2_exists_patterns(false);
}

/* kv limits every pool: pages beyond the kv prefix do not count, even when
 * the side pool and later kv pages exist. */
static void v2_exists_kv_limit(bool file)
{
	struct fx f;
	fx_open(&f, file, false);
	struct hc_key keys[10];
	st_keys(7, 10, PS, keys);
	put_pattern(&f, "kv", keys, "1111110111");
	put_pattern(&f, "swa", keys, "1111111111");
	put_pattern(&f, "mamba", keys, "0000000011");
	uint64_t kvh, ph;
	assert_int_equal(exists1(&f, keys, 10, "swa", HC_HIT_ALL_PAGES, 10, &kvh, &ph), 6);
	assert_int_equal(kvh, 6);
	assert_int_equal(ph, 6);
	assert_int_equal(exists1(&f, keys, 10, "swa", HC_HIT_TRAILING_PAGES, 3, &kvh, &ph), 6);
	assert_int_equal(ph, 6);
	/* Mamba's states beyond the kv prefix are no use. */
	assert_int_equal(exists1(&f, keys, 10, "mamba", HC_HIT_TRAILING_PAGES, 1, &kvh, &ph), 0);
	assert_int_equal(ph, 0);
	/* A shorter query: n limits kv. */
	assert_int_equal(exists1(&f, keys, 4, "swa", HC_HIT_ALL_PAGES, 4, &kvh, &ph), 4);
	assert_int_equal(kvh, 4);
	/* No transfers: the kv prefix. */
	kvh = 0;
	assert_int_equal(hc_store_exists_v2(f.st, keys, 10, NULL, 0, &kvh, NULL), 6);
	assert_int_equal(kvh, 6);
	/* v1 exists agrees and stops at the first miss. */
	assert_int_equal(hc_store_exists(f.st, keys, 10), 6);
	fx_close(&f);
}

static void test_exists_kv_limit(void **state)
{
	(void)state;
	v2_exists_kv_limit(true);
	v2_exists_kv_limit(false);
}

/* The result is the minimum; an unregistered pool gives 0 and stops the
 * rest; so does any transfer whose result is 0. */
static void v2_exists_multi(bool file)
{
	struct fx f;
	fx_open(&f, file, false);
	struct hc_key keys[10];
	st_keys(8, 10, PS, keys);
	put_pattern(&f, "kv", keys, "1111111111");
	put_pattern(&f, "mamba", keys, "1101101100");
	put_pattern(&f, "swa", keys, "1111111011");
	put_pattern(&f, "indexer", keys, "0111111111");
	struct hc_pool_transfer t[4] = {
		{"mamba", keys, 1, NULL, HC_HIT_TRAILING_PAGES, NULL, NULL},
		{"swa", keys, 10, NULL, HC_HIT_ALL_PAGES, NULL, NULL},
		{"swa", keys, 2, NULL, HC_HIT_TRAILING_PAGES, NULL, NULL},
		{"indexer", keys, 9, NULL, HC_HIT_TRAILING_PAGES, NULL, NULL},
	};
	uint64_t kvh, ph[4];
	assert_int_equal(hc_store_exists_v2(f.st, keys, 10, t, 4, &kvh, ph), 7);
	assert_int_equal(kvh, 10);
	assert_int_equal(ph[0], 8);
	assert_int_equal(ph[1], 7);
	/* swa N=2: [8, 10) exist. */
	assert_int_equal(ph[2], 10);
	/* indexer, trailing with N = 9: [1, 10) exist. */
	assert_int_equal(ph[3], 10);
	/* With N = 10, [0, 10) misses page 0, and for p < 10 the window
	 * [0, p) holds page 0 too: 0, which is the result. */
	t[3].n = 10;
	assert_int_equal(hc_store_exists_v2(f.st, keys, 10, t, 4, &kvh, ph), 0);
	assert_int_equal(ph[0], 8);
	assert_int_equal(ph[3], 0);
	/* all_pages: page 0 is missing. */
	t[3].policy = HC_HIT_ALL_PAGES;
	assert_int_equal(hc_store_exists_v2(f.st, keys, 10, t, 4, &kvh, ph), 0);
	assert_int_equal(ph[3], 0);

	/* An unregistered pool: 0, and the transfers after it are not asked. */
	struct hc_pool_transfer u[3] = {
		{"swa", keys, 10, NULL, HC_HIT_ALL_PAGES, NULL, NULL},
		{"nope", keys, 10, NULL, HC_HIT_ALL_PAGES, NULL, NULL},
		{"mamba", keys, 1, NULL, HC_HIT_TRAILING_PAGES, NULL, NULL},
	};
	uint64_t uh[3] = {99, 99, 99};
	assert_int_equal(hc_store_exists_v2(f.st, keys, 10, u, 3, &kvh, uh), 0);
	assert_int_equal(kvh, 10);
	assert_int_equal(uh[0], 7);
	assert_int_equal(uh[1], 0);
	assert_int_equal(uh[2], 0);
	/* A transfer with result 0 stops the rest too. */
	struct hc_pool_transfer z[2] = {
		{"indexer", keys, 10, NULL, HC_HIT_ALL_PAGES, NULL, NULL},
		{"swa", keys, 10, NULL, HC_HIT_ALL_PAGES, NULL, NULL},
	};
	uint64_t zh[2] = {99, 99};
	assert_int_equal(hc_store_exists_v2(f.st, keys, 10, z, 2, &kvh, zh), 0);
	assert_int_equal(zh[0], 0);
	assert_int_equal(zh[1], 0);
	/* "kv" names the anchor. */
	struct hc_pool_transfer k = {"kv", keys, 10, NULL, HC_HIT_ALL_PAGES, NULL, NULL};
	assert_int_equal(hc_store_exists_v2(f.st, keys, 10, &k, 1, &kvh, zh), 10);
	assert_int_equal(zh[0], 10);
	/* kv 0: every pool 0. */
	struct hc_key other[3];
	st_keys(9, 3, PS, other);
	zh[0] = zh[1] = 99;
	assert_int_equal(hc_store_exists_v2(f.st, other, 3, z, 2, &kvh, zh), 0);
	assert_int_equal(kvh, 0);
	assert_int_equal(zh[0], 0);
	assert_int_equal(zh[1], 0);
	fx_close(&f);
}

static void test_exists_multi(void **state)
{
	(void)state;
	v2_exists_multi(true);
	v2_exists_multi(false);
}

/* ---- v1 exists and get ---- */

static void v1_leading(bool file)
{
	struct fx f;
	fx_open(&f, file, false);
	struct hc_key keys[6];
	st_keys(10, 6, PS, keys);
	put_pattern(&f, "kv", keys, "111011");
	/* exists stops at the first miss: later pages are not looked at. */
	struct hc_store_stats a = st_stats(f.st, "kv");
	assert_int_equal(hc_store_exists(f.st, keys, 6), 3);
	struct hc_store_stats b = st_stats(f.st, "kv");
	assert_int_equal(b.hits - a.hits, 3);
	assert_int_equal(b.misses - a.misses, 1);
	assert_int_equal(hc_store_exists(f.st, keys + 4, 2), 2);
	assert_int_equal(hc_store_exists(f.st, keys + 3, 3), 0);

	/* get: a result per page, returns the leading hits; pages after the
	 * miss are still read. */
	uint64_t r[6] = {40, 41, 42, 43, 44, 45};
	for (int i = 0; i < 6; i++)
		st_clear(f.kv, r[i]);
	int res[6];
	memset(res, 0x55, sizeof(res));
	assert_int_equal(hc_store_get(f.st, keys, 6, r, res), 3);
	static const int want[6] = {0, 0, 0, -ENOENT, 0, 0};
	for (int i = 0; i < 6; i++) {
		assert_int_equal(res[i], want[i]);
		if (!want[i])
			st_assert_page(f.kv, r[i], KV_ID, (uint64_t)i);
	}
	/* The missing page's slot was left alone. */
	size_t pb = hc_pool_page_bytes(f.kv);
	uint8_t *buf = malloc(pb), *zero = calloc(1, pb);
	assert_int_equal(hc_pool_gather(f.kv, r[3], buf, pb), 0);
	assert_memory_equal(buf, zero, pb);
	free(buf);
	free(zero);
	/* results may be NULL. */
	assert_int_equal(hc_store_get(f.st, keys, 6, r, NULL), 3);
	assert_int_equal(hc_store_get(f.st, keys + 4, 2, r, NULL), 2);
	/* get_v2 returns the first transfer's leading hits, with or without
	 * a results array. The second transfer reads into slots of its own:
	 * two transfers of one pool may not share a destination page (a get
	 * that repeats one fails -EINVAL, store.dup_dest). */
	uint64_t r2[2] = {46, 47};
	struct hc_pool_transfer t[2] = {
		{"kv", keys, 6, r, HC_HIT_ALL_PAGES, res, NULL},
		{"kv", keys + 4, 2, r2, HC_HIT_ALL_PAGES, NULL, NULL},
	};
	assert_int_equal(hc_store_get_v2(f.st, t, 2), 3);
	t[0].results = NULL;
	assert_int_equal(hc_store_get_v2(f.st, t, 2), 3);
	t[0] = t[1];
	assert_int_equal(hc_store_get_v2(f.st, t, 1), 2);
	fx_close(&f);
}

static void test_v1_leading(void **state)
{
	(void)state;
	v1_leading(true);
	v1_leading(false);
}

/* ---- a logical anchor ---- */

static void v2_logical_anchor(bool file)
{
	struct fx f;
	fx_open(&f, file, true);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(f.st, "anchor", &info), 0);
	assert_false(info.zero_copy);
	assert_int_equal(info.objects, 1);
	assert_int_equal(info.page_bytes, 0);
	assert_int_equal(hc_store_pool_info(f.st, "kv", &info), 0); /* "kv" = the anchor */
	assert_int_equal(info.page_bytes, 0);

	struct hc_key keys[6];
	st_keys(11, 6, PS, keys);
	/* Side pools have all six pages, the anchor's markers only three. */
	put_pattern(&f, "mamba", keys, "111111");
	put_pattern(&f, "indexer", keys, "111111");
	assert_int_equal(hc_store_exists(f.st, keys, 6), 0);
	uint64_t kvh, ph;
	assert_int_equal(exists1(&f, keys, 6, "indexer", HC_HIT_ALL_PAGES, 6, &kvh, &ph), 0);
	assert_int_equal(kvh, 0);
	put_pattern(&f, "anchor", keys, "111000");
	assert_int_equal(hc_store_exists(f.st, keys, 6), 3);
	assert_int_equal(exists1(&f, keys, 6, "indexer", HC_HIT_ALL_PAGES, 6, &kvh, &ph), 3);
	assert_int_equal(kvh, 3);
	assert_int_equal(ph, 3);
	assert_int_equal(exists1(&f, keys, 6, "mamba", HC_HIT_TRAILING_PAGES, 1, &kvh, &ph), 3);
	if (file) {
		/* A marker is an empty page: a trailer block, plain name. */
		char path[PATH_MAX];
		for (int i = 0; i < 6; i++) {
			st_obj_path(f.dir, &keys[i], ST_SUFFIX, "", path);
			st_assert_file(path, i < 3 ? (long long)st_obj_len(f.st, 0) : -1);
		}
		/* Deleting a marker gates the side pools again. */
		st_obj_path(f.dir, &keys[1], ST_SUFFIX, "", path);
		assert_int_equal(unlink(path), 0);
		assert_int_equal(exists1(&f, keys, 6, "indexer", HC_HIT_ALL_PAGES, 6, &kvh, &ph),
				 1);
		put_pattern(&f, "anchor", keys, "010000");
	}
	/* v1 get has no data to move. */
	uint64_t slots[6] = {10, 11, 12, 13, 14, 15};
	assert_int_equal(hc_store_get(f.st, keys, 3, slots, NULL), -EINVAL);
	assert_last_error_contains("anchor");
	/* get_v2: the markers hit, and side pools load their data. */
	int ra[6], ri[6];
	struct hc_pool_transfer t[2] = {
		{"anchor", keys, 6, slots, HC_HIT_ALL_PAGES, ra, NULL},
		{"indexer", keys, 6, slots, HC_HIT_ALL_PAGES, ri, NULL},
	};
	assert_int_equal(hc_store_get_v2(f.st, t, 2), 3);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(ra[i], i < 3 ? 0 : -ENOENT);
		assert_int_equal(ri[i], 0);
		st_assert_page(f.idx, slots[i], INDEXER_ID, (uint64_t)i);
	}
	fx_close(&f);
}

static void test_logical_anchor(void **state)
{
	(void)state;
	v2_logical_anchor(true);
	v2_logical_anchor(false);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_pools),       cmocka_unit_test(test_isolation),
		cmocka_unit_test(test_exists_patterns), cmocka_unit_test(test_exists_kv_limit),
		cmocka_unit_test(test_exists_multi),    cmocka_unit_test(test_v1_leading),
		cmocka_unit_test(test_logical_anchor),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
