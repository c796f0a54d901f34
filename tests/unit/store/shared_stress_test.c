/*
 * Multi-process stress on one file store dir (HC_TEST_CONCURRENCY): 4
 * processes for HC_STRESS_S seconds (20 by default), each with its cleaner
 * on and a small capacity (so the cleaners delete all the while, taking
 * turns through their lease), set, get and check overlapping keys at
 * random. Every page a get finds is compared byte for byte with its key's
 * content: 0 wrong bytes; no set or get fails; each process holds as many
 * fds after its close as before its open; after all exit no temp file is
 * left, and fsck finds nothing corrupt.
 */
#include "robust_test.h"

#define TOKENS 16 /* 8 KiB pages: two 8 KiB objects on disk */
#define NPROC 4
#define KEYS 2000 /* 32 MB of pages against a 2 MB cap */
#define BATCH 8

struct tally {
	uint64_t set_pages, get_pages, exists_calls, hits, verified, wrong, set_errors;
	uint64_t corrupt, failures, cleaner_rounds, cleaner_skipped, cleaner_pages;
	int fds_before, fds_after;
	int err; /* a step that failed */
};

static double stress_s(void)
{
	const char *e = getenv("HC_STRESS_S");
	double s = e && *e ? strtod(e, NULL) : 20;
	return s > 0 ? s : 20;
}

static void child(const char *dir, unsigned who, int go, int report)
{
	char c;
	if (read(go, &c, 1) != 0)
		_exit(20);
	struct tally t = {0};
	t.fds_before = rt_count_fds();
	struct hc_pool *pool = rt_pool(TOKENS, 2 * BATCH);
	void *scratch = malloc(hc_pool_page_bytes(pool));
	struct hc_store *st;
	if (rt_open(dir,
		    "\"l3_cleaner_interval_s\": 0.2, \"capacity_gb\": 0.002, "
		    "\"l3_cleaner_high_watermark\": 100, \"l3_cleaner_low_watermark\": 70",
		    false, pool, &st))
		_exit(21);
	uint64_t rng = 0x51ce + who;
	double end = rt_now() + stress_s();
	while (rt_now() < end && !t.err) {
		struct hc_key keys[BATCH];
		uint64_t pages[BATCH], back[BATCH];
		int res[BATCH];
		for (unsigned i = 0; i < BATCH; i++) {
			rng = test_mix(rng);
			keys[i] = rt_key(rng % KEYS);
			pages[i] = i;
			back[i] = BATCH + i;
			rt_put_page(pool, i, &keys[i], 0, scratch);
		}
		if (hc_store_set(st, keys, BATCH, pages, res))
			t.set_errors++;
		t.set_pages += BATCH;
		/* Other keys (other processes' pages too) back. */
		for (unsigned i = 0; i < BATCH; i++) {
			rng = test_mix(rng);
			keys[i] = rt_key(rng % KEYS);
		}
		int64_t lead = hc_store_get(st, keys, BATCH, back, res);
		if (lead < 0)
			t.err = 1;
		t.get_pages += BATCH;
		for (unsigned i = 0; i < BATCH; i++) {
			if (res[i] != 0) {
				if (res[i] != -ENOENT)
					t.err = 2;
				continue;
			}
			t.hits++;
			if (rt_page_ok(pool, back[i], &keys[i], scratch))
				t.verified++;
			else
				t.wrong++;
		}
		if (hc_store_exists(st, keys, BATCH) < 0)
			t.err = 3;
		t.exists_calls++;
	}
	struct hc_store_stats s;
	struct hc_store_cleaner_stats cs;
	hc_store_stats(st, NULL, &s);
	hc_store_cleaner_stats(st, &cs, sizeof(cs));
	t.corrupt = s.corrupt;
	t.failures = s.failures;
	t.cleaner_rounds = cs.rounds;
	t.cleaner_skipped = cs.rounds_skipped;
	t.cleaner_pages = cs.capacity_pages + cs.watermark_pages;
	hc_store_close(st);
	hc_pool_destroy(pool);
	free(scratch);
	t.fds_after = rt_count_fds();
	if (write(report, &t, sizeof(t)) != (ssize_t)sizeof(t))
		_exit(22);
	_exit(0);
}

static void test_stress(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	rt_mkdtemp(dir, "stress");
	int go[2], rep[2];
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(rep), 0);
	pid_t kids[NPROC];
	fflush(NULL);
	for (unsigned i = 0; i < NPROC; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0) {
			close(go[1]);
			close(rep[0]);
			child(dir, i, go[0], rep[1]);
		}
	}
	close(go[0]);
	close(rep[1]);
	close(go[1]);
	struct tally t[NPROC], sum = {0};
	unsigned got = 0;
	for (; got < NPROC; got++)
		if (read(rep[0], &t[got], sizeof(t[got])) != (ssize_t)sizeof(t[got]))
			break;
	close(rep[0]);
	for (unsigned i = 0; i < NPROC; i++) {
		int status;
		assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			fail_msg("process %u: %s %d", i, WIFEXITED(status) ? "status" : "signal",
				 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	}
	assert_int_equal(got, NPROC);
	for (unsigned i = 0; i < NPROC; i++) {
		if (t[i].err)
			fail_msg("process %u: step %d failed", i, t[i].err);
		if (t[i].fds_after != t[i].fds_before)
			fail_msg("process %u: %d fds before its open, %d after its close", i,
				 t[i].fds_before, t[i].fds_after);
		sum.set_pages += t[i].set_pages;
		sum.get_pages += t[i].get_pages;
		sum.exists_calls += t[i].exists_calls;
		sum.hits += t[i].hits;
		sum.verified += t[i].verified;
		sum.wrong += t[i].wrong;
		sum.set_errors += t[i].set_errors;
		sum.corrupt += t[i].corrupt;
		sum.failures += t[i].failures;
		sum.cleaner_rounds += t[i].cleaner_rounds;
		sum.cleaner_skipped += t[i].cleaner_skipped;
		sum.cleaner_pages += t[i].cleaner_pages;
	}
	print_message("stress: %d processes x %.0f s: %llu pages set, %llu got (%llu hits, "
		      "%llu verified, %llu wrong), %llu exists calls; cleaners %llu rounds, "
		      "%llu skipped, %llu pages deleted\n",
		      NPROC, stress_s(), (unsigned long long)sum.set_pages,
		      (unsigned long long)sum.get_pages, (unsigned long long)sum.hits,
		      (unsigned long long)sum.verified, (unsigned long long)sum.wrong,
		      (unsigned long long)sum.exists_calls, (unsigned long long)sum.cleaner_rounds,
		      (unsigned long long)sum.cleaner_skipped,
		      (unsigned long long)sum.cleaner_pages);
	assert_int_equal(sum.wrong, 0);
	assert_int_equal(sum.set_errors, 0);
	assert_int_equal(sum.corrupt, 0);
	assert_int_equal(sum.failures, 0);
	assert_int_equal(sum.verified, sum.hits);
	assert_true(sum.hits > 0);
	assert_true(sum.cleaner_pages > 0); /* the cleaners raced the readers */
	assert_int_equal(rt_count_temps(dir), 0);
	struct hc_fsck_report r = rt_fsck(dir, false);
	assert_int_equal(r.corrupt, 0);
	assert_int_equal(r.orphaned_temp, 0);
	rt_rmtree(dir);
}

int main(void)
{
	rt_skip_without_engine();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stress),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
