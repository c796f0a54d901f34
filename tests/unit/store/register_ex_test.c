/* Registration options (hc_store_register_pool_ex) and unregistering:
 * sharing AUTO / RANK_SHARDED / RANK_REPLICATED and their names on disk
 * (replicated pools write only on rank 0, and report success elsewhere),
 * a suffix override and its checks, names that would pass NAME_MAX, a
 * per-pool force_bounce; hc_store_unregister_pool: later calls fail as
 * for a pool never registered, the name and the anchor role are free
 * again, and the objects stay. */
#include "store_test.h"

enum { KV_ID = 1, MAMBA_ID = 2 };
#define NP 3

static struct hc_pool_reg reg_of(enum hc_pool_sharing sharing, const char *suffix, bool anchor)
{
	struct hc_pool_reg r;
	hc_pool_reg_init(&r, sizeof(r));
	r.sharing = sharing;
	r.suffix = suffix;
	r.anchor = anchor;
	return r;
}

/* Write NP pages of pool `name` (v2), results all 0. */
static void put(struct hc_store *st, const char *name, struct hc_pool *pool, uint32_t id,
		const struct hc_key *keys)
{
	uint64_t w[NP];
	int res[NP];
	for (int i = 0; i < NP; i++) {
		w[i] = (uint64_t)i;
		st_fill(pool, w[i], id, (uint64_t)i);
	}
	memset(res, 0x55, sizeof(res));
	struct hc_pool_transfer t = {name, keys, NP, w, HC_HIT_ALL_PAGES, res, NULL};
	assert_int_equal(hc_store_set_v2(st, &t, 1), 0);
	for (int i = 0; i < NP; i++)
		assert_int_equal(res[i], 0);
}

static struct hc_store *open_rank(const char *dir, uint32_t rank, uint32_t size)
{
	char json[PATH_MAX + 128];
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s\"], \"l3_cleaner_interval_s\": 0}", dir);
	struct hc_store *st;
	/* Bounce: the same objects whatever the file system's alignment. */
	assert_int_equal(st_open_json("file", json, ST_MODEL, rank, size, true, &st), 0);
	return st;
}

