/*
 * Cleaners of several stores on one directory (hosts and containers
 * sharing a volume), and what they delete.
 *
 * lease held:     a lock on <dir>/.hicache-cleaner.lock held elsewhere: this
 *                 store's cleaner skips its rounds (counted) and deletes
 *                 nothing; once it is released, the cleaner cleans.
 * two processes:  two processes with cleaners on one store over its
 *                 capacity, started at once: together they delete exactly
 *                 what one cleaner alone deletes on the same store, all of
 *                 it by one of them.
 * filled fs:      on a small ext4, the L3 and other files above the high
 *                 watermark, readers holding every object open (deleting
 *                 frees nothing yet): the cleaner deletes only the excess
 *                 over the low mark from the L3, which keeps what the low
 *                 mark leaves for it (own - (used - low x size)), and the
 *                 file system ends at the low mark.
 * orphaned temps: temp files older than l3_file_temp_max_age_s (mtime set
 *                 back) are removed by the cleaner and counted; younger
 *                 ones stay; fsck --repair removes old ones, keeps young.
 */
#include "robust_test.h"

#include <sys/file.h>

#define TOKENS 16 /* 8 KiB pages: two 8 KiB objects (zero-copy) */
#define PAGE_DISK (2 * 8192)
#define BATCH 20

static int dir_setup(void **state)
{
	char *dir = malloc(PATH_MAX);
	rt_mkdtemp(dir, "sclean");
	*state = dir;
	return 0;
}

static int dir_teardown(void **state)
{
	rt_rmtree(*state);
	free(*state);
	return 0;
}

static struct hc_store_cleaner_stats cstats(struct hc_store *st)
{
	struct hc_store_cleaner_stats s;
	assert_int_equal(hc_store_cleaner_stats(st, &s, sizeof(s)), 0);
	return s;
}

/* Write pages [0, n) of key base `base` with no cleaner, in batches spaced
 * in time (distinct mtimes). */
static void fill_store(const char *dir, uint64_t base, unsigned n, uint32_t tokens)
{
	struct hc_pool *pool = rt_pool(tokens, BATCH);
	void *scratch = malloc(hc_pool_page_bytes(pool));
	struct hc_store *st = rt_open_ok(dir, "\"l3_cleaner_interval_s\": 0", false, pool);
	for (unsigned done = 0; done < n;) {
		struct hc_key keys[BATCH];
		uint64_t pages[BATCH];
		int res[BATCH];
		unsigned m = n - done < BATCH ? n - done : BATCH;
		for (unsigned i = 0; i < m; i++) {
			keys[i] = rt_key(base + done + i);
			pages[i] = i;
			rt_put_page(pool, i, &keys[i], 0, scratch);
		}
		assert_int_equal(hc_store_set(st, keys, m, pages, res), 0);
		done += m;
		rt_sleep_ms(2);
	}
	hc_store_close(st);
	hc_pool_destroy(pool);
	free(scratch);
}

/* 400 pages of 16 KiB on disk (6.5 MB) against a 3.2 MB cap, high 100 /
 * low 50: one cleaner deletes down to 1.6 MB, leaving 97 pages. */
#define NPAGES 400
#define CAP_CFG                                                         \
	"\"capacity_gb\": 0.0032, \"l3_cleaner_high_watermark\": 100, " \
	"\"l3_cleaner_low_watermark\": 50"
#define KEEP_PAGES (1600000 / PAGE_DISK)

/* ---- a lease held elsewhere ---- */

static void test_lease_held(void **state)
{
	const char *dir = *state;
	fill_store(dir, 1000, NPAGES, TOKENS);
	assert_int_equal(rt_ls(dir).pages, NPAGES);
	char lock[PATH_MAX + 32];
	rt_pathf(lock, sizeof(lock), "%s/.hicache-cleaner.lock", dir);
	/* What another host's cleaner holds: a lock on the file (flock: its
	 * own open file description, so it conflicts even in this process). */
	int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	struct hc_store *st = rt_open_ok(dir, "\"l3_cleaner_interval_s\": 0.05, " CAP_CFG, false,
					 NULL);
	rt_sleep_ms(400);
	struct hc_store_cleaner_stats s = cstats(st);
	print_message("lease held: %llu rounds, %llu skipped, %llu pages deleted\n",
		      (unsigned long long)s.rounds, (unsigned long long)s.rounds_skipped,
		      (unsigned long long)s.capacity_pages);
	assert_int_equal(s.rounds, 0);
	assert_true(s.rounds_skipped >= 2);
	assert_int_equal(s.capacity_pages, 0);
	assert_int_equal(rt_ls(dir).pages, NPAGES);
	/* Released: the next round cleans. */
	assert_int_equal(flock(fd, LOCK_UN), 0);
	double end = rt_now() + 10;
	while (cstats(st).capacity_pages == 0 && rt_now() < end)
		rt_sleep_ms(20);
	s = cstats(st);
	assert_true(s.rounds >= 1);
	assert_int_equal(s.capacity_pages, NPAGES - KEEP_PAGES);
	assert_int_equal(s.capacity_bytes, (uint64_t)(NPAGES - KEEP_PAGES) * PAGE_DISK);
	assert_int_equal(rt_ls(dir).pages, KEEP_PAGES);
	/* Closed: its lease is free again. */
	hc_store_close(st);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	close(fd);
	/* The lock file is next to the buckets: neither an object nor foreign. */
	struct hc_fsck_report r = rt_fsck(dir, false);
	assert_int_equal(r.foreign, 0);
	assert_int_equal(r.ok, 2 * KEEP_PAGES);
}

