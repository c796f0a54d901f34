/* kv_one_object_max_bytes: a page_first / page_first_direct MHA KV page of
 * at most that many bytes is one object of its flat page (K then V),
 * named "<key><suffix>" (a side pool's "_<pool>"), instead of "_k" and
 * "_v". Off (0, the default) keeps SGLang's and NIXL's names. Checked
 * here: the names with and without it and at its bound; pages round-trip
 * byte for byte through file (O_DIRECT and buffered) and mem stores, and
 * a restarted store reads them; MLA (one buffer) and the pools the key
 * is not about keep their objects; a page written split is a miss to a
 * store with the key on and the other way round; a layer_first page
 * under the same name is a miss by the trailer's geometry tag (layout),
 * never data, and is left alone by a set; bad values are refused with
 * the key named. */
#include "store_test.h"

#include <hicache/config.h>

enum { KV_ID = 1, SWA_ID = 2, MAMBA_ID = 3 };
#define NP 4
#define SLOTS 16
/* st_kv_geo's MHA page: 2 layers x 8 tokens x 2 heads x 64 x bf16, K and V. */
#define PAGE_BYTES 8192

static const char *layout_name(enum hc_kv_layout l)
{
	return hc_kv_layout_name(l);
}

/* A file store on dir with kv_one_object_max_bytes = max. */
static struct hc_store *open_max(const char *dir, bool direct, bool bounce, uint64_t max)
{
	char extra[96];
	snprintf(extra, sizeof(extra), "\"kv_one_object_max_bytes\": %llu",
		 (unsigned long long)max);
	return st_open_file(dir, direct, bounce, extra);
}

static struct hc_store *open_mem_max(uint64_t max)
{
	char json[96];
	snprintf(json, sizeof(json), "{\"kv_one_object_max_bytes\": %llu}",
		 (unsigned long long)max);
	struct hc_store *st;
	int rc = st_open_json("mem", json, ST_MODEL, 0, 1, false, &st);
	if (rc)
		fail_msg("open mem store %s: %s (%s)", json, hc_strerror(rc), hc_last_error());
	return st;
}

static void put(struct hc_store *st, struct hc_pool *pool, uint32_t id, const struct hc_key *keys)
{
	uint64_t pages[NP];
	int res[NP];
	for (uint64_t i = 0; i < NP; i++) {
		pages[i] = i;
		st_fill(pool, i, id, i);
	}
	assert_int_equal(hc_store_set(st, keys, NP, pages, res), 0);
	for (int i = 0; i < NP; i++)
		assert_int_equal(res[i], 0);
}

/* A get into slots SLOTS-1.. (marked 0x5a first): every page a hit with
 * its bytes, or every page a miss with result want and its slot as it
 * was (nothing reaches a page that fails). */
static void get_expect(struct hc_store *st, struct hc_pool *pool, uint32_t id,
		       const struct hc_key *keys, int want, const char *what)
{
	size_t len = hc_pool_page_bytes(pool);
	uint8_t *mark = malloc(len), *got = malloc(len);
	assert_non_null(mark);
	assert_non_null(got);
	memset(mark, 0x5a, len);
	uint64_t pages[NP];
	int res[NP];
	for (uint64_t i = 0; i < NP; i++) {
		pages[i] = SLOTS - 1 - i;
		assert_int_equal(hc_pool_scatter(pool, pages[i], mark, len), 0);
	}
	int got_n = hc_store_get(st, keys, NP, pages, res);
	if (got_n != (want ? 0 : NP))
		fail_msg("%s: get read %d of %d pages (result %d, wanted %d)", what, got_n, NP,
			 res[0], want);
	for (uint64_t i = 0; i < NP; i++) {
		if (res[i] != want)
			fail_msg("%s: page %llu result %d, wanted %d", what, (unsigned long long)i,
				 res[i], want);
		if (!want) {
			st_assert_page(pool, pages[i], id, i);
			continue;
		}
		assert_int_equal(hc_pool_gather(pool, pages[i], got, len), 0);
		if (memcmp(got, mark, len))
			fail_msg("%s: a missed page's slot was written", what);
	}
	free(mark);
	free(got);
}

static struct hc_store_pool_info info(struct hc_store *st, const char *pool)
{
	struct hc_store_pool_info i;
	assert_int_equal(hc_store_pool_info(st, pool, &i), 0);
	return i;
}

