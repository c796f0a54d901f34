/* Wrapped pools through a store: a created pool and a wrapped pool over a
 * copy of its memory (its "twin") write byte-identical objects under the
 * same names (same geometry tag, segments and flat pages), and each reads
 * the other's pages, zero-copy and bounce, for KV MHA in every layout (one
 * kv_buffer, and separate K and V), MLA, Mamba and an indexer; a segments
 * pool reads its twin's pages too and may be the anchor (K and V). */
#include "store_test.h"

#include <dirent.h>
#include <sys/mman.h>

enum { ID = 7 };
#define NP 4 /* pages written; pools have 2 * NP slots */

struct twin {
	struct hc_pool *pool;
	uint8_t *mem, *vmem; /* vmem: the separate V copy, or NULL */
	size_t len, vlen;
};

static uint8_t *map_copy(const void *src, size_t len)
{
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(m != MAP_FAILED);
	memcpy(m, src, len);
	return m;
}

/* A wrapped pool over a copy of created pool a's memory, each buffer where
 * it is in a (split_kv: K and V as two separate copies). */
static struct twin make_twin(struct hc_pool *a, bool split_kv)
{
	struct hc_region r;
	assert_int_equal(hc_pool_regions(a, &r, 1), 1);
	struct twin t = {NULL, map_copy(r.addr, r.len), NULL, r.len, 0};
	const struct hc_kv_geometry *kv = hc_pool_kv_geometry(a);
	if (kv && split_kv) {
		size_t half = hc_pool_page_bytes(a) / 2 * kv->pages;
		t.vmem = map_copy(t.mem + half, half);
		t.vlen = half;
		memset(t.mem + half, 0, half); /* only the copy holds V */
		struct hc_region bufs[2] = {{t.mem, half}, {t.vmem, half}};
		assert_int_equal(hc_pool_wrap_kv(kv, bufs, 2, &t.pool), 0);
		return t;
	}
	if (kv) {
		struct hc_region buf = {t.mem, t.len};
		assert_int_equal(hc_pool_wrap_kv(kv, &buf, 1, &t.pool), 0);
		return t;
	}
	const struct hc_mamba_geometry *mg = hc_pool_mamba_geometry(a);
	struct hc_segment segs[9];
	int n = hc_pool_page_segments(a, 0, segs, 9);
	assert_true(n > 0);
	struct hc_region bufs[9];
	for (int i = 0; i < n; i++)
		bufs[i] = (struct hc_region){t.mem + ((uint8_t *)segs[i].addr - (uint8_t *)r.addr),
					     segs[i].len * hc_pool_pages(a)};
	if (mg) {
		bool temporal = mg->temporal_bytes > 0;
		assert_int_equal(hc_pool_wrap_mamba(mg, temporal ? &bufs[0] : NULL, bufs + temporal,
						    &t.pool),
				 0);
	} else {
		struct hc_indexer_geometry ig = {.pages = hc_pool_pages(a),
						 .page_size = hc_pool_page_tokens(a),
						 .page_bytes = hc_pool_page_bytes(a)};
		assert_int_equal(hc_pool_wrap_indexer(&ig, &bufs[0], &t.pool), 0);
	}
	return t;
}

static void twin_free(struct twin *t)
{
	hc_pool_destroy(t->pool);
	munmap(t->mem, t->len);
	if (t->vmem)
		munmap(t->vmem, t->vlen);
}

static int set_pages(struct hc_store *st, const char *name, const struct hc_key *keys,
		     const uint64_t *slots)
{
	int res[NP];
	struct hc_pool_transfer t = {name, keys, NP, slots, HC_HIT_ALL_PAGES, res, NULL};
	int rc = hc_store_set_v2(st, &t, 1);
	for (int i = 0; i < NP && !rc; i++)
		assert_int_equal(res[i], 0);
	return rc;
}

/* Read keys into slots NP..2NP-1 (zeroed first) and check them. */
static void get_pages(struct hc_store *st, const char *name, struct hc_pool *pool,
		      const struct hc_key *keys, uint64_t first_page)
{
	uint64_t r[NP];
	for (int i = 0; i < NP; i++) {
		r[i] = NP + (uint64_t)i;
		st_clear(pool, r[i]);
	}
	int res[NP];
	struct hc_pool_transfer t = {name, keys, NP, r, HC_HIT_ALL_PAGES, res, NULL};
	assert_int_equal(hc_store_get_v2(st, &t, 1), NP);
	for (int i = 0; i < NP; i++)
		st_assert_page(pool, r[i], ID, first_page + (uint64_t)i);
}

/* Every object in dir a is in dir b with the same bytes, and b has no
 * others. */