/* ---- two processes ---- */

static void cleaner_child(const char *dir, int go, int report)
{
	char c;
	if (read(go, &c, 1) != 0) /* the parent closes it: everyone starts */
		_exit(20);
	struct hc_store *st;
	if (rt_open(dir, "\"l3_cleaner_interval_s\": 0.02, " CAP_CFG, false, NULL, &st))
		_exit(21);
	struct hc_store_cleaner_stats s;
	double end = rt_now() + 10;
	do {
		rt_sleep_ms(10);
		hc_store_cleaner_stats(st, &s, sizeof(s));
	} while (s.rounds + s.rounds_skipped < 10 && rt_now() < end);
	hc_store_close(st); /* joins the cleaner: s is final but for a last round */
	if (write(report, &s, sizeof(s)) != (ssize_t)sizeof(s))
		_exit(22);
	_exit(0);
}

static void test_two_processes(void **state)
{
	const char *dir = *state;
	/* One cleaner alone, on the same store in another dir. */
	char alone[PATH_MAX + 16];
	rt_pathf(alone, sizeof(alone), "%s/alone", dir);
	assert_int_equal(mkdir(alone, 0700), 0);
	char shared[PATH_MAX + 16];
	rt_pathf(shared, sizeof(shared), "%s/shared", dir);
	assert_int_equal(mkdir(shared, 0700), 0);
	fill_store(alone, 5000, NPAGES, TOKENS);
	fill_store(shared, 5000, NPAGES, TOKENS);
	struct hc_store *st = rt_open_ok(alone, "\"l3_cleaner_interval_s\": 0.02, " CAP_CFG, false,
					 NULL);
	double end = rt_now() + 10;
	while (cstats(st).capacity_pages == 0 && rt_now() < end)
		rt_sleep_ms(10);
	rt_sleep_ms(100);
	uint64_t one = cstats(st).capacity_pages;
	hc_store_close(st);
	assert_int_equal(one, NPAGES - KEEP_PAGES);

	int go[2], rep[2];
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(rep), 0);
	pid_t kids[2];
	fflush(NULL);
	for (unsigned i = 0; i < 2; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0) {
			close(go[1]);
			close(rep[0]);
			cleaner_child(shared, go[0], rep[1]);
		}
	}
	close(go[0]);
	close(rep[1]);
	close(go[1]); /* start both */
	struct hc_store_cleaner_stats s[2];
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(read(rep[0], &s[i], sizeof(s[i])), (ssize_t)sizeof(s[i]));
	close(rep[0]);
	for (unsigned i = 0; i < 2; i++) {
		int status;
		assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			fail_msg("cleaner process %u: status %d", i,
				 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	}
	print_message("two processes: deleted %llu + %llu pages (one cleaner alone: %llu), "
		      "rounds %llu + %llu, skipped %llu + %llu\n",
		      (unsigned long long)s[0].capacity_pages,
		      (unsigned long long)s[1].capacity_pages, (unsigned long long)one,
		      (unsigned long long)s[0].rounds, (unsigned long long)s[1].rounds,
		      (unsigned long long)s[0].rounds_skipped,
		      (unsigned long long)s[1].rounds_skipped);
	assert_int_equal(s[0].capacity_pages + s[1].capacity_pages, one);
	/* One of them did it all: the other's rounds came after, and found
	 * the store under its cap. */
	assert_true(s[0].capacity_pages == 0 || s[1].capacity_pages == 0);
	assert_int_equal(s[0].capacity_bytes + s[1].capacity_bytes, one * PAGE_DISK);
	assert_int_equal(rt_ls(shared).pages, KEEP_PAGES);
	assert_int_equal(rt_ls(shared).pages, rt_ls(alone).pages);
}