static bool has(const char *dir, const struct hc_key *key, const char *suffix, const char *comp)
{
	char path[PATH_MAX];
	st_obj_path(dir, key, suffix, comp, path);
	return st_file_size(path) >= 0;
}

static struct hc_mamba_geometry mamba_geo(void)
{
	struct hc_mamba_geometry g = {.slots = SLOTS,
				      .layers = 2,
				      .temporal_bytes = 2048,
				      .nconv = 2,
				      .conv_bytes = {2048, 6144}};
	return g;
}

/* With max, the anchor "kv" and side pool "swa" (page_first or _direct
 * MHA), "mamba" and a layer_first "lf" pool: which objects each page gets,
 * on disk and in hc_store_pool_info, zero-copy and forced bounce alike. */
static void check_names(const char *dir, enum hc_kv_layout layout, uint64_t max, bool bounce)
{
	struct hc_kv_geometry g = st_kv_geo(layout, false, SLOTS);
	struct hc_kv_geometry lg = st_kv_geo(HC_LAYOUT_LAYER_FIRST, false, SLOTS);
	struct hc_mamba_geometry mg = mamba_geo();
	struct hc_pool *kv = st_kv_pool(&g), *swa = st_kv_pool(&g), *lf = st_kv_pool(&lg);
	struct hc_pool *mamba = st_mamba_pool(&mg);
	assert_int_equal(hc_pool_page_bytes(kv), PAGE_BYTES);
	bool one = max >= PAGE_BYTES;
	struct hc_store *st = open_max(dir, true, bounce, max);
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	assert_int_equal(hc_store_register_pool(st, "swa", swa, false), 0);
	assert_int_equal(hc_store_register_pool(st, "mamba", mamba, false), 0);
	assert_int_equal(hc_store_register_pool(st, "lf", lf, false), 0);
	struct hc_store_pool_info ik = info(st, "kv"), is = info(st, "swa");
	assert_int_equal(ik.objects, one ? 1 : 2);
	assert_int_equal(is.objects, one ? 1 : 2);
	/* One object moves through a bounce slot that holds the flat page. */
	assert_int_equal(ik.zero_copy, !one && !bounce);
	if (one)
		assert_true(ik.slot_bytes >= PAGE_BYTES);
	assert_int_equal(info(st, "mamba").objects, 3);
	assert_int_equal(info(st, "lf").objects, 1);

	struct hc_key keys[NP];
	st_keys(7, NP, g.page_size, keys);
	uint64_t pages[NP];
	int rk[NP], rs[NP], rm[NP], rl[NP];
	for (uint64_t i = 0; i < NP; i++) {
		pages[i] = i;
		st_fill(kv, i, KV_ID, i);
		st_fill(swa, i, SWA_ID, i);
		st_fill(mamba, i, MAMBA_ID, i);
	}
	struct hc_pool_transfer t[4] = {
		{"kv", keys, NP, pages, HC_HIT_ALL_PAGES, rk, NULL},
		{"swa", keys, NP, pages, HC_HIT_ALL_PAGES, rs, NULL},
		{"mamba", keys, NP, pages, HC_HIT_ALL_PAGES, rm, NULL},
		{"lf", keys, NP, pages, HC_HIT_ALL_PAGES, rl, NULL},
	};
	assert_int_equal(hc_store_set_v2(st, t, 4), 0);
	hc_store_close(st);

	char what[128];
	snprintf(what, sizeof(what), "%s, max %llu%s", layout_name(layout), (unsigned long long)max,
		 bounce ? ", bounce" : "");
	for (int i = 0; i < NP; i++) {
		if (has(dir, &keys[i], ST_SUFFIX, "") != one ||
		    has(dir, &keys[i], ST_SUFFIX, "_swa") != one ||
		    has(dir, &keys[i], ST_SUFFIX, "_k") == one ||
		    has(dir, &keys[i], ST_SUFFIX, "_v") == one ||
		    has(dir, &keys[i], ST_SUFFIX, "_swa_k") == one ||
		    has(dir, &keys[i], ST_SUFFIX, "_swa_v") == one)
			fail_msg("%s: page %d has the wrong objects", what, i);
		assert_true(has(dir, &keys[i], ST_SUFFIX, "_mamba_temporal"));
		assert_true(has(dir, &keys[i], ST_SUFFIX, "_mamba_conv_1"));
		assert_true(has(dir, &keys[i], ST_SUFFIX, "_lf"));
	}
	/* kv, swa, mamba (3), lf */
	size_t want = NP * ((one ? 2 : 4) + 3 + 1);
	if (st_count(dir).files != want)
		fail_msg("%s: %zu files, expected %zu", what, st_count(dir).files, want);
	hc_pool_destroy(kv);
	hc_pool_destroy(swa);
	hc_pool_destroy(lf);
	hc_pool_destroy(mamba);
	st_empty_dir(dir);
}

