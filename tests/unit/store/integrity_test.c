/* Integrity: an object written under one layout or geometry is a miss
 * under another (counted as corrupt when it has the right name and size);
 * truncated, empty and bit-flipped objects are misses; verify_checksum
 * off skips the payload checksum but never the trailer; an existing page
 * is never rewritten. */
#include "store_test.h"

#include <time.h>

enum { KV_ID = 1 };

#define N 4
#define SLOTS 16

/* ---- geometry and layout mismatches ---- */

struct mismatch {
	const char *what;
	struct hc_kv_geometry w, r; /* written with, read with */
	bool bounce;
};

/* Write N pages with geometry w, read them with r (same object names and
 * sizes): every page a miss, every object counted as corrupt. */
static void check_mismatch(const char *dir, const struct mismatch *m)
{
	struct hc_pool *pw = st_kv_pool(&m->w), *pr = st_kv_pool(&m->r);
	assert_int_equal(hc_pool_page_bytes(pw), hc_pool_page_bytes(pr));
	struct hc_key keys[N];
	st_keys(1, N, 8, keys);
	uint64_t slots[N] = {0, 1, 2, 3}, back[N] = {8, 9, 10, 11};
	for (uint64_t i = 0; i < N; i++)
		st_fill(pw, i, KV_ID, i);

	struct hc_store *st = st_open_file(dir, true, m->bounce, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", pw, true), 0);
	struct hc_store_pool_info iw, ir;
	assert_int_equal(hc_store_pool_info(st, "kv", &iw), 0);
	assert_int_equal(hc_store_set(st, keys, N, slots, NULL), 0);
	hc_store_close(st);

	st = st_open_file(dir, true, m->bounce, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", pr, true), 0);
	assert_int_equal(hc_store_pool_info(st, "kv", &ir), 0);
	assert_int_equal(iw.zero_copy, ir.zero_copy);
	assert_int_equal(iw.objects, ir.objects);
	int res[N];
	assert_int_equal(hc_store_get(st, keys, N, back, res), 0);
	for (int i = 0; i < N; i++)
		if (res[i] != -EBADMSG)
			fail_msg("%s: page %d result %d, expected -EBADMSG", m->what, i, res[i]);
	struct hc_store_stats s = st_stats(st, NULL);
	if (s.corrupt != N * ir.objects || s.misses != N || s.hits || s.pages_read || s.failures)
		fail_msg("%s: corrupt %llu misses %llu hits %llu failures %llu", m->what,
			 (unsigned long long)s.corrupt, (unsigned long long)s.misses,
			 (unsigned long long)s.hits, (unsigned long long)s.failures);
	/* The per-pool counters say the same. */
	assert_int_equal(st_stats(st, "kv").corrupt, s.corrupt);
	hc_store_close(st);

	/* The writer's geometry still reads its pages. */
	st = st_open_file(dir, true, m->bounce, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", pw, true), 0);
	assert_int_equal(hc_store_get(st, keys, N, back, res), N);
	for (uint64_t i = 0; i < N; i++)
		st_assert_page(pw, back[i], KV_ID, i);
	assert_int_equal(st_stats(st, NULL).corrupt, 0);
	hc_store_close(st);
	hc_pool_destroy(pw);
	hc_pool_destroy(pr);
	st_empty_dir(dir);
}

static void test_mismatch(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	struct hc_kv_geometry pf = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	struct mismatch m[6];
	int k = 0;
	/* Zero-copy: both write "_k"/"_v" of 4096 bytes. */
	m[k] = (struct mismatch){"page_first -> page_first_direct", pf, pf, false};
	m[k++].r.layout = HC_LAYOUT_PAGE_FIRST_DIRECT;
	/* Both write one plain object of the flat page (page_first would
	 * write "_k"/"_v", bounced or not: another name, a plain miss). */
	m[k] = (struct mismatch){"layer_first -> page_head", pf, pf, true};
	m[k].w.layout = HC_LAYOUT_LAYER_FIRST;
	m[k++].r.layout = HC_LAYOUT_PAGE_HEAD;
	m[k] = (struct mismatch){"heads 2 x 64 -> 4 x 32", pf, pf, false};
	m[k].r.heads = 4;
	m[k++].r.head_dim = 32;
	m[k] = (struct mismatch){"8 tokens x 2 layers -> 16 x 1", pf, pf, false};
	m[k].r.page_size = 16;
	m[k++].r.layers = 1;
	m[k] = (struct mismatch){"bf16 x 64 -> 1 byte x 128", pf, pf, false};
	m[k].r.elem_bytes = 1;
	m[k++].r.head_dim = 128;
	m[k] = (struct mismatch){"4 layers x 32 -> 2 layers x 64", pf, pf, true};
	m[k].w.layers = 4;
	m[k++].w.head_dim = 32;
	for (int i = 0; i < k; i++)
		check_mismatch(dir, &m[i]);
	st_rmrf(dir);
}

/* MLA and MHA pages of the same bytes: different names (the MLA suffix has
 * no rank), so a plain miss; an MLA object put under the MHA name (same
 * size) fails the trailer's geometry. */
static void test_mla_vs_mha(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	/* layer_first: one plain object per page (page_first would give MLA
	 * one "_k" of 8192 bytes, MHA "_k" and "_v" of 4096). */
	struct hc_kv_geometry mla = st_kv_geo(HC_LAYOUT_LAYER_FIRST, true, SLOTS);
	mla.head_dim = 256; /* 8192 bytes, as MHA's K + V */
	struct hc_kv_geometry mha = st_kv_geo(HC_LAYOUT_LAYER_FIRST, false, SLOTS);
	struct hc_pool *pa = st_kv_pool(&mla), *pb = st_kv_pool(&mha);
	assert_int_equal(hc_pool_page_bytes(pa), hc_pool_page_bytes(pb));
	struct hc_key keys[N];
	st_keys(2, N, 8, keys);
	uint64_t slots[N] = {0, 1, 2, 3};
	for (uint64_t i = 0; i < N; i++)
		st_fill(pa, i, KV_ID, i);
	struct hc_store *st = st_open_file(dir, true, true, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", pa, true), 0);
	assert_int_equal(hc_store_set(st, keys, N, slots, NULL), 0);
	hc_store_close(st);

	st = st_open_file(dir, true, true, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", pb, true), 0);
	assert_int_equal(hc_store_exists(st, keys, N), 0);
	int res[N];
	assert_int_equal(hc_store_get(st, keys, N, slots, res), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(res[i], -ENOENT);
	assert_int_equal(st_stats(st, NULL).corrupt, 0);
	for (int i = 0; i < N; i++) {
		char from[PATH_MAX], to[PATH_MAX];
		st_obj_path(dir, &keys[i], ST_SUFFIX_MLA, "", from);
		st_obj_path(dir, &keys[i], ST_SUFFIX, "", to);
		assert_int_equal(link(from, to), 0);
	}
	assert_int_equal(hc_store_exists(st, keys, N), N); /* exists compares sizes */
	assert_int_equal(hc_store_get(st, keys, N, slots, res), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(res[i], -EBADMSG);
	assert_int_equal(st_stats(st, NULL).corrupt, N);
	hc_store_close(st);
	hc_pool_destroy(pa);
	hc_pool_destroy(pb);
	st_rmrf(dir);
}

/* ---- damaged objects ---- */

enum damage { TRUNCATE, EMPTY, EXTEND, FLIP_PAYLOAD, FLIP_TRAILER, FLIP_SELF_CHECK, DELETE };
static const char *const damage_name[] = {"truncate",     "empty",        "extend",
					  "flip payload", "flip trailer", "flip self_check",
					  "delete"};

/* Pages 0..6, page i damaged by damage i in its first object; page 7 whole. */
static void check_damage(const char *dir, bool bounce, bool verify)
{
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	struct hc_pool *pool = st_kv_pool(&g);
	struct hc_store *st = st_open_file(dir, true, bounce,
					   verify ? NULL : "\"verify_checksum\": false");
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	enum { NP = 8 };
	struct hc_key keys[NP];
	st_keys(3, NP, 8, keys);
	uint64_t slots[NP], back[NP];
	for (uint64_t i = 0; i < NP; i++) {
		slots[i] = i;
		back[i] = SLOTS - 1 - i;
		st_fill(pool, i, KV_ID, i);
	}
	assert_int_equal(hc_store_set(st, keys, NP, slots, NULL), 0);
	const char *comp = "_k"; /* page_first: K and V objects, bounced or not */
	for (int i = 0; i < NP - 1; i++) {
		char path[PATH_MAX];
		st_obj_path(dir, &keys[i], ST_SUFFIX, comp, path);
		long long size = st_file_size(path);
		assert_true(size > 4096);
		switch ((enum damage)i) {
		case TRUNCATE:
			assert_int_equal(truncate(path, size - 4096), 0);
			break;
		case EMPTY:
			assert_int_equal(truncate(path, 0), 0);
			break;
		case EXTEND: /* a whole object, then 4096 more bytes */
			assert_int_equal(truncate(path, size + 4096), 0);
			break;
		case FLIP_PAYLOAD:
			st_flip(path, 100, 0x10);
			break;
		case FLIP_TRAILER: /* the payload_len field */
			st_flip(path, -64 + 32, 0x01);
			break;
		case FLIP_SELF_CHECK:
			st_flip(path, -64 + 48, 0x80);
			break;
		case DELETE:
			assert_int_equal(unlink(path), 0);
			break;
		}
	}
	/* Each page on its own: exists, then get. */
	for (int i = 0; i < NP; i++) {
		bool size_ok = i != TRUNCATE && i != EMPTY && i != EXTEND && i != DELETE;
		bool hit = i == NP - 1 || (!verify && i == FLIP_PAYLOAD);
		/* exists looks at names and sizes only. */
		assert_int_equal(hc_store_exists(st, &keys[i], 1), size_ok ? 1 : 0);
		struct hc_store_stats a = st_stats(st, NULL);
		st_clear(pool, back[i]);
		int res = 12345;
		int64_t got = hc_store_get(st, &keys[i], 1, &back[i], &res);
		struct hc_store_stats b = st_stats(st, NULL);
		if (got != (hit ? 1 : 0))
			fail_msg("%s (bounce %d verify %d): get %lld, result %d",
				 i < NP - 1 ? damage_name[i] : "whole", bounce, verify,
				 (long long)got, res);
		int want = hit ? 0 : i == DELETE ? -ENOENT : -EBADMSG;
		assert_int_equal(res, want);
		assert_int_equal(b.corrupt - a.corrupt, want == -EBADMSG ? 1 : 0);
		assert_int_equal(b.misses - a.misses, hit ? 0 : 1);
		assert_int_equal(b.hits - a.hits, hit ? 1 : 0);
		if (i == NP - 1)
			st_assert_page(pool, back[i], KV_ID, (uint64_t)i);
		if (hit && i == FLIP_PAYLOAD) {
			/* Not verified: the flipped bit is in the page. */
			long at = st_diff(pool, back[i], KV_ID, (uint64_t)i);
			assert_int_equal(at, 100);
		}
	}
	/* A batch over all of them: per-page results, the leading hits. */
	int res[NP];
	int64_t got = hc_store_get(st, keys, NP, back, res);
	assert_int_equal(got, 0);
	assert_int_equal(res[NP - 1], 0);
	/* Broken objects (no valid trailer, or a bad checksum) were removed
	 * when the single gets found them: now plain misses. */
	assert_int_equal(res[FLIP_PAYLOAD], verify ? -ENOENT : 0);
	assert_int_equal(res[FLIP_TRAILER], -ENOENT);
	assert_int_equal(res[FLIP_SELF_CHECK], -ENOENT);
	assert_int_equal(res[DELETE], -ENOENT);
	/* ...so setting those pages again heals them. */
	for (uint64_t i = 0; i < NP; i++)
		st_fill(pool, i, KV_ID, i);
	assert_int_equal(hc_store_set(st, keys, NP, slots, NULL), 0);
	static const enum damage healed[] = {FLIP_PAYLOAD, FLIP_TRAILER, FLIP_SELF_CHECK, DELETE};
	for (size_t h = 0; h < sizeof(healed) / sizeof(healed[0]); h++) {
		int i = (int)healed[h];
		if (i == FLIP_PAYLOAD && !verify)
			continue; /* never detected, so never removed: still flipped */
		st_clear(pool, back[i]);
		assert_int_equal(hc_store_get(st, &keys[i], 1, &back[i], NULL), 1);
		st_assert_page(pool, back[i], KV_ID, (uint64_t)i);
	}
	struct st_count c = st_count(dir);
	assert_int_equal(c.tmps, 0);
	hc_store_close(st);
	hc_pool_destroy(pool);
	st_empty_dir(dir);
}

static void test_damage(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	for (int bounce = 0; bounce < 2; bounce++)
		for (int verify = 0; verify < 2; verify++)
			check_damage(dir, bounce, verify);
	st_rmrf(dir);
}

/* ---- immutability ---- */

struct ident {
	ino_t ino;
	struct timespec mtime;
};

static struct ident ident_of(const char *path)
{
	struct stat sb;
	if (stat(path, &sb))
		fail_msg("stat %s: %s", path, strerror(errno));
	return (struct ident){sb.st_ino, sb.st_mtim};
}

static bool same_ident(struct ident a, struct ident b)
{
	return a.ino == b.ino && a.mtime.tv_sec == b.mtime.tv_sec &&
	       a.mtime.tv_nsec == b.mtime.tv_nsec;
}

static void check_not_rewritten(const char *dir, bool bounce)
{
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	struct hc_pool *pool = st_kv_pool(&g);
	struct hc_store *st = dir ? st_open_file(dir, true, bounce, NULL) : st_open_mem(bounce);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_key keys[N];
	st_keys(4, N, 8, keys);
	uint64_t slots[N] = {0, 1, 2, 3}, back[N] = {12, 13, 14, 15};
	for (uint64_t i = 0; i < N; i++)
		st_fill(pool, i, KV_ID, i);
	assert_int_equal(hc_store_set(st, keys, 2, slots, NULL), 0);
	const char *comps[2] = {"_k", "_v"}; /* page_first, bounced or not */
	unsigned nobj = 2;
	struct ident before[N][2];
	char path[PATH_MAX];
	if (dir)
		for (int i = 0; i < 2; i++)
			for (unsigned o = 0; o < nobj; o++) {
				st_obj_path(dir, &keys[i], ST_SUFFIX, comps[o], path);
				before[i][o] = ident_of(path);
			}
	struct timespec pause = {0, 20 * 1000 * 1000};
	nanosleep(&pause, NULL);

	/* Other bytes in the slots now; pages 0 and 1 exist, 2 and 3 do not. */
	for (uint64_t i = 0; i < N; i++)
		st_fill(pool, i, KV_ID, 100 + i);
	struct hc_store_stats a = st_stats(st, NULL);
	int res[N];
	memset(res, 0x55, sizeof(res));
	assert_int_equal(hc_store_set(st, keys, N, slots, res), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(res[i], 0);
	struct hc_store_stats b = st_stats(st, NULL);
	assert_int_equal(b.pages_existing - a.pages_existing, 2);
	assert_int_equal(b.pages_written - a.pages_written, 2);
	assert_int_equal(b.bytes_written - a.bytes_written, 2 * hc_pool_page_bytes(pool));
	assert_int_equal(st_stats(st, "kv").pages_existing, 2);
	if (dir)
		for (int i = 0; i < 2; i++)
			for (unsigned o = 0; o < nobj; o++) {
				st_obj_path(dir, &keys[i], ST_SUFFIX, comps[o], path);
				if (!same_ident(before[i][o], ident_of(path)))
					fail_msg("%s was rewritten", path);
			}
	assert_int_equal(hc_store_get(st, keys, N, back, NULL), N);
	st_assert_page(pool, back[0], KV_ID, 0);
	st_assert_page(pool, back[1], KV_ID, 1);
	st_assert_page(pool, back[2], KV_ID, 102);
	st_assert_page(pool, back[3], KV_ID, 103);

	if (dir && !bounce) {
		/* One object of a page missing: only that one is written. */
		st_obj_path(dir, &keys[0], ST_SUFFIX, "_v", path);
		assert_int_equal(unlink(path), 0);
		st_fill(pool, 0, KV_ID, 0);
		a = st_stats(st, NULL);
		assert_int_equal(hc_store_set(st, keys, 1, slots, NULL), 0);
		b = st_stats(st, NULL);
		assert_int_equal(b.pages_written - a.pages_written, 1);
		assert_int_equal(b.pages_existing - a.pages_existing, 0);
		assert_int_equal(b.bytes_written - a.bytes_written, 4096);
		st_obj_path(dir, &keys[0], ST_SUFFIX, "_k", path);
		assert_true(same_ident(before[0][0], ident_of(path)));
		assert_int_equal(hc_store_get(st, keys, 1, back, NULL), 1);
		st_assert_page(pool, back[0], KV_ID, 0);
	}
	if (dir)
		assert_int_equal(st_count(dir).tmps, 0);
	hc_store_close(st);
	hc_pool_destroy(pool);
	if (dir)
		st_empty_dir(dir);
}

/* The same key twice in one call: stored once, the second counted as
 * existing; no temp file left by the losing rename. */
static void check_same_key_twice(const char *dir, bool bounce)
{
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	struct hc_pool *pool = st_kv_pool(&g);
	struct hc_store *st = dir ? st_open_file(dir, true, bounce, NULL) : st_open_mem(bounce);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_key k[3];
	st_keys(5, 2, 8, k);
	k[2] = k[0];
	uint64_t slots[3] = {0, 1, 2}, back[3] = {13, 14, 15};
	st_fill(pool, 0, KV_ID, 0);
	st_fill(pool, 1, KV_ID, 1);
	st_fill(pool, 2, KV_ID, 0);
	int res[3];
	memset(res, 0x55, sizeof(res));
	assert_int_equal(hc_store_set(st, k, 3, slots, res), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(res[i], 0);
	/* Which copy's objects win is up to the I/O engine (the thread engine
	 * runs them at once): both may count as written, in part. */
	struct hc_store_stats s = st_stats(st, NULL);
	assert_true(s.pages_written >= 2);
	assert_int_equal(s.pages_written + s.pages_existing, 3);
	assert_int_equal(s.failures, 0);
	if (dir) {
		struct st_count c = st_count(dir);
		assert_int_equal(c.files, 4); /* K and V, bounced or not */
		assert_int_equal(c.tmps, 0);
	}
	assert_int_equal(hc_store_get(st, k, 3, back, res), 3);
	st_assert_page(pool, 13, KV_ID, 0);
	st_assert_page(pool, 14, KV_ID, 1);
	st_assert_page(pool, 15, KV_ID, 0);
	hc_store_close(st);
	hc_pool_destroy(pool);
	if (dir)
		st_empty_dir(dir);
}

static void test_same_key_twice(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	check_same_key_twice(dir, false);
	check_same_key_twice(dir, true);
	st_rmrf(dir);
	check_same_key_twice(NULL, false);
	check_same_key_twice(NULL, true);
}

/* Pool names whose objects would share names with another pool's (a side
 * pool "k" would write "_k" objects like the anchor's K half, "swa_k" in
 * bounce mode like swa's zero-copy K half) are refused at registration. */
static void test_name_collision(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	struct hc_pool *kv = st_kv_pool(&g), *swa = st_kv_pool(&g);
	struct hc_pool *idx = st_indexer_pool(SLOTS, 8, 4096);
	struct hc_store *st = st_open_file(dir, true, false, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	assert_int_equal(hc_store_register_pool(st, "k", idx, false), -EEXIST);
	assert_last_error_contains("like pool 'kv'");
	assert_int_equal(hc_store_register_pool(st, "swa", swa, false), 0);
	assert_int_equal(hc_store_register_pool(st, "swa_k", idx, false), -EEXIST);
	assert_last_error_contains("like pool 'swa'");
	assert_int_equal(hc_store_register_pool(st, "indexer", idx, false), 0);
	/* A refused name left nothing registered under it. */
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "k", &info), -ENOENT);
	hc_store_close(st);
	hc_pool_destroy(kv);
	hc_pool_destroy(swa);
	hc_pool_destroy(idx);
	st_rmrf(dir);
}

static void test_not_rewritten(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	check_not_rewritten(dir, false);
	check_not_rewritten(dir, true);
	st_rmrf(dir);
	check_not_rewritten(NULL, false);
	check_not_rewritten(NULL, true);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mismatch),       cmocka_unit_test(test_mla_vs_mha),
		cmocka_unit_test(test_damage),         cmocka_unit_test(test_not_rewritten),
		cmocka_unit_test(test_same_key_twice), cmocka_unit_test(test_name_collision),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
