/* Names in place of keys: hc_store_set_named / _get_named / _exists_named
 * and hc_pool_transfer.names in every v2 call (started ones and the
 * exists query too). Objects are "<name><suffix><component>" at the
 * bucket and base dir their full name routes to; a name of 64 lowercase
 * hex digits is that key's object (uppercase is another name); a bad name
 * (empty, '/', leading '.', control byte, over HC_STORE_NAME_MAX, or too
 * long with the pool's suffix, not UTF-8) fails the whole call naming it, with
 * nothing written. */
#include "store_test.h"

enum { KV_ID = 1, SWA_ID = 2 };

static const char *const good[] = {
	"p0",  "cafebabe_page_0", "a b%c+d?e#f&g=h", "\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87",
	"x.y", "-dash",           "~tilde*star",     "\xf0\x9f\x98\x80",
};
#define NG (sizeof(good) / sizeof(good[0]))

static void name_path(const char *dir, const char *name, const char *suffix, const char *comp,
		      char out[PATH_MAX])
{
	char full[HC_NAME_MAX], bucket[3];
	snprintf(full, sizeof(full), "%s%s%s", name, suffix, comp);
	uint64_t h = hc_key_route_hash(full);
	hc_key_bucket_hex(h, bucket);
	if (snprintf(out, PATH_MAX, "%s/%s/%s", dir, bucket, full) >= PATH_MAX)
		fail_msg("object path under %s too long", dir);
}

static struct hc_store *open_store(bool file, char *dir, bool bounce)
{
	if (!file)
		return st_open_mem(bounce);
	st_mkdtemp(dir);
	return st_open_file(dir, st_dir_supports_direct(dir), bounce, NULL);
}

static void v1_named(bool file, bool bounce)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct hc_store *st = open_store(file, dir, bounce);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 2 * NG);
	struct hc_pool *kv = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	uint64_t w[NG], r[NG];
	int res[NG];
	for (size_t i = 0; i < NG; i++) {
		w[i] = i;
		r[i] = NG + i;
		st_fill(kv, w[i], KV_ID, i);
	}
	assert_int_equal(hc_store_exists_named(st, good, NG), 0);
	assert_int_equal(hc_store_set_named(st, good, NG, w, res), 0);
	for (size_t i = 0; i < NG; i++)
		assert_int_equal(res[i], 0);
	assert_int_equal(hc_store_exists_named(st, good, NG), NG);
	for (size_t i = 0; i < NG; i++)
		st_clear(kv, r[i]);
	assert_int_equal(hc_store_get_named(st, good, NG, r, res), NG);
	for (size_t i = 0; i < NG; i++)
		st_assert_page(kv, r[i], KV_ID, i);
	if (file) {
		struct hc_store_pool_info info;
		assert_int_equal(hc_store_pool_info(st, "kv", &info), 0);
		for (size_t i = 0; i < NG; i++) {
			/* page_first: "_k" and "_v" of 4096, bounced or not. */
			name_path(dir, good[i], ST_SUFFIX, "_k", path);
			st_assert_file(path, st_obj_len(st, 4096));
		}
	}
	/* A missing name misses; the leading count stops there. */
	const char *some[3] = {good[0], "absent", good[1]};
	assert_int_equal(hc_store_exists_named(st, some, 3), 1);
	assert_int_equal(hc_store_get_named(st, some, 3, r, res), 1);
	assert_int_equal(res[1], -ENOENT);
	assert_int_equal(res[2], 0);
	hc_store_close(st);
	hc_pool_destroy(kv);
	if (file)
		st_rmrf(dir);
}

static void test_v1_named(void **state)
{
	(void)state;
	for (int bounce = 0; bounce < 2; bounce++) {
		v1_named(true, bounce);
		v1_named(false, bounce);
	}
}