static void test_names(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	static const enum hc_kv_layout layouts[] = {HC_LAYOUT_PAGE_FIRST,
						    HC_LAYOUT_PAGE_FIRST_DIRECT};
	/* Off, one byte short of the page, the page exactly, far above. */
	static const uint64_t maxes[] = {0, PAGE_BYTES - 1, PAGE_BYTES, 1u << 30};
	for (size_t l = 0; l < 2; l++)
		for (size_t m = 0; m < 4; m++)
			for (int bounce = 0; bounce < 2; bounce++)
				check_names(dir, layouts[l], maxes[m], bounce);
	st_rmrf(dir);
}

/* Pages through one store, then through a restarted one (another pool of
 * the same geometry), byte for byte. dir NULL: one mem store. */
static void round_trip(const char *dir, enum hc_kv_layout layout, bool direct)
{
	struct hc_kv_geometry g = st_kv_geo(layout, false, SLOTS);
	struct hc_pool *a = st_kv_pool(&g), *b = st_kv_pool(&g);
	struct hc_key keys[NP];
	st_keys(11, NP, g.page_size, keys);
	struct hc_store *st = dir ? open_max(dir, direct, false, PAGE_BYTES)
				  : open_mem_max(PAGE_BYTES);
	assert_int_equal(hc_store_register_pool(st, "kv", a, true), 0);
	assert_int_equal(info(st, "kv").objects, 1);
	put(st, a, KV_ID, keys);
	assert_int_equal(hc_store_exists(st, keys, NP), NP);
	char what[96];
	snprintf(what, sizeof(what), "%s %s%s", layout_name(layout), dir ? "file" : "mem",
		 dir && direct ? " O_DIRECT" : "");
	get_expect(st, a, KV_ID, keys, 0, what);
	if (dir) {
		assert_int_equal(st_count(dir).files, NP);
		hc_store_close(st);
		st = open_max(dir, direct, false, PAGE_BYTES);
	} else {
		assert_int_equal(hc_store_unregister_pool(st, "kv"), 0);
	}
	assert_int_equal(hc_store_register_pool(st, "kv", b, true), 0);
	get_expect(st, b, KV_ID, keys, 0, what);
	assert_int_equal(st_stats(st, NULL).corrupt, 0);
	hc_store_close(st);
	hc_pool_destroy(a);
	hc_pool_destroy(b);
	if (dir)
		st_empty_dir(dir);
}

static void test_round_trip(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	static const enum hc_kv_layout layouts[] = {HC_LAYOUT_PAGE_FIRST,
						    HC_LAYOUT_PAGE_FIRST_DIRECT};
	for (size_t l = 0; l < 2; l++) {
		round_trip(dir, layouts[l], true);
		round_trip(dir, layouts[l], false);
		round_trip(NULL, layouts[l], false);
	}
	st_rmrf(dir);
}

/* MLA page_first(_direct): one buffer, so one "_k" object, zero-copy,
 * with the key or without; each store reads the other's pages. */
