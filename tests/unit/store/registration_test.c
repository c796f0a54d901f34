/* Registration and contexts: pool names, anchors and groups; an unaligned
 * pool under O_DIRECT falls back to bounce; a bounce pool's slots follow
 * the config's host memory keys; a base dir where O_DIRECT fails (ramfs)
 * falls back to buffered I/O; use_direct_io off; the base dirs from
 * HICACHE_STORAGE_DIR when the config has none. */
#include "store_test.h"

enum { KV_ID = 1, MAMBA_ID = 2 };

static bool have_mounts;

/* Write n pages from slots 0.. and read them back into the last slots. */
static void round_trip(struct hc_store *st, struct hc_pool *pool, uint32_t seed, size_t n)
{
	struct hc_key keys[8];
	uint64_t w[8], r[8];
	assert_true(n <= 8 && 2 * n <= hc_pool_pages(pool));
	st_keys(seed, n, hc_pool_page_tokens(pool), keys);
	for (uint64_t i = 0; i < n; i++) {
		w[i] = i;
		r[i] = hc_pool_pages(pool) - 1 - i;
		st_fill(pool, i, KV_ID, seed * 100 + i);
	}
	assert_int_equal(hc_store_set(st, keys, n, w, NULL), 0);
	for (uint64_t i = 0; i < n; i++)
		st_clear(pool, r[i]);
	int res[8];
	assert_int_equal(hc_store_get(st, keys, n, r, res), (int64_t)n);
	for (uint64_t i = 0; i < n; i++)
		st_assert_page(pool, r[i], KV_ID, seed * 100 + i);
}

static void test_register_errors(void **state)
{
	(void)state;
	struct hc_store *st = st_open_mem(false);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 8);
	struct hc_mamba_geometry mg = {.slots = 8,
				       .layers = 1,
				       .temporal_bytes = 64,
				       .nconv = 1,
				       .conv_bytes = {32}};
	struct hc_pool *kv = st_kv_pool(&g), *kv2 = st_kv_pool(&g), *mamba = st_mamba_pool(&mg);
	struct hc_pool *anchor = st_anchor_pool(8, 8);
	struct hc_key key;
	st_keys(1, 1, 8, &key);
	uint64_t page = 0;

	/* No anchor yet: v1 calls say so. */
	assert_int_equal(hc_store_set(st, &key, 1, &page, NULL), -EINVAL);
	assert_last_error_contains("no anchor");
	assert_int_equal(hc_store_get(st, &key, 1, &page, NULL), -EINVAL);
	assert_last_error_contains("no anchor");
	assert_int_equal(hc_store_exists(st, &key, 1), -EINVAL);
	assert_last_error_contains("no anchor");
	uint64_t kvh;
	assert_int_equal(hc_store_exists_v2(st, &key, 1, NULL, 0, &kvh, NULL), -EINVAL);
	assert_last_error_contains("no anchor");

	assert_int_equal(hc_store_register_pool(NULL, "kv", kv, true), -EINVAL);
	assert_int_equal(hc_store_register_pool(st, NULL, kv, true), -EINVAL);
	assert_int_equal(hc_store_register_pool(st, "kv", NULL, true), -EINVAL);
	assert_int_equal(hc_store_register_pool(st, "KV", kv, true), -EINVAL);
	assert_last_error_contains("'KV'");
	assert_int_equal(hc_store_register_pool(st, "", kv, true), -EINVAL);
	assert_int_equal(hc_store_register_pool(st, "a/b", kv, true), -EINVAL);
	assert_int_equal(hc_store_register_pool(st, "mamba", mamba, true), -EINVAL);
	assert_last_error_contains("kv or anchor");
	assert_int_equal(hc_store_register_pool(st, "anchor", anchor, false), -EINVAL);
	assert_last_error_contains("only be the anchor");

	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	assert_int_equal(hc_store_register_pool(st, "kv", kv2, false), -EEXIST);
	assert_last_error_contains("'kv' is already registered");
	assert_int_equal(hc_store_register_pool(st, "kv2", kv2, true), -EEXIST);
	assert_last_error_contains("already the anchor");
	assert_int_equal(hc_store_register_pool(st, "anchor", anchor, true), -EEXIST);

	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "nope", &info), -ENOENT);
	assert_last_error_contains("'nope'");
	assert_int_equal(hc_store_pool_info(st, "kv2", &info), -ENOENT);
	assert_int_equal(hc_store_pool_info(st, "kv", NULL), -EINVAL);
	struct hc_store_stats s;
	assert_int_equal(hc_store_stats(st, "nope", &s), -ENOENT);
	assert_int_equal(hc_store_stats(st, NULL, NULL), -EINVAL);

	/* The failed registrations left the store working. */
	assert_int_equal(hc_store_register_pool(st, "mamba", mamba, false), 0);
	assert_int_equal(hc_store_register_pool(st, "kv2", kv2, false), 0);
	round_trip(st, kv, 1, 3);
	assert_int_equal(st_stats(st, "kv2").pages_written, 0);
	assert_int_equal(st_stats(st, "kv").pages_written, 3);
	hc_store_close(st);
	hc_pool_destroy(kv);
	hc_pool_destroy(kv2);
	hc_pool_destroy(mamba);
	hc_pool_destroy(anchor);
}

