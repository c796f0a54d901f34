/*
 * The file store's cleaner, hc_file_gc and hc_file_ls.
 *
 * capacity:  capacity_gb of a few MB, l3_cleaner_interval_s 0.2; write well
 *            over the cap in batches spaced in time while a reader re-reads
 *            the oldest pages. The cleaner brings the store under the cap
 *            (and not much further), deletes oldest first and whole pages
 *            only; the newest stay readable; the reader sees hits (right
 *            bytes) or misses (-ENOENT), never an error or a corrupt page.
 * watermark: on a small loop ext4 (skipped if mounting is not permitted),
 *            high 50 / low 30: the cleaner brings the fs under 30 %.
 * gc, ls:    hc_file_gc once down to a capacity; hc_file_ls numbers before
 *            and after; temp and foreign files are neither counted nor
 *            deleted.
 * Readers race the cleaner thread: HC_TEST_CONCURRENCY (TSan runs it too).
 */
#include "robust_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/time.h>

#define TOKENS 16 /* 8 KiB pages: two 8 KiB objects (zero-copy) */
#define BATCH 16
#define GAP_MS 12 /* between batches: distinct mtimes even on coarse clocks */

struct written {
	unsigned batches;
	unsigned batch; /* pages per batch */
	uint64_t key_base;
};

static struct hc_key wkey(const struct written *w, unsigned b, unsigned i)
{
	return rt_key(w->key_base + (uint64_t)b * w->batch + i);
}

/* Write batches [from, to) of w (pool pages 0..batch-1). */
static void write_batches(struct hc_store *st, struct hc_pool *pool, const struct written *w,
			  unsigned from, unsigned to, void *scratch)
{
	struct hc_key keys[64];
	uint64_t pages[64];
	int res[64];
	for (unsigned b = from; b < to; b++) {
		for (unsigned i = 0; i < w->batch; i++) {
			keys[i] = wkey(w, b, i);
			pages[i] = i;
			rt_put_page(pool, i, &keys[i], 0, scratch);
		}
		int rc = hc_store_set(st, keys, w->batch, pages, res);
		if (rc)
			fail_msg("set of batch %u: %d", b, rc);
		rt_sleep_ms(GAP_MS);
	}
}

/* Objects present per page: 0 or all (never half a page). Deleted pages
 * are the oldest: batches before the boundary batch are gone, batches after
 * it complete. Returns the pages present; *first_full the first complete
 * batch. */
static uint64_t check_prefix_deleted(const char *dir, const struct written *w, unsigned *first_full)
{
	unsigned nobj = 2; /* page_first: K and V, in either mode */
	uint64_t present = 0;
	int boundary = -1; /* first batch with a page present */
	*first_full = w->batches;
	for (unsigned b = 0; b < w->batches; b++) {
		unsigned have = 0;
		for (unsigned i = 0; i < w->batch; i++) {
			struct hc_key k = wkey(w, b, i);
			unsigned n = rt_objects_present(dir, &k);
			if (n != 0 && n != nobj)
				fail_msg("batch %u page %u: %u of %u objects (half a page)", b, i,
					 n, nobj);
			have += n != 0;
		}
		present += have;
		if (have && boundary < 0)
			boundary = (int)b;
		if (boundary >= 0 && (unsigned)boundary != b && have != w->batch)
			fail_msg("batch %u: %u of %u pages, but older batch %d is there: "
				 "not oldest first",
				 b, have, w->batch, boundary);
		if (have == w->batch && *first_full == w->batches)
			*first_full = b;
	}
	return present;
}

/* Batches [from, to) read back whole and right. */
static void check_readable(struct hc_store *st, struct hc_pool *pool, const struct written *w,
			   unsigned from, unsigned to, void *scratch)
{
	struct hc_key keys[64];
	uint64_t pages[64];
	int res[64];
	for (unsigned b = from; b < to; b++) {
		for (unsigned i = 0; i < w->batch; i++) {
			keys[i] = wkey(w, b, i);
			pages[i] = w->batch + i;
		}
		int64_t got = hc_store_get(st, keys, w->batch, pages, res);
		if (got != (int64_t)w->batch)
			fail_msg("batch %u: %lld of %u pages read", b, (long long)got, w->batch);
		for (unsigned i = 0; i < w->batch; i++)
			if (!rt_page_ok(pool, pages[i], &keys[i], scratch))
				fail_msg("batch %u page %u: wrong content", b, i);
	}
}

/* ---- the capacity cleaner, with a reader racing its deletions ---- */

