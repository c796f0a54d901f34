/*
 * A writer killed mid-batch leaves no torn page. RUNS times on the same
 * dir: fork a writer (it opens its own store, and so its own io_uring
 * rings, after the fork), let it write batches in a loop, SIGKILL it
 * 1-30 ms after it is ready. Then:
 *   - every page of a batch the writer saw complete reads back right;
 *   - every page of the batch in flight reads back right or is a miss,
 *     never corrupt (the checksum would catch a torn object: -EBADMSG);
 *   - hc_file_fsck finds 0 corrupt objects; the dead writer's temp files,
 *     once old, are all reported as orphaned, repair removes exactly those, and a
 *     second fsck finds none.
 * Some runs first stop the writer mid-batch and repair beside it: only
 * the dead writers' temp files go (the live writer then carries on and must
 * not fail). Some repairs go through $HICACHE_BIN fsck --repair.
 * Runs vary the mode (zero-copy: two objects per page, bounce: one), the
 * batch size, and direct versus buffered I/O.
 */
#include "robust_test.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define TOKENS 16
#define RUNS 20
#define MAX_BATCH 32
#define RUN_KEYS 1000000ull /* key ids of run r: r * RUN_KEYS + b * batch + i */
#define CHILD_LIMIT_S 20.0

struct progress {
	_Atomic uint64_t started;   /* batches begun */
	_Atomic uint64_t completed; /* batches whose set returned 0 */
};

struct run_info {
	bool bounce, buffered;
	unsigned batch;
	uint64_t started, completed;
};

static void plan_run(unsigned run, struct run_info *ri)
{
	ri->bounce = run % 2;
	ri->buffered = run % 4 == 3;
	ri->batch = (unsigned[]){8, 32, 1, 16, 5}[run % 5];
}

static const char *run_extra(const struct run_info *ri)
{
	return ri->buffered ? "\"l3_cleaner_interval_s\": 0, \"use_direct_io\": false"
			    : "\"l3_cleaner_interval_s\": 0";
}

static struct hc_key run_key(unsigned run, const struct run_info *ri, uint64_t b, unsigned i)
{
	return rt_key(run * RUN_KEYS + b * ri->batch + i);
}

/* The writer. No cmocka here: failures are exit codes. */
static void child_main(const char *dir, unsigned run, const struct run_info *ri,
		       struct progress *prog, int ready_fd)
{
	struct hc_kv_geometry g = {.layers = 2,
				   .heads = 1,
				   .head_dim = 64,
				   .elem_bytes = 2,
				   .page_size = TOKENS,
				   .pages = MAX_BATCH,
				   .layout = HC_LAYOUT_PAGE_FIRST};
	struct hc_pool *pool;
	if (hc_pool_create_kv(&g, NULL, &pool))
		_exit(10);
	char json[PATH_MAX + 256];
	rt_pathf(json, sizeof(json), "{\"dirs\": [\"%s\"], %s}", dir, run_extra(ri));
	struct hc_config *cfg;
	if (hc_config_create(json, &cfg))
		_exit(11);
	struct hc_store_opts o;
	hc_store_opts_init(&o, sizeof(o));
	o.config = cfg;
	o.model = RT_MODEL;
	o.force_bounce = ri->bounce;
	struct hc_store *st;
	if (hc_store_open(&o, &st))
		_exit(12);
	if (hc_store_register_pool(st, "kv", pool, true))
		_exit(13);
	size_t pb = hc_pool_page_bytes(pool);
	void *scratch = malloc(pb);
	if (!scratch || write(ready_fd, "r", 1) != 1)
		_exit(14);
	double end = rt_now() + CHILD_LIMIT_S;
	struct hc_key keys[MAX_BATCH];
	uint64_t pages[MAX_BATCH];
	int res[MAX_BATCH];
	for (uint64_t b = 0; rt_now() < end; b++) {
		for (unsigned i = 0; i < ri->batch; i++) {
			keys[i] = run_key(run, ri, b, i);
			pages[i] = i;
			rt_fill(scratch, pb, &keys[i], 0);
			hc_pool_scatter(pool, i, scratch, pb);
		}
		atomic_store(&prog->started, b + 1);
		if (hc_store_set(st, keys, ri->batch, pages, res))
			_exit(20);
		atomic_store(&prog->completed, b + 1);
	}
	_exit(30); /* never killed: the parent is stuck */
}