/* A group registers every pool under its name, the group's anchor as the
 * anchor. */
static void test_register_group(void **state)
{
	(void)state;
	struct hc_pool_group *grp;
	assert_int_equal(hc_pool_group_create(&grp), 0);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 8);
	struct hc_mamba_geometry mg = {.slots = 8,
				       .layers = 1,
				       .temporal_bytes = 64,
				       .nconv = 1,
				       .conv_bytes = {32}};
	assert_int_equal(hc_pool_group_add(grp, "mamba", st_mamba_pool(&mg), false), 0);
	assert_int_equal(hc_pool_group_add(grp, "full", st_kv_pool(&g), true), 0);
	struct hc_store *st = st_open_mem(false);
	assert_int_equal(hc_store_register_group(st, grp), 0);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "full", &info), 0);
	assert_int_equal(info.objects, 2);
	assert_int_equal(hc_store_pool_info(st, "kv", &info), 0); /* "kv" = the anchor */
	assert_int_equal(info.objects, 2);
	assert_int_equal(hc_store_pool_info(st, "mamba", &info), 0);
	assert_int_equal(info.objects, 2);
	/* v1 goes to the anchor "full". */
	round_trip(st, hc_pool_group_find(grp, "full"), 2, 2);
	assert_int_equal(st_stats(st, "full").pages_written, 2);
	assert_int_equal(st_stats(st, "mamba").pages_written, 0);
	/* Registering the group again: names taken. */
	assert_int_equal(hc_store_register_group(st, grp), -EEXIST);
	assert_int_equal(hc_store_register_group(st, NULL), -EINVAL);
	hc_store_close(st);
	hc_pool_group_destroy(grp);
}

/* Page segments of 2400 bytes: no zero-copy under O_DIRECT (each object's
 * image in the bounce slot rounded up to 4096, as the reference forgot),
 * zero-copy with buffered I/O; both round trip, through the same "_k" and
 * "_v" objects. */
static void test_unaligned_pool(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	if (!st_dir_supports_direct(dir)) {
		st_rmrf(dir);
		skip();
	}
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 16);
	g.layers = 1;
	g.heads = 1;
	g.head_dim = 150; /* 8 x 1 x 1 x 150 x 2 = 2400 */
	struct hc_pool *pool = st_kv_pool(&g);
	assert_false(hc_pool_aligned(pool, 512));
	for (int direct = 1; direct >= 0; direct--) {
		struct hc_store *st = st_open_file(dir, direct, false, NULL);
		assert_int_equal(hc_store_direct_io(st), direct);
		assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
		struct hc_store_pool_info info;
		assert_int_equal(hc_store_pool_info(st, "kv", &info), 0);
		assert_int_equal(info.zero_copy, !direct);
		assert_int_equal(info.page_bytes, 4800);
		/* K and V objects either way: bounced, each has its image
		 * (2400 bytes, padded, and a trailer block) in the slot. */
		assert_int_equal(info.objects, 2);
		assert_int_equal(info.slot_bytes, direct ? 2 * st_obj_len(st, 2400) : 0);
		assert_int_equal(info.alignment, hc_store_alignment(st));
		round_trip(st, pool, 3 + (uint32_t)direct, 6);
		/* Still O_DIRECT: the pool was bounced, I/O was not degraded. */
		assert_int_equal(hc_store_direct_io(st), direct);
		struct hc_key keys[6];
		st_keys(3 + (uint32_t)direct, 6, 8, keys);
		char path[PATH_MAX];
		st_obj_path(dir, &keys[0], ST_SUFFIX, "_k", path);
		st_assert_file(path, st_obj_len(st, 2400));
		hc_store_close(st);
	}
	assert_int_equal(st_count(dir).files, 12 + 12);
	hc_pool_destroy(pool);
	st_rmrf(dir);
}

