/* Bad input and failures: whole-call errors (-EFAULT for a page outside
 * its pool, -EINVAL for NULL or unregistered arguments) write nothing;
 * zero pages is a no-op; open errors (backend, tp_rank, model, dirs given
 * twice, a file for a dir, a read-only dir) are clear; pages that fail
 * leave existing pages readable, no temp files, and the right results and
 * stats; per-pool stats add up to the store's. */
#include "store_test.h"

enum { KV_ID = 1, MAMBA_ID = 2 };

#define SLOTS 16

static bool have_mounts;

struct fx {
	char dir[PATH_MAX];
	bool file;
	struct hc_store *st;
	struct hc_pool *kv, *mamba;
};

static void fx_open(struct fx *f, bool file)
{
	memset(f, 0, sizeof(*f));
	f->file = file;
	if (file) {
		st_mkdtemp(f->dir);
		f->st = st_open_file(f->dir, true, false, NULL);
	} else {
		f->st = st_open_mem(false);
	}
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	struct hc_mamba_geometry mg = {.slots = SLOTS,
				       .layers = 2,
				       .temporal_bytes = 2048,
				       .nconv = 1,
				       .conv_bytes = {2048}};
	f->kv = st_kv_pool(&g);
	f->mamba = st_mamba_pool(&mg);
	assert_int_equal(hc_store_register_pool(f->st, "kv", f->kv, true), 0);
	assert_int_equal(hc_store_register_pool(f->st, "mamba", f->mamba, false), 0);
}

static void fx_close(struct fx *f)
{
	hc_store_close(f->st);
	hc_pool_destroy(f->kv);
	hc_pool_destroy(f->mamba);
	if (f->file)
		st_rmrf(f->dir);
}

static void assert_nothing_stored(struct fx *f)
{
	struct hc_store_stats s = st_stats(f->st, NULL);
	assert_int_equal(s.pages_written, 0);
	assert_int_equal(s.pages_existing, 0);
	assert_int_equal(s.failures, 0);
	if (f->file) {
		struct st_count c = st_count(f->dir);
		assert_int_equal(c.files, 0);
		assert_int_equal(c.dirs, 256);
	}
}

/* ---- whole-call errors ---- */

static void efault(bool file)
{
	struct fx f;
	fx_open(&f, file);
	struct hc_key keys[3];
	st_keys(1, 3, 8, keys);
	uint64_t bad[3] = {0, 1, SLOTS}, ok[3] = {0, 1, 2};
	int res[3] = {7, 7, 7};
	for (uint64_t i = 0; i < 3; i++)
		st_fill(f.kv, i, KV_ID, i);
	assert_int_equal(hc_store_set(f.st, keys, 3, bad, res), -EFAULT);
	assert_last_error_contains("outside");
	assert_last_error_contains("'kv'");
	bad[2] = UINT64_MAX;
	assert_int_equal(hc_store_set(f.st, keys, 3, bad, NULL), -EFAULT);
	assert_nothing_stored(&f);
	assert_int_equal(hc_store_exists(f.st, keys, 3), 0);

	/* v2: the bad page is in the second transfer; the first is not
	 * written either. */
	uint64_t mbad[3] = {0, SLOTS + 5, 1};
	struct hc_pool_transfer t[2] = {
		{"kv", keys, 3, ok, HC_HIT_ALL_PAGES, NULL, NULL},
		{"mamba", keys, 3, mbad, HC_HIT_ALL_PAGES, NULL, NULL},
	};
	assert_int_equal(hc_store_set_v2(f.st, t, 2), -EFAULT);
	assert_last_error_contains("'mamba'");
	assert_nothing_stored(&f);

	/* get: nothing read into the pool. */
	assert_int_equal(hc_store_set(f.st, keys, 3, ok, NULL), 0);
	for (uint64_t i = 0; i < SLOTS; i++)
		st_clear(f.kv, i);
	uint64_t back[3] = {5, 6, SLOTS};
	assert_int_equal(hc_store_get(f.st, keys, 3, back, res), -EFAULT);
	assert_int_equal(st_stats(f.st, NULL).pages_read, 0);
	size_t pb = hc_pool_page_bytes(f.kv);
	uint8_t *zero = calloc(1, pb), *buf = malloc(pb);
	for (uint64_t i = 0; i < SLOTS; i++) {
		assert_int_equal(hc_pool_gather(f.kv, i, buf, pb), 0);
		assert_memory_equal(buf, zero, pb);
	}
	t[0].pages = back;
	t[1].pages = ok;
	assert_int_equal(hc_store_get_v2(f.st, t, 2), -EFAULT);
	free(zero);
	free(buf);
	fx_close(&f);
}