struct reader {
	struct hc_store *st;
	struct hc_pool *pool;
	const struct written *w;
	_Atomic unsigned written; /* batches written so far */
	_Atomic bool stop;
	_Atomic uint64_t hits, misses, rounds;
	_Atomic bool failed; /* err is set */
	char err[256];
};

static void reader_fail(struct reader *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void reader_fail(struct reader *r, const char *fmt, ...)
{
	if (atomic_load(&r->failed))
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	atomic_store(&r->failed, true);
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	size_t pb = hc_pool_page_bytes(r->pool);
	void *scratch = malloc(pb);
	struct hc_key keys[BATCH];
	uint64_t pages[BATCH];
	int res[BATCH];
	while (!atomic_load(&r->stop) && !atomic_load(&r->failed)) {
		/* The oldest batches: those the cleaner deletes. */
		unsigned n = atomic_load(&r->written);
		if (n == 0) {
			rt_sleep_ms(1);
			continue;
		}
		for (unsigned b = 0; b < n && b < 24 && !atomic_load(&r->failed); b++) {
			for (unsigned i = 0; i < BATCH; i++) {
				keys[i] = wkey(r->w, b, i);
				pages[i] = 2 * BATCH + i;
			}
			int64_t got = hc_store_get(r->st, keys, BATCH, pages, res);
			if (got < 0)
				reader_fail(r, "get: %lld", (long long)got);
			for (unsigned i = 0; i < BATCH; i++) {
				if (res[i] == 0) {
					atomic_fetch_add(&r->hits, 1);
					if (!rt_page_ok(r->pool, pages[i], &keys[i], scratch))
						reader_fail(r, "batch %u page %u: wrong content", b,
							    i);
				} else if (res[i] == -ENOENT) {
					atomic_fetch_add(&r->misses, 1);
				} else {
					reader_fail(r,
						    "batch %u page %u: result %d racing the "
						    "cleaner",
						    b, i, res[i]);
				}
			}
		}
		atomic_fetch_add(&r->rounds, 1);
	}
	free(scratch);
	return NULL;
}

static int dir_setup(void **state)
{
	char *dir = malloc(PATH_MAX);
	rt_mkdtemp(dir, "clean");
	*state = dir;
	return 0;
}

static int dir_teardown(void **state)
{
	rt_rmtree(*state);
	free(*state);
	return 0;
}

#define CAP_BYTES 4000000ull /* capacity_gb 0.004 */

static void test_capacity(void **state)
{
	const char *dir = *state;
	struct hc_pool *pool = rt_pool(TOKENS, 3 * BATCH);
	size_t pb = hc_pool_page_bytes(pool);
	void *scratch = malloc(pb);
	/* high 100: the fs watermark never triggers here; the capacity
	 * cleaner deletes down to cap * low / high. */
	struct hc_store *st = rt_open_ok(dir,
					 "\"capacity_gb\": 0.004, \"l3_cleaner_interval_s\": 0.2, "
					 "\"l3_cleaner_high_watermark\": 100, "
					 "\"l3_cleaner_low_watermark\": 70",
					 false, pool);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "kv", &info), 0);
	assert_true(info.zero_copy);
	uint64_t page_disk = 2 * (pb / 2 + hc_store_object_block(st));
	/* 2.5 x the cap. */
	struct written w = {.batch = BATCH, .key_base = 1000};
	w.batches = (unsigned)(CAP_BYTES * 5 / 2 / (page_disk * BATCH)) + 1;

	struct reader r = {.st = st, .pool = pool, .w = &w};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, reader_main, &r), 0);
	for (unsigned b = 0; b < w.batches; b++) {
		write_batches(st, pool, &w, b, b + 1, scratch);
		atomic_store(&r.written, b + 1);
	}
	/* The cleaner gets the store under the cap; wait until its pass is
	 * over (the size holds still for a few passes). */
	double end = rt_now() + 15;
	struct hc_ls_report ls = rt_ls(dir);
	uint64_t last = 0;
	while ((ls.bytes > CAP_BYTES || ls.bytes != last) && rt_now() < end) {
		last = ls.bytes;
		rt_sleep_ms(ls.bytes > CAP_BYTES ? 50 : 600);
		ls = rt_ls(dir);
	}
	atomic_store(&r.stop, true);
	pthread_join(th, NULL);
	if (atomic_load(&r.failed))
		fail_msg("reader: %s", r.err);
	print_message("capacity: %u batches of %u pages written, reader %llu rounds: %llu hits, "
		      "%llu misses\n",
		      w.batches, BATCH, (unsigned long long)r.rounds, (unsigned long long)r.hits,
		      (unsigned long long)r.misses);

	ls = rt_ls(dir);
	uint64_t target = CAP_BYTES * 70 / 100;
	print_message("capacity: %llu bytes in %llu pages left (cap %llu, target %llu)\n",
		      (unsigned long long)ls.bytes, (unsigned long long)ls.pages,
		      (unsigned long long)CAP_BYTES, (unsigned long long)target);
	assert_true(ls.bytes <= CAP_BYTES);
	/* Down to the target, not much further. */
	assert_true(ls.bytes + page_disk > target);
	assert_int_equal(ls.objects, 2 * ls.pages);
	assert_int_equal(ls.bytes, ls.pages * page_disk);
	unsigned first_full;
	uint64_t present = check_prefix_deleted(dir, &w, &first_full);
	assert_int_equal(present, ls.pages);
	assert_true(first_full > 0); /* the oldest went */
	check_readable(st, pool, &w, first_full, w.batches, scratch);
	assert_true(r.hits > 0);
	assert_true(r.misses > 0);
	struct hc_store_stats s;
	assert_int_equal(hc_store_stats(st, NULL, &s), 0);
	assert_int_equal(s.corrupt, 0);
	assert_int_equal(s.failures, 0);
	hc_store_close(st);
	hc_pool_destroy(pool);
	free(scratch);
	struct hc_fsck_report f = rt_fsck(dir, false);
	assert_int_equal(f.corrupt, 0);
	assert_int_equal(f.ok, ls.objects);
	assert_int_equal(rt_count_temps(dir), 0);
}