static void test_sharing(void **state)
{
	(void)state;
	char dir[PATH_MAX], path[PATH_MAX];
	st_mkdtemp(dir);
	struct hc_kv_geometry mg = st_kv_geo(HC_LAYOUT_LAYER_FIRST, true,
					     8); /* bounce: one object */
	struct hc_kv_geometry hg = st_kv_geo(HC_LAYOUT_LAYER_FIRST, false, 8);
	struct hc_mamba_geometry mb = {.slots = 8, .layers = 1, .temporal_bytes = 100};
	struct hc_pool *mla = st_kv_pool(&mg), *mha = st_kv_pool(&hg), *mamba = st_mamba_pool(&mb);
	struct hc_key keys[NP];
	st_keys(1, NP, 8, keys);
	struct hc_key mkeys[NP];
	st_keys(2, NP, 1, mkeys);

	/* Rank 1 of 2: AUTO gives MLA KV the shared suffix, written by rank 0
	 * only (success here, nothing on disk); a replicated Mamba pool does
	 * the same; a sharded MLA pool writes under the rank's suffix. */
	struct hc_store *r1 = open_rank(dir, 1, 2);
	struct hc_pool_reg r = reg_of(HC_POOL_SHARING_AUTO, NULL, true);
	assert_int_equal(hc_store_register_pool_ex(r1, "kv", mla, &r), 0);
	r = reg_of(HC_POOL_RANK_REPLICATED, NULL, false);
	assert_int_equal(hc_store_register_pool_ex(r1, "mamba", mamba, &r), 0);
	r = reg_of(HC_POOL_RANK_SHARDED, NULL, false);
	assert_int_equal(hc_store_register_pool_ex(r1, "mla2", mla, &r), 0);
	put(r1, "kv", mla, KV_ID, keys);
	put(r1, "mamba", mamba, MAMBA_ID, mkeys);
	put(r1, "mla2", mla, KV_ID, keys);
	int res[NP];
	uint64_t w[NP] = {0, 1, 2};
	assert_int_equal(hc_store_set(r1, keys, NP, w, res), 0);
	for (int i = 0; i < NP; i++) {
		assert_int_equal(res[i], 0);
		st_obj_path(dir, &keys[i], ST_SUFFIX_MLA, "", path);
		st_assert_file(path, -1);
		st_obj_path(dir, &mkeys[i], ST_SUFFIX_MLA, "_mamba_temporal", path);
		st_assert_file(path, -1);
		st_obj_path(dir, &keys[i], "_" ST_MODEL_SAN "_1_2", "_mla2", path);
		st_assert_file(path, st_obj_len(r1, hc_pool_page_bytes(mla)));
	}
	hc_store_close(r1);

	/* Rank 0 writes them, under the shared suffix; MHA AUTO is sharded. */
	struct hc_store *r0 = open_rank(dir, 0, 2);
	r = reg_of(HC_POOL_SHARING_AUTO, NULL, true);
	assert_int_equal(hc_store_register_pool_ex(r0, "kv", mla, &r), 0);
	r = reg_of(HC_POOL_RANK_REPLICATED, NULL, false);
	assert_int_equal(hc_store_register_pool_ex(r0, "mamba", mamba, &r), 0);
	r = reg_of(HC_POOL_SHARING_AUTO, NULL, false);
	assert_int_equal(hc_store_register_pool_ex(r0, "mha", mha, &r), 0);
	put(r0, "kv", mla, KV_ID, keys);
	put(r0, "mamba", mamba, MAMBA_ID, mkeys);
	put(r0, "mha", mha, KV_ID, keys);
	for (int i = 0; i < NP; i++) {
		st_obj_path(dir, &keys[i], ST_SUFFIX_MLA, "", path);
		st_assert_file(path, st_obj_len(r0, hc_pool_page_bytes(mla)));
		st_obj_path(dir, &mkeys[i], ST_SUFFIX_MLA, "_mamba_temporal", path);
		st_assert_file(path, st_obj_len(r0, 100));
		st_obj_path(dir, &keys[i], "_" ST_MODEL_SAN "_0_2", "_mha", path);
		st_assert_file(path, st_obj_len(r0, hc_pool_page_bytes(mha)));
	}
	hc_store_close(r0);

	/* Rank 1 reads what rank 0 wrote for both replicated pools. */
	r1 = open_rank(dir, 1, 2);
	r = reg_of(HC_POOL_SHARING_AUTO, NULL, true);
	assert_int_equal(hc_store_register_pool_ex(r1, "kv", mla, &r), 0);
	r = reg_of(HC_POOL_RANK_REPLICATED, NULL, false);
	assert_int_equal(hc_store_register_pool_ex(r1, "mamba", mamba, &r), 0);
	uint64_t rd[NP] = {5, 6, 7};
	for (int i = 0; i < NP; i++) {
		st_clear(mla, rd[i]);
		st_clear(mamba, rd[i]);
	}
	assert_int_equal(hc_store_get(r1, keys, NP, rd, res), NP);
	struct hc_pool_transfer t = {"mamba", mkeys, NP, rd, HC_HIT_ALL_PAGES, res, NULL};
	assert_int_equal(hc_store_get_v2(r1, &t, 1), NP);
	for (int i = 0; i < NP; i++) {
		st_assert_page(mla, rd[i], KV_ID, (uint64_t)i);
		st_assert_page(mamba, rd[i], MAMBA_ID, (uint64_t)i);
	}
	/* A sharing value that is none of the three. */
	r = reg_of((enum hc_pool_sharing)7, NULL, false);
	assert_int_equal(hc_store_register_pool_ex(r1, "x", mha, &r), -EINVAL);
	assert_last_error_contains("sharing");
	hc_store_close(r1);
	hc_pool_destroy(mla);
	hc_pool_destroy(mha);
	hc_pool_destroy(mamba);
	st_rmrf(dir);
}