static void test_efault(void **state)
{
	(void)state;
	efault(true);
	efault(false);
}

static void null_args(bool file)
{
	struct fx f;
	fx_open(&f, file);
	struct hc_key keys[2];
	st_keys(2, 2, 8, keys);
	uint64_t pages[2] = {0, 1}, ph[2];
	int res[2];

	assert_int_equal(hc_store_set(NULL, keys, 2, pages, res), -EINVAL);
	assert_int_equal(hc_store_set(f.st, NULL, 2, pages, res), -EINVAL);
	assert_last_error_contains("NULL");
	assert_int_equal(hc_store_set(f.st, keys, 2, NULL, res), -EINVAL);
	assert_int_equal(hc_store_get(NULL, keys, 2, pages, res), -EINVAL);
	assert_int_equal(hc_store_get(f.st, NULL, 2, pages, res), -EINVAL);
	assert_int_equal(hc_store_get(f.st, keys, 2, NULL, res), -EINVAL);
	assert_int_equal(hc_store_exists(NULL, keys, 2), -EINVAL);
	assert_int_equal(hc_store_exists(f.st, NULL, 2), -EINVAL);
	assert_int_equal(hc_store_set_v2(NULL, NULL, 0), -EINVAL);
	assert_int_equal(hc_store_set_v2(f.st, NULL, 1), -EINVAL);
	assert_int_equal(hc_store_get_v2(f.st, NULL, 1), -EINVAL);

	struct hc_pool_transfer t[2] = {
		{"kv", keys, 2, pages, HC_HIT_ALL_PAGES, res, NULL},
		{"mamba", NULL, 2, pages, HC_HIT_ALL_PAGES, NULL, NULL},
	};
	assert_int_equal(hc_store_set_v2(f.st, t, 2), -EINVAL);
	assert_last_error_contains("transfer 1");
	t[1].keys = keys;
	t[1].pages = NULL;
	assert_int_equal(hc_store_set_v2(f.st, t, 2), -EINVAL);
	assert_int_equal(hc_store_get_v2(f.st, t, 2), -EINVAL);
	t[1].pages = pages;
	t[1].pool = "swa"; /* not registered */
	assert_int_equal(hc_store_set_v2(f.st, t, 2), -EINVAL);
	assert_last_error_contains("'swa'");
	assert_int_equal(hc_store_get_v2(f.st, t, 2), -EINVAL);
	t[1].pool = NULL;
	assert_int_equal(hc_store_set_v2(f.st, t, 2), -EINVAL);
	assert_nothing_stored(&f);

	/* exists_v2: pool_hits is needed when there are transfers. */
	t[1].pool = "mamba";
	assert_int_equal(hc_store_exists_v2(f.st, keys, 2, t, 2, NULL, NULL), -EINVAL);
	assert_int_equal(hc_store_exists_v2(f.st, NULL, 2, t, 2, NULL, ph), -EINVAL);
	assert_int_equal(hc_store_exists_v2(f.st, keys, 2, NULL, 2, NULL, ph), -EINVAL);
	assert_int_equal(hc_store_exists_v2(NULL, keys, 2, t, 2, NULL, ph), -EINVAL);
	/* kv_hit_pages may be NULL. */
	assert_int_equal(hc_store_exists_v2(f.st, keys, 2, t, 2, NULL, ph), 0);

	/* Other calls on NULL. */
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(NULL, "kv", &info), -EINVAL);
	assert_int_equal(hc_store_pool_info(f.st, NULL, &info), -ENOENT);
	assert_int_equal(hc_store_register_group(f.st, NULL), -EINVAL);
	assert_int_equal(hc_store_alignment(NULL), 0);
	assert_false(hc_store_direct_io(NULL));
	assert_string_equal(hc_store_io_engine(NULL), "none");
	const char *engine = getenv("HICACHE_IO_ENGINE");
	if (!file)
		assert_string_equal(hc_store_io_engine(f.st), "none");
	else if (engine && (!strcmp(engine, "uring") || !strcmp(engine, "threads")))
		assert_string_equal(hc_store_io_engine(f.st), engine);
	hc_store_close(NULL);
	fx_close(&f);
}