/* A key's 64 lowercase hex digits are its name; uppercase is not. */
static void test_hex_name_is_key(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	struct hc_store *st = open_store(true, dir, false);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 8);
	struct hc_pool *kv = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	struct hc_key keys[2];
	st_keys(9, 2, 8, keys);
	char hex[2][HC_KEY_HEX_LEN + 1], upper[HC_KEY_HEX_LEN + 1];
	for (int i = 0; i < 2; i++)
		hc_key_to_hex(&keys[i], hex[i]);
	for (int i = 0; i <= HC_KEY_HEX_LEN; i++)
		upper[i] = (char)(hex[0][i] >= 'a' && hex[0][i] <= 'f' ? hex[0][i] - 32
								       : hex[0][i]);
	const char *names[2] = {hex[0], hex[1]};
	uint64_t w[2] = {0, 1}, r[2] = {4, 5};
	st_fill(kv, 0, KV_ID, 0);
	st_fill(kv, 1, KV_ID, 1);
	/* Set by key, read by name; set by name, read by key. */
	assert_int_equal(hc_store_set(st, keys, 1, w, NULL), 0);
	assert_int_equal(hc_store_set_named(st, names + 1, 1, w + 1, NULL), 0);
	assert_int_equal(hc_store_exists_named(st, names, 2), 2);
	assert_int_equal(hc_store_exists(st, keys, 2), 2);
	st_clear(kv, 4);
	st_clear(kv, 5);
	assert_int_equal(hc_store_get_named(st, names, 1, r, NULL), 1);
	assert_int_equal(hc_store_get(st, keys + 1, 1, r + 1, NULL), 1);
	st_assert_page(kv, 4, KV_ID, 0);
	st_assert_page(kv, 5, KV_ID, 1);
	/* One object per page: a set by name of a key's page writes nothing. */
	struct hc_store_stats s = st_stats(st, NULL);
	assert_int_equal(hc_store_set_named(st, names, 1, w, NULL), 0);
	assert_int_equal(st_stats(st, NULL).pages_existing, s.pages_existing + 1);
	const char *up[1] = {upper};
	assert_int_equal(hc_store_exists_named(st, up, 1), 0);
	/* Two started sets of one page, by key and by its hex name: the
	 * second behaves as if the first had returned (it finds the page). */
	struct hc_key k3;
	st_keys(10, 1, 8, &k3);
	char h3[HC_KEY_HEX_LEN + 1];
	hc_key_to_hex(&k3, h3);
	const char *n3[1] = {h3};
	st_fill(kv, 2, KV_ID, 30);
	st_fill(kv, 3, KV_ID, 31);
	uint64_t p2 = 2, p3 = 3, p6 = 6;
	struct hc_store_op *o1, *o2;
	struct hc_pool_transfer t1 = {"kv", &k3, 1, &p2, HC_HIT_ALL_PAGES, NULL, NULL};
	struct hc_pool_transfer t2 = {"kv", NULL, 1, &p3, HC_HIT_ALL_PAGES, NULL, n3};
	assert_int_equal(hc_store_set_v2_start(st, &t1, 1, &o1), 0);
	assert_int_equal(hc_store_set_v2_start(st, &t2, 1, &o2), 0);
	assert_int_equal(hc_store_op_wait(o1), 0);
	assert_int_equal(hc_store_op_wait(o2), 0);
	assert_int_equal(hc_store_get(st, &k3, 1, &p6, NULL), 1);
	st_assert_page(kv, 6, KV_ID, 30);
	hc_store_close(st);
	hc_pool_destroy(kv);
	st_rmrf(dir);
}

/* v2 transfers with names (keys NULL), mixed with keyed ones, synchronous
 * and started; the exists query with names. */