static void test_suffix(void **state)
{
	(void)state;
	char dir[PATH_MAX], path[PATH_MAX];
	st_mkdtemp(dir);
	struct hc_store *st = st_open_file(dir, false, false, NULL);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_LAYER_FIRST, false, 8); /* bounce */
	struct hc_pool *kv = st_kv_pool(&g);
	struct hc_key keys[NP];
	st_keys(3, NP, 8, keys);

	/* Checked: no '/', no control byte, not too long. */
	struct hc_pool_reg r = reg_of(HC_POOL_SHARING_AUTO, "_m/x", true);
	assert_int_equal(hc_store_register_pool_ex(st, "kv", kv, &r), -EINVAL);
	assert_last_error_contains("'/'");
	r.suffix = "_m\nx";
	assert_int_equal(hc_store_register_pool_ex(st, "kv", kv, &r), -EINVAL);
	assert_last_error_contains("control byte");
	char longs[HC_SUFFIX_MAX + 1];
	memset(longs, 'a', HC_SUFFIX_MAX);
	longs[HC_SUFFIX_MAX] = '\0';
	r.suffix = longs;
	assert_int_equal(hc_store_register_pool_ex(st, "kv", kv, &r), -EINVAL);
	assert_last_error_contains("longer than");
	/* Fits HC_SUFFIX_MAX but not NAME_MAX with a long pool's component:
	 * 64 + 170 + "_<30 chars>" = 265 bytes. */
	longs[170] = '\0';
	r.suffix = longs;
	r.anchor = false;
	assert_int_equal(hc_store_register_pool_ex(st, "abcdefghijklmnopqrstuvwxyz0123", kv, &r),
			 -EINVAL);
	assert_last_error_contains("265 bytes");
	/* As the anchor (component "") it fits. */
	r.anchor = true;
	assert_int_equal(hc_store_register_pool_ex(st, "kv", kv, &r), 0);
	assert_int_equal(hc_store_unregister_pool(st, "kv"), 0);

	/* Used verbatim: pipeline ranks appended. */
	r = reg_of(HC_POOL_SHARING_AUTO, "_" ST_MODEL_SAN "_0_1_2_1", true);
	assert_int_equal(hc_store_register_pool_ex(st, "kv", kv, &r), 0);
	uint64_t w[NP] = {0, 1, 2};
	for (int i = 0; i < NP; i++)
		st_fill(kv, w[i], KV_ID, (uint64_t)i);
	assert_int_equal(hc_store_set(st, keys, NP, w, NULL), 0);
	st_obj_path(dir, &keys[0], "_" ST_MODEL_SAN "_0_1_2_1", "", path);
	st_assert_file(path, st_obj_len(st, hc_pool_page_bytes(kv)));
	st_obj_path(dir, &keys[0], ST_SUFFIX, "", path);
	st_assert_file(path, -1);
	/* A pool whose names would be another pool's is refused, also
	 * through a suffix: "_<sfx>_0_1" + "_2_1" is the anchor's ending. */
	r = reg_of(HC_POOL_SHARING_AUTO, "_" ST_MODEL_SAN, false);
	struct hc_pool *kv2 = st_kv_pool(&g);
	r.force_bounce = true;
	assert_int_equal(hc_store_register_pool_ex(st, "zz", kv2, &r), 0); /* "_org-m-7b_zz" */
	r.suffix = "_" ST_MODEL_SAN "_0_1_2";
	assert_int_equal(hc_store_register_pool_ex(st, "1", kv2, &r), -EEXIST);
	assert_last_error_contains("like pool 'kv'");
	hc_store_close(st);
	hc_pool_destroy(kv);
	hc_pool_destroy(kv2);
	st_rmrf(dir);
}

/* force_bounce for one pool; the other stays zero-copy. reg NULL gives
 * the defaults; a reg without struct_size is refused. */
static void test_force_bounce(void **state)
{
	(void)state;
	struct hc_store *st = st_open_mem(false);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 8);
	struct hc_pool *a = st_kv_pool(&g), *b = st_kv_pool(&g);
	struct hc_pool_reg r = reg_of(HC_POOL_SHARING_AUTO, NULL, false);
	r.force_bounce = true;
	assert_int_equal(hc_store_register_pool_ex(st, "a", a, &r), 0);
	assert_int_equal(hc_store_register_pool_ex(st, "b", b, NULL), 0);
	struct hc_store_pool_info ia, ib;
	assert_int_equal(hc_store_pool_info(st, "a", &ia), 0);
	assert_int_equal(hc_store_pool_info(st, "b", &ib), 0);
	/* Bounced or not, a page_first page is its K and V objects. */
	assert_false(ia.zero_copy);
	assert_int_equal(ia.objects, 2);
	assert_int_equal(ia.slot_bytes, 2 * st_obj_len(st, 4096));
	assert_true(ib.zero_copy);
	assert_int_equal(ib.objects, 2);
	/* NULL reg: not the anchor. */
	struct hc_key k;
	uint64_t p = 0;
	st_keys(4, 1, 8, &k);
	assert_int_equal(hc_store_set(st, &k, 1, &p, NULL), -EINVAL);
	struct hc_pool_reg bad = {0};
	assert_int_equal(hc_store_register_pool_ex(st, "c", a, &bad), -EINVAL);
	assert_last_error_contains("struct_size");
	/* A reg of an older, shorter layout: the fields after it default. */
	struct hc_pool_reg old;
	memset(&old, 0xff, sizeof(old));
	hc_pool_reg_init(&old, offsetof(struct hc_pool_reg, sharing));
	old.anchor = true;
	assert_int_equal(hc_store_register_pool_ex(st, "kv", a, &old), 0);
	assert_int_equal(hc_store_pool_info(st, "kv", &ia), 0);
	assert_true(ia.zero_copy);
	hc_store_close(st);
	hc_pool_destroy(a);
	hc_pool_destroy(b);
}