static void assert_same_objects(const char *a, const char *b)
{
	size_t na = 0, nb = 0;
	for (unsigned bucket = 0; bucket < 256; bucket++) {
		char pa[PATH_MAX], pb[PATH_MAX];
		assert_true(snprintf(pa, sizeof(pa), "%s/%02x", a, bucket) < (int)sizeof(pa));
		assert_true(snprintf(pb, sizeof(pb), "%s/%02x", b, bucket) < (int)sizeof(pb));
		for (int side = 0; side < 2; side++) {
			DIR *d = opendir(side ? pb : pa);
			assert_non_null(d);
			struct dirent *de;
			while ((de = readdir(d))) {
				if (de->d_name[0] == '.')
					continue;
				if (side) {
					nb++;
					continue;
				}
				na++;
				char fa[PATH_MAX + 260], fb[PATH_MAX + 260];
				snprintf(fa, sizeof(fa), "%s/%s", pa, de->d_name);
				snprintf(fb, sizeof(fb), "%s/%s", pb, de->d_name);
				long long len = st_file_size(fa);
				if (st_file_size(fb) != len)
					fail_msg("%s: %lld bytes, its twin %lld", fb,
						 st_file_size(fb), len);
				uint8_t *x = malloc((size_t)len), *y = malloc((size_t)len);
				FILE *f = fopen(fa, "rb"), *g = fopen(fb, "rb");
				assert_int_equal(fread(x, 1, (size_t)len, f), (size_t)len);
				assert_int_equal(fread(y, 1, (size_t)len, g), (size_t)len);
				fclose(f);
				fclose(g);
				if (memcmp(x, y, (size_t)len))
					fail_msg("%s differs from its twin", fb);
				free(x);
				free(y);
			}
			closedir(d);
		}
	}
	assert_true(na > 0);
	assert_int_equal(na, nb);
}

/* Pool a (created) and its twin b, registered as `name` in stores over
 * two dirs, then across: b reads what a wrote and a what b wrote. */
static void cross(struct hc_pool *a, bool split_kv, const char *name, bool bounce)
{
	bool anchor = hc_pool_kind(a) == HC_POOL_KV;
	char da[PATH_MAX], db[PATH_MAX];
	st_mkdtemp(da);
	st_mkdtemp(db);
	bool direct = st_dir_supports_direct(da);
	uint64_t w[NP];
	for (int i = 0; i < NP; i++) {
		w[i] = (uint64_t)i;
		st_fill(a, w[i], ID, (uint64_t)i);
	}
	struct twin b = make_twin(a, split_kv);
	struct hc_key k1[NP], k2[NP];
	st_keys(31, NP, hc_pool_page_tokens(a), k1);
	st_keys(32, NP, hc_pool_page_tokens(a), k2);

	struct hc_store *sa = st_open_file(da, direct, bounce, NULL);
	struct hc_store *sb = st_open_file(db, direct, bounce, NULL);
	assert_int_equal(hc_store_register_pool(sa, name, a, anchor), 0);
	assert_int_equal(hc_store_register_pool(sb, name, b.pool, anchor), 0);
	struct hc_store_pool_info ia, ib;
	assert_int_equal(hc_store_pool_info(sa, name, &ia), 0);
	assert_int_equal(hc_store_pool_info(sb, name, &ib), 0);
	assert_int_equal(ia.zero_copy, ib.zero_copy);
	assert_int_equal(ia.objects, ib.objects);
	assert_int_equal(ia.page_bytes, ib.page_bytes);
	assert_int_equal(set_pages(sa, name, k1, w), 0);
	assert_int_equal(set_pages(sb, name, k1, w), 0);
	assert_same_objects(da, db);
	hc_store_close(sb);

	/* b over a's dir: reads a's pages, writes pages a reads. */
	sb = st_open_file(da, direct, bounce, NULL);
	assert_int_equal(hc_store_register_pool(sb, name, b.pool, anchor), 0);
	get_pages(sb, name, b.pool, k1, 0);
	for (int i = 0; i < NP; i++)
		st_fill(b.pool, w[i], ID, 100 + (uint64_t)i);
	assert_int_equal(set_pages(sb, name, k2, w), 0);
	get_pages(sa, name, a, k2, 100);
	hc_store_close(sa);
	hc_store_close(sb);
	twin_free(&b);
	st_rmrf(da);
	st_rmrf(db);
}

static void test_kv(void **state)
{
	(void)state;
	static const enum hc_kv_layout layouts[] = {HC_LAYOUT_LAYER_FIRST, HC_LAYOUT_PAGE_FIRST,
						    HC_LAYOUT_PAGE_FIRST_DIRECT,
						    HC_LAYOUT_PAGE_HEAD};
	for (int li = 0; li < 4; li++)
		for (int mla = 0; mla < 2; mla++)
			for (int bounce = 0; bounce < 2; bounce++)
				for (int split = 0; split <= !mla; split++) {
					struct hc_kv_geometry g = st_kv_geo(layouts[li], mla,
									    2 * NP);
					struct hc_pool *a = st_kv_pool(&g);
					cross(a, split, "kv", bounce);
					hc_pool_destroy(a);
				}
}

static void test_side_pools(void **state)
{
	(void)state;
	for (int bounce = 0; bounce < 2; bounce++) {
		struct hc_mamba_geometry mg = {.slots = 2 * NP,
					       .layers = 2,
					       .temporal_bytes = 2048,
					       .nconv = 2,
					       .conv_bytes = {4096, 1024}};
		struct hc_pool *a = st_mamba_pool(&mg);
		cross(a, false, "mamba", bounce);
		hc_pool_destroy(a);
		mg.temporal_bytes = 0;
		a = st_mamba_pool(&mg);
		cross(a, false, "mamba", bounce);
		hc_pool_destroy(a);
		a = st_indexer_pool(2 * NP, 8, 4096);
		cross(a, false, "indexer", bounce);
		hc_pool_destroy(a);
	}
}