/* Registering a bounce pool allocates its slots now, with the config's
 * hugepage_mode: required fails the registration (saying so) when the
 * kernel has too few huge pages, and the pool can be registered once the
 * mode allows normal pages. */
static void test_bounce_slots_config(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, true, 16);
	struct hc_pool *pool = st_kv_pool(&g);
	/* A call's slots: 16 pages of at least a page plus its trailer block. */
	uint64_t free2m = 0;
	hc_mem_huge_pages_free(HC_HUGE_2MB, &free2m);
	uint64_t need = (16 * (hc_pool_page_bytes(pool) + 4096) + HC_HUGE_2MB - 1) / HC_HUGE_2MB;

	struct hc_store *st = st_open_file(dir, true, true, "\"hugepage_mode\": \"required\"");
	int rc = hc_store_register_pool(st, "kv", pool, true);
	if (free2m < need) {
		assert_int_equal(rc, -ENOMEM);
		assert_last_error_contains("bounce slots");
		assert_last_error_contains("hugepage_mode=required");
		/* Nothing registered: the name is still free. */
		struct hc_store_pool_info info;
		assert_int_equal(hc_store_pool_info(st, "kv", &info), -ENOENT);
	} else {
		assert_int_equal(rc, 0);
	}
	hc_store_close(st);

	st = st_open_file(dir, true, true, "\"hugepage_mode\": \"off\"");
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	round_trip(st, pool, 7, 4);
	hc_store_close(st);
	hc_pool_destroy(pool);
	st_rmrf(dir);
}

/* A base dir where O_DIRECT cannot be used (ramfs refuses it): the probe
 * at open falls back to buffered I/O, and pages round trip. */
static void test_direct_probe_fallback(void **state)
{
	(void)state;
	if (!have_mounts)
		skip(); /* mounting ramfs needs CAP_SYS_ADMIN */
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	if (mount("none", dir, "ramfs", 0, "mode=0700")) {
		rmdir(dir);
		skip();
	}
	assert_false(st_dir_supports_direct(dir));
	struct hc_store *st = st_open_file(dir, true, false, NULL);
	assert_false(hc_store_direct_io(st));
	assert_int_equal(hc_store_alignment(st), 1);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 16);
	g.head_dim = 75; /* unaligned: zero-copy all the same, I/O is buffered */
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "kv", &info), 0);
	assert_true(info.zero_copy);
	assert_int_equal(info.alignment, 1);
	round_trip(st, pool, 5, 8);
	struct st_count c = st_count(dir);
	assert_int_equal(c.files, 16);
	assert_int_equal(c.tmps, 0);
	assert_int_equal(c.dirs, 256); /* the probe left nothing either */
	/* Whole objects, not the zero-length files of the reference's bug. */
	struct hc_key keys[8];
	st_keys(5, 8, 8, keys);
	char path[PATH_MAX];
	st_obj_path(dir, &keys[0], ST_SUFFIX, "_k", path);
	st_assert_file(path, st_obj_len(st, 4800));
	hc_store_close(st);
	hc_pool_destroy(pool);
	assert_int_equal(umount2(dir, MNT_DETACH), 0);
	st_rmrf(dir);
}

/* tmpfs: whatever this kernel does with O_DIRECT there, the store agrees
 * with it and pages round trip. */
static void test_tmpfs(void **state)
{
	(void)state;
	struct stat sb;
	if (stat("/dev/shm", &sb) || !S_ISDIR(sb.st_mode))
		skip();
	char dir[PATH_MAX];
	if (!st_mkdtemp_in("/dev/shm", dir))
		skip();
	bool dio = st_dir_supports_direct(dir);
	struct hc_store *st = st_open_file(dir, true, false, NULL);
	assert_int_equal(hc_store_direct_io(st), dio);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST_DIRECT, false, 16);
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	round_trip(st, pool, 6, 8);
	hc_store_close(st);
	hc_pool_destroy(pool);
	st_rmrf(dir);
}

