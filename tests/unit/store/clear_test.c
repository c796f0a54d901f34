/* hc_store_clear: every object of this store's registered pools goes,
 * keys' and names' alike, in every base dir and bucket (file) or in memory
 * (mem); other instances' objects stay: another rank, another model (also
 * one whose suffix ends with ours), another layout's names, an
 * unregistered pool's, foreign files and temp files. It returns how many
 * it deleted; the store works on after it. */
#include "store_test.h"

enum { KV_ID = 1, MAMBA_ID = 2, SWA_ID = 3 };
#define NP 5

static void put(struct hc_store *st, const char *pool, struct hc_pool *p, uint32_t id,
		const struct hc_key *keys, const char *const *names, size_t n)
{
	uint64_t w[NP];
	for (size_t i = 0; i < n; i++) {
		w[i] = i;
		st_fill(p, w[i], id, i);
	}
	struct hc_pool_transfer t = {pool, names ? NULL : keys, n, w, HC_HIT_ALL_PAGES, NULL,
				     names};
	assert_int_equal(hc_store_set_v2(st, &t, 1), 0);
}

/* Leading pages of pool that exist: the anchor by exists, side pools by
 * a get (exists_v2 only asks side pools within the anchor's prefix). */
static int64_t count(struct hc_store *st, const char *pool, const struct hc_key *keys, size_t n)
{
	if (!strcmp(pool, "kv"))
		return hc_store_exists(st, keys, n);
	uint64_t r[NP];
	for (size_t i = 0; i < n; i++)
		r[i] = i;
	struct hc_pool_transfer t = {pool, keys, n, r, HC_HIT_ALL_PAGES, NULL, NULL};
	int64_t got = hc_store_get_v2(st, &t, 1);
	assert_true(got >= 0);
	return got;
}

static unsigned objects(struct hc_store *st, const char *pool)
{
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, pool, &info), 0);
	return info.objects;
}

static struct hc_store *open_in(const char *json_dirs, const char *model, uint32_t rank,
				uint32_t size, bool bounce)
{
	char json[2 * PATH_MAX + 128];
	snprintf(json, sizeof(json), "{\"dirs\": %s, \"l3_cleaner_interval_s\": 0}", json_dirs);
	struct hc_store *st;
	assert_int_equal(st_open_json("file", json, model, rank, size, bounce, &st), 0);
	return st;
}