/* A get racing a whole page's deletion, page by page: the page is a hit
 * before, a miss after, and never anything else in between. */
static void test_get_races_delete(void **state)
{
	const char *dir = *state;
	struct hc_pool *pool = rt_pool(TOKENS, 3 * BATCH);
	void *scratch = malloc(hc_pool_page_bytes(pool));
	struct hc_store *st = rt_open_ok(dir, "\"l3_cleaner_interval_s\": 0", false, pool);
	struct written w = {.batch = BATCH, .batches = 24, .key_base = 500000};
	write_batches(st, pool, &w, 0, w.batches, scratch);
	struct reader r = {.st = st, .pool = pool, .w = &w};
	atomic_store(&r.written, w.batches);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, reader_main, &r), 0);
	/* Delete the pages as the cleaner does, oldest first, a few at a time. */
	const char *dirs[] = {dir};
	uint64_t total = rt_ls(dir).bytes, step = total / 40;
	for (uint64_t cap = total; cap >= step && !atomic_load(&r.failed); cap -= step) {
		assert_int_equal(hc_file_gc(dirs, 1, cap - step, NULL, NULL), 0);
		rt_sleep_ms(5);
	}
	assert_int_equal(hc_file_gc(dirs, 1, 0, NULL, NULL), 0);
	rt_sleep_ms(50);
	atomic_store(&r.stop, true);
	pthread_join(th, NULL);
	if (atomic_load(&r.failed))
		fail_msg("reader: %s", r.err);
	print_message("race: reader %llu rounds, %llu hits, %llu misses\n",
		      (unsigned long long)r.rounds, (unsigned long long)r.hits,
		      (unsigned long long)r.misses);
	assert_true(r.hits > 0 && r.misses > 0);
	assert_int_equal(rt_ls(dir).pages, 0);
	struct hc_store_stats s;
	assert_int_equal(hc_store_stats(st, NULL, &s), 0);
	assert_int_equal(s.corrupt, 0);
	assert_int_equal(s.failures, 0);
	hc_store_close(st);
	hc_pool_destroy(pool);
	free(scratch);
}

/* ---- watermarks on a small file system ---- */

struct wm_fx {
	struct rt_mount m;
	bool mounted;
	struct hc_pool *pool;
	struct hc_store *st;
	void *scratch;
};

static int wm_setup(void **state)
{
	struct wm_fx *f = calloc(1, sizeof(*f));
	f->mounted = rt_mount_ext4(&f->m, 32) == 0;
	*state = f;
	return 0;
}

static int wm_teardown(void **state)
{
	struct wm_fx *f = *state;
	hc_store_close(f->st);
	hc_pool_destroy(f->pool);
	free(f->scratch);
	rt_umount(&f->m);
	if (f->m.mounted)
		print_message("could not unmount %s\n", f->m.mnt);
	free(f);
	return 0;
}