static void test_no_direct_io(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	struct hc_store *st = st_open_file(dir, false, false, NULL);
	assert_false(hc_store_direct_io(st));
	assert_int_equal(hc_store_alignment(st), 1);
	hc_store_close(st);
	/* The same through the environment (JSON absent). */
	char json[PATH_MAX + 64];
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s\"]}", dir);
	setenv("HICACHE_USE_DIRECT_IO", "off", 1);
	int rc = st_open_json("file", json, ST_MODEL, 0, 1, false, &st);
	unsetenv("HICACHE_USE_DIRECT_IO");
	assert_int_equal(rc, 0);
	assert_false(hc_store_direct_io(st));
	hc_store_close(st);
	if (st_dir_supports_direct(dir)) {
		st = st_open_file(dir, true, false, NULL);
		assert_true(hc_store_direct_io(st));
		hc_store_close(st);
	}
	st_rmrf(dir);
}

/* HICACHE_STORAGE_DIR gives the base dirs when the config has none; the
 * JSON wins over it; neither: a clear error. */
static void test_storage_dir_env(void **state)
{
	(void)state;
	char root[PATH_MAX], a[PATH_MAX + 8], b[PATH_MAX + 8], list[2 * PATH_MAX + 32];
	st_mkdtemp(root);
	snprintf(a, sizeof(a), "%s/a", root);
	snprintf(b, sizeof(b), "%s/b", root);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 16);
	struct hc_pool *pool = st_kv_pool(&g);

	unsetenv("HICACHE_STORAGE_DIR");
	/* Default config otherwise; but no cleaner: on a disk over its 80 %
	 * watermark it would delete the pages counted below. */
	setenv("HICACHE_L3_CLEANER_INTERVAL_S", "0", 1);
	struct hc_store *st;
	assert_int_equal(st_open_json("file", NULL, ST_MODEL, 0, 1, false, &st), -EINVAL);
	assert_null(st);
	assert_last_error_contains("HICACHE_STORAGE_DIR");

	/* One dir from the environment, created by the store. */
	setenv("HICACHE_STORAGE_DIR", a, 1);
	assert_int_equal(st_open_json("file", NULL, ST_MODEL, 0, 1, false, &st), 0);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	round_trip(st, pool, 7, 4);
	hc_store_close(st);
	assert_int_equal(st_count(a).files, 8);
	assert_int_equal(st_count(a).dirs, 256);

	/* Two, comma-separated: the pages spread over both. */
	snprintf(list, sizeof(list), "%s,%s", a, b);
	setenv("HICACHE_STORAGE_DIR", list, 1);
	assert_int_equal(st_open_json("file", "{}", ST_MODEL, 0, 1, false, &st), 0);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	round_trip(st, pool, 8, 8);
	long long v_bytes = (long long)st_obj_len(st, 4096);
	hc_store_close(st);
	size_t na = st_count(a).files, nb = st_count(b).files;
	assert_int_equal(na + nb, 8 + 16);
	assert_true(nb > 0);
	struct hc_key keys[8];
	st_keys(8, 8, 8, keys);
	const char *dirs[2] = {a, b};
	for (int i = 0; i < 8; i++) {
		char path[PATH_MAX];
		st_obj_path_in(dirs, 2, &keys[i], ST_SUFFIX, "_v", path);
		st_assert_file(path, v_bytes);
	}

	/* The config's dirs win over the environment. */
	st_empty_dir(root);
	char json[PATH_MAX + 64];
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s\"]}", b);
	assert_int_equal(st_open_json("file", json, ST_MODEL, 0, 1, false, &st), 0);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	round_trip(st, pool, 9, 2);
	hc_store_close(st);
	assert_int_equal(st_count(a).files, 0);
	assert_int_equal(st_count(b).files, 4);
	unsetenv("HICACHE_STORAGE_DIR");
	unsetenv("HICACHE_L3_CLEANER_INTERVAL_S");
	hc_pool_destroy(pool);
	st_rmrf(root);
}

int main(void)
{
	have_mounts = st_private_mounts();
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_register_errors),
		cmocka_unit_test(test_register_group),
		cmocka_unit_test(test_unaligned_pool),
		cmocka_unit_test(test_bounce_slots_config),
		cmocka_unit_test(test_direct_probe_fallback),
		cmocka_unit_test(test_tmpfs),
		cmocka_unit_test(test_no_direct_io),
		cmocka_unit_test(test_storage_dir_env),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