static void test_null_args(void **state)
{
	(void)state;
	null_args(true);
	null_args(false);
}

/* n == 0 is a no-op returning 0, with or without arrays. */
static void zero_pages(bool file)
{
	struct fx f;
	fx_open(&f, file);
	struct hc_key key;
	st_keys(3, 1, 8, &key);
	uint64_t page = 0, kvh = 99, ph[2] = {99, 99};
	assert_int_equal(hc_store_set(f.st, NULL, 0, NULL, NULL), 0);
	assert_int_equal(hc_store_set(f.st, &key, 0, &page, NULL), 0);
	assert_int_equal(hc_store_get(f.st, NULL, 0, NULL, NULL), 0);
	assert_int_equal(hc_store_exists(f.st, NULL, 0), 0);
	assert_int_equal(hc_store_set_v2(f.st, NULL, 0), 0);
	assert_int_equal(hc_store_get_v2(f.st, NULL, 0), 0);
	struct hc_pool_transfer t[2] = {
		{"kv", NULL, 0, NULL, HC_HIT_ALL_PAGES, NULL, NULL},
		{"mamba", NULL, 0, NULL, HC_HIT_TRAILING_PAGES, NULL, NULL},
	};
	assert_int_equal(hc_store_set_v2(f.st, t, 2), 0);
	assert_int_equal(hc_store_get_v2(f.st, t, 2), 0);
	assert_int_equal(hc_store_exists_v2(f.st, NULL, 0, t, 2, &kvh, ph), 0);
	assert_int_equal(kvh, 0);
	assert_int_equal(ph[0], 0);
	assert_int_equal(ph[1], 0);
	assert_int_equal(hc_store_exists_v2(f.st, NULL, 0, NULL, 0, NULL, NULL), 0);
	assert_nothing_stored(&f);
	struct hc_store_stats s = st_stats(f.st, NULL);
	assert_int_equal(s.hits + s.misses + s.pages_read, 0);
	fx_close(&f);
}

static void test_zero_pages(void **state)
{
	(void)state;
	zero_pages(true);
	zero_pages(false);
}

/* ---- open errors ---- */

