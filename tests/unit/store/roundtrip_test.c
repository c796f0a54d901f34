/* Round trips: every KV layout x zero-copy/bounce x direct/buffered on the
 * file backend, and on mem, for KV MHA and MLA, Mamba (temporal + 2 conv,
 * conv only), SWA and an indexer whose pages are not a multiple of 4096;
 * pages read back into other slots than they were written from. Pool
 * contexts (hc_store_pool_info), physical names, buckets and modes on disk
 * as docs/FORMAT.md says; batches far longer than 128 pages. */
#include "store_test.h"

#include <dirent.h>

enum { KV_ID = 1, MAMBA_ID = 2, INDEXER_ID = 3, SWA_ID = 4 };

/* Indexer page bytes: 64 tokens x 132 bytes, not a multiple of 4096. */
#define INDEXER_BYTES (64 * 132)

/* 256 bucket dirs 00..ff of mode 0700 and nothing else at the top; every
 * object file is mode 0600. */
static void check_dir_layout(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	bool seen[256] = {false};
	unsigned n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (strlen(de->d_name) != 2 || strspn(de->d_name, "0123456789abcdef") != 2)
			fail_msg("unexpected entry '%s' in the base dir", de->d_name);
		unsigned b = (unsigned)strtoul(de->d_name, NULL, 16);
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		struct stat sb;
		assert_int_equal(stat(p, &sb), 0);
		assert_true(S_ISDIR(sb.st_mode));
		if ((sb.st_mode & 07777) != 0700)
			fail_msg("bucket %s has mode %o", p, sb.st_mode & 07777);
		assert_false(seen[b]);
		seen[b] = true;
		n++;
		DIR *bd = opendir(p);
		assert_non_null(bd);
		struct dirent *fe;
		while ((fe = readdir(bd))) {
			if (fe->d_name[0] == '.' &&
			    (!fe->d_name[1] || (fe->d_name[1] == '.' && !fe->d_name[2])))
				continue;
			char fp[PATH_MAX + 260];
			snprintf(fp, sizeof(fp), "%s/%s", p, fe->d_name);
			assert_int_equal(stat(fp, &sb), 0);
			assert_true(S_ISREG(sb.st_mode));
			if ((sb.st_mode & 07777) != 0600)
				fail_msg("object %s has mode %o", fp, sb.st_mode & 07777);
		}
		closedir(bd);
	}
	closedir(d);
	assert_int_equal(n, 256);
}

/* ---- KV on the anchor, v1 ---- */

struct kv_case {
	const char *backend;
	enum hc_kv_layout layout;
	bool mla;
	bool bounce;
	bool direct;
	uint32_t head_dim; /* 0: st_kv_geo()'s */
};

#define NPAGES 8
#define NSLOTS 20