static void test_file(void **state)
{
	(void)state;
	char d0[PATH_MAX], d1[PATH_MAX], dirs[2 * PATH_MAX + 16];
	st_mkdtemp(d0);
	st_mkdtemp(d1);
	snprintf(dirs, sizeof(dirs), "[\"%s\", \"%s\"]", d0, d1);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, NP);
	struct hc_mamba_geometry mg = {.slots = NP,
				       .layers = 1,
				       .temporal_bytes = 4096,
				       .nconv = 1,
				       .conv_bytes = {4096}};
	struct hc_pool *kv = st_kv_pool(&g), *mamba = st_mamba_pool(&mg);
	struct hc_pool *swa = st_indexer_pool(NP, 8, 3000);
	struct hc_key keys[NP], mkeys[NP];
	st_keys(1, NP, 8, keys);
	st_keys(2, NP, 1, mkeys);
	static const char *const names[2] = {"p0", "p1"};

	struct hc_store *a = open_in(dirs, ST_MODEL, 0, 1, false);
	assert_int_equal(hc_store_register_pool(a, "kv", kv, true), 0);
	assert_int_equal(hc_store_register_pool(a, "mamba", mamba, false), 0);
	assert_int_equal(hc_store_register_pool(a, "swa", swa, false), 0);
	put(a, "kv", kv, KV_ID, keys, NULL, NP);
	put(a, "kv", kv, KV_ID, NULL, names, 2);
	put(a, "mamba", mamba, MAMBA_ID, mkeys, NULL, NP);
	put(a, "swa", swa, SWA_ID, keys, NULL, NP);
	int64_t mine = (NP + 2) * objects(a, "kv") + NP * objects(a, "mamba") + NP;

	/* Others in the same dirs: rank 1 of 2; a model whose suffix ends
	 * with ours ("_x_org-m-7b_0_1"); a bounce store (which names its
	 * pages as a zero-copy one does: they are a's objects); a pool this
	 * store does not have. */
	const char *models[2] = {ST_MODEL, "x_" ST_MODEL};
	struct hc_store *other[4] = {
		open_in(dirs, models[0], 1, 2, false),
		open_in(dirs, models[1], 0, 1, false),
		open_in(dirs, models[0], 0, 1, true),
		open_in(dirs, models[0], 0, 1, false),
	};
	for (int i = 0; i < 3; i++) {
		assert_int_equal(hc_store_register_pool(other[i], "kv", kv, true), 0);
		put(other[i], "kv", kv, KV_ID, keys, NULL, NP);
	}
	assert_int_equal(hc_store_register_pool(other[3], "ssm", mamba, false), 0);
	put(other[3], "ssm", mamba, MAMBA_ID, mkeys, NULL, NP);
	/* A foreign file and a temp file. */
	char foreign[PATH_MAX + 16], temp[PATH_MAX + 32];
	snprintf(foreign, sizeof(foreign), "%s/00/README", d1);
	snprintf(temp, sizeof(temp), "%s/01/.tmp.0123456789abcdef.1.1", d0);
	FILE *f = fopen(foreign, "w");
	fclose(f);
	f = fopen(temp, "w");
	fclose(f);
	size_t files = st_count(d0).files + st_count(d1).files;

	assert_int_equal(hc_store_clear(a), mine);
	assert_int_equal(st_count(d0).files + st_count(d1).files, files - (size_t)mine);
	assert_int_equal(count(a, "kv", keys, NP), 0);
	assert_int_equal(hc_store_exists_named(a, names, 2), 0);
	assert_int_equal(count(a, "mamba", mkeys, NP), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(count(other[i], "kv", keys, NP), NP);
	assert_int_equal(count(other[2], "kv", keys, NP), 0);
	/* ssm's objects ("_ssm_0", "_ssm_1" or "_ssm") are not a's pools'. */
	assert_int_equal(count(other[3], "ssm", mkeys, NP), NP);
	assert_true(st_file_size(foreign) == 0 && st_file_size(temp) == 0);
	/* Nothing left to clear; the store works on. */
	assert_int_equal(hc_store_clear(a), 0);
	put(a, "kv", kv, KV_ID, keys, NULL, NP);
	assert_int_equal(count(a, "kv", keys, NP), NP);
	for (int i = 0; i < 4; i++)
		hc_store_close(other[i]);
	hc_store_close(a);
	hc_pool_destroy(kv);
	hc_pool_destroy(mamba);
	hc_pool_destroy(swa);
	st_rmrf(d0);
	st_rmrf(d1);
}

static void test_mem(void **state)
{
	(void)state;
	struct hc_store *st = st_open_mem(false);
	assert_int_equal(hc_store_clear(st), 0); /* no pools: nothing is ours */
	assert_int_equal(hc_store_clear(NULL), -EINVAL);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, NP);
	struct hc_pool *kv = st_kv_pool(&g), *side = st_indexer_pool(NP, 8, 64);
	struct hc_key keys[NP];
	st_keys(3, NP, 8, keys);
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	assert_int_equal(hc_store_register_pool(st, "side", side, false), 0);
	put(st, "kv", kv, KV_ID, keys, NULL, NP);
	put(st, "side", side, SWA_ID, keys, NULL, NP);
	/* An unregistered pool's objects are not the store's any more. */
	assert_int_equal(hc_store_unregister_pool(st, "side"), 0);
	assert_int_equal(hc_store_clear(st), NP * objects(st, "kv"));
	assert_int_equal(count(st, "kv", keys, NP), 0);
	assert_int_equal(hc_store_register_pool(st, "side", side, false), 0);
	put(st, "kv", kv, KV_ID, keys, NULL, NP);
	assert_int_equal(count(st, "side", keys, NP), NP);
	assert_int_equal(hc_store_clear(st), NP * objects(st, "kv") + NP);
	assert_int_equal(count(st, "kv", keys, NP), 0);
	hc_store_close(st);
	hc_pool_destroy(kv);
	hc_pool_destroy(side);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file),
		cmocka_unit_test(test_mem),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