static void test_v2_names(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	struct hc_store *st = open_store(true, dir, false);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 2 * NG);
	struct hc_pool *kv = st_kv_pool(&g), *swa = st_indexer_pool(2 * NG, 8, 5000);
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	assert_int_equal(hc_store_register_pool(st, "swa", swa, false), 0);
	uint64_t w[NG], r[NG];
	int res[2][NG];
	for (size_t i = 0; i < NG; i++) {
		w[i] = i;
		r[i] = NG + i;
		st_fill(kv, w[i], KV_ID, i);
		st_fill(swa, w[i], SWA_ID, i);
	}
	struct hc_key keys[NG];
	st_keys(11, NG, 8, keys);
	/* kv by names, swa by keys, started. */
	struct hc_pool_transfer t[2] = {
		{"kv", NULL, NG, w, HC_HIT_ALL_PAGES, res[0], good},
		{"swa", keys, NG, w, HC_HIT_ALL_PAGES, res[1], NULL},
	};
	struct hc_store_op *op;
	assert_int_equal(hc_store_set_v2_start(st, t, 2, &op), 0);
	assert_int_equal(hc_store_op_wait(op), 0);
	/* swa by names too (synchronous), then read both by names. */
	t[1] = (struct hc_pool_transfer){"swa", NULL, NG, w, HC_HIT_ALL_PAGES, res[1], good};
	assert_int_equal(hc_store_set_v2(st, &t[1], 1), 0);
	for (size_t i = 0; i < NG; i++) {
		st_clear(kv, r[i]);
		st_clear(swa, r[i]);
	}
	t[0].pages = t[1].pages = r;
	assert_int_equal(hc_store_get_v2_start(st, t, 2, &op), 0);
	assert_int_equal(hc_store_op_wait(op), NG);
	for (size_t i = 0; i < NG; i++) {
		assert_int_equal(res[1][i], 0);
		st_assert_page(kv, r[i], KV_ID, i);
		st_assert_page(swa, r[i], SWA_ID, i);
	}
	assert_int_equal(hc_store_get_v2(st, t, 2), NG);
	/* The names' swa objects and the keys' are different pages. */
	char path[PATH_MAX];
	name_path(dir, good[0], ST_SUFFIX, "_swa", path);
	st_assert_file(path, st_obj_len(st, 5000));
	st_obj_path(dir, &keys[0], ST_SUFFIX, "_swa", path);
	st_assert_file(path, st_obj_len(st, 5000));
	/* The exists query over names. */
	struct hc_pool_transfer e = {"swa", NULL, 1, NULL, HC_HIT_TRAILING_PAGES, NULL, NULL};
	uint64_t hits, ends[NG];
	struct hc_exists_query q;
	hc_exists_query_init(&q, sizeof(q));
	q.names = good;
	q.n = NG;
	q.transfers = &e;
	q.nt = 1;
	q.pool_hits = &hits;
	q.endpoints = ends;
	q.endpoints_max = NG;
	assert_int_equal(hc_store_exists_query(st, &q), NG);
	assert_int_equal(q.kv_hit_pages, NG);
	assert_int_equal(hits, NG);
	assert_int_equal(q.nendpoints, NG);
	hc_store_close(st);
	hc_pool_destroy(kv);
	hc_pool_destroy(swa);
	st_rmrf(dir);
}

