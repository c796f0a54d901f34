/*
 * Registration while other pools transfer (HC_TEST_CONCURRENCY: also runs
 * under TSan).
 *
 * churn:    threads move pages of the anchor and of a side pool "a"
 *           (v1 and v2, synchronous and started, exists and exists_v2)
 *           while another
 *           thread registers and unregisters pool "b" over and over; the
 *           transfers that name "b" either fail whole with -EINVAL (not
 *           registered) or move every page right. Every page read is
 *           checked byte for byte.
 * waits:    unregistering a pool that a started get is reading returns
 *           only once the get's pages are all done (its results final);
 *           a started set likewise; transfers started later fail.
 * On the mem and the file backend.
 */
#include "store_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define SLOTS 256
#define PER_THREAD 16 /* slots per worker: [16 t, 16 t + 16) */
#define NP 8
#define SECONDS 2.0
enum { KV_ID = 1, A_ID = 2, B_ID = 3 };

struct race {
	struct hc_store *st;
	struct hc_pool *kv, *a, *b;
	_Atomic bool stop;
	_Atomic uint64_t b_ok, b_refused, rounds;
	long on_ns; /* how long b stays registered each time */
	pthread_mutex_t err_lock;
	char err[512];
};

static void race_fail(struct race *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void race_fail(struct race *r, const char *fmt, ...)
{
	pthread_mutex_lock(&r->err_lock);
	if (!r->err[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(r->err, sizeof(r->err), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&r->err_lock);
	atomic_store(&r->stop, true);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Does slot hold page `page` of id? (thread-safe: no cmocka asserts) */
static bool holds(struct hc_pool *pool, uint64_t slot, uint32_t id, uint64_t page)
{
	size_t len = hc_pool_page_bytes(pool);
	uint8_t *want = malloc(len), *got = malloc(len);
	st_content(id, page, want, len);
	hc_pool_gather(pool, slot, got, len);
	bool same = !memcmp(want, got, len);
	free(want);
	free(got);
	return same;
}

static void fill(struct hc_pool *pool, uint64_t slot, uint32_t id, uint64_t page)
{
	size_t len = hc_pool_page_bytes(pool);
	uint8_t *buf = malloc(len);
	st_content(id, page, buf, len);
	hc_pool_scatter(pool, slot, buf, len);
	free(buf);
}

static void zero(struct hc_pool *pool, uint64_t slot)
{
	size_t len = hc_pool_page_bytes(pool);
	uint8_t *buf = calloc(1, len);
	hc_pool_scatter(pool, slot, buf, len);
	free(buf);
}

struct worker {
	struct race *r;
	unsigned id;
};

/* Keys of round `round` of worker w: fresh pages every round. */
static void round_keys(unsigned w, uint64_t round, struct hc_key *keys)
{
	st_keys(1000u + w * 100000u + (uint32_t)round, NP, 8, keys);
}

/* One round of worker w: write NP pages to kv, a and (maybe) b from its
 * first half of slots, read them back into the second half, check. */
static void one_round(struct race *r, unsigned w, uint64_t round, bool started)
{
	struct hc_key keys[NP];
	round_keys(w, round, keys);
	uint64_t ws[NP], rs[NP];
	uint64_t page0 = ((uint64_t)w << 32) | (round * NP);
	for (int i = 0; i < NP; i++) {
		ws[i] = w * PER_THREAD + (uint64_t)i;
		rs[i] = w * PER_THREAD + NP + (uint64_t)i;
		fill(r->kv, ws[i], KV_ID, page0 + (uint64_t)i);
		fill(r->a, ws[i], A_ID, page0 + (uint64_t)i);
		fill(r->b, ws[i], B_ID, page0 + (uint64_t)i);
	}
	int res[3][NP];
	struct hc_pool_transfer t[3] = {
		{"kv", keys, NP, ws, HC_HIT_ALL_PAGES, res[0], NULL},
		{"a", keys, NP, ws, HC_HIT_ALL_PAGES, res[1], NULL},
		{"b", keys, NP, ws, HC_HIT_ALL_PAGES, res[2], NULL},
	};
	int64_t rc;
	struct hc_store_op *op;
	if (started) {
		rc = hc_store_set_v2_start(r->st, t, 3, &op);
		if (!rc)
			rc = hc_store_op_wait(op);
	} else {
		rc = hc_store_set_v2(r->st, t, 3);
	}
	bool with_b = rc == 0;
	if (rc == -EINVAL) {
		/* b was not registered: nothing written; kv and a alone. */
		atomic_fetch_add(&r->b_refused, 1);
		rc = hc_store_set_v2(r->st, t, 2);
	}
	if (rc) {
		race_fail(r, "worker %u: set: %s", w, hc_strerror((int)rc));
		return;
	}
	for (int i = 0; i < NP; i++) {
		zero(r->kv, rs[i]);
		zero(r->a, rs[i]);
		zero(r->b, rs[i]);
	}
	for (int i = 0; i < 3; i++)
		t[i].pages = rs;
	size_t nt = with_b ? 3 : 2;
	if (started) {
		rc = hc_store_get_v2_start(r->st, t, nt, &op);
		if (!rc)
			rc = hc_store_op_wait(op);
	} else {
		rc = hc_store_get_v2(r->st, t, nt);
	}
	if (rc == -EINVAL && with_b) {
		/* b went away between the set and the get. */
		atomic_fetch_add(&r->b_refused, 1);
		nt = 2;
		rc = hc_store_get_v2(r->st, t, nt);
	}
	if (rc != NP) {
		race_fail(r, "worker %u: get returned %lld", w, (long long)rc);
		return;
	}
	struct hc_pool *pools[3] = {r->kv, r->a, r->b};
	uint32_t ids[3] = {KV_ID, A_ID, B_ID};
	for (size_t p = 0; p < nt; p++)
		for (int i = 0; i < NP; i++)
			if (res[p][i] || !holds(pools[p], rs[i], ids[p], page0 + (uint64_t)i)) {
				race_fail(r,
					  "worker %u: pool %zu page %d: result %d or wrong bytes",
					  w, p, i, res[p][i]);
				return;
			}
	if (nt == 3)
		atomic_fetch_add(&r->b_ok, 1);
	/* v1 (synchronous or started) and exists_v2 over the same pages. */
	if (hc_store_exists(r->st, keys, NP) != NP)
		race_fail(r, "worker %u: exists below %d", w, NP);
	for (int i = 0; i < NP; i++)
		zero(r->kv, rs[i]);
	if (started) {
		rc = hc_store_get_start(r->st, keys, NP, rs, res[0], &op);
		if (!rc)
			rc = hc_store_op_wait(op);
	} else {
		rc = hc_store_get(r->st, keys, NP, rs, res[0]);
	}
	for (int i = 0; i < NP && rc == NP; i++)
		if (!holds(r->kv, rs[i], KV_ID, page0 + (uint64_t)i))
			rc = -EIO;
	if (rc != NP)
		race_fail(r, "worker %u: v1 get returned %lld", w, (long long)rc);
	uint64_t kvh, hits[2];
	rc = hc_store_exists_v2(r->st, keys, NP, &t[1], 2, &kvh, hits);
	if (rc < 0 || kvh != NP || hits[0] != NP)
		race_fail(r, "worker %u: exists_v2 %lld kv %llu a %llu", w, (long long)rc,
			  (unsigned long long)kvh, (unsigned long long)hits[0]);
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	struct race *r = wk->r;
	for (uint64_t round = 0; !atomic_load(&r->stop); round++) {
		one_round(r, wk->id, round, (round + wk->id) % 2 == 1);
		atomic_fetch_add(&r->rounds, 1);
	}
	return NULL;
}

static void *registrar_main(void *arg)
{
	struct race *r = arg;
	while (!atomic_load(&r->stop)) {
		int rc = hc_store_unregister_pool(r->st, "b");
		if (rc) {
			race_fail(r, "unregister b: %s", hc_strerror(rc));
			break;
		}
		struct timespec off = {0, 1000000},
				on = {r->on_ns / 1000000000, r->on_ns % 1000000000};
		nanosleep(&off, NULL);
		struct hc_pool_reg reg;
		hc_pool_reg_init(&reg, sizeof(reg));
		rc = hc_store_register_pool_ex(r->st, "b", r->b, &reg);
		if (rc) {
			race_fail(r, "register b: %s", hc_strerror(rc));
			break;
		}
		nanosleep(&on, NULL);
	}
	return NULL;
}

static struct hc_store *open_store(bool file, char dir[PATH_MAX])
{
	if (!file)
		return st_open_mem(false);
	st_mkdtemp(dir);
	return st_open_file(dir, st_dir_supports_direct(dir), false, NULL);
}

static void churn(bool file)
{
	char dir[PATH_MAX];
	struct race r = {0};
	pthread_mutex_init(&r.err_lock, NULL);
	r.st = open_store(file, dir);
	/* A file round takes far longer: b stays long enough for some. */
	r.on_ns = file ? 300000000 : 20000000;
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	r.kv = st_kv_pool(&g);
	r.a = st_indexer_pool(SLOTS, 8, 4096);
	r.b = st_indexer_pool(SLOTS, 8, 3000); /* bounce: not a multiple of 4096 */
	assert_int_equal(hc_store_register_pool(r.st, "kv", r.kv, true), 0);
	assert_int_equal(hc_store_register_pool(r.st, "a", r.a, false), 0);
	assert_int_equal(hc_store_register_pool(r.st, "b", r.b, false), 0);
	enum { NW = 4 };
	pthread_t th[NW], reg;
	struct worker wk[NW];
	for (unsigned i = 0; i < NW; i++) {
		wk[i] = (struct worker){&r, i};
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &wk[i]), 0);
	}
	assert_int_equal(pthread_create(&reg, NULL, registrar_main, &r), 0);
	double end = now_s() + SECONDS;
	while (now_s() < end && !atomic_load(&r.stop)) {
		struct timespec ts = {0, 20000000};
		nanosleep(&ts, NULL);
	}
	atomic_store(&r.stop, true);
	for (unsigned i = 0; i < NW; i++)
		pthread_join(th[i], NULL);
	pthread_join(reg, NULL);
	if (r.err[0])
		fail_msg("%s", r.err);
	/* Both outcomes were seen (registration and transfers interleaved). */
	assert_true(atomic_load(&r.rounds) >= NW);
	fprintf(stderr, "%s: %llu rounds, b in %llu, refused %llu\n", file ? "file" : "mem",
		(unsigned long long)r.rounds, (unsigned long long)r.b_ok,
		(unsigned long long)r.b_refused);
	hc_store_close(r.st);
	hc_pool_destroy(r.kv);
	hc_pool_destroy(r.a);
	hc_pool_destroy(r.b);
	pthread_mutex_destroy(&r.err_lock);
	if (file)
		st_rmrf(dir);
}

static void test_churn(void **state)
{
	(void)state;
	churn(false);
	churn(true);
}

struct unreg {
	struct hc_store *st;
	int rc;
};

static void *unreg_main(void *arg)
{
	struct unreg *u = arg;
	u->rc = hc_store_unregister_pool(u->st, "b");
	return NULL;
}

/* A started op holds its pools: unregistering waits until it is over. */
static void waits(bool file)
{
	char dir[PATH_MAX];
	struct hc_store *st = open_store(file, dir);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 8);
	struct hc_pool *kv = st_kv_pool(&g), *b = st_indexer_pool(SLOTS, 8, 4096);
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	assert_int_equal(hc_store_register_pool(st, "b", b, false), 0);
	enum { N = SLOTS / 2 };
	struct hc_key keys[N];
	uint64_t w[N], rd[N];
	st_keys(77, N, 8, keys);
	for (int i = 0; i < N; i++) {
		w[i] = (uint64_t)i;
		rd[i] = N + (uint64_t)i;
		st_fill(b, w[i], B_ID, (uint64_t)i);
	}
	/* A started set: when unregister returns, every page is written. */
	int res[N];
	memset(res, 0x55, sizeof(res));
	struct hc_pool_transfer t = {"b", keys, N, w, HC_HIT_ALL_PAGES, res, NULL};
	struct hc_store_op *op;
	assert_int_equal(hc_store_set_v2_start(st, &t, 1, &op), 0);
	struct unreg u = {st, 1};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, unreg_main, &u), 0);
	pthread_join(th, NULL);
	assert_int_equal(u.rc, 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(res[i], 0);
	assert_int_equal(hc_store_op_wait(op), 0);

	/* A started get likewise: its pages are in the pool when the pool
	 * is unregistered; a get started after fails at start. */
	assert_int_equal(hc_store_register_pool(st, "b", b, false), 0);
	for (int i = 0; i < N; i++)
		st_clear(b, rd[i]);
	memset(res, 0x55, sizeof(res));
	t.pages = rd;
	assert_int_equal(hc_store_get_v2_start(st, &t, 1, &op), 0);
	/* The unregistering thread is this one: the store's thread finishes
	 * the get meanwhile. */
	assert_int_equal(hc_store_unregister_pool(st, "b"), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(res[i], 0);
	for (int i = 0; i < N; i++)
		st_assert_page(b, rd[i], B_ID, (uint64_t)i);
	struct hc_store_op *late = (struct hc_store_op *)1;
	assert_int_equal(hc_store_get_v2_start(st, &t, 1, &late), -EINVAL);
	assert_null(late);
	assert_int_equal(hc_store_op_wait(op), N);
	hc_store_close(st);
	hc_pool_destroy(kv);
	hc_pool_destroy(b);
	if (file)
		st_rmrf(dir);
}

static void test_waits(void **state)
{
	(void)state;
	waits(false);
	waits(true);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_churn),
		cmocka_unit_test(test_waits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