/* dir: an empty base dir for the file backend (emptied again at the end). */
static void kv_round_trip(const struct kv_case *kc, const char *dir)
{
	bool file = !strcmp(kc->backend, "file");
	struct hc_store *st;
	if (file) {
		st = st_open_file(dir, kc->direct, kc->bounce, NULL);
		bool want_direct = kc->direct && st_dir_supports_direct(dir);
		assert_int_equal(hc_store_direct_io(st), want_direct);
		/* The file system's direct-I/O alignment (statx), at most 4096. */
		size_t align = hc_store_alignment(st);
		if (want_direct)
			assert_true(align >= 512 && align <= 4096 && !(align & (align - 1)));
		else
			assert_int_equal(align, 1);
		const char *engine = getenv("HICACHE_IO_ENGINE");
		if (engine && (!strcmp(engine, "uring") || !strcmp(engine, "threads")))
			assert_string_equal(hc_store_io_engine(st), engine);
	} else {
		st = st_open_mem(kc->bounce);
		assert_false(hc_store_direct_io(st));
		assert_int_equal(hc_store_alignment(st), 1);
	}
	struct hc_kv_geometry g = st_kv_geo(kc->layout, kc->mla, NSLOTS);
	if (kc->head_dim)
		g.head_dim = kc->head_dim;
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);

	/* The objects: K and V (MLA: K) for page_first and page_first_direct,
	 * one of the flat page for layer_first and page_head, in every mode.
	 * Zero-copy only for a split layout that is aligned for the backend's
	 * direct I/O, never when bounce is forced; else each object's image
	 * has its place in the bounce slot. */
	size_t seg = (size_t)g.layers * g.page_size * g.heads * g.head_dim * g.elem_bytes;
	size_t page_bytes = kc->mla ? seg : 2 * seg;
	bool split = kc->layout == HC_LAYOUT_PAGE_FIRST ||
		     kc->layout == HC_LAYOUT_PAGE_FIRST_DIRECT;
	unsigned objects = split ? (kc->mla ? 1 : 2) : 1;
	bool aligned_io = hc_store_alignment(st) > 1;
	bool zero_copy = !kc->bounce && split && (!aligned_io || seg % hc_store_alignment(st) == 0);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "kv", &info), 0);
	assert_int_equal(info.zero_copy, zero_copy);
	assert_int_equal(info.page_bytes, page_bytes);
	assert_int_equal(info.alignment, hc_store_alignment(st));
	assert_int_equal(info.objects, objects);
	if (zero_copy) {
		assert_int_equal(info.slot_bytes, 0);
	} else {
		assert_int_equal(info.slot_bytes % hc_store_object_block(st), 0);
		assert_int_equal(info.slot_bytes, split ? objects * st_obj_len(st, seg)
							: st_obj_len(st, page_bytes));
	}

	/* Write logical pages 0..7 from slots 3, 4, ..., 10. */
	struct hc_key keys[NPAGES];
	st_keys(100 + (uint32_t)kc->layout, NPAGES, g.page_size, keys);
	uint64_t wslots[NPAGES], rslots[NPAGES];
	int res[NPAGES];
	for (uint64_t p = 0; p < NPAGES; p++) {
		wslots[p] = 3 + p;
		rslots[p] = NSLOTS - 1 - 2 * p; /* 19, 17, ..., 5: other slots, other order */
		st_fill(pool, wslots[p], KV_ID, p);
	}
	assert_int_equal(hc_store_exists(st, keys, NPAGES), 0);
	memset(res, 0x55, sizeof(res));
	assert_int_equal(hc_store_set(st, keys, NPAGES, wslots, res), 0);
	for (int p = 0; p < NPAGES; p++)
		assert_int_equal(res[p], 0);
	assert_int_equal(hc_store_exists(st, keys, NPAGES), NPAGES);

	/* Overwrite the write slots so only the store holds the data. */
	for (uint64_t p = 0; p < NSLOTS; p++)
		st_clear(pool, p);
	memset(res, 0x55, sizeof(res));
	assert_int_equal(hc_store_get(st, keys, NPAGES, rslots, res), NPAGES);
	for (uint64_t p = 0; p < NPAGES; p++) {
		assert_int_equal(res[p], 0);
		st_assert_page(pool, rslots[p], KV_ID, p);
	}
	/* Neighbouring slots were not touched by the reads. */
	size_t pb = hc_pool_page_bytes(pool);
	uint8_t *zero = calloc(1, pb), *buf = malloc(pb);
	for (uint64_t s = 0; s < NSLOTS; s++) {
		bool read_into = false;
		for (int p = 0; p < NPAGES; p++)
			read_into |= rslots[p] == s;
		if (read_into)
			continue;
		assert_int_equal(hc_pool_gather(pool, s, buf, pb), 0);
		if (memcmp(buf, zero, pb))
			fail_msg("slot %llu was written by a get", (unsigned long long)s);
	}
	free(zero);
	free(buf);

	struct hc_store_stats s = st_stats(st, NULL);
	assert_int_equal(s.pages_written, NPAGES);
	assert_int_equal(s.pages_read, NPAGES);
	assert_int_equal(s.bytes_read, NPAGES * page_bytes);
	assert_int_equal(s.bytes_written, NPAGES * page_bytes);
	assert_int_equal(s.corrupt, 0);
	assert_int_equal(s.failures, 0);

	if (file) {
		/* Names: split MHA "_k" and "_v", MLA "_k" under the shared
		 * suffix, zero-copy or bounced; layer_first and page_head one
		 * plain object; nothing else on disk. */
		const char *suffix = kc->mla ? ST_SUFFIX_MLA : ST_SUFFIX;
		for (int p = 0; p < NPAGES; p++) {
			char path[PATH_MAX];
			st_obj_path(dir, &keys[p], suffix, "_k", path);
			st_assert_file(path, split ? (long long)st_obj_len(st, seg) : -1);
			st_obj_path(dir, &keys[p], suffix, "_v", path);
			st_assert_file(path,
				       split && !kc->mla ? (long long)st_obj_len(st, seg) : -1);
			st_obj_path(dir, &keys[p], suffix, "", path);
			st_assert_file(path, split ? -1 : (long long)st_obj_len(st, page_bytes));
			/* The other suffix names nothing. */
			st_obj_path(dir, &keys[p], kc->mla ? ST_SUFFIX : ST_SUFFIX_MLA,
				    split ? "_k" : "", path);
			st_assert_file(path, -1);
		}
		struct st_count c = st_count(dir);
		assert_int_equal(c.files, NPAGES * info.objects);
		assert_int_equal(c.tmps, 0);
		assert_int_equal(c.dirs, 256);
		check_dir_layout(dir);
	}
	hc_store_close(st);
	hc_pool_destroy(pool);
	if (file)
		st_empty_dir(dir);
}