/* ---- other files fill the file system ---- */

struct fs_fx {
	struct rt_mount m;
	bool mounted;
};

static int fs_setup(void **state)
{
	struct fs_fx *f = calloc(1, sizeof(*f));
	f->mounted = rt_mount_ext4(&f->m, 64) == 0;
	*state = f;
	return 0;
}

static int fs_teardown(void **state)
{
	struct fs_fx *f = *state;
	rt_umount(&f->m);
	free(f);
	return 0;
}

static void fs_bytes(const char *path, double *used, double *usable)
{
	struct statvfs sv;
	assert_int_equal(statvfs(path, &sv), 0);
	*used = (double)(sv.f_blocks - sv.f_bfree) * (double)sv.f_frsize;
	*usable = *used + (double)sv.f_bavail * (double)sv.f_frsize;
}

/* Open every object under dir (what readers in flight hold): fds out. */
static unsigned hold_objects(const char *dir, int *fds, unsigned max)
{
	unsigned n = 0;
	for (int b = 0; b < 256; b++) {
		char path[PATH_MAX + 8];
		rt_pathf(path, sizeof(path), "%s/%02x", dir, b);
		DIR *d = opendir(path);
		if (!d)
			continue;
		struct dirent *de;
		while ((de = readdir(d)))
			if (de->d_name[0] != '.' && n < max)
				fds[n++] = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC);
		closedir(d);
	}
	return n;
}

#define BIG_TOKENS 256 /* 128 KiB pages: two 68 KiB objects */
#define BIG_PAGE_DISK (2 * (65536 + 4096))

