/* A page's objects do not depend on how this process moves them: the
 * same page_first / page_first_direct KV (MHA and MLA) and Mamba pools
 * registered zero-copy and bounced (force_bounce for the store or for one
 * pool, or memory O_DIRECT cannot use) over one dir read each other's
 * pages byte for byte, both ways; the two modes write identical object
 * files (names, payloads, trailers); hc_store_pool_info says which mode a
 * pool got and the same objects per page. Before, a bounce pool wrote one
 * "<key><suffix>" object where a zero-copy one wrote "_k" and "_v", and
 * neither saw the other's pages. */
#include "store_test.h"

enum { KV_ID = 1, MAMBA_ID = 2 };
#define NP 4
#define SLOTS 16

struct geo {
	const char *what;
	struct hc_kv_geometry kv;
	unsigned kv_objects;
};

static struct hc_mamba_geometry mamba_geo(void)
{
	struct hc_mamba_geometry g = {.slots = SLOTS,
				      .layers = 2,
				      .temporal_bytes = 2048,
				      .nconv = 2,
				      .conv_bytes = {2048, 6144}};
	return g;
}

/* A store over dir with the KV anchor and "mamba"; bounce: the store's
 * force_bounce, pool_bounce: the KV pool's own. */
static struct hc_store *open_with(const char *dir, bool direct, bool bounce, bool pool_bounce,
				  struct hc_pool *kv, struct hc_pool *mamba)
{
	struct hc_store *st = dir ? st_open_file(dir, direct, bounce, NULL) : st_open_mem(bounce);
	struct hc_pool_reg r;
	hc_pool_reg_init(&r, sizeof(r));
	r.anchor = true;
	r.force_bounce = pool_bounce;
	assert_int_equal(hc_store_register_pool_ex(st, "kv", kv, &r), 0);
	assert_int_equal(hc_store_register_pool(st, "mamba", mamba, false), 0);
	return st;
}

static void set_pages(struct hc_store *st, struct hc_pool *kv, struct hc_pool *mamba,
		      const struct hc_key *keys, uint64_t first)
{
	uint64_t w[NP];
	int rk[NP], rm[NP];
	for (uint64_t i = 0; i < NP; i++) {
		w[i] = i;
		st_fill(kv, w[i], KV_ID, first + i);
		st_fill(mamba, w[i], MAMBA_ID, first + i);
	}
	struct hc_pool_transfer t[2] = {
		{"kv", keys, NP, w, HC_HIT_ALL_PAGES, rk, NULL},
		{"mamba", keys, NP, w, HC_HIT_ALL_PAGES, rm, NULL},
	};
	assert_int_equal(hc_store_set_v2(st, t, 2), 0);
}

/* Every page of keys reads back whole into other slots, in both pools. */
static void get_pages(struct hc_store *st, struct hc_pool *kv, struct hc_pool *mamba,
		      const struct hc_key *keys, uint64_t first, const char *what)
{
	uint64_t r[NP];
	int rk[NP], rm[NP];
	for (uint64_t i = 0; i < NP; i++) {
		r[i] = SLOTS - 1 - i;
		st_clear(kv, r[i]);
		st_clear(mamba, r[i]);
	}
	struct hc_pool_transfer t[2] = {
		{"kv", keys, NP, r, HC_HIT_ALL_PAGES, rk, NULL},
		{"mamba", keys, NP, r, HC_HIT_ALL_PAGES, rm, NULL},
	};
	int got = hc_store_get_v2(st, t, 2);
	if (got != NP)
		fail_msg("%s: get read %d of %d pages (kv %d, mamba %d)", what, got, NP, rk[0],
			 rm[0]);
	for (uint64_t i = 0; i < NP; i++) {
		assert_int_equal(rk[i], 0);
		assert_int_equal(rm[i], 0);
		st_assert_page(kv, r[i], KV_ID, first + i);
		st_assert_page(mamba, r[i], MAMBA_ID, first + i);
	}
	assert_int_equal(st_stats(st, NULL).corrupt, 0);
}

static void info_of(struct hc_store *st, const char *pool, struct hc_store_pool_info *out)
{
	assert_int_equal(hc_store_pool_info(st, pool, out), 0);
}