static void test_open_errors(void **state)
{
	(void)state;
	char dir[PATH_MAX], json[PATH_MAX + 128];
	st_mkdtemp(dir);
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s\"]}", dir);
	struct hc_store *st = (struct hc_store *)1;
	struct hc_store_opts o;
	hc_store_opts_init(&o, sizeof(o));
	assert_string_equal(o.backend, "file");
	assert_int_equal(o.tp_size, 1);
	assert_false(o.force_bounce);

	assert_int_equal(hc_store_open(NULL, &st), -EINVAL);
	assert_int_equal(hc_store_open(&o, NULL), -EINVAL);
	o.struct_size = 0; /* never initialised (an older size is fine: opts_test) */
	assert_int_equal(hc_store_open(&o, &st), -EINVAL);
	assert_null(st);
	assert_last_error_contains("struct_size");
	hc_store_opts_init(&o, sizeof(o));

	assert_int_equal(st_open_json("nfs", json, ST_MODEL, 0, 1, false, &st), -EINVAL);
	assert_null(st);
	assert_last_error_contains("'nfs'");
	assert_int_equal(st_open_json("file", json, ST_MODEL, 2, 2, false, &st), -EINVAL);
	assert_last_error_contains("tp_rank 2");
	assert_int_equal(st_open_json("file", json, ST_MODEL, 0, 0, false, &st), -EINVAL);
	assert_last_error_contains("tp_size");
	char model[300];
	memset(model, 'm', sizeof(model) - 1);
	model[sizeof(model) - 1] = 0;
	assert_int_equal(st_open_json("mem", "{}", model, 0, 1, false, &st), -ENAMETOOLONG);
	assert_null(st);
	assert_last_error_contains("model");
	/* Backend keys are checked. */
	snprintf(json, sizeof(json),
		 "{\"dirs\": [\"%s\"], \"l3_cleaner_low_watermark\": 90, "
		 "\"l3_cleaner_high_watermark\": 80}",
		 dir);
	assert_int_equal(st_open_json("file", json, ST_MODEL, 0, 1, false, &st), -EINVAL);
	assert_last_error_contains("l3_cleaner_low_watermark");
	/* A base dir whose parent does not exist. */
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s/no/such\"]}", dir);
	assert_int_equal(st_open_json("file", json, ST_MODEL, 0, 1, false, &st), -ENOENT);
	assert_last_error_contains("/no/such");
	/* A file where the base dir should be. */
	char file[PATH_MAX + 8];
	snprintf(file, sizeof(file), "%s/file", dir);
	int fd = open(file, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s\"]}", file);
	assert_int_equal(st_open_json("file", json, ST_MODEL, 0, 1, false, &st), -ENOTDIR);
	assert_null(st);
	assert_last_error_contains(file);
	assert_int_equal(st_count(dir).files, 1);
	st_rmrf(dir);
}

/* The same dir twice (by a symlink, or by another spelling): -EINVAL that
 * names it, and no store. */
static void test_duplicate_dir(void **state)
{
	(void)state;
	char root[PATH_MAX], real[PATH_MAX + 8], link_[PATH_MAX + 8], json[4 * PATH_MAX];
	st_mkdtemp(root);
	snprintf(real, sizeof(real), "%s/real", root);
	snprintf(link_, sizeof(link_), "%s/link", root);
	assert_int_equal(mkdir(real, 0700), 0);
	assert_int_equal(symlink(real, link_), 0);
	struct hc_store *st;
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s\", \"%s\"]}", real, link_);
	assert_int_equal(st_open_json("file", json, ST_MODEL, 0, 1, false, &st), -EINVAL);
	assert_null(st);
	assert_last_error_contains(link_);
	assert_last_error_contains("twice");
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s\", \"%s/../real/\"]}", real, real);
	assert_int_equal(st_open_json("file", json, ST_MODEL, 0, 1, false, &st), -EINVAL);
	assert_last_error_contains("twice");
	/* The same list through the environment. */
	char list[2 * PATH_MAX + 32];
	snprintf(list, sizeof(list), "%s,%s", link_, real);
	setenv("HICACHE_STORAGE_DIR", list, 1);
	int rc = st_open_json("file", NULL, ST_MODEL, 0, 1, false, &st);
	unsetenv("HICACHE_STORAGE_DIR");
	assert_int_equal(rc, -EINVAL);
	assert_last_error_contains("twice");
	st_rmrf(root);
}

/* ---- pages that fail ---- */

/* Replace the bucket dir of one object by a file: writes into it fail
 * (-ENOTDIR), other pages are stored; existing pages stay readable, no
 * temp file is left, results and stats say which pages failed. */