/* Every bad name fails the whole call, naming it; nothing is written. */
static void test_bad_names(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	/* The longest model: suffix "_<120 chars>_0_1" (125 bytes). */
	char model[HC_MODEL_NAME_MAX + 1];
	memset(model, 'm', HC_MODEL_NAME_MAX);
	model[HC_MODEL_NAME_MAX] = '\0';
	st_mkdtemp(dir);
	char json[PATH_MAX + 128];
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s\"], \"l3_cleaner_interval_s\": 0}", dir);
	struct hc_store *st;
	assert_int_equal(st_open_json("file", json, model, 0, 1, true, &st), 0);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 8);
	struct hc_pool *kv = st_kv_pool(&g);
	/* A side pool of a 32-byte name: component "_<32 chars>" (33 bytes). */
	struct hc_pool *side = st_indexer_pool(8, 8, 100);
	const char *side_name = "abcdefghijklmnopqrstuvwxyz012345";
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	assert_int_equal(hc_store_register_pool(st, side_name, side, false), 0);
	char n128[HC_STORE_NAME_MAX + 2], n97[98], n98[99];
	memset(n128, 'n', sizeof(n128));
	n128[HC_STORE_NAME_MAX] = '\0'; /* 128: fits the anchor (255 - 125) */
	memset(n97, 'n', sizeof(n97));
	n97[97] = '\0'; /* 255 - 125 - 33 = 97 */
	memset(n98, 'n', sizeof(n98));
	n98[98] = '\0';
	uint64_t w[3] = {0, 1, 2};
	static const struct {
		const char *name;
		const char *says;
	} bad[] = {
		{"", "empty"},
		{"a/b", "'/'"},
		{".hidden", "starts with '.'"},
		{"tab\there", "control byte"},
		{"del\x7f", "control byte"},
		{"\xe9t\xe9", "not UTF-8"},    /* Latin-1 */
		{"ab\xc0\xaf", "not UTF-8"},   /* an overlong '/' */
		{"\xed\xa0\x80", "not UTF-8"}, /* a surrogate */
		{"cut\xe2\x82", "not UTF-8"},  /* a truncated sequence */
	};
	for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
		const char *names[3] = {"ok0", "ok1", bad[b].name};
		assert_int_equal(hc_store_set_named(st, names, 3, w, NULL), -EINVAL);
		assert_last_error_contains(bad[b].says);
		assert_last_error_contains("name 2");
		assert_int_equal(hc_store_get_named(st, names, 3, w, NULL), -EINVAL);
		assert_int_equal(hc_store_exists_named(st, names, 3), -EINVAL);
		struct hc_pool_transfer t = {side_name, NULL, 3, w, HC_HIT_ALL_PAGES, NULL, names};
		assert_int_equal(hc_store_set_v2(st, &t, 1), -EINVAL);
		assert_last_error_contains("transfer 0");
	}
	const char *null_name[2] = {"ok", NULL};
	assert_int_equal(hc_store_set_named(st, null_name, 2, w, NULL), -EINVAL);
	assert_last_error_contains("NULL");
	assert_int_equal(hc_store_set_named(st, NULL, 2, w, NULL), -EINVAL);
	n128[HC_STORE_NAME_MAX] = 'n';
	n128[HC_STORE_NAME_MAX + 1] = '\0';
	const char *too_long[1] = {n128};
	assert_int_equal(hc_store_set_named(st, too_long, 1, w, NULL), -EINVAL);
	assert_last_error_contains("HC_STORE_NAME_MAX");
	/* Within HC_STORE_NAME_MAX but not NAME_MAX with the side pool. */
	const char *n98s[1] = {n98};
	struct hc_pool_transfer t = {side_name, NULL, 1, w, HC_HIT_ALL_PAGES, NULL, n98s};
	assert_int_equal(hc_store_set_v2(st, &t, 1), -EINVAL);
	assert_last_error_contains("NAME_MAX");
	assert_last_error_contains("97 bytes fit");
	struct st_count c = st_count(dir);
	assert_int_equal(c.files, 0);
	/* The longest names that fit work. */
	const char *n97s[1] = {n97};
	t.names = n97s;
	assert_int_equal(hc_store_set_v2(st, &t, 1), 0);
	n128[HC_STORE_NAME_MAX] = '\0';
	assert_int_equal(hc_store_set_named(st, too_long, 1, w, NULL), 0);
	assert_int_equal(hc_store_exists_named(st, too_long, 1), 1);
	/* exists_v2-style query names are checked against every pool asked. */
	struct hc_pool_transfer e = {side_name, NULL, 1, NULL, HC_HIT_ALL_PAGES, NULL, NULL};
	uint64_t hits;
	struct hc_exists_query q;
	hc_exists_query_init(&q, sizeof(q));
	q.names = too_long;
	q.n = 1;
	q.transfers = &e;
	q.nt = 1;
	q.pool_hits = &hits;
	assert_int_equal(hc_store_exists_query(st, &q), -EINVAL);
	assert_last_error_contains("NAME_MAX");
	hc_store_close(st);
	hc_pool_destroy(kv);
	hc_pool_destroy(side);
	st_rmrf(dir);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v1_named),
		cmocka_unit_test(test_hex_name_is_key),
		cmocka_unit_test(test_v2_names),
		cmocka_unit_test(test_bad_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
