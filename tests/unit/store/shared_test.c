/*
 * A file store shared by many writers on one directory (hosts and
 * containers whose pids repeat):
 *
 * taken names:  every temp and probe name a writer will use is taken by a
 *               planted file before it opens (the test hook fixes the
 *               per-writer nonce): the probes keep O_DIRECT, every set works
 *               under a fresh name, and no planted file is touched.
 * same nonce:   two processes with the same nonce (as two containers with
 *               the same pid would have had) write overlapping keys at once:
 *               no failed write, both keep O_DIRECT, every page reads back,
 *               no temp file is left.
 * invalid files: zero-length, truncated, extended and bad-trailer files
 *               planted under real object names are replaced by the set,
 *               which reports them written, and the pages read back; valid
 *               objects of another geometry (same size, and another size)
 *               are left alone and the page's result is -ENOTUNIQ, counted
 *               in stats.other_geometry.
 */
#include "robust_test.h"
#include "store/backend/file/file_scan.h"

#include <hicache/key.h>

#include <sys/wait.h>

#define TOKENS 16
#define NONCE 0x00c0ffee00c0ffeeull
#define SEQS 48 /* names planted per object: more than the writer uses */

struct fx {
	char dir[PATH_MAX];
	struct hc_pool *pool;
	void *scratch;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	rt_mkdtemp(f->dir, "shared");
	f->pool = rt_pool(TOKENS, 64);
	f->scratch = malloc(4 * hc_pool_page_bytes(f->pool)); /* also other geometries */
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	file_test_nonce = 0;
	hc_pool_destroy(f->pool);
	rt_rmtree(f->dir);
	free(f->scratch);
	free(f);
	return 0;
}

/* The object name of key k with that component (as rt_obj_path). */
static void obj_name(const struct hc_key *k, const char *component, char *out, size_t size)
{
	char suffix[HC_SUFFIX_MAX];
	assert_true(hc_key_suffix(RT_MODEL, 0, 1, false, suffix, sizeof(suffix)) > 0);
	assert_true(hc_key_name(k, suffix, component, out, size) > 0);
}