static void test_failed_pages(void **state)
{
	(void)state;
	struct fx f;
	fx_open(&f, true);
	enum { NP = 8 };
	struct hc_key keys[NP];
	st_keys(4, NP, 8, keys);
	uint64_t slots[NP], back[NP];
	for (uint64_t i = 0; i < NP; i++) {
		slots[i] = i;
		back[i] = SLOTS - 1 - i;
		st_fill(f.kv, i, KV_ID, i);
		st_fill(f.mamba, i, MAMBA_ID, i);
	}
	/* Pages 0 and 1 exist before the damage. */
	assert_int_equal(hc_store_set(f.st, keys, 2, slots, NULL), 0);

	/* Break the bucket of page 5's "_k", unless pages 0 or 1 live there. */
	char name[HC_NAME_MAX], bucket[3], bpath[PATH_MAX + 8];
	assert_true(hc_key_name(&keys[5], ST_SUFFIX, "_k", name, sizeof(name)) > 0);
	hc_key_bucket_hex(hc_key_route_hash(name), bucket);
	snprintf(bpath, sizeof(bpath), "%s/%s", f.dir, bucket);
	bool broken[NP] = {false};
	for (int i = 0; i < NP; i++)
		for (int o = 0; o < 2; o++) {
			char n2[HC_NAME_MAX], b2[3];
			hc_key_name(&keys[i], ST_SUFFIX, o ? "_v" : "_k", n2, sizeof(n2));
			hc_key_bucket_hex(hc_key_route_hash(n2), b2);
			if (!strcmp(b2, bucket))
				broken[i] = true;
		}
	if (broken[0] || broken[1])
		fail_msg("pick other keys: page 0 or 1 shares bucket %s", bucket);
	assert_int_equal(rmdir(bpath), 0);
	int fd = open(bpath, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);

	int res[NP];
	memset(res, 0x55, sizeof(res));
	struct hc_store_stats a = st_stats(f.st, NULL);
	assert_int_equal(hc_store_set(f.st, keys, NP, slots, res), -ENOTDIR);
	size_t nbroken = 0;
	int64_t first_broken = -1;
	for (int i = 0; i < NP; i++) {
		assert_int_equal(res[i], broken[i] ? -ENOTDIR : 0);
		nbroken += broken[i];
		if (broken[i] && first_broken < 0)
			first_broken = i;
	}
	assert_true(first_broken >= 2 && first_broken <= 5);
	struct hc_store_stats b = st_stats(f.st, NULL);
	assert_int_equal(b.failures - a.failures, nbroken);
	assert_int_equal(b.pages_written - a.pages_written, NP - 2 - nbroken);
	assert_int_equal(b.pages_existing - a.pages_existing, 2);
	assert_int_equal(st_stats(f.st, "kv").failures, nbroken);

	/* Without a results array the error still comes back (v1 and v2). */
	assert_int_equal(hc_store_set(f.st, keys, NP, slots, NULL), -ENOTDIR);
	struct hc_pool_transfer t[2] = {
		{"mamba", keys, NP, slots, HC_HIT_ALL_PAGES, NULL, NULL},
		{"kv", keys, NP, slots, HC_HIT_ALL_PAGES, NULL, NULL},
	};
	assert_int_equal(hc_store_set_v2(f.st, t, 2), -ENOTDIR);
	int mres[NP], kres[NP];
	t[0].results = mres;
	t[1].results = kres;
	assert_int_equal(hc_store_set_v2(f.st, t, 2), -ENOTDIR);
	for (int i = 0; i < NP; i++)
		assert_int_equal(kres[i], broken[i] ? -ENOTDIR : 0);

	struct st_count c = st_count(f.dir);
	assert_int_equal(c.tmps, 0);
	/* Every page that was stored reads back; the others fail on the
	 * broken bucket (an error, not a miss). */
	memset(res, 0x55, sizeof(res));
	a = st_stats(f.st, NULL);
	int64_t lead = hc_store_get(f.st, keys, NP, back, res);
	b = st_stats(f.st, NULL);
	assert_int_equal(lead, first_broken);
	assert_int_equal(b.failures - a.failures, nbroken);
	assert_int_equal(b.hits - a.hits, NP - nbroken);
	for (int i = 0; i < NP; i++) {
		assert_int_equal(res[i], broken[i] ? -ENOTDIR : 0);
		if (!broken[i])
			st_assert_page(f.kv, back[i], KV_ID, (uint64_t)i);
	}
	assert_int_equal(hc_store_exists(f.st, keys, NP), first_broken);

	/* Repaired, the same call stores the rest. */
	assert_int_equal(unlink(bpath), 0);
	assert_int_equal(mkdir(bpath, 0700), 0);
	assert_int_equal(hc_store_set(f.st, keys, NP, slots, NULL), 0);
	assert_int_equal(hc_store_get(f.st, keys, NP, back, NULL), NP);
	fx_close(&f);
}