static void test_filled_fs(void **state)
{
	struct fs_fx *f = *state;
	if (!f->mounted) {
		print_message("filled fs: skipped, cannot mount a loop file system\n");
		skip();
	}
	char dir[PATH_MAX + 16], other[PATH_MAX + 16];
	rt_pathf(dir, sizeof(dir), "%s/store", f->m.mnt);
	rt_pathf(other, sizeof(other), "%s/other", f->m.mnt);
	/* The L3: ~30 % of the fs. */
	double used, usable;
	fs_bytes(f->m.mnt, &used, &usable);
	unsigned npages = (unsigned)(0.30 * usable / BIG_PAGE_DISK);
	fill_store(dir, 70000, npages, BIG_TOKENS);
	uint64_t own = rt_ls(dir).bytes;
	assert_int_equal(own, (uint64_t)npages * BIG_PAGE_DISK);
	/* Other files: up to ~68 %, above the high mark (60), their own
	 * share (~35 %) below the low mark (50). */
	fs_bytes(f->m.mnt, &used, &usable);
	size_t fill = (size_t)(0.68 * usable - used);
	int ofd = open(other, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(ofd >= 0);
	char *buf = calloc(1, 1 << 20);
	for (size_t done = 0; done < fill;) {
		size_t n = fill - done < (1u << 20) ? fill - done : (1u << 20);
		memset(buf, 0x6f, n);
		assert_int_equal(write(ofd, buf, n), (ssize_t)n);
		done += n;
	}
	free(buf);
	assert_int_equal(fsync(ofd), 0);
	close(ofd);
	fs_bytes(f->m.mnt, &used, &usable);
	double excess = used - 0.50 * usable;
	double expect = (double)own - excess; /* what the low mark leaves the L3 */
	assert_true(100 * used / usable > 60 && expect > 8 * BIG_PAGE_DISK);
	/* Readers hold every object open: a deletion frees nothing yet. */
	static int held[4096];
	unsigned nheld = hold_objects(dir, held, 4096);
	assert_int_equal(nheld, 2 * npages);
	struct hc_store *st = rt_open_ok(dir,
					 "\"l3_cleaner_interval_s\": 3600, "
					 "\"l3_cleaner_high_watermark\": 60, "
					 "\"l3_cleaner_low_watermark\": 50",
					 false, NULL);
	double end = rt_now() + 20;
	while (cstats(st).watermark_pages == 0 && rt_now() < end)
		rt_sleep_ms(20);
	struct hc_store_cleaner_stats s = cstats(st);
	hc_store_close(st);
	for (unsigned i = 0; i < nheld; i++)
		if (held[i] >= 0)
			close(held[i]);
	rt_sleep_ms(100); /* the last close frees the blocks */
	uint64_t kept = rt_ls(dir).bytes;
	double now_used, now_usable;
	fs_bytes(f->m.mnt, &now_used, &now_usable);
	print_message("filled fs: L3 %llu bytes, others to %.1f%% (excess over 50%%: %.0f "
		      "bytes): kept %llu bytes (low mark allows %.0f), deleted %llu pages; fs "
		      "now %.1f%%\n",
		      (unsigned long long)own, 100 * used / usable, excess,
		      (unsigned long long)kept, expect, (unsigned long long)s.watermark_pages,
		      100 * now_used / now_usable);
	/* Whole pages: at most one page under what the low mark allows. */
	assert_true((double)kept <= expect);
	assert_true((double)kept > expect - BIG_PAGE_DISK);
	assert_int_equal(s.watermark_bytes, own - kept);
	assert_true(100 * now_used / now_usable <= 50.0);
	assert_true(100 * now_used / now_usable > 50.0 - 100.0 * BIG_PAGE_DISK / now_usable);
}

/* ---- orphaned temp files ---- */

static void plant_aged(const char *path, unsigned age_s)
{
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		fail_msg("create %s: %s", path, strerror(errno));
	static const char junk[8192];
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	struct timespec t[2];
	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= age_s;
	t[1] = t[0];
	assert_int_equal(futimens(fd, t), 0);
	close(fd);
}

static void test_orphaned_temps(void **state)
{
	const char *dir = *state;
	fill_store(dir, 9000, 10, TOKENS); /* makes the buckets */
	struct {
		const char *name;
		unsigned age_s;
		bool old; /* past 60 s */
	} temps[] = {
		{"3a/.tmp.0123456789abcdef.00c0ffee00c0ffee.7", 7200, true},
		{"00/.tmp.probe.00c0ffee00c0ffee.0", 7200, true},
		{"ff/.tmp.heal.fedcba9876543210.3", 120, true},
		{"10/.probe.12345", 7200, true},
		{"3a/.tmp.0123456789abcdef.00c0ffee00c0ffee.8", 30, false},
		{"20/.tmp.89abcdef01234567.1111111111111111.0", 0, false},
	};
	const unsigned nt = sizeof(temps) / sizeof(temps[0]);
	char path[8][PATH_MAX + 64];
	for (unsigned i = 0; i < nt; i++) {
		rt_pathf(path[i], sizeof(path[i]), "%s/%s", dir, temps[i].name);
		plant_aged(path[i], temps[i].age_s);
	}
	struct hc_store *st = rt_open_ok(dir,
					 "\"l3_cleaner_interval_s\": 0.05, "
					 "\"l3_file_temp_max_age_s\": 60",
					 false, NULL);
	double end = rt_now() + 10;
	while (cstats(st).temps_removed < 4 && rt_now() < end)
		rt_sleep_ms(20);
	rt_sleep_ms(150); /* more rounds: young ones stay young */
	struct hc_store_cleaner_stats s = cstats(st);
	hc_store_close(st);
	print_message("orphaned temps: cleaner removed %llu in %llu rounds\n",
		      (unsigned long long)s.temps_removed, (unsigned long long)s.rounds);
	assert_int_equal(s.temps_removed, 4);
	for (unsigned i = 0; i < nt; i++)
		if ((access(path[i], F_OK) == 0) != !temps[i].old)
			fail_msg("%s (%u s old): %s", temps[i].name, temps[i].age_s,
				 temps[i].old ? "still there" : "removed");
	assert_int_equal(rt_ls(dir).pages, 10);

	/* fsck --repair: by its own age (10 minutes). */
	char old2[PATH_MAX + 64];
	rt_pathf(old2, sizeof(old2), "%s/44/.tmp.4444444444444444.2222222222222222.1", dir);
	plant_aged(old2, 3600);
	struct hc_fsck_report r = rt_fsck(dir, false);
	assert_int_equal(r.orphaned_temp, 1); /* the 30 s and fresh ones are young */
	assert_int_equal(r.removed, 0);
	r = rt_fsck(dir, true);
	assert_int_equal(r.orphaned_temp, 1);
	assert_int_equal(r.removed, 1);
	assert_int_equal(r.ok, 20);
	assert_int_equal(access(old2, F_OK), -1);
	assert_int_equal(access(path[4], F_OK), 0);
	assert_int_equal(access(path[5], F_OK), 0);
}

int main(void)
{
	/* The page sizes above count 4096-byte object blocks, whatever
	 * block the file system would give. */
	setenv("HICACHE_OBJECT_BLOCK", "4096", 1);
	rt_skip_without_engine();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lease_held, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_two_processes, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_filled_fs, fs_setup, fs_teardown),
		cmocka_unit_test_setup_teardown(test_orphaned_temps, dir_setup, dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
