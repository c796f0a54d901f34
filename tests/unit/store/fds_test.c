/* File store: no fd and no temp file outlives a call, whatever fails.
 * Counts /proc/self/fd around store open+close, a batch that fails half-way
 * (bucket dirs replaced by plain files after open), gets of missing pages
 * and many batches; scans the store for ".tmp." files afterwards. */
#include "robust_test.h"

#define TOKENS 16
#define NPAGES 64
/* A cleaner thread that runs often but deletes nothing: on a shared disk
 * that is more than 80 % used (the default watermark) it would delete the
 * pages that warm_up() checks. */
#define WITH_CLEANER                                                           \
	"\"l3_cleaner_interval_s\": 0.2, \"l3_cleaner_high_watermark\": 100, " \
	"\"l3_cleaner_low_watermark\": 99"

struct fx {
	char dir[PATH_MAX];
	struct hc_pool *pool;
	struct hc_store *st;
	void *scratch;
	bool bounce;
};

static int setup(void **state, bool bounce)
{
	struct fx *f = calloc(1, sizeof(*f));
	rt_mkdtemp(f->dir, "fds");
	f->pool = rt_pool(TOKENS, NPAGES);
	f->scratch = malloc(hc_pool_page_bytes(f->pool));
	f->bounce = bounce;
	*state = f;
	return 0;
}

static int setup_zc(void **state)
{
	return setup(state, false);
}

static int setup_bounce(void **state)
{
	return setup(state, true);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	hc_store_close(f->st);
	hc_pool_destroy(f->pool);
	rt_rmtree(f->dir);
	free(f->scratch);
	free(f);
	return 0;
}

/* Write NPAGES pages (keys base..base+n) once so that the store's engine
 * has its rings / workers and caches; later counts compare to this. */
static void warm_up(struct fx *f, uint64_t base)
{
	struct hc_key keys[4];
	uint64_t pages[4];
	int res[4];
	for (int i = 0; i < 4; i++) {
		keys[i] = rt_key(base + (uint64_t)i);
		pages[i] = (uint64_t)i;
		rt_put_page(f->pool, pages[i], &keys[i], 0, f->scratch);
	}
	assert_int_equal(hc_store_set(f->st, keys, 4, pages, res), 0);
	assert_int_equal(hc_store_get(f->st, keys, 4, pages, res), 4);
	assert_int_equal(hc_store_exists(f->st, keys, 4), 4);
}

static void test_open_close(void **state)
{
	struct fx *f = *state;
	/* First open outside the count: libraries may keep something open
	 * for good on first use (none should, but that is not our concern). */
	f->st = rt_open_ok(f->dir, WITH_CLEANER, f->bounce, f->pool);
	warm_up(f, 1000);
	hc_store_close(f->st);
	f->st = NULL;

	int before = rt_count_fds();
	for (int round = 0; round < 5; round++) {
		/* With and without the cleaner thread, with and without I/O. */
		f->st = rt_open_ok(f->dir, round % 2 ? WITH_CLEANER : NULL, f->bounce, f->pool);
		if (round >= 2)
			warm_up(f, 2000 + 10 * (uint64_t)round);
		hc_store_close(f->st);
		f->st = NULL;
	}
	int after = rt_count_fds();
	if (after != before)
		rt_dump_fds();
	assert_int_equal(after, before);
	assert_int_equal(rt_count_temps(f->dir), 0);
	/* A failed open leaks nothing either. */
	char missing[PATH_MAX + 16];
	rt_pathf(missing, sizeof(missing), "%s/file", f->dir);
	int fd = open(missing, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	struct hc_store *st = NULL;
	assert_int_not_equal(rt_open(missing, NULL, f->bounce, NULL, &st), 0);
	assert_null(st);
	assert_int_equal(rt_count_fds(), before);
	unlink(missing);
}

/* Replace bucket dir b by a plain file of the same name (the dir moves
 * aside, out of the store's view). */
static void break_bucket(const char *dir, unsigned b)
{
	char path[PATH_MAX + 8], aside[PATH_MAX + 16];
	rt_pathf(path, sizeof(path), "%s/%02x", dir, b);
	rt_pathf(aside, sizeof(aside), "%s/aside-%02x", dir, b);
	if (rename(path, aside))
		fail_msg("rename %s: %s", path, strerror(errno));
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
}

static unsigned bucket_of(const char *dir, const struct hc_key *k, const char *comp)
{
	char path[PATH_MAX];
	rt_obj_path(dir, k, comp, path, sizeof(path));
	const char *slash = strrchr(path, '/');
	return (unsigned)strtoul(slash - 2, NULL, 16);
}

static void test_half_failed_batch(void **state)
{
	struct fx *f = *state;
	f->st = rt_open_ok(f->dir, "\"l3_cleaner_interval_s\": 0", f->bounce, f->pool);
	warm_up(f, 100);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(f->st, "kv", &info), 0);
	assert_int_equal(info.zero_copy, !f->bounce);
	const char *comp[2];
	unsigned nc = rt_components(comp);

	/* Break every odd bucket: about half the objects cannot be created. */
	enum { N = NPAGES };
	struct hc_key keys[N];
	uint64_t pages[N];
	int res[N];
	bool expect_fail[N];
	unsigned nfail = 0;
	for (unsigned i = 0; i < N; i++) {
		keys[i] = rt_key(5000 + i);
		pages[i] = i;
		rt_put_page(f->pool, i, &keys[i], 0, f->scratch);
		expect_fail[i] = false;
		for (unsigned c = 0; c < nc; c++)
			if (bucket_of(f->dir, &keys[i], comp[c]) % 2)
				expect_fail[i] = true;
		nfail += expect_fail[i];
	}
	assert_true(nfail > 0 && nfail < N);
	for (unsigned b = 1; b < 256; b += 2)
		break_bucket(f->dir, b);

	int before = rt_count_fds();
	for (int round = 0; round < 3; round++) {
		int rc = hc_store_set(f->st, keys, N, pages, res);
		assert_true(rc < 0);
		int first = 0;
		for (unsigned i = 0; i < N; i++) {
			if (expect_fail[i]) {
				if (res[i] != -ENOTDIR)
					fail_msg("page %u: result %d, expected -ENOTDIR", i,
						 res[i]);
				if (!first)
					first = res[i];
			} else if (res[i] != 0) {
				fail_msg("page %u (all objects in good buckets): result %d", i,
					 res[i]);
			}
		}
		assert_int_equal(rc, first);
		assert_int_equal(rt_count_fds(), before);
		assert_int_equal(rt_count_temps(f->dir), 0);
	}
	/* Good pages read back; failed ones are misses (a half-written page is
	 * not a page). */
	uint64_t back[N];
	for (unsigned i = 0; i < N; i++)
		back[i] = N - 1 - i;
	hc_store_get(f->st, keys, N, back, res);
	for (unsigned i = 0; i < N; i++) {
		if (expect_fail[i]) {
			assert_true(res[i] == -ENOENT || res[i] == -ENOTDIR);
		} else {
			assert_int_equal(res[i], 0);
			assert_true(rt_page_ok(f->pool, back[i], &keys[i], f->scratch));
		}
	}
	assert_int_equal(rt_count_fds(), before);
	struct hc_store_stats s;
	assert_int_equal(hc_store_stats(f->st, NULL, &s), 0);
	assert_int_equal(s.corrupt, 0);
	hc_store_close(f->st);
	f->st = NULL;
	assert_int_equal(rt_count_temps(f->dir), 0);
}