static void test_kv_file_matrix(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	for (int layout = 0; layout < 3; layout++)
		for (int bounce = 0; bounce < 2; bounce++)
			for (int direct = 0; direct < 2; direct++)
				for (int mla = 0; mla < 2; mla++) {
					struct kv_case kc = {"file", (enum hc_kv_layout)layout,
							     mla,    bounce,
							     direct, 0};
					kv_round_trip(&kc, dir);
				}
	st_rmrf(dir);
}

static void test_kv_mem_matrix(void **state)
{
	(void)state;
	for (int layout = 0; layout < 3; layout++)
		for (int bounce = 0; bounce < 2; bounce++)
			for (int mla = 0; mla < 2; mla++) {
				struct kv_case kc = {"mem", (enum hc_kv_layout)layout,
						     mla,   bounce,
						     false, 0};
				kv_round_trip(&kc, NULL);
			}
}

/* Segments of 4800 bytes: not aligned, so O_DIRECT needs bounce; buffered
 * I/O and mem keep zero-copy. */
static void test_kv_unaligned(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	for (int layout = 1; layout < 3; layout++)
		for (int direct = 0; direct < 2; direct++) {
			struct kv_case kc = {"file", (enum hc_kv_layout)layout,
					     false,  false,
					     direct, 75};
			kv_round_trip(&kc, dir);
			kc.mla = true;
			kv_round_trip(&kc, dir);
		}
	st_rmrf(dir);
	struct kv_case kc = {"mem", HC_LAYOUT_PAGE_FIRST, false, false, false, 75};
	kv_round_trip(&kc, NULL);
}

/* ---- side pools over v2 ---- */

enum mamba_kind { MAMBA_ALIGNED, MAMBA_UNALIGNED, MAMBA_CONV_ONLY };

struct side_case {
	const char *backend;
	bool bounce;
	bool direct;
	enum mamba_kind mamba;
};

static struct hc_mamba_geometry mamba_geo(enum mamba_kind k, uint64_t slots)
{
	struct hc_mamba_geometry g = {.slots = slots, .layers = 2};
	switch (k) {
	case MAMBA_ALIGNED: /* 4096 + 4096 + 12288 bytes a slot */
		g.temporal_bytes = 2048;
		g.nconv = 2;
		g.conv_bytes[0] = 2048;
		g.conv_bytes[1] = 6144;
		break;
	case MAMBA_UNALIGNED: /* 80 + 48 + 16 */
		g.temporal_bytes = 40;
		g.nconv = 2;
		g.conv_bytes[0] = 24;
		g.conv_bytes[1] = 8;
		break;
	case MAMBA_CONV_ONLY: /* 8192 */
		g.nconv = 1;
		g.conv_bytes[0] = 4096;
		break;
	}
	return g;
}

