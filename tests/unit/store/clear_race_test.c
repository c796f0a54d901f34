/*
 * hc_store_clear while transfers run (HC_TEST_CONCURRENCY: also under
 * TSan): setters write pages of a small key space (zero-copy KV and a
 * bounce side pool) while getters read them and a thread clears the store
 * over and over. Every set succeeds; every get of a page is a hit with
 * exactly its bytes or a miss (-ENOENT), never a corrupt object; no temp
 * file stays behind; after the storm the store works as before. On the
 * file backend (both I/O engines) and the mem backend.
 */
#include "store_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define KEYS 64
#define NP 8
#define NWORKERS 4 /* 2 setters, 2 getters */
#define SLOTS (NWORKERS * NP)
#define SECONDS 2.0
enum { KV_ID = 1, SWA_ID = 2 };

struct storm {
	struct hc_store *st;
	struct hc_pool *kv, *swa;
	struct hc_key keys[KEYS];
	_Atomic bool stop;
	_Atomic uint64_t hits, misses, clears, cleared;
	pthread_mutex_t err_lock;
	char err[256];
};

static void storm_fail(struct storm *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void storm_fail(struct storm *s, const char *fmt, ...)
{
	pthread_mutex_lock(&s->err_lock);
	if (!s->err[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(s->err, sizeof(s->err), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&s->err_lock);
	atomic_store(&s->stop, true);
}

static void page_bytes(struct hc_pool *p, uint32_t id, uint64_t page, bool set, uint64_t slot,
		       bool *same)
{
	size_t len = hc_pool_page_bytes(p);
	uint8_t *want = malloc(len), *got = malloc(len);
	st_content(id, page, want, len);
	if (set) {
		hc_pool_scatter(p, slot, want, len);
	} else {
		hc_pool_gather(p, slot, got, len);
		*same = !memcmp(want, got, len);
	}
	free(want);
	free(got);
}

struct worker {
	struct storm *s;
	unsigned id;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct storm *s = w->s;
	bool setter = w->id < 2;
	uint64_t slots[NP];
	for (int i = 0; i < NP; i++)
		slots[i] = w->id * NP + (uint64_t)i;
	for (unsigned round = 0; !atomic_load(&s->stop); round++) {
		unsigned first = (round * 7 + w->id * 13) % (KEYS - NP);
		int res[2][NP];
		struct hc_pool_transfer t[2] = {
			{"kv", &s->keys[first], NP, slots, HC_HIT_ALL_PAGES, res[0], NULL},
			{"swa", &s->keys[first], NP, slots, HC_HIT_ALL_PAGES, res[1], NULL},
		};
		struct hc_pool *pools[2] = {s->kv, s->swa};
		uint32_t ids[2] = {KV_ID, SWA_ID};
		for (int p = 0; p < 2; p++)
			for (int i = 0; i < NP; i++) {
				if (setter)
					page_bytes(pools[p], ids[p], first + (uint64_t)i, true,
						   slots[i], NULL);
				else
					hc_pool_scatter(pools[p], slots[i], (uint8_t[8192]){0},
							hc_pool_page_bytes(pools[p]));
			}
		int64_t rc = setter ? hc_store_set_v2(s->st, t, 2) : hc_store_get_v2(s->st, t, 2);
		if (setter && rc) {
			storm_fail(s, "set failed: %s", hc_strerror((int)rc));
			break;
		}
		if (setter)
			continue;
		if (rc < 0) {
			storm_fail(s, "get failed: %s", hc_strerror((int)rc));
			break;
		}
		for (int p = 0; p < 2; p++)
			for (int i = 0; i < NP; i++) {
				if (res[p][i] == -ENOENT) {
					atomic_fetch_add(&s->misses, 1);
					continue;
				}
				bool same = false;
				if (!res[p][i])
					page_bytes(pools[p], ids[p], first + (uint64_t)i, false,
						   slots[i], &same);
				if (res[p][i] || !same) {
					storm_fail(s, "pool %d page %u: result %d%s", p, first + i,
						   res[p][i], res[p][i] ? "" : ", wrong bytes");
					return NULL;
				}
				atomic_fetch_add(&s->hits, 1);
			}
	}
	return NULL;
}

static void *clearer_main(void *arg)
{
	struct storm *s = arg;
	while (!atomic_load(&s->stop)) {
		int64_t n = hc_store_clear(s->st);
		if (n < 0) {
			storm_fail(s, "clear failed: %s", hc_strerror((int)n));
			break;
		}
		atomic_fetch_add(&s->clears, 1);
		atomic_fetch_add(&s->cleared, (uint64_t)n);
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void storm(bool file)
{
	char dir[PATH_MAX];
	struct storm s = {0};
	pthread_mutex_init(&s.err_lock, NULL);
	if (file) {
		st_mkdtemp(dir);
		s.st = st_open_file(dir, st_dir_supports_direct(dir), false, NULL);
	} else {
		s.st = st_open_mem(false);
	}
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	s.kv = st_kv_pool(&g);
	s.swa = st_indexer_pool(SLOTS, 8, 3000);
	assert_int_equal(hc_store_register_pool(s.st, "kv", s.kv, true), 0);
	assert_int_equal(hc_store_register_pool(s.st, "swa", s.swa, false), 0);
	st_keys(5, KEYS, 8, s.keys);
	pthread_t th[NWORKERS], cl;
	struct worker w[NWORKERS];
	for (unsigned i = 0; i < NWORKERS; i++) {
		w[i] = (struct worker){&s, i};
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	assert_int_equal(pthread_create(&cl, NULL, clearer_main, &s), 0);
	double end = now_s() + SECONDS;
	while (now_s() < end && !atomic_load(&s.stop)) {
		struct timespec ts = {0, 20000000};
		nanosleep(&ts, NULL);
	}
	atomic_store(&s.stop, true);
	for (unsigned i = 0; i < NWORKERS; i++)
		pthread_join(th[i], NULL);
	pthread_join(cl, NULL);
	if (s.err[0])
		fail_msg("%s", s.err);
	fprintf(stderr, "%s: %llu hits, %llu misses, %llu clears deleted %llu objects\n",
		file ? "file" : "mem", (unsigned long long)s.hits, (unsigned long long)s.misses,
		(unsigned long long)s.clears, (unsigned long long)s.cleared);
	assert_true(atomic_load(&s.clears) > 0);
	assert_int_equal(st_stats(s.st, NULL).corrupt, 0);
	if (file)
		assert_int_equal(st_count(dir).tmps, 0);
	/* Afterwards: write every page, read every page. */
	uint64_t slots[NP];
	for (int i = 0; i < NP; i++)
		slots[i] = (uint64_t)i;
	for (unsigned first = 0; first < KEYS; first += NP) {
		for (int i = 0; i < NP; i++)
			st_fill(s.kv, slots[i], KV_ID, first + (uint64_t)i);
		assert_int_equal(hc_store_set(s.st, &s.keys[first], NP, slots, NULL), 0);
		for (int i = 0; i < NP; i++)
			st_clear(s.kv, slots[i]);
		assert_int_equal(hc_store_get(s.st, &s.keys[first], NP, slots, NULL), NP);
		for (int i = 0; i < NP; i++)
			st_assert_page(s.kv, slots[i], KV_ID, first + (uint64_t)i);
	}
	hc_store_close(s.st);
	hc_pool_destroy(s.kv);
	hc_pool_destroy(s.swa);
	pthread_mutex_destroy(&s.err_lock);
	if (file)
		st_rmrf(dir);
}

static void test_storm(void **state)
{
	(void)state;
	storm(false);
	storm(true);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_storm),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