static void test_mla_unchanged(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	static const enum hc_kv_layout layouts[] = {HC_LAYOUT_PAGE_FIRST,
						    HC_LAYOUT_PAGE_FIRST_DIRECT};
	for (size_t l = 0; l < 2; l++) {
		struct hc_kv_geometry g = st_kv_geo(layouts[l], true, SLOTS);
		struct hc_pool *pool = st_kv_pool(&g);
		struct hc_key k1[NP], k2[NP];
		st_keys(21, NP, g.page_size, k1);
		st_keys(22, NP, g.page_size, k2);
		struct hc_store *on = open_max(dir, true, false, 1u << 30);
		struct hc_store *off = open_max(dir, true, false, 0);
		assert_int_equal(hc_store_register_pool(on, "kv", pool, true), 0);
		assert_int_equal(hc_store_register_pool(off, "kv", pool, true), 0);
		struct hc_store_pool_info i_on = info(on, "kv"), i_off = info(off, "kv");
		assert_int_equal(i_on.objects, 1);
		assert_int_equal(i_off.objects, 1);
		assert_int_equal(i_on.zero_copy, i_off.zero_copy);
		assert_true(i_on.zero_copy);
		put(on, pool, KV_ID, k1);
		get_expect(off, pool, KV_ID, k1, 0, "MLA, on -> off");
		put(off, pool, KV_ID, k2);
		get_expect(on, pool, KV_ID, k2, 0, "MLA, off -> on");
		for (int i = 0; i < NP; i++) {
			assert_true(has(dir, &k1[i], ST_SUFFIX_MLA, "_k"));
			assert_false(has(dir, &k1[i], ST_SUFFIX_MLA, ""));
		}
		assert_int_equal(st_count(dir).files, 2 * NP);
		hc_store_close(on);
		hc_store_close(off);
		hc_pool_destroy(pool);
		st_empty_dir(dir);
	}
	st_rmrf(dir);
}

/* A page written split is a miss to a store with the key on, and one
 * written as one object a miss to a store without it: another name, so
 * nothing is read (no corrupt object either); then each writes its own
 * objects beside the other's, and both read their pages. */
static void test_split_vs_one(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	static const enum hc_kv_layout layouts[] = {HC_LAYOUT_PAGE_FIRST,
						    HC_LAYOUT_PAGE_FIRST_DIRECT};
	for (size_t l = 0; l < 2; l++) {
		struct hc_kv_geometry g = st_kv_geo(layouts[l], false, SLOTS);
		struct hc_pool *ps = st_kv_pool(&g), *po = st_kv_pool(&g);
		struct hc_key k1[NP], k2[NP];
		st_keys(31, NP, g.page_size, k1);
		st_keys(32, NP, g.page_size, k2);
		struct hc_store *split = open_max(dir, true, false, 0);
		struct hc_store *one = open_max(dir, true, false, PAGE_BYTES);
		assert_int_equal(hc_store_register_pool(split, "kv", ps, true), 0);
		assert_int_equal(hc_store_register_pool(one, "kv", po, true), 0);

		put(split, ps, KV_ID, k1);
		assert_int_equal(hc_store_exists(one, k1, NP), 0);
		get_expect(one, po, KV_ID, k1, -ENOENT, "split -> one");
		put(one, po, KV_ID, k2);
		assert_int_equal(hc_store_exists(split, k2, NP), 0);
		get_expect(split, ps, KV_ID, k2, -ENOENT, "one -> split");
		assert_int_equal(st_stats(one, NULL).corrupt, 0);
		assert_int_equal(st_stats(split, NULL).corrupt, 0);

		put(one, po, KV_ID, k1);
		put(split, ps, KV_ID, k2);
		get_expect(one, po, KV_ID, k1, 0, "one, after");
		get_expect(split, ps, KV_ID, k2, 0, "split, after");
		assert_int_equal(st_count(dir).files, 2 * NP * (1 + 2));
		hc_store_close(split);
		hc_store_close(one);
		hc_pool_destroy(ps);
		hc_pool_destroy(po);
		st_empty_dir(dir);
	}
	st_rmrf(dir);
}

/* A layer_first pool names its page as the one-object page_first one
 * ("<key><suffix>", same bytes): the layout in the trailer's geometry
 * tag makes each the other's miss (-EBADMSG, counted as corrupt), never
 * data, and a set over the other's object leaves it (-ENOTUNIQ). */