struct side_expect {
	const char *pool;
	uint32_t id;
	struct hc_pool *p;
	bool zero_copy;
	unsigned nobj;
	const char *comp[4];
	size_t payload[4];
};

static void check_info(struct hc_store *st, const struct side_expect *x)
{
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, x->pool, &info), 0);
	if (info.zero_copy != x->zero_copy)
		fail_msg("pool %s: zero_copy %d, expected %d", x->pool, info.zero_copy,
			 x->zero_copy);
	assert_int_equal(info.objects, x->nobj);
	assert_int_equal(info.page_bytes, hc_pool_page_bytes(x->p));
	/* A bounce slot holds each object's image, back to back. */
	size_t images = 0;
	for (unsigned o = 0; o < x->nobj; o++)
		images += st_obj_len(st, x->payload[o]);
	assert_int_equal(info.slot_bytes, x->zero_copy ? 0 : images);
	assert_int_equal(info.slot_bytes % hc_store_object_block(st), 0);
}

#define SIDE_PAGES 6
#define SIDE_SLOTS 16

static void side_round_trip(const struct side_case *sc, const char *dir)
{
	bool file = !strcmp(sc->backend, "file");
	struct hc_store *st;
	if (file) {
		st = st_open_file(dir, sc->direct, sc->bounce, NULL);
	} else {
		st = st_open_mem(sc->bounce);
	}
	bool dio = hc_store_alignment(st) > 1;
	bool zc = !sc->bounce;

	struct hc_kv_geometry kg = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SIDE_SLOTS);
	struct hc_kv_geometry sg = st_kv_geo(HC_LAYOUT_PAGE_FIRST_DIRECT, false, SIDE_SLOTS);
	sg.layers = 1;
	sg.head_dim = 128; /* segments of 4096 */
	struct hc_mamba_geometry mg = mamba_geo(sc->mamba, SIDE_SLOTS);
	struct hc_pool *kv = st_kv_pool(&kg), *swa = st_kv_pool(&sg), *mamba = st_mamba_pool(&mg);
	struct hc_pool *idx = st_indexer_pool(SIDE_SLOTS, 64, INDEXER_BYTES);
	assert_int_equal(hc_pool_page_bytes(idx), INDEXER_BYTES);
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	assert_int_equal(hc_store_register_pool(st, "mamba", mamba, false), 0);
	assert_int_equal(hc_store_register_pool(st, "swa", swa, false), 0);
	assert_int_equal(hc_store_register_pool(st, "indexer", idx, false), 0);

	/* The same objects zero-copy or bounced (a pool's names follow from
	 * its kind and layout alone); zero-copy where not forced off and the
	 * memory suits the direct I/O. */
	struct side_expect x[4] = {
		{"kv", KV_ID, kv, zc, 2, {"_k", "_v"}, {4096, 4096}},
		{"mamba", MAMBA_ID, mamba, zc, 1, {"_mamba_conv_0"}, {8192}},
		{"swa", SWA_ID, swa, zc, 2, {"_swa_k", "_swa_v"}, {4096, 4096}},
		{"indexer", INDEXER_ID, idx, zc && !dio, 1, {"_indexer"}, {INDEXER_BYTES}},
	};
	if (sc->mamba != MAMBA_CONV_ONLY) {
		x[1].nobj = 3;
		x[1].comp[0] = "_mamba_temporal";
		x[1].comp[1] = "_mamba_conv_0";
		x[1].comp[2] = "_mamba_conv_1";
		for (int i = 0; i < 3; i++)
			x[1].payload[i] = 2 * (i == 0 ? mg.temporal_bytes : mg.conv_bytes[i - 1]);
	}
	if (sc->mamba == MAMBA_UNALIGNED && dio)
		x[1].zero_copy = false; /* unaligned Mamba under O_DIRECT: bounced */
	for (int i = 0; i < 4; i++)
		check_info(st, &x[i]);

	/* One call over all four pools; each pool's pages from slots 1..6,
	 * read back into 15, 13, ..., 5. */
	struct hc_key keys[SIDE_PAGES];
	st_keys(7, SIDE_PAGES, 8, keys);
	uint64_t w[SIDE_PAGES], r[SIDE_PAGES];
	int res[4][SIDE_PAGES];
	for (int p = 0; p < SIDE_PAGES; p++) {
		w[p] = 1 + (uint64_t)p;
		r[p] = SIDE_SLOTS - 1 - 2 * (uint64_t)p;
		for (int i = 0; i < 4; i++)
			st_fill(x[i].p, w[p], x[i].id, (uint64_t)p);
	}
	struct hc_pool_transfer t[4];
	for (int i = 0; i < 4; i++)
		t[i] = (struct hc_pool_transfer){x[i].pool,        keys,   SIDE_PAGES, w,
						 HC_HIT_ALL_PAGES, res[i], NULL};
	memset(res, 0x55, sizeof(res));
	assert_int_equal(hc_store_set_v2(st, t, 4), 0);
	for (int i = 0; i < 4; i++)
		for (int p = 0; p < SIDE_PAGES; p++)
			assert_int_equal(res[i][p], 0);
	for (int i = 0; i < 4; i++)
		for (uint64_t s = 0; s < SIDE_SLOTS; s++)
			st_clear(x[i].p, s);
	for (int i = 0; i < 4; i++)
		t[i].pages = r;
	memset(res, 0x55, sizeof(res));
	assert_int_equal(hc_store_get_v2(st, t, 4), SIDE_PAGES);
	for (int i = 0; i < 4; i++)
		for (int p = 0; p < SIDE_PAGES; p++) {
			assert_int_equal(res[i][p], 0);
			st_assert_page(x[i].p, r[p], x[i].id, (uint64_t)p);
		}
	for (int i = 0; i < 4; i++) {
		struct hc_store_stats s = st_stats(st, x[i].pool);
		assert_int_equal(s.pages_written, SIDE_PAGES);
		assert_int_equal(s.pages_read, SIDE_PAGES);
		assert_int_equal(s.bytes_read, SIDE_PAGES * hc_pool_page_bytes(x[i].p));
	}

	if (file) {
		size_t total = 0;
		for (int i = 0; i < 4; i++) {
			for (int p = 0; p < SIDE_PAGES; p++)
				for (unsigned o = 0; o < x[i].nobj; o++) {
					char path[PATH_MAX];
					st_obj_path(dir, &keys[p], ST_SUFFIX, x[i].comp[o], path);
					st_assert_file(path, st_obj_len(st, x[i].payload[o]));
				}
			total += SIDE_PAGES * x[i].nobj;
		}
		struct st_count c = st_count(dir);
		assert_int_equal(c.files, total);
		assert_int_equal(c.tmps, 0);
		check_dir_layout(dir);
	}
	hc_store_close(st);
	hc_pool_destroy(kv);
	hc_pool_destroy(swa);
	hc_pool_destroy(mamba);
	hc_pool_destroy(idx);
	if (file)
		st_empty_dir(dir);
}