/* SWA-like K/V over strided views: two segments pools over the same
 * bytes read each other's pages; a K/V segments pool may be the anchor
 * (objects "_k", "_v" in either mode, as a page_first KV anchor's). */
static void test_segments(void **state)
{
	(void)state;
	size_t len = 2 * NP * 8192;
	uint8_t *m1 = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			   0);
	uint8_t *m2 = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			   0);
	assert_true(m1 != MAP_FAILED && m2 != MAP_FAILED);
	for (int bounce = 0; bounce < 2; bounce++)
		for (int anchor = 0; anchor < 2; anchor++) {
			struct hc_pool *p[2];
			uint8_t *m[2] = {m1, m2};
			for (int i = 0; i < 2; i++) {
				struct hc_segment_buffer sb[2] = {
					{m[i], len, 8192, 4096, HC_COMP_K, 0},
					{m[i] + len, len, 8192, 8192, HC_COMP_V, 1},
				};
				assert_int_equal(hc_pool_wrap_segments(sb, 2, 2 * NP, 8, &p[i]), 0);
			}
			char dir[PATH_MAX];
			st_mkdtemp(dir);
			bool direct = st_dir_supports_direct(dir);
			struct hc_store *s1 = st_open_file(dir, direct, bounce, NULL);
			struct hc_store *s2 = st_open_file(dir, direct, bounce, NULL);
			const char *name = anchor ? "anchor" : "swa";
			assert_int_equal(hc_store_register_pool(s1, name, p[0], anchor), 0);
			assert_int_equal(hc_store_register_pool(s2, name, p[1], anchor), 0);
			struct hc_key keys[NP];
			st_keys(40 + (uint32_t)(2 * bounce + anchor), NP, 8, keys);
			uint64_t w[NP];
			for (int i = 0; i < NP; i++) {
				w[i] = (uint64_t)i;
				st_fill(p[0], w[i], ID, (uint64_t)i);
			}
			assert_int_equal(set_pages(s1, name, keys, w), 0);
			get_pages(s2, name, p[1], keys, 0);
			struct hc_store_pool_info info;
			assert_int_equal(hc_store_pool_info(s1, name, &info), 0);
			char path[PATH_MAX];
			/* One object per segment, zero-copy or bounced alike. */
			assert_int_equal(info.zero_copy, !bounce && direct);
			assert_int_equal(info.objects, 2);
			if (anchor) {
				st_obj_path(dir, &keys[0], ST_SUFFIX, "_k", path);
				st_assert_file(path, st_obj_len(s1, 4096));
				st_obj_path(dir, &keys[0], ST_SUFFIX, "_v", path);
				st_assert_file(path, st_obj_len(s1, 8192));
				/* v1 calls use it. */
				assert_int_equal(hc_store_exists(s2, keys, NP), NP);
			} else {
				st_obj_path(dir, &keys[0], ST_SUFFIX, "_swa_k", path);
				st_assert_file(path, st_obj_len(s1, 4096));
			}
			hc_store_close(s1);
			hc_store_close(s2);
			hc_pool_destroy(p[0]);
			hc_pool_destroy(p[1]);
			st_rmrf(dir);
		}
	munmap(m1, 2 * len);
	munmap(m2, 2 * len);
}

/* A segments anchor must name its objects apart: two plain buffers
 * cannot be an anchor (their objects would share a name, zero-copy or
 * bounced: a page's objects do not depend on the mode); another kind
 * (mamba) cannot be one at all. */
static void test_segments_anchor_rules(void **state)
{
	(void)state;
	static uint8_t mem[2][8192] __attribute__((aligned(4096)));
	struct hc_segment_buffer sb[2] = {{mem[0], 8192, 4096, 4096, HC_COMP_PLAIN, 0},
					  {mem[1], 8192, 4096, 4096, HC_COMP_PLAIN, 1}};
	struct hc_pool *p;
	assert_int_equal(hc_pool_wrap_segments(sb, 2, 2, 1, &p), 0);
	struct hc_store *st = st_open_mem(false);
	assert_int_equal(hc_store_register_pool(st, "kv", p, true), -EINVAL);
	assert_last_error_contains("same component");
	/* As a side pool its objects are "_<pool>_0", "_<pool>_1". */
	assert_int_equal(hc_store_register_pool(st, "side", p, false), 0);
	hc_store_close(st);
	st = st_open_mem(true);
	assert_int_equal(hc_store_register_pool(st, "kv", p, true), -EINVAL);
	assert_last_error_contains("same component");
	hc_store_close(st);
	hc_pool_destroy(p);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kv),
		cmocka_unit_test(test_side_pools),
		cmocka_unit_test(test_segments),
		cmocka_unit_test(test_segments_anchor_rules),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
