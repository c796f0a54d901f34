/* Four processes on one bucket prefix of the real gateway (a fleet sharing
 * one L3), HC_TEST_CONCURRENCY: each sets, gets and checks overlapping
 * pages for HC_S3_FLEET_SECONDS (20) - half zero-copy, half bounce, so the
 * two paths meet on the same objects. Every page read is compared byte for
 * byte (0 wrong), no process crashes, and a process's fd count does not grow
 * (connections stay within its max_inflight). */
#include "s3_test.h"

#include <sys/wait.h>

enum { KV_ID = 1 };

#define PROCS 4
#define K 48 /* pages shared by all processes */
#define PS 8
#define MAX_BATCH 16
#define INFLIGHT 8

static unsigned count_fds(void)
{
	unsigned n = 0;
	for (int fd = 0; fd < 4096; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

/* One process of the fleet; returns its exit status (0 = all good). */
static int worker(int id, int seconds)
{
	struct hc_store *st;
	int rc = s3t_open_rc("fleet/", id % 2, "\"max_inflight\": 8", &st);
	if (rc) {
		fprintf(stderr, "worker %d: open: %s (%s)\n", id, hc_strerror(rc), hc_last_error());
		return 2;
	}
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 2 * K);
	struct hc_pool *pool = st_kv_pool(&g);
	if (hc_store_register_pool(st, "kv", pool, true))
		return 3;
	struct hc_key keys[K];
	st_keys(77, K, PS, keys);
	uint64_t slots[K], back[MAX_BATCH];
	for (uint64_t i = 0; i < K; i++) {
		slots[i] = i;
		st_fill(pool, i, KV_ID, i);
	}
	uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
	unsigned fds_warm = 0, fds_max = 0;
	uint64_t rounds = 0, verified = 0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int status = 0;
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= seconds)
			break;
		seed = test_mix(seed);
		size_t start = seed % K, n = 1 + (seed >> 20) % MAX_BATCH;
		if (n > K - start)
			n = K - start;
		int res[MAX_BATCH];
		rc = hc_store_set(st, keys + start, n, slots + start, res);
		if (rc) {
			fprintf(stderr, "worker %d: set of %zu at %zu: %s (%s)\n", id, n, start,
				hc_strerror(rc), hc_last_error());
			status = 4;
			break;
		}
		for (size_t j = 0; j < n; j++) {
			back[j] = K + j;
			st_clear(pool, K + j);
		}
		/* Objects are never deleted here: every page just set reads back. */
		int64_t hits = hc_store_get(st, keys + start, n, back, res);
		if (hits != (int64_t)n) {
			fprintf(stderr, "worker %d: get of %zu at %zu: %lld hits (%s)\n", id, n,
				start, (long long)hits, hc_last_error());
			status = 5;
			break;
		}
		for (size_t j = 0; j < n; j++) {
			long at = st_diff(pool, K + j, KV_ID, start + j);
			if (at >= 0) {
				fprintf(stderr, "worker %d: page %zu wrong at byte %ld\n", id,
					start + j, at);
				status = 6;
			}
			verified++;
		}
		if (hc_store_exists(st, keys + start, n) != (int64_t)n) {
			fprintf(stderr, "worker %d: exists of %zu at %zu missed\n", id, n, start);
			status = 7;
		}
		if (status)
			break;
		rounds++;
		unsigned fds = count_fds();
		if (rounds == 3)
			fds_warm = fds;
		if (fds > fds_max)
			fds_max = fds;
	}
	unsigned fds_end = count_fds();
	fprintf(stderr,
		"worker %d (%s): %llu rounds, %llu pages verified, fds warm %u max %u end %u\n", id,
		id % 2 ? "bounce" : "zero-copy", (unsigned long long)rounds,
		(unsigned long long)verified, fds_warm, fds_max, fds_end);
	/* Each connection is one fd; there are at most INFLIGHT of them. */
	if (!status && rounds > 3 && fds_end > fds_warm + INFLIGHT) {
		fprintf(stderr, "worker %d: fds grew from %u to %u\n", id, fds_warm, fds_end);
		status = 8;
	}
	if (!status && rounds < 3)
		status = 9;
	hc_store_close(st);
	hc_pool_destroy(pool);
	return status;
}

static void test_fleet_on_one_bucket(void **state)
{
	(void)state;
	const char *env = getenv("HC_S3_FLEET_SECONDS");
	int seconds = env && atoi(env) > 0 ? atoi(env) : 20;
	pid_t pids[PROCS];
	for (int i = 0; i < PROCS; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0)
			_exit(worker(i, seconds));
	}
	int failed = 0;
	for (int i = 0; i < PROCS; i++) {
		int status;
		while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			print_message("worker %d: %s %d\n", i,
				      WIFEXITED(status) ? "exit" : "signal",
				      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			failed++;
		}
	}
	assert_int_equal(failed, 0);
}

int main(void)
{
	int rc = s3t_setup("fleet");
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fleet_on_one_bucket),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