static void test_side_pools(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	for (int m = 0; m < 3; m++) {
		for (int bounce = 0; bounce < 2; bounce++) {
			for (int direct = 0; direct < 2; direct++) {
				struct side_case sc = {"file", bounce, direct, (enum mamba_kind)m};
				side_round_trip(&sc, dir);
			}
			struct side_case sc = {"mem", bounce, false, (enum mamba_kind)m};
			side_round_trip(&sc, NULL);
		}
	}
	st_rmrf(dir);
}

/* A Mamba pool under another name: its buffers are "_<pool>_<i>" and a
 * one-buffer pool is "_<pool>". */
static void test_other_mamba_name(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	struct hc_store *st = st_open_file(dir, false, false, NULL);
	struct hc_kv_geometry kg = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 4);
	struct hc_mamba_geometry m3 = mamba_geo(MAMBA_ALIGNED, 4);
	struct hc_mamba_geometry m1 = mamba_geo(MAMBA_CONV_ONLY, 4);
	struct hc_pool *kv = st_kv_pool(&kg), *a = st_mamba_pool(&m3), *b = st_mamba_pool(&m1);
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	assert_int_equal(hc_store_register_pool(st, "ssm", a, false), 0);
	assert_int_equal(hc_store_register_pool(st, "ssm1", b, false), 0);
	struct hc_key key;
	st_keys(9, 1, 8, &key);
	uint64_t slot = 2;
	st_fill(a, slot, MAMBA_ID, 0);
	st_fill(b, slot, MAMBA_ID + 10, 0);
	struct hc_pool_transfer t[2] = {
		{"ssm", &key, 1, &slot, HC_HIT_ALL_PAGES, NULL, NULL},
		{"ssm1", &key, 1, &slot, HC_HIT_ALL_PAGES, NULL, NULL},
	};
	assert_int_equal(hc_store_set_v2(st, t, 2), 0);
	char path[PATH_MAX];
	static const char *const comps[] = {"_ssm_0", "_ssm_1", "_ssm_2"};
	static const size_t lens[] = {4096, 4096, 12288};
	for (int i = 0; i < 3; i++) {
		st_obj_path(dir, &key, ST_SUFFIX, comps[i], path);
		st_assert_file(path, st_obj_len(st, lens[i]));
	}
	st_obj_path(dir, &key, ST_SUFFIX, "_ssm1", path);
	st_assert_file(path, st_obj_len(st, 8192));
	assert_int_equal(st_count(dir).files, 4);
	uint64_t back = 3;
	t[0].pages = t[1].pages = &back;
	int r0, r1;
	t[0].results = &r0;
	t[1].results = &r1;
	assert_int_equal(hc_store_get_v2(st, t, 2), 1);
	assert_int_equal(r0, 0);
	assert_int_equal(r1, 0);
	st_assert_page(a, back, MAMBA_ID, 0);
	st_assert_page(b, back, MAMBA_ID + 10, 0);
	hc_store_close(st);
	hc_pool_destroy(kv);
	hc_pool_destroy(a);
	hc_pool_destroy(b);
	st_rmrf(dir);
}