static void put_text(const char *path, const char *text)
{
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		fail_msg("create %s: %s", path, strerror(errno));
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static bool has_text(const char *path, const char *text)
{
	char buf[128] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n == (ssize_t)strlen(text) && !memcmp(buf, text, (size_t)n);
}

#define NKEYS 4

static void test_taken_names(void **state)
{
	struct fx *f = *state;
	struct hc_key keys[NKEYS];
	uint64_t pages[NKEYS];
	int res[NKEYS];
	/* Buckets exist before the store's open makes them (0700, ours). */
	for (unsigned b = 0; b < 256; b++) {
		char p[PATH_MAX + 8];
		rt_pathf(p, sizeof(p), "%s/%02x", f->dir, b);
		assert_int_equal(mkdir(p, 0700), 0);
	}
	static char planted[NKEYS * 2 * SEQS + SEQS][PATH_MAX + 96];
	unsigned np = 0;
	for (unsigned s = 0; s < SEQS; s++) {
		rt_pathf(planted[np], sizeof(planted[np]), "%s/00/.tmp.probe.%016llx.%u", f->dir,
			 (unsigned long long)NONCE, s);
		put_text(planted[np++], "another prober");
	}
	const char *comp[2] = {"_k", "_v"};
	for (unsigned i = 0; i < NKEYS; i++) {
		keys[i] = rt_key(100 + i);
		pages[i] = i;
		for (unsigned c = 0; c < 2; c++) {
			char name[HC_NAME_MAX], bucket[3];
			obj_name(&keys[i], comp[c], name, sizeof(name));
			uint64_t route = hc_key_route_hash(name);
			hc_key_bucket_hex(route, bucket);
			for (unsigned s = 0; s < SEQS; s++) {
				rt_pathf(planted[np], sizeof(planted[np]),
					 "%s/%s/.tmp.%016llx.%016llx.%u", f->dir, bucket,
					 (unsigned long long)route, (unsigned long long)NONCE, s);
				put_text(planted[np++], "another writer");
			}
		}
	}
	file_test_nonce = NONCE;
	struct hc_store *st = rt_open_ok(f->dir, "\"l3_cleaner_interval_s\": 0", false, f->pool);
	file_test_nonce = 0;
	/* The probes met taken names and still found O_DIRECT working. */
	assert_true(hc_store_direct_io(st));
	for (unsigned i = 0; i < NKEYS; i++)
		rt_put_page(f->pool, i, &keys[i], 0, f->scratch);
	assert_int_equal(hc_store_set(st, keys, NKEYS, pages, res), 0);
	for (unsigned i = 0; i < NKEYS; i++)
		assert_int_equal(res[i], 0);
	uint64_t back[NKEYS] = {10, 11, 12, 13};
	assert_int_equal(hc_store_get(st, keys, NKEYS, back, res), NKEYS);
	for (unsigned i = 0; i < NKEYS; i++)
		assert_true(rt_page_ok(f->pool, back[i], &keys[i], f->scratch));
	hc_store_close(st);
	/* Every planted file is there, untouched; nothing else is left. */
	for (unsigned i = 0; i < np; i++)
		if (!has_text(planted[i], i < SEQS ? "another prober" : "another writer"))
			fail_msg("planted %s was removed or changed", planted[i]);
	assert_int_equal(rt_count_temps_quiet(f->dir), np);
}

#define CHILD_KEYS 300
#define CHILD_BATCH 10

static int child_main(const char *dir, unsigned who)
{
	file_test_nonce = NONCE;
	struct hc_pool *pool = rt_pool(TOKENS, 2 * CHILD_BATCH);
	void *scratch = malloc(hc_pool_page_bytes(pool));
	struct hc_store *st;
	if (rt_open(dir, "\"l3_cleaner_interval_s\": 0", false, pool, &st))
		_exit(10);
	if (!hc_store_direct_io(st))
		_exit(11);
	int rc = 0;
	for (unsigned b = 0; b < CHILD_KEYS / CHILD_BATCH && !rc; b++) {
		struct hc_key keys[CHILD_BATCH];
		uint64_t pages[CHILD_BATCH], back[CHILD_BATCH];
		int res[CHILD_BATCH];
		/* Both write the same keys, in opposite orders. */
		unsigned base = who ? CHILD_KEYS - (b + 1) * CHILD_BATCH : b * CHILD_BATCH;
		for (unsigned i = 0; i < CHILD_BATCH; i++) {
			keys[i] = rt_key(base + i);
			pages[i] = i;
			back[i] = CHILD_BATCH + i;
			rt_put_page(pool, i, &keys[i], 0, scratch);
		}
		if (hc_store_set(st, keys, CHILD_BATCH, pages, res))
			rc = 12;
		if (!rc && hc_store_get(st, keys, CHILD_BATCH, back, res) != CHILD_BATCH)
			rc = 13;
		for (unsigned i = 0; i < CHILD_BATCH && !rc; i++)
			if (!rt_page_ok(pool, back[i], &keys[i], scratch))
				rc = 14;
	}
	hc_store_close(st);
	hc_pool_destroy(pool);
	free(scratch);
	_exit(rc);
}

static void test_same_nonce(void **state)
{
	struct fx *f = *state;
	pid_t kids[2];
	fflush(NULL);
	for (unsigned i = 0; i < 2; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0)
			child_main(f->dir, i);
	}
	for (unsigned i = 0; i < 2; i++) {
		int status;
		assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			fail_msg("writer %u: status %d (10 open, 11 no O_DIRECT, 12 set, 13 get, "
				 "14 wrong bytes)",
				 i, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	}
	assert_int_equal(rt_count_temps(f->dir), 0);
	struct hc_fsck_report r = rt_fsck(f->dir, false);
	assert_int_equal(r.corrupt, 0);
	assert_int_equal(r.ok, 2 * CHILD_KEYS);
}

static struct hc_pool *pool_geometry(uint32_t heads, uint32_t head_dim)
{
	struct hc_kv_geometry g = {.layers = 2,
				   .heads = heads,
				   .head_dim = head_dim,
				   .elem_bytes = 2,
				   .page_size = TOKENS,
				   .pages = 8,
				   .layout = HC_LAYOUT_PAGE_FIRST,
				   .mla = false};
	struct hc_pool *pool = NULL;
	assert_int_equal(hc_pool_create_kv(&g, NULL, &pool), 0);
	return pool;
}

/* Write len bytes (byte value v) at path, replacing it. */
static void plant(const char *path, size_t len, int v)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	void *buf = malloc(len ? len : 1);
	memset(buf, v, len);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	free(buf);
	close(fd);
}

#define NBAD 5