static void test_layout_tag(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	static const enum hc_kv_layout layouts[] = {HC_LAYOUT_PAGE_FIRST,
						    HC_LAYOUT_PAGE_FIRST_DIRECT};
	for (size_t l = 0; l < 2; l++) {
		struct hc_kv_geometry g = st_kv_geo(layouts[l], false, SLOTS);
		struct hc_kv_geometry lg = st_kv_geo(HC_LAYOUT_LAYER_FIRST, false, SLOTS);
		struct hc_pool *po = st_kv_pool(&g), *pl = st_kv_pool(&lg);
		assert_int_equal(hc_pool_page_bytes(pl), hc_pool_page_bytes(po));
		struct hc_key k1[NP], k2[NP];
		st_keys(41, NP, g.page_size, k1);
		st_keys(42, NP, g.page_size, k2);
		struct hc_store *one = open_max(dir, true, false, PAGE_BYTES);
		struct hc_store *lf = open_max(dir, true, false, PAGE_BYTES);
		assert_int_equal(hc_store_register_pool(one, "kv", po, true), 0);
		assert_int_equal(hc_store_register_pool(lf, "kv", pl, true), 0);

		put(lf, pl, KV_ID, k1);
		get_expect(one, po, KV_ID, k1, -EBADMSG, "layer_first -> one");
		put(one, po, KV_ID, k2);
		get_expect(lf, pl, KV_ID, k2, -EBADMSG, "one -> layer_first");
		assert_int_equal(st_stats(one, NULL).corrupt, NP);
		assert_int_equal(st_stats(lf, NULL).corrupt, NP);

		/* A set over the other layout's objects leaves them. */
		uint64_t pages[NP];
		int res[NP];
		for (uint64_t i = 0; i < NP; i++) {
			pages[i] = i;
			st_fill(po, i, KV_ID, 100 + i);
		}
		assert_int_equal(hc_store_set(one, k1, NP, pages, res), -ENOTUNIQ);
		for (int i = 0; i < NP; i++)
			assert_int_equal(res[i], -ENOTUNIQ);
		get_expect(lf, pl, KV_ID, k1, 0, "layer_first keeps its pages");
		get_expect(one, po, KV_ID, k2, 0, "one keeps its pages");
		assert_int_equal(st_count(dir).files, 2 * NP);
		hc_store_close(one);
		hc_store_close(lf);
		hc_pool_destroy(po);
		hc_pool_destroy(pl);
		st_empty_dir(dir);
	}
	st_rmrf(dir);
}

/* hc_config_create(json) fails -EINVAL naming the key. */
static void refused(const char *json)
{
	struct hc_config *cfg = NULL;
	int rc = hc_config_create(json, &cfg);
	if (rc != -EINVAL || !strstr(hc_last_error(), "kv_one_object_max_bytes"))
		fail_msg("%s: rc %d, message '%s'", json, rc, hc_last_error());
	assert_null(cfg);
}

static void test_bad_values(void **state)
{
	(void)state;
	refused("{\"kv_one_object_max_bytes\": -1}");
	refused("{\"kv_one_object_max_bytes\": 1.5}");
	refused("{\"kv_one_object_max_bytes\": \"64K\"}");
	refused("{\"kv_one_object_max_bytes\": \"65536\"}");
	refused("{\"kv_one_object_max_bytes\": true}");
	refused("{\"kv_one_object_max_bytes\": 1073741825}");
	refused("{\"kv_one_object_max_bytes\": 1e300}");
	/* The environment's value is checked too, and fails a store's open. */
	setenv("HICACHE_KV_ONE_OBJECT_MAX_BYTES", "64K", 1);
	refused(NULL);
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	char json[PATH_MAX + 64];
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s\"]}", dir);
	struct hc_store *st;
	assert_int_equal(st_open_json("file", json, ST_MODEL, 0, 1, false, &st), -EINVAL);
	assert_null(st);
	assert_non_null(strstr(hc_last_error(), "kv_one_object_max_bytes"));
	/* A good one in the environment applies; the JSON wins over it. */
	setenv("HICACHE_KV_ONE_OBJECT_MAX_BYTES", "8192", 1);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(st_open_json("file", json, ST_MODEL, 0, 1, false, &st), 0);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	assert_int_equal(info(st, "kv").objects, 1);
	hc_store_close(st);
	st = open_max(dir, true, false, 0);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	assert_int_equal(info(st, "kv").objects, 2);
	hc_store_close(st);
	unsetenv("HICACHE_KV_ONE_OBJECT_MAX_BYTES");
	/* The bounds themselves are accepted. */
	struct hc_config *cfg;
	assert_int_equal(hc_config_create("{\"kv_one_object_max_bytes\": 0}", &cfg), 0);
	hc_config_destroy(cfg);
	assert_int_equal(hc_config_create("{\"kv_one_object_max_bytes\": 1073741824}", &cfg), 0);
	hc_config_destroy(cfg);
	hc_pool_destroy(pool);
	st_rmrf(dir);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),         cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_mla_unchanged), cmocka_unit_test(test_split_vs_one),
		cmocka_unit_test(test_layout_tag),    cmocka_unit_test(test_bad_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