static void test_unregister(void **state)
{
	(void)state;
	struct hc_store *st = st_open_mem(false);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 8);
	struct hc_mamba_geometry mg = {.slots = 8, .layers = 1, .temporal_bytes = 64};
	struct hc_pool *kv = st_kv_pool(&g), *mamba = st_mamba_pool(&mg);
	assert_int_equal(hc_store_unregister_pool(st, "kv"), -ENOENT);
	assert_last_error_contains("'kv'");
	assert_int_equal(hc_store_unregister_pool(NULL, "kv"), -EINVAL);
	assert_int_equal(hc_store_unregister_pool(st, NULL), -EINVAL);
	assert_int_equal(hc_store_register_pool(st, "anchor", kv, true), 0);
	assert_int_equal(hc_store_register_pool(st, "mamba", mamba, false), 0);
	struct hc_key keys[NP], mkeys[NP];
	st_keys(5, NP, 8, keys);
	st_keys(6, NP, 1, mkeys);
	put(st, "kv", kv, KV_ID, keys); /* "kv" means the anchor */
	put(st, "mamba", mamba, MAMBA_ID, mkeys);

	assert_int_equal(hc_store_unregister_pool(st, "mamba"), 0);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "mamba", &info), -ENOENT);
	struct hc_store_stats s;
	assert_int_equal(hc_store_stats(st, "mamba", &s), -ENOENT);
	uint64_t r[NP] = {4, 5, 6};
	struct hc_pool_transfer t = {"mamba", mkeys, NP, r, HC_HIT_ALL_PAGES, NULL, NULL};
	assert_int_equal(hc_store_get_v2(st, &t, 1), -EINVAL);
	assert_last_error_contains("'mamba' is not registered");
	assert_int_equal(hc_store_set_v2(st, &t, 1), -EINVAL);
	struct hc_store_op *op;
	assert_int_equal(hc_store_get_v2_start(st, &t, 1, &op), -EINVAL);
	assert_null(op);
	uint64_t kvh, ph;
	t.n = 1;
	assert_int_equal(hc_store_exists_v2(st, keys, NP, &t, 1, &kvh, &ph), 0);
	assert_int_equal(kvh, NP);
	assert_int_equal(ph, 0);
	/* The name is free again; the objects stayed. */
	assert_int_equal(hc_store_register_pool(st, "mamba", mamba, false), 0);
	t.n = NP;
	for (int i = 0; i < NP; i++)
		st_clear(mamba, r[i]);
	assert_int_equal(hc_store_get_v2(st, &t, 1), NP);
	for (int i = 0; i < NP; i++)
		st_assert_page(mamba, r[i], MAMBA_ID, (uint64_t)i);

	/* The anchor, by its alias "kv": v1 calls find none, another may
	 * take its place. */
	assert_int_equal(hc_store_unregister_pool(st, "kv"), 0);
	assert_int_equal(hc_store_exists(st, keys, NP), -EINVAL);
	assert_last_error_contains("no anchor");
	assert_int_equal(hc_store_get_start(st, keys, NP, r, NULL, &op), -EINVAL);
	assert_int_equal(hc_store_unregister_pool(st, "anchor"), -ENOENT);
	struct hc_pool *kv2 = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", kv2, true), 0);
	assert_int_equal(hc_store_get(st, keys, NP, r, NULL), NP);
	for (int i = 0; i < NP; i++)
		st_assert_page(kv2, r[i], KV_ID, (uint64_t)i);
	/* Every registered pool may go, and the store closes after. */
	assert_int_equal(hc_store_unregister_pool(st, "kv"), 0);
	assert_int_equal(hc_store_unregister_pool(st, "mamba"), 0);
	hc_store_close(st);
	hc_pool_destroy(kv);
	hc_pool_destroy(kv2);
	hc_pool_destroy(mamba);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sharing),
		cmocka_unit_test(test_suffix),
		cmocka_unit_test(test_force_bounce),
		cmocka_unit_test(test_unregister),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