/* tp ranks: MHA objects carry the rank; MLA objects are shared, written
 * by rank 0 only, and read by every rank. */
static void test_tp_ranks(void **state)
{
	(void)state;
	char dir[PATH_MAX], json[PATH_MAX + 64];
	st_mkdtemp(dir);
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s\"], \"l3_cleaner_interval_s\": 0}", dir);
	struct hc_store *r0, *r1;
	assert_int_equal(st_open_json("file", json, ST_MODEL, 0, 2, false, &r0), 0);
	assert_int_equal(st_open_json("file", json, ST_MODEL, 1, 2, false, &r1), 0);
	struct hc_kv_geometry mla = st_kv_geo(HC_LAYOUT_PAGE_FIRST, true, 4);
	struct hc_pool *p0 = st_kv_pool(&mla), *p1 = st_kv_pool(&mla);
	assert_int_equal(hc_store_register_pool(r0, "kv", p0, true), 0);
	assert_int_equal(hc_store_register_pool(r1, "kv", p1, true), 0);
	struct hc_key keys[2];
	st_keys(11, 2, 8, keys);
	uint64_t slots[2] = {0, 1}, back[2] = {3, 2};
	st_fill(p1, 0, KV_ID, 0);
	st_fill(p1, 1, KV_ID, 1);
	/* Rank 1 reports success and writes nothing. */
	assert_int_equal(hc_store_set(r1, keys, 2, slots, NULL), 0);
	assert_int_equal(st_count(dir).files, 0);
	assert_int_equal(hc_store_exists(r1, keys, 2), 0);
	st_fill(p0, 0, KV_ID, 0);
	st_fill(p0, 1, KV_ID, 1);
	assert_int_equal(hc_store_set(r0, keys, 2, slots, NULL), 0);
	char path[PATH_MAX];
	for (int i = 0; i < 2; i++) {
		st_obj_path(dir, &keys[i], "_" ST_MODEL_SAN, "_k", path);
		st_assert_file(path, st_obj_len(r0, 4096));
	}
	assert_int_equal(st_count(dir).files, 2);
	assert_int_equal(hc_store_exists(r1, keys, 2), 2);
	assert_int_equal(hc_store_get(r1, keys, 2, back, NULL), 2);
	st_assert_page(p1, 3, KV_ID, 0);
	st_assert_page(p1, 2, KV_ID, 1);
	hc_store_close(r0);
	hc_store_close(r1);
	hc_pool_destroy(p0);
	hc_pool_destroy(p1);

	/* MHA: each rank its own objects "_<model>_<rank>_<size>_k". */
	assert_int_equal(st_open_json("file", json, ST_MODEL, 1, 2, false, &r1), 0);
	struct hc_kv_geometry mha = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 4);
	p1 = st_kv_pool(&mha);
	assert_int_equal(hc_store_register_pool(r1, "kv", p1, true), 0);
	st_fill(p1, 0, KV_ID, 0);
	assert_int_equal(hc_store_set(r1, keys, 1, slots, NULL), 0);
	st_obj_path(dir, &keys[0], "_" ST_MODEL_SAN "_1_2", "_k", path);
	st_assert_file(path, st_obj_len(r1, 4096));
	st_obj_path(dir, &keys[0], "_" ST_MODEL_SAN "_1_2", "_v", path);
	st_assert_file(path, st_obj_len(r1, 4096));
	assert_int_equal(st_count(dir).files, 4);
	hc_store_close(r1);
	hc_pool_destroy(p1);
	st_rmrf(dir);
}