/* The pools' modes: z zero-copy, b bounced, with the same objects. */
static void check_modes(struct hc_store *z, struct hc_store *b, const char *pool, bool b_zero_copy,
			unsigned objects)
{
	struct hc_store_pool_info iz, ib;
	info_of(z, pool, &iz);
	info_of(b, pool, &ib);
	assert_true(iz.zero_copy);
	assert_int_equal(ib.zero_copy, b_zero_copy);
	assert_int_equal(iz.objects, objects);
	assert_int_equal(ib.objects, objects);
	assert_int_equal(iz.slot_bytes, 0);
	if (!b_zero_copy)
		assert_true(ib.slot_bytes >= iz.page_bytes + objects * hc_store_object_block(b));
}

/* Zero-copy and forced-bounce stores over one dir (or, dir NULL, one mem
 * store whose pools are registered again in the other mode). */
static void cross(const struct geo *g, const char *dir, bool pool_bounce)
{
	struct hc_kv_geometry kg = g->kv;
	struct hc_mamba_geometry mg = mamba_geo();
	struct hc_pool *kz = st_kv_pool(&kg), *kb = st_kv_pool(&kg);
	struct hc_pool *mz = st_mamba_pool(&mg), *mb = st_mamba_pool(&mg);
	struct hc_key k1[NP], k2[NP];
	st_keys(1, NP, kg.page_size, k1);
	st_keys(2, NP, kg.page_size, k2);
	if (dir) {
		struct hc_store *z = open_with(dir, true, false, false, kz, mz);
		struct hc_store *b = open_with(dir, true, !pool_bounce, pool_bounce, kb, mb);
		check_modes(z, b, "kv", false, g->kv_objects);
		check_modes(z, b, "mamba", pool_bounce, 3); /* only the KV pool bounces */
		set_pages(z, kz, mz, k1, 0);
		get_pages(b, kb, mb, k1, 0, g->what);
		set_pages(b, kb, mb, k2, 100);
		get_pages(z, kz, mz, k2, 100, g->what);
		/* Each mode's pages are the other's: nothing was written twice. */
		assert_int_equal(st_count(dir).files, 2 * NP * (g->kv_objects + 3));
		hc_store_close(z);
		hc_store_close(b);
		st_empty_dir(dir);
	} else {
		struct hc_store *st = open_with(NULL, false, false, false, kz, mz);
		set_pages(st, kz, mz, k1, 0);
		assert_int_equal(hc_store_unregister_pool(st, "kv"), 0);
		assert_int_equal(hc_store_unregister_pool(st, "mamba"), 0);
		struct hc_pool_reg r;
		hc_pool_reg_init(&r, sizeof(r));
		r.anchor = true;
		r.force_bounce = true;
		assert_int_equal(hc_store_register_pool_ex(st, "kv", kb, &r), 0);
		r.anchor = false;
		assert_int_equal(hc_store_register_pool_ex(st, "mamba", mb, &r), 0);
		get_pages(st, kb, mb, k1, 0, g->what);
		set_pages(st, kb, mb, k2, 100);
		assert_int_equal(st_stats(st, NULL).pages_existing, 0);
		hc_store_close(st);
	}
	hc_pool_destroy(kz);
	hc_pool_destroy(kb);
	hc_pool_destroy(mz);
	hc_pool_destroy(mb);
}

static const struct geo *geos(size_t *n)
{
	static struct geo g[3];
	g[0] = (struct geo){"page_first MHA", st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS), 2};
	g[1] = (struct geo){"page_first MLA", st_kv_geo(HC_LAYOUT_PAGE_FIRST, true, SLOTS), 1};
	g[2] = (struct geo){"page_first_direct MHA",
			    st_kv_geo(HC_LAYOUT_PAGE_FIRST_DIRECT, false, SLOTS), 2};
	*n = 3;
	return g;
}

static void test_file_force_bounce(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	size_t n;
	const struct geo *g = geos(&n);
	for (size_t i = 0; i < n; i++) {
		cross(&g[i], dir, false); /* the store's force_bounce */
		cross(&g[i], dir, true);  /* the KV pool's own */
	}
	st_rmrf(dir);
}

static void test_mem_force_bounce(void **state)
{
	(void)state;
	size_t n;
	const struct geo *g = geos(&n);
	for (size_t i = 0; i < n; i++)
		cross(&g[i], NULL, false);
}

/* Read a whole file; *len gets its size. */
static uint8_t *slurp(const char *path, size_t *len)
{
	long long size = st_file_size(path);
	assert_true(size > 0);
	uint8_t *buf = malloc((size_t)size);
	assert_non_null(buf);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, (size_t)size, 0), size);
	close(fd);
	*len = (size_t)size;
	return buf;
}

/* One page written zero-copy into one dir and bounced into another: the
 * same files, byte for byte (payload, padding and trailer). */