static void test_missing_pages(void **state)
{
	struct fx *f = *state;
	f->st = rt_open_ok(f->dir, "\"l3_cleaner_interval_s\": 0", f->bounce, f->pool);
	warm_up(f, 200);
	int before = rt_count_fds();
	enum { N = NPAGES };
	struct hc_key keys[N];
	uint64_t pages[N];
	int res[N];
	for (unsigned i = 0; i < N; i++) {
		keys[i] = rt_key(9000 + i);
		pages[i] = i;
	}
	for (int round = 0; round < 20; round++) {
		assert_int_equal(hc_store_get(f->st, keys, N, pages, res), 0);
		for (unsigned i = 0; i < N; i++)
			assert_int_equal(res[i], -ENOENT);
		assert_int_equal(hc_store_exists(f->st, keys, N), 0);
	}
	/* A file of the wrong size is a miss too, and costs no fd. */
	const char *comp[2];
	rt_components(comp);
	char path[PATH_MAX];
	rt_obj_path(f->dir, &keys[0], comp[0], path, sizeof(path));
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "short", 5), 5);
	close(fd);
	assert_int_equal(hc_store_get(f->st, keys, 1, pages, res), 0);
	assert_int_equal(res[0], -EBADMSG);
	assert_int_equal(rt_count_fds(), before);
	hc_store_close(f->st);
	f->st = NULL;
}

static void test_many_batches(void **state)
{
	struct fx *f = *state;
	f->st = rt_open_ok(f->dir, "\"l3_cleaner_interval_s\": 0", f->bounce, f->pool);
	warm_up(f, 300);
	int before = rt_count_fds();
	enum { B = 16 };
	struct hc_key keys[B];
	uint64_t pages[B], back[B];
	int res[B];
	for (unsigned round = 0; round < 150; round++) {
		unsigned n = 1 + round % B;
		for (unsigned i = 0; i < n; i++) {
			keys[i] = rt_key(100000 + round * B + i);
			pages[i] = i;
			back[i] = B + i;
			rt_put_page(f->pool, i, &keys[i], 0, f->scratch);
		}
		assert_int_equal(hc_store_set(f->st, keys, n, pages, res), 0);
		/* Again: every page exists already. */
		assert_int_equal(hc_store_set(f->st, keys, n, pages, res), 0);
		assert_int_equal(hc_store_exists(f->st, keys, n), n);
		assert_int_equal(hc_store_get(f->st, keys, n, back, res), n);
		for (unsigned i = 0; i < n; i++)
			assert_true(rt_page_ok(f->pool, back[i], &keys[i], f->scratch));
	}
	int after = rt_count_fds();
	if (after != before)
		rt_dump_fds();
	assert_int_equal(after, before);
	assert_int_equal(rt_count_temps(f->dir), 0);
	hc_store_close(f->st);
	f->st = NULL;
	struct hc_fsck_report r = rt_fsck(f->dir, false);
	assert_int_equal(r.corrupt, 0);
	assert_int_equal(r.orphaned_temp, 0);
	assert_true(r.ok >= 150 * 8);
}

int main(void)
{
	rt_skip_without_engine();
	const struct CMUnitTest tests[] = {
		{"open_close", test_open_close, setup_zc, teardown, NULL},
		{"half_failed_batch_zero_copy", test_half_failed_batch, setup_zc, teardown, NULL},
		{"half_failed_batch_bounce", test_half_failed_batch, setup_bounce, teardown, NULL},
		{"missing_pages_zero_copy", test_missing_pages, setup_zc, teardown, NULL},
		{"missing_pages_bounce", test_missing_pages, setup_bounce, teardown, NULL},
		{"many_batches_zero_copy", test_many_batches, setup_zc, teardown, NULL},
		{"many_batches_bounce", test_many_batches, setup_bounce, teardown, NULL},
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