/* Several base dirs: each object in the dir its route hash picks. */
static void test_multi_dir(void **state)
{
	(void)state;
	char root[PATH_MAX], d[3][PATH_MAX + 16], json[4 * PATH_MAX];
	st_mkdtemp(root);
	for (int i = 0; i < 3; i++) {
		snprintf(d[i], sizeof(d[i]), "%s/disk%d", root, i);
		assert_int_equal(mkdir(d[i], 0700), 0);
	}
	snprintf(json, sizeof(json),
		 "{\"dirs\": [\"%s\", \"%s\", \"%s\"], \"l3_cleaner_interval_s\": 0}", d[0], d[1],
		 d[2]);
	struct hc_store *st;
	assert_int_equal(st_open_json("file", json, ST_MODEL, 0, 1, false, &st), 0);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 64);
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_key keys[32];
	uint64_t slots[32], back[32];
	st_keys(12, 32, 8, keys);
	for (uint64_t i = 0; i < 32; i++) {
		slots[i] = i;
		back[i] = 63 - i;
		st_fill(pool, i, KV_ID, i);
	}
	assert_int_equal(hc_store_set(st, keys, 32, slots, NULL), 0);
	const char *dirs[3] = {d[0], d[1], d[2]};
	size_t per[3];
	for (int i = 0; i < 3; i++) {
		per[i] = st_count(d[i]).files;
		assert_int_equal(st_count(d[i]).dirs, 256);
	}
	assert_int_equal(per[0] + per[1] + per[2], 64);
	for (int i = 0; i < 3; i++)
		assert_true(per[i] > 0); /* 64 names over 3 dirs */
	for (int i = 0; i < 32; i++) {
		char path[PATH_MAX];
		st_obj_path_in(dirs, 3, &keys[i], ST_SUFFIX, "_k", path);
		st_assert_file(path, st_obj_len(st, 4096));
		st_obj_path_in(dirs, 3, &keys[i], ST_SUFFIX, "_v", path);
		st_assert_file(path, st_obj_len(st, 4096));
	}
	assert_int_equal(hc_store_get(st, keys, 32, back, NULL), 32);
	for (uint64_t i = 0; i < 32; i++)
		st_assert_page(pool, back[i], KV_ID, i);
	hc_store_close(st);
	hc_pool_destroy(pool);
	st_rmrf(root);
}

/* ---- batches longer than 128 pages ---- */

#define BIG 300