struct fx {
	char dir[PATH_MAX];
	struct progress *prog;
	struct hc_pool *pool;
	struct hc_store *st;
	void *scratch;
	pid_t child;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	rt_mkdtemp(f->dir, "crash");
	f->prog = mmap(NULL, sizeof(*f->prog), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	assert_true(f->prog != MAP_FAILED);
	f->pool = rt_pool(TOKENS, MAX_BATCH);
	f->scratch = malloc(hc_pool_page_bytes(f->pool));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	if (f->child > 0) {
		kill(f->child, SIGKILL);
		waitpid(f->child, NULL, 0);
	}
	hc_store_close(f->st);
	hc_pool_destroy(f->pool);
	munmap(f->prog, sizeof(*f->prog));
	rt_rmtree(f->dir);
	free(f->scratch);
	free(f);
	return 0;
}

/* Read batches [0, ri->started) of a run: complete ones must be full hits,
 * the one in flight hits or misses; all hits byte-exact. Returns the hits
 * of the batch in flight. */
static unsigned verify_run(struct fx *f, unsigned run, const struct run_info *ri)
{
	f->st = rt_open_ok(f->dir, run_extra(ri), ri->bounce, f->pool);
	unsigned inflight_hits = 0;
	struct hc_key keys[MAX_BATCH];
	uint64_t pages[MAX_BATCH];
	int res[MAX_BATCH];
	for (uint64_t b = 0; b < ri->started; b++) {
		bool complete = b < ri->completed;
		for (unsigned i = 0; i < ri->batch; i++) {
			keys[i] = run_key(run, ri, b, i);
			pages[i] = ri->batch - 1 - i;
		}
		int64_t lead = hc_store_get(f->st, keys, ri->batch, pages, res);
		assert_true(lead >= 0);
		for (unsigned i = 0; i < ri->batch; i++) {
			if (res[i] == 0) {
				if (!rt_page_ok(f->pool, pages[i], &keys[i], f->scratch))
					fail_msg("run %u batch %llu page %u: wrong content", run,
						 (unsigned long long)b, i);
				inflight_hits += !complete;
			} else if (complete || res[i] != -ENOENT) {
				fail_msg("run %u batch %llu/%llu page %u: result %d", run,
					 (unsigned long long)b, (unsigned long long)ri->completed,
					 i, res[i]);
			}
		}
		/* exists agrees with get: what is there is whole. */
		int64_t ex = hc_store_exists(f->st, keys, ri->batch);
		assert_int_equal(ex, lead);
	}
	struct hc_store_stats s;
	assert_int_equal(hc_store_stats(f->st, NULL, &s), 0);
	assert_int_equal(s.corrupt, 0);
	hc_store_close(f->st);
	f->st = NULL;
	return inflight_hits;
}

static void test_kill_mid_batch(void **state)
{
	struct fx *f = *state;
	struct run_info runs[RUNS];
	const char *env_seed = getenv("HC_TEST_SEED"); /* to replay a run */
	uint64_t seed = env_seed ? strtoull(env_seed, NULL, 0) : (uint64_t)time(NULL);
	unsigned mid_batch = 0, orphans_seen = 0, inflight_hits = 0, cli_repairs = 0;
	unsigned leftover = 0, stopped_repairs = 0; /* temps left by earlier runs */
	print_message("crash: seed %llu\n", (unsigned long long)seed);
	for (unsigned run = 0; run < RUNS; run++) {
		struct run_info *ri = &runs[run];
		plan_run(run, ri);
		atomic_store(&f->prog->started, 0);
		atomic_store(&f->prog->completed, 0);
		int pfd[2];
		assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
		fflush(NULL);
		f->child = fork();
		assert_true(f->child >= 0);
		if (f->child == 0) {
			close(pfd[0]);
			child_main(f->dir, run, ri, f->prog, pfd[1]);
		}
		close(pfd[1]);
		char c;
		ssize_t n = read(pfd[0], &c, 1);
		close(pfd[0]);
		unsigned delay_us = 1000 + (unsigned)(test_mix(seed + run) % 29000);
		if (n == 1)
			usleep(delay_us);
		int status;
		if (n == 1 && run % 5 == 2) {
			/* fsck --repair while the writer is alive (stopped mid-batch)
			 * removes only the dead writers' temp files: the live one's
			 * are not orphaned. Had it taken one, the writer's set would
			 * fail and it would exit before the kill (checked below). */
			kill(f->child, SIGSTOP);
			assert_int_equal(waitpid(f->child, &status, WUNTRACED), f->child);
			assert_true(WIFSTOPPED(status));
			rt_sleep_ms(20);
			struct hc_fsck_report r = rt_fsck(f->dir, true);
			assert_int_equal(r.corrupt, 0);
			assert_int_equal(r.orphaned_temp, leftover);
			assert_int_equal(r.removed, leftover);
			leftover = 0;
			stopped_repairs++;
			kill(f->child, SIGCONT);
			usleep(5000);
		}
		kill(f->child, SIGKILL);
		assert_int_equal(waitpid(f->child, &status, 0), f->child);
		f->child = 0;
		if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
			fail_msg("run %u: writer exited with %d before the kill", run,
				 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		assert_int_equal(n, 1);
		ri->started = atomic_load(&f->prog->started);
		ri->completed = atomic_load(&f->prog->completed);
		assert_true(ri->completed <= ri->started);
		mid_batch += ri->started > ri->completed && ri->completed > 0;

		inflight_hits += verify_run(f, run, ri);

		/* Every temp file left is the dead writer's: orphaned once it
		 * is old enough (temp files are judged by age alone). */
		unsigned temps = rt_count_temps_quiet(f->dir);
		assert_int_equal(rt_age_temps(f->dir, 3600), temps);
		struct hc_fsck_report r = rt_fsck(f->dir, false);
		assert_int_equal(r.corrupt, 0);
		assert_int_equal(r.orphaned_temp, temps);
		assert_int_equal(r.removed, 0);
		assert_true(temps >= leftover);
		orphans_seen += temps - leftover;
		leftover = temps;
		/* Repair every other run, so some runs meet an earlier run's
		 * leftovers. */
		if (run % 4 == 1 && rt_have_cli()) {
			/* The CLI: orphaned temp files do not fail the check. */
			assert_int_equal(rt_cli_fsck(f->dir, true, &r), 0);
			assert_int_equal(r.corrupt, 0);
			assert_int_equal(r.orphaned_temp, temps);
			assert_int_equal(r.removed, temps);
			cli_repairs++;
			assert_int_equal(rt_cli_fsck(f->dir, false, &r), 0);
			assert_int_equal(r.orphaned_temp, 0);
			assert_int_equal(rt_count_temps(f->dir), 0);
			leftover = 0;
		} else if (run % 2 || run == RUNS - 1) {
			r = rt_fsck(f->dir, true);
			assert_int_equal(r.corrupt, 0);
			assert_int_equal(r.removed, r.orphaned_temp);
			assert_int_equal(r.orphaned_temp, temps);
			r = rt_fsck(f->dir, false);
			assert_int_equal(r.orphaned_temp, 0);
			assert_int_equal(r.corrupt, 0);
			assert_int_equal(rt_count_temps(f->dir), 0);
			leftover = 0;
		}
		print_message("run %u: %s%s batch %u, killed after %u us in batch %llu "
			      "(%llu complete), %u temp file(s)\n",
			      run, ri->bounce ? "bounce" : "zero-copy",
			      ri->buffered ? " buffered" : "", ri->batch, delay_us,
			      (unsigned long long)ri->started, (unsigned long long)ri->completed,
			      temps);
	}
	/* Later runs and repairs left every earlier run's pages alone. */
	for (unsigned run = 0; run < RUNS; run++)
		verify_run(f, run, &runs[run]);
	struct hc_fsck_report r = rt_fsck(f->dir, false);
	assert_int_equal(r.corrupt, 0);
	assert_int_equal(r.orphaned_temp, 0);
	assert_true(r.ok > 0);
	print_message("crash: %u of %u runs killed mid-batch after a complete one, %u orphaned "
		      "temp files, %u pages of in-flight batches were whole, %u repairs by "
		      "$HICACHE_BIN, %u beside a stopped writer\n",
		      mid_batch, RUNS, orphans_seen, inflight_hits, cli_repairs, stopped_repairs);
	struct hc_fsck_report cli;
	if (rt_have_cli()) {
		assert_int_equal(rt_cli_fsck(f->dir, false, &cli), 0);
		assert_int_equal(cli.ok, r.ok);
		assert_int_equal(cli.bytes, r.bytes);
		assert_int_equal(cli.corrupt, 0);
	}
	/* The kills did land while the writer was writing. */
	assert_true(mid_batch > 0);
}

/* Write a small file at path (mode 0600), optionally aged by age_s. */
static void make_file(const char *path, const char *text, int age_s)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	if (age_s) {
		struct timespec t[2];
		clock_gettime(CLOCK_REALTIME, &t[0]);
		t[0].tv_sec -= age_s;
		t[1] = t[0];
		assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
	}
}

/* What a crash leaves, made by hand: fsck's temp-file policy (by age
 * alone: older than FILE_TEMP_AGE_NS orphaned, young kept whatever pid its
 * name holds, since the writer may be on another host) and
 * corrupt objects (a flipped byte, a truncated file): reported, a miss for
 * get, removed by repair. */
static void test_fsck_policy(void **state)
{
	struct fx *f = *state;
	pid_t dead = fork();
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	assert_int_equal(waitpid(dead, NULL, 0), dead);

	f->st = rt_open_ok(f->dir, "\"l3_cleaner_interval_s\": 0", false, f->pool);
	struct hc_key keys[3] = {rt_key(1), rt_key(2), rt_key(3)};
	uint64_t pages[3] = {0, 1, 2};
	int res[3];
	for (unsigned i = 0; i < 3; i++)
		rt_put_page(f->pool, i, &keys[i], 0, f->scratch);
	assert_int_equal(hc_store_set(f->st, keys, 3, pages, res), 0);

	char p[6][PATH_MAX + 64];
	rt_pathf(p[0], sizeof(p[0]), "%s/10/.tmp.0000000000000010.%d.1", f->dir, (int)getpid());
	rt_pathf(p[1], sizeof(p[1]), "%s/11/.tmp.0000000000000011.%d.1", f->dir, (int)dead);
	rt_pathf(p[2], sizeof(p[2]), "%s/12/.tmp.0000000000000012.%d.2", f->dir, (int)getpid());
	rt_pathf(p[3], sizeof(p[3]), "%s/00/.probe.%d.7", f->dir, (int)dead);
	rt_pathf(p[4], sizeof(p[4]), "%s/13/not-an-object", f->dir);
	make_file(p[0], "live writer", 0);        /* kept */
	make_file(p[1], "dead pid, young", 0);    /* kept: a pid says nothing */
	make_file(p[2], "stale, live pid", 3600); /* orphaned: old */
	make_file(p[3], "dead prober", 3600);     /* orphaned: old */
	make_file(p[4], "foreign", 0);            /* foreign, kept */

	/* Corrupt key 0's K object (a flipped payload byte) and truncate key
	 * 1's V object. */
	char obj[2][PATH_MAX];
	rt_obj_path(f->dir, &keys[0], "_k", obj[0], sizeof(obj[0]));
	rt_obj_path(f->dir, &keys[1], "_v", obj[1], sizeof(obj[1]));
	int fd = open(obj[0], O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, 100), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, 100), 1);
	close(fd);
	assert_int_equal(truncate(obj[1], 4096), 0);

	struct hc_fsck_report r = rt_fsck(f->dir, false);
	assert_int_equal(r.ok, 4);
	assert_int_equal(r.corrupt, 2);
	assert_int_equal(r.orphaned_temp, 2);
	assert_int_equal(r.foreign, 1);
	assert_int_equal(r.removed, 0);
	/* Corrupt objects are misses, never data. */
	assert_int_equal(hc_store_get(f->st, keys, 3, pages, res), 0);
	assert_int_equal(res[0], -EBADMSG);
	assert_int_equal(res[1], -EBADMSG);
	assert_int_equal(res[2], 0);
	assert_true(rt_page_ok(f->pool, 2, &keys[2], f->scratch));
	struct hc_store_stats s;
	assert_int_equal(hc_store_stats(f->st, NULL, &s), 0);
	assert_int_equal(s.corrupt, 2);
	/* The get removed the flipped object (a later set heals the page);
	 * the truncated one could be another geometry's and is left to fsck. */
	struct stat st;
	assert_int_equal(stat(obj[0], &st), -1);
	assert_int_equal(stat(obj[1], &st), 0);

	r = rt_fsck(f->dir, true);
	assert_int_equal(r.corrupt, 1);
	assert_int_equal(r.orphaned_temp, 2);
	assert_int_equal(r.removed, 3);
	assert_int_equal(stat(p[0], &st), 0);
	assert_int_equal(stat(p[1], &st), 0);
	assert_int_equal(stat(p[4], &st), 0);
	for (int i = 2; i <= 3; i++)
		assert_int_equal(stat(p[i], &st), -1);
	assert_int_equal(stat(obj[0], &st), -1);
	r = rt_fsck(f->dir, false);
	assert_int_equal(r.ok, 4);
	assert_int_equal(r.corrupt, 0);
	assert_int_equal(r.orphaned_temp, 0);
	/* Now plain misses; the store heals by writing them again. */
	assert_int_equal(hc_store_get(f->st, keys, 3, pages, res), 0);
	assert_int_equal(res[0], -ENOENT);
	assert_int_equal(res[1], -ENOENT);
	for (unsigned i = 0; i < 3; i++)
		rt_put_page(f->pool, i, &keys[i], 0, f->scratch);
	assert_int_equal(hc_store_set(f->st, keys, 3, pages, res), 0);
	uint64_t back[3] = {5, 6, 7};
	assert_int_equal(hc_store_get(f->st, keys, 3, back, res), 3);
	for (unsigned i = 0; i < 3; i++)
		assert_true(rt_page_ok(f->pool, back[i], &keys[i], f->scratch));
	hc_store_close(f->st);
	f->st = NULL;
	unlink(p[0]);
	unlink(p[1]);
	unlink(p[4]);
}

int main(void)
{
	rt_skip_without_engine();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fsck_policy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_mid_batch, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