static void test_invalid_files(void **state)
{
	struct fx *f = *state;
	const char *cfg = "\"l3_cleaner_interval_s\": 0";
	struct hc_store *st = rt_open_ok(f->dir, cfg, false, f->pool);
	struct hc_key keys[NBAD];
	uint64_t pages[NBAD], back[NBAD];
	int res[NBAD];
	char path[NBAD][PATH_MAX];
	/* Key 4: a real object, extended by one block (its trailer is no
	 * longer last). */
	keys[4] = rt_key(204);
	rt_put_page(f->pool, 0, &keys[4], 0, f->scratch);
	pages[0] = 0;
	assert_int_equal(hc_store_set(st, &keys[4], 1, pages, res), 0);
	struct hc_store_stats s0;
	assert_int_equal(hc_store_stats(st, NULL, &s0), 0);
	for (unsigned i = 0; i < NBAD; i++) {
		if (i < 4)
			keys[i] = rt_key(200 + i);
		pages[i] = i;
		back[i] = 10 + i;
		rt_obj_path(f->dir, &keys[i], "_k", path[i], sizeof(path[i]));
	}
	size_t obj = 4096 + hc_store_object_block(st); /* a 4 KiB payload and the trailer block */
	plant(path[0], 0, 0);                          /* zero-length */
	plant(path[1], obj / 2, 0x5a);                 /* truncated */
	plant(path[2], obj + 4096, 0);                 /* extended, no trailer */
	plant(path[3], obj, 0x33);                     /* the right size, a bad trailer */
	int fd = open(path[4], O_WRONLY | O_APPEND | O_CLOEXEC);
	assert_true(fd >= 0);
	static const uint8_t zeros[4096];
	assert_int_equal(write(fd, zeros, sizeof(zeros)), (ssize_t)sizeof(zeros));
	close(fd);
	/* Before: misses (or corrupt), never data. */
	assert_int_equal(hc_store_get(st, keys, NBAD, back, res), 0);
	for (unsigned i = 0; i < NBAD; i++)
		rt_put_page(f->pool, i, &keys[i], 0, f->scratch);
	assert_int_equal(hc_store_set(st, keys, NBAD, pages, res), 0);
	for (unsigned i = 0; i < NBAD; i++)
		assert_int_equal(res[i], 0);
	struct hc_store_stats s1;
	assert_int_equal(hc_store_stats(st, NULL, &s1), 0);
	assert_int_equal(s1.pages_written - s0.pages_written, NBAD);
	assert_int_equal(s1.pages_existing, s0.pages_existing);
	assert_int_equal(hc_store_exists(st, keys, NBAD), NBAD);
	assert_int_equal(hc_store_get(st, keys, NBAD, back, res), NBAD);
	for (unsigned i = 0; i < NBAD; i++)
		assert_true(rt_page_ok(f->pool, back[i], &keys[i], f->scratch));
	assert_int_equal(rt_count_temps(f->dir), 0);

	/* Other geometries under the same names: heads 2 x 32 (objects of
	 * the same size) and head_dim 128 (bigger objects). */
	struct hc_pool *other[2] = {pool_geometry(2, 32), pool_geometry(1, 128)};
	for (unsigned g = 0; g < 2; g++) {
		struct hc_store *sb = rt_open_ok(f->dir, cfg, false, other[g]);
		struct hc_key k = rt_key(300 + g);
		uint64_t p0 = 0, p1 = 1;
		int r;
		rt_put_page(other[g], 0, &k, 0, f->scratch);
		assert_int_equal(hc_store_set(sb, &k, 1, &p0, &r), 0);
		char kpath[PATH_MAX];
		struct stat before, after;
		rt_obj_path(f->dir, &k, "_k", kpath, sizeof(kpath));
		assert_int_equal(stat(kpath, &before), 0);
		/* This store's set of the page: left alone, -ENOTUNIQ. */
		rt_put_page(f->pool, 0, &k, 1, f->scratch);
		assert_int_equal(hc_store_set(st, &k, 1, &p0, &r), -ENOTUNIQ);
		assert_int_equal(r, -ENOTUNIQ);
		assert_int_equal(stat(kpath, &after), 0);
		assert_int_equal(after.st_ino, before.st_ino);
		/* The other instance still reads its page. */
		assert_int_equal(hc_store_get(sb, &k, 1, &p1, &r), 1);
		assert_true(rt_page_ok(other[g], 1, &k, f->scratch));
		hc_store_close(sb);
	}
	struct hc_store_stats s2;
	assert_int_equal(hc_store_stats(st, NULL, &s2), 0);
	assert_int_equal(s2.other_geometry, 2);
	assert_int_equal(s2.failures - s1.failures, 2);
	hc_store_close(st);
	hc_pool_destroy(other[0]);
	hc_pool_destroy(other[1]);
}

int main(void)
{
	rt_skip_without_engine();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_taken_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_nonce, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalid_files, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