static void big_batch(const char *backend, bool bounce, const char *dir)
{
	bool file = !strcmp(backend, "file");
	struct hc_store *st;
	if (file) {
		st = st_open_file(dir, true, bounce, NULL);
	} else {
		st = st_open_mem(bounce);
	}
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 2 * BIG);
	struct hc_mamba_geometry mg = mamba_geo(MAMBA_ALIGNED, 2 * BIG);
	struct hc_pool *kv = st_kv_pool(&g), *mamba = st_mamba_pool(&mg);
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	assert_int_equal(hc_store_register_pool(st, "mamba", mamba, false), 0);
	struct hc_key *keys = malloc(BIG * sizeof(*keys));
	uint64_t *w = malloc(BIG * sizeof(*w)), *r = malloc(BIG * sizeof(*r));
	int *res = malloc(BIG * sizeof(*res)), *mres = malloc(BIG * sizeof(*mres));
	st_keys(13, BIG, 8, keys);
	for (uint64_t i = 0; i < BIG; i++) {
		w[i] = i;
		r[i] = 2 * BIG - 1 - i;
		st_fill(kv, i, KV_ID, i);
		st_fill(mamba, i, MAMBA_ID, i);
	}
	/* v1: 300 pages in one call. */
	assert_int_equal(hc_store_set(st, keys, BIG, w, res), 0);
	for (int i = 0; i < BIG; i++)
		assert_int_equal(res[i], 0);
	assert_int_equal(hc_store_exists(st, keys, BIG), BIG);
	memset(res, 0x55, BIG * sizeof(*res));
	assert_int_equal(hc_store_get(st, keys, BIG, r, res), BIG);
	for (uint64_t i = 0; i < BIG; i++) {
		assert_int_equal(res[i], 0);
		st_assert_page(kv, r[i], KV_ID, i);
	}
	/* v2: 300 pages in each of two pools, one call. */
	struct hc_pool_transfer t[2] = {
		{"kv", keys, BIG, w, HC_HIT_ALL_PAGES, res, NULL},
		{"mamba", keys, BIG, w, HC_HIT_TRAILING_PAGES, mres, NULL},
	};
	assert_int_equal(hc_store_set_v2(st, t, 2), 0);
	t[0].pages = t[1].pages = r;
	for (uint64_t i = 0; i < BIG; i++)
		st_clear(mamba, r[i]);
	memset(mres, 0x55, BIG * sizeof(*mres));
	assert_int_equal(hc_store_get_v2(st, t, 2), BIG);
	for (uint64_t i = 0; i < BIG; i++) {
		assert_int_equal(mres[i], 0);
		st_assert_page(mamba, r[i], MAMBA_ID, i);
	}
	uint64_t kvh = 0, ph[2] = {0, 0};
	t[1].n = 1; /* trailing_pages, N = 1 */
	assert_int_equal(hc_store_exists_v2(st, keys, BIG, t, 2, &kvh, ph), BIG);
	assert_int_equal(kvh, BIG);
	assert_int_equal(ph[0], BIG);
	assert_int_equal(ph[1], BIG);
	struct hc_store_stats s = st_stats(st, NULL);
	assert_int_equal(s.pages_written, 2 * BIG);
	assert_int_equal(s.pages_existing, BIG);
	assert_int_equal(s.failures, 0);
	if (file) {
		struct st_count c = st_count(dir);
		assert_int_equal(c.files, BIG * 5); /* K, V and three Mamba objects, either mode */
		assert_int_equal(c.tmps, 0);
	}
	free(keys);
	free(w);
	free(r);
	free(res);
	free(mres);
	hc_store_close(st);
	hc_pool_destroy(kv);
	hc_pool_destroy(mamba);
	if (file)
		st_empty_dir(dir);
}

static void test_big_batches(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	big_batch("file", false, dir);
	big_batch("file", true, dir);
	st_rmrf(dir);
	big_batch("mem", false, NULL);
	big_batch("mem", true, NULL);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kv_file_matrix),   cmocka_unit_test(test_kv_mem_matrix),
		cmocka_unit_test(test_kv_unaligned),     cmocka_unit_test(test_side_pools),
		cmocka_unit_test(test_other_mamba_name), cmocka_unit_test(test_tp_ranks),
		cmocka_unit_test(test_multi_dir),        cmocka_unit_test(test_big_batches),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