static void test_watermark(void **state)
{
	struct wm_fx *f = *state;
	if (!f->mounted) {
		print_message("watermark: skipped, cannot mount a loop file system\n");
		skip();
	}
	char dir[PATH_MAX + 16];
	rt_pathf(dir, sizeof(dir), "%s/store", f->m.mnt);
	/* 128 KiB pages. */
	f->pool = rt_pool(256, 3 * 8);
	f->scratch = malloc(hc_pool_page_bytes(f->pool));
	f->st = rt_open_ok(dir,
			   "\"l3_cleaner_interval_s\": 0.2, "
			   "\"l3_cleaner_high_watermark\": 50, "
			   "\"l3_cleaner_low_watermark\": 30",
			   false, f->pool);
	double base = rt_fs_used_pct(f->m.mnt);
	assert_true(base < 25);
	/* Write up to ~65 % use: the cleaner must act (50 %) and the fs must
	 * never fill. */
	struct written w = {.batch = 8, .key_base = 900000};
	double used = base, peak = base;
	while (used < 65 && w.batches < 1000) {
		write_batches(f->st, f->pool, &w, w.batches, w.batches + 1, f->scratch);
		w.batches++;
		used = rt_fs_used_pct(f->m.mnt);
		if (used > peak)
			peak = used;
	}
	/* Passes come every 0.2 s but may each take seconds on a loaded
	 * host: the bound is generous, the loop ends once under the mark. */
	double end = rt_now() + 30;
	while ((used = rt_fs_used_pct(f->m.mnt)) >= 30 && rt_now() < end)
		rt_sleep_ms(50);
	rt_sleep_ms(500);
	used = rt_fs_used_pct(f->m.mnt);
	/* One page is ~0.4 % of the fs. */
	print_message("watermark: base %.1f%%, peak %.1f%%, %u batches, now %.1f%%\n", base, peak,
		      w.batches, used);
	assert_true(used < 30);
	assert_true(used > 25); /* it stopped at the low watermark */
	unsigned first_full;
	uint64_t present = check_prefix_deleted(dir, &w, &first_full);
	assert_true(present > 0);
	assert_true(first_full > 0);
	check_readable(f->st, f->pool, &w, first_full, w.batches, f->scratch);
	assert_int_equal(rt_ls(dir).pages, present);
	struct hc_store_stats s;
	assert_int_equal(hc_store_stats(f->st, NULL, &s), 0);
	assert_int_equal(s.failures, 0);
	hc_store_close(f->st);
	f->st = NULL;
	struct hc_fsck_report r = rt_fsck(dir, false);
	assert_int_equal(r.corrupt, 0);
	assert_int_equal(r.orphaned_temp, 0);
}

/* ---- hc_file_gc and hc_file_ls ---- */