/* A read-only base dir (root ignores mode bits, so a read-only bind
 * mount): the store opens, reads what is there, every write fails with
 * -EROFS, leaving nothing behind, and a set of pages already stored counts
 * them as stored. Small objects are written without a lookup and looked up
 * when that fails; large ones are looked up first: the same results. */
static void read_only_dir(uint32_t layers)
{
	if (!have_mounts)
		skip(); /* a bind mount needs CAP_SYS_ADMIN */
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	g.layers = layers;
	struct hc_pool *pool = st_kv_pool(&g);
	struct hc_key keys[4];
	st_keys(5, 4, 8, keys);
	uint64_t slots[4] = {0, 1, 2, 3}, back[4] = {15, 14, 13, 12};
	for (uint64_t i = 0; i < 4; i++)
		st_fill(pool, i, KV_ID, i);
	struct hc_store *st = st_open_file(dir, true, false, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	assert_int_equal(hc_store_set(st, keys, 2, slots, NULL), 0);
	hc_store_close(st);
	if (mount(dir, dir, NULL, MS_BIND, NULL) ||
	    mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL)) {
		umount2(dir, MNT_DETACH);
		st_rmrf(dir);
		hc_pool_destroy(pool);
		skip();
	}
	st = st_open_file(dir, true, false, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	int res[4];
	assert_int_equal(hc_store_set(st, keys, 4, slots, res), -EROFS);
	assert_int_equal(res[0], 0);
	assert_int_equal(res[1], 0);
	assert_int_equal(res[2], -EROFS);
	assert_int_equal(res[3], -EROFS);
	struct hc_store_stats s = st_stats(st, NULL);
	assert_int_equal(s.failures, 2);
	assert_int_equal(s.pages_existing, 2);
	assert_int_equal(hc_store_exists(st, keys, 4), 2);
	assert_int_equal(hc_store_get(st, keys, 4, back, res), 2);
	st_assert_page(pool, back[0], KV_ID, 0);
	st_assert_page(pool, back[1], KV_ID, 1);
	assert_int_equal(res[2], -ENOENT);
	hc_store_close(st);
	/* A closed ring's files are released by a kernel worker: retry EBUSY. */
	int urc = umount2(dir, 0);
	for (int i = 0; urc && errno == EBUSY && i < 100; i++) {
		usleep(20 * 1000);
		urc = umount2(dir, 0);
	}
	assert_int_equal(urc, 0);
	struct st_count c = st_count(dir);
	assert_int_equal(c.files, 4);
	assert_int_equal(c.tmps, 0);
	hc_pool_destroy(pool);
	st_rmrf(dir);
}

static void test_read_only_dir(void **state)
{
	(void)state;
	read_only_dir(2); /* 4 KiB objects */
}

static void test_read_only_dir_large(void **state)
{
	(void)state;
	read_only_dir(128); /* 256 KiB objects */
}

/* ---- stats ---- */

#define NSTAT_PAGE 9 /* the page and byte counters, first in the struct */

static void stats_add_up(bool file)
{
	struct fx f;
	fx_open(&f, file);
	struct hc_key keys[6];
	st_keys(6, 6, 8, keys);
	uint64_t slots[6] = {0, 1, 2, 3, 4, 5}, back[6] = {10, 11, 12, 13, 14, 15};
	for (uint64_t i = 0; i < 6; i++) {
		st_fill(f.kv, i, KV_ID, i);
		st_fill(f.mamba, i, MAMBA_ID, i);
	}
	struct hc_pool_transfer t[2] = {
		{"kv", keys, 4, slots, HC_HIT_ALL_PAGES, NULL, NULL},
		{"mamba", keys, 6, slots, HC_HIT_ALL_PAGES, NULL, NULL},
	};
	assert_int_equal(hc_store_set_v2(f.st, t, 2), 0);
	assert_int_equal(hc_store_set(f.st, keys, 6, slots, NULL), 0); /* 4 existing */
	t[0].n = 6;
	t[0].pages = t[1].pages = back;
	assert_int_equal(hc_store_get_v2(f.st, t, 2), 6);
	assert_int_equal(hc_store_exists(f.st, keys, 6), 6);
	uint64_t kvh, ph[2];
	t[1].policy = HC_HIT_TRAILING_PAGES;
	assert_int_equal(hc_store_exists_v2(f.st, keys, 6, t, 2, &kvh, ph), 6);
	struct hc_key other[2];
	st_keys(60, 2, 8, other);
	assert_int_equal(hc_store_get(f.st, other, 2, back, NULL), 0);

	struct hc_store_stats all = st_stats(f.st, NULL), kv = st_stats(f.st, "kv"),
			      m = st_stats(f.st, "mamba");
	assert_int_equal(kv.pages_written, 6);
	assert_int_equal(kv.pages_existing, 4);
	assert_int_equal(m.pages_written, 6);
	assert_int_equal(kv.pages_read, 6);
	assert_int_equal(m.pages_read, 6);
	assert_int_equal(kv.bytes_written, 6 * hc_pool_page_bytes(f.kv));
	assert_int_equal(m.bytes_read, 6 * hc_pool_page_bytes(f.mamba));
	assert_int_equal(kv.misses, 2);
	assert_int_equal(all.set_batches, 2);
	assert_int_equal(all.get_batches, 2);
	assert_int_equal(all.exists_batches, 2);
	uint64_t set_hist = 0, get_hist = 0, ex_hist = 0;
	for (int i = 0; i < HC_STORE_LAT_BUCKETS; i++) {
		set_hist += all.set_latency_us[i];
		get_hist += all.get_latency_us[i];
		ex_hist += all.exists_latency_us[i];
	}
	assert_int_equal(set_hist, all.set_batches);
	assert_int_equal(get_hist, all.get_batches);
	assert_int_equal(ex_hist, all.exists_batches);
	double q = hc_store_latency_quantile(all.get_latency_us, 0.5);
	assert_true(q >= 1.0);
	/* Every page and byte counter of the store is the sum over its pools. */
	const uint64_t *pa = (const uint64_t *)&all, *pk = (const uint64_t *)&kv,
		       *pm = (const uint64_t *)&m;
	for (size_t i = 0; i < NSTAT_PAGE; i++)
		if (pa[i] != pk[i] + pm[i])
			fail_msg("counter %zu: store %llu, pools %llu + %llu", i,
				 (unsigned long long)pa[i], (unsigned long long)pk[i],
				 (unsigned long long)pm[i]);
	fx_close(&f);
}

static void test_stats_add_up(void **state)
{
	(void)state;
	_Static_assert(offsetof(struct hc_store_stats, set_batches) ==
			       NSTAT_PAGE * sizeof(uint64_t),
		       "page and byte counters come first");
	stats_add_up(true);
	stats_add_up(false);
}

int main(void)
{
	have_mounts = st_private_mounts();
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_efault),        cmocka_unit_test(test_null_args),
		cmocka_unit_test(test_zero_pages),    cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_duplicate_dir), cmocka_unit_test(test_failed_pages),
		cmocka_unit_test(test_read_only_dir), cmocka_unit_test(test_read_only_dir_large),
		cmocka_unit_test(test_stats_add_up),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