static void test_identical_objects(void **state)
{
	(void)state;
	size_t n;
	const struct geo *g = geos(&n);
	for (size_t i = 0; i < n; i++) {
		char dz[PATH_MAX], db[PATH_MAX];
		st_mkdtemp(dz);
		st_mkdtemp(db);
		struct hc_kv_geometry kg = g[i].kv;
		struct hc_mamba_geometry mg = mamba_geo();
		struct hc_pool *kv = st_kv_pool(&kg), *mamba = st_mamba_pool(&mg);
		struct hc_store *z = open_with(dz, true, false, false, kv, mamba);
		struct hc_store *b = open_with(db, true, true, false, kv, mamba);
		struct hc_key keys[NP];
		st_keys(3, NP, kg.page_size, keys);
		set_pages(z, kv, mamba, keys, 0);
		set_pages(b, kv, mamba, keys, 0);
		static const char *const comps[] = {"_k", "_v", "_mamba_temporal", "_mamba_conv_0",
						    "_mamba_conv_1"};
		size_t files = 0;
		for (size_t c = 0; c < sizeof(comps) / sizeof(comps[0]); c++) {
			bool mla_v = kg.mla && c == 1;
			const char *suffix = kg.mla && c < 2 ? ST_SUFFIX_MLA : ST_SUFFIX;
			char pz[PATH_MAX], pb[PATH_MAX];
			st_obj_path(dz, &keys[0], suffix, comps[c], pz);
			st_obj_path(db, &keys[0], suffix, comps[c], pb);
			if (mla_v) {
				assert_int_equal(st_file_size(pz), -1);
				assert_int_equal(st_file_size(pb), -1);
				continue;
			}
			size_t lz, lb;
			uint8_t *a = slurp(pz, &lz), *bb = slurp(pb, &lb);
			assert_int_equal(lz, lb);
			if (memcmp(a, bb, lz))
				fail_msg("%s: %s differs between the modes", g[i].what, comps[c]);
			free(a);
			free(bb);
			files++;
		}
		assert_int_equal(st_count(dz).files, NP * files);
		assert_int_equal(st_count(db).files, NP * files);
		hc_store_close(z);
		hc_store_close(b);
		hc_pool_destroy(kv);
		hc_pool_destroy(mamba);
		st_rmrf(dz);
		st_rmrf(db);
	}
}

/* Memory O_DIRECT cannot use (segments of 2400 bytes) bounces under
 * direct I/O and moves zero-copy with buffered I/O: a config change
 * (use_direct_io) keeps every page readable. */
static void test_unaligned_direct(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	if (!st_dir_supports_direct(dir)) {
		st_rmrf(dir);
		skip();
	}
	struct hc_kv_geometry kg = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	kg.layers = 1;
	kg.heads = 1;
	kg.head_dim = 150; /* 8 x 1 x 1 x 150 x 2 = 2400 */
	struct hc_mamba_geometry mg = mamba_geo();
	mg.temporal_bytes = 40; /* 80 + 4096 + 12288: unaligned as well */
	struct hc_pool *kd = st_kv_pool(&kg), *kb = st_kv_pool(&kg);
	struct hc_pool *md = st_mamba_pool(&mg), *mb = st_mamba_pool(&mg);
	struct hc_store *d = open_with(dir, true, false, false, kd, md);
	struct hc_store *buffered = open_with(dir, false, false, false, kb, mb);
	assert_true(hc_store_direct_io(d));
	/* d bounces (unaligned under O_DIRECT), buffered moves zero-copy. */
	check_modes(buffered, d, "kv", false, 2);
	check_modes(buffered, d, "mamba", false, 3);
	struct hc_key k1[NP], k2[NP];
	st_keys(4, NP, 8, k1);
	st_keys(5, NP, 8, k2);
	set_pages(d, kd, md, k1, 0);
	get_pages(buffered, kb, mb, k1, 0, "direct -> buffered");
	set_pages(buffered, kb, mb, k2, 100);
	get_pages(d, kd, md, k2, 100, "buffered -> direct");
	assert_int_equal(st_count(dir).files, 2 * NP * (2 + 3));
	hc_store_close(d);
	hc_store_close(buffered);
	hc_pool_destroy(kd);
	hc_pool_destroy(kb);
	hc_pool_destroy(md);
	hc_pool_destroy(mb);
	st_rmrf(dir);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_force_bounce),
		cmocka_unit_test(test_mem_force_bounce),
		cmocka_unit_test(test_identical_objects),
		cmocka_unit_test(test_unaligned_direct),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