static int64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void test_gc_and_ls(void **state)
{
	const char *dir = *state;
	struct hc_pool *pool = rt_pool(TOKENS, 3 * BATCH);
	size_t pb = hc_pool_page_bytes(pool);
	void *scratch = malloc(pb);
	struct hc_store *st = rt_open_ok(dir, "\"l3_cleaner_interval_s\": 0", false, pool);
	const char *dirs[] = {dir};

	struct hc_ls_report ls = rt_ls(dir);
	assert_int_equal(ls.pages, 0);
	assert_int_equal(ls.objects, 0);
	assert_int_equal(ls.bytes, 0);
	assert_int_equal(ls.oldest_ns, 0);
	assert_int_equal(ls.newest_ns, 0);

	int64_t t0 = realtime_ns() - 1000000000ll; /* mtimes may be coarse */
	struct written w = {.batch = 8, .batches = 20, .key_base = 300000};
	write_batches(st, pool, &w, 0, w.batches, scratch);
	int64_t t1 = realtime_ns() + 1000000000ll;
	uint64_t page_disk = 2 * (pb / 2 + hc_store_object_block(st));
	uint64_t npages = (uint64_t)w.batch * w.batches;

	/* A temp file and a foreign file are no pages, and gc leaves them. */
	char tmp[PATH_MAX + 64], junk[PATH_MAX + 64];
	rt_pathf(tmp, sizeof(tmp), "%s/3c/.tmp.0123456789abcdef.%d.999", dir, (int)getpid());
	rt_pathf(junk, sizeof(junk), "%s/3c/junk", dir);
	for (int i = 0; i < 2; i++) {
		int fd = open(i ? junk : tmp, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, "xxxx", 4), 4);
		close(fd);
	}

	ls = rt_ls(dir);
	assert_int_equal(ls.pages, npages);
	assert_int_equal(ls.objects, 2 * npages);
	assert_int_equal(ls.bytes, npages * page_disk);
	assert_true(ls.oldest_ns >= t0 && ls.oldest_ns < ls.newest_ns && ls.newest_ns <= t1);
	/* The batches are GAP_MS apart: oldest and newest are most of the
	 * writing time apart. */
	assert_true(ls.newest_ns - ls.oldest_ns >= (int64_t)(w.batches - 2) * GAP_MS * 1000000ll);

	/* Half a page (one object) is still one page for ls. */
	struct hc_key half = wkey(&w, 0, 0);
	char path[PATH_MAX];
	rt_obj_path(dir, &half, "_v", path, sizeof(path));
	assert_int_equal(unlink(path), 0);
	ls = rt_ls(dir);
	assert_int_equal(ls.pages, npages);
	assert_int_equal(ls.objects, 2 * npages - 1);
	uint64_t bytes0 = ls.bytes;
	assert_int_equal(bytes0, npages * page_disk - page_disk / 2);

	/* Nothing to do above the current size. */
	uint64_t rp = 99, rb = 99;
	assert_int_equal(hc_file_gc(dirs, 1, bytes0, &rp, &rb), 0);
	assert_int_equal(rp, 0);
	assert_int_equal(rb, 0);

	/* Down to 60 %: the oldest pages go, whole, and no more than needed. */
	uint64_t cap = bytes0 * 6 / 10;
	assert_int_equal(hc_file_gc(dirs, 1, cap, &rp, &rb), 0);
	struct hc_ls_report after = rt_ls(dir);
	print_message("gc: %llu -> %llu bytes (cap %llu): %llu pages, %llu bytes removed\n",
		      (unsigned long long)bytes0, (unsigned long long)after.bytes,
		      (unsigned long long)cap, (unsigned long long)rp, (unsigned long long)rb);
	assert_true(rp > 0);
	assert_int_equal(after.pages, npages - rp);
	assert_int_equal(after.bytes, bytes0 - rb);
	assert_int_equal(after.objects, after.pages * 2);
	assert_true(after.bytes <= cap);
	assert_true(after.bytes + page_disk > cap);
	assert_true(after.oldest_ns > ls.oldest_ns);
	assert_int_equal(after.newest_ns, ls.newest_ns);
	unsigned first_full;
	assert_int_equal(check_prefix_deleted(dir, &w, &first_full), after.pages);
	assert_true(first_full > 0);
	check_readable(st, pool, &w, first_full, w.batches, scratch);

	/* Down to nothing: every page goes, the other files stay. */
	assert_int_equal(hc_file_gc(dirs, 1, 0, &rp, &rb), 0);
	assert_int_equal(rp, after.pages);
	assert_int_equal(rb, after.bytes);
	ls = rt_ls(dir);
	assert_int_equal(ls.pages, 0);
	assert_int_equal(ls.objects, 0);
	assert_int_equal(ls.bytes, 0);
	assert_int_equal(ls.oldest_ns, 0);
	assert_int_equal(ls.newest_ns, 0);
	struct stat sb;
	assert_int_equal(stat(tmp, &sb), 0);
	assert_int_equal(stat(junk, &sb), 0);
	struct hc_fsck_report f = rt_fsck(dir, false);
	assert_int_equal(f.ok, 0);
	assert_int_equal(f.foreign, 1);
	assert_int_equal(f.orphaned_temp, 0); /* our own pid, and young */
	unlink(tmp);
	unlink(junk);

	/* Bad arguments. */
	assert_int_equal(hc_file_gc(NULL, 1, 0, NULL, NULL), -EINVAL);
	assert_int_equal(hc_file_ls(dirs, 0, &ls), -EINVAL);
	/* The backend is found by location: an s3:// URL goes to the s3
	 * backend, which has no offline fsck (refused before any request),
	 * and must be the only location. */
	const char *url[] = {"s3://bucket/prefix/", dir};
	assert_int_equal(hc_file_fsck(url, 1, false, &f), -ENOTSUP);
	assert_non_null(strstr(hc_last_error(), "s3 backend has no offline fsck"));
	assert_int_equal(hc_file_ls(url, 2, &ls), -EINVAL);
	assert_non_null(strstr(hc_last_error(), "only location"));
	assert_int_equal(hc_file_fsck(url, 2, false, &f), -EINVAL);
	hc_store_close(st);
	hc_pool_destroy(pool);
	free(scratch);
}

int main(void)
{
	rt_skip_without_engine();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_capacity, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_get_races_delete, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_watermark, wm_setup, wm_teardown),
		cmocka_unit_test_setup_teardown(test_gc_and_ls, dir_setup, dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
