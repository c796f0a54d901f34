/*
 * Store under concurrent use (HC_TEST_CONCURRENCY: also runs under TSan).
 *
 * mixed:  one setter, one getter and one exists thread on the same keys for
 *         3 s on one store. Keys come in generations of GEN_KEYS; the setter
 *         writes generation g in random batches, then deletes generation
 *         g - 2 (file backend: unlinks its objects, as the cleaner would).
 *         Every page's content is a function of its key, so any hit must
 *         match byte for byte; a completed generation that is not being
 *         deleted must be a full hit for get and exists alike.
 * racing: several setters write the same keys at once, each with its own
 *         content variant, while a reader reads them: every object that
 *         results is exactly one setter's (never a mix), one object per
 *         name, every call succeeds, no temp file remains.
 * Both on the file backend (both engines via HICACHE_IO_ENGINE, zero-copy
 * and bounce) and on the mem backend.
 */
#include "robust_test.h"

#include <pthread.h>
#include <stdatomic.h>

#define TOKENS 16
#define GEN_KEYS 256
#define MAX_BATCH 16
#define MIX_SECONDS 3.0
#define MEM_MAX_GENS 8 /* the mem backend has no delete: bound its size */

struct mix {
	struct hc_store *st;
	struct hc_pool *pool;
	const char *dir; /* NULL: mem backend */
	bool zero_copy;
	_Atomic bool stop;
	_Atomic uint64_t cur_gen;       /* the generation being written */
	_Atomic uint64_t deleted_below; /* generations below may be deleted */
	_Atomic uint64_t get_hits, get_calls, exists_calls, exists_checked, gens;
	pthread_mutex_t err_lock;
	char err[512];
};

static void mix_fail(struct mix *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mix_fail(struct mix *m, const char *fmt, ...)
{
	pthread_mutex_lock(&m->err_lock);
	if (!m->err[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(m->err, sizeof(m->err), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&m->err_lock);
	atomic_store(&m->stop, true);
}

static struct hc_key gen_key(uint64_t gen, unsigned idx)
{
	return rt_key(gen * GEN_KEYS + idx);
}

/* Unlink every object of generation gen. */
static void delete_gen(struct mix *m, uint64_t gen)
{
	const char *comp[2];
	unsigned nc = rt_components(comp);
	for (unsigned i = 0; i < GEN_KEYS; i++) {
		struct hc_key k = gen_key(gen, i);
		for (unsigned c = 0; c < nc; c++) {
			char path[PATH_MAX];
			rt_obj_path(m->dir, &k, comp[c], path, sizeof(path));
			if (unlink(path) && errno != ENOENT)
				mix_fail(m, "unlink %s: %s", path, strerror(errno));
		}
	}
}

static void *setter_main(void *arg)
{
	struct mix *m = arg;
	size_t pb = hc_pool_page_bytes(m->pool);
	void *scratch = malloc(pb);
	unsigned order[GEN_KEYS];
	uint64_t rnd = 1;
	for (uint64_t gen = 0; !atomic_load(&m->stop); gen++) {
		bool fresh = m->dir || gen < MEM_MAX_GENS;
		uint64_t g = fresh ? gen : gen % MEM_MAX_GENS; /* mem: rewrite existing gens */
		if (fresh)
			atomic_store(&m->cur_gen, g);
		for (unsigned i = 0; i < GEN_KEYS; i++)
			order[i] = i;
		for (unsigned i = GEN_KEYS - 1; i > 0; i--) {
			unsigned j = (unsigned)(test_mix(rnd++) % (i + 1)), t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		for (unsigned done = 0; done < GEN_KEYS && !atomic_load(&m->stop);) {
			unsigned n = 1 + (unsigned)(test_mix(rnd++) % MAX_BATCH);
			if (n > GEN_KEYS - done)
				n = GEN_KEYS - done;
			struct hc_key keys[MAX_BATCH];
			uint64_t pages[MAX_BATCH];
			int res[MAX_BATCH];
			for (unsigned i = 0; i < n; i++) {
				keys[i] = gen_key(g, order[done + i]);
				pages[i] = i;
				rt_fill(scratch, pb, &keys[i], 0);
				hc_pool_scatter(m->pool, i, scratch, pb);
			}
			int rc = hc_store_set(m->st, keys, n, pages, res);
			if (rc)
				mix_fail(m, "set of generation %llu: %d", (unsigned long long)g,
					 rc);
			for (unsigned i = 0; i < n; i++)
				if (res[i])
					mix_fail(m, "set: page result %d", res[i]);
			done += n;
		}
		if (atomic_load(&m->stop))
			break;
		atomic_fetch_add(&m->gens, 1);
		if (!fresh)
			continue;
		/* g is complete: readers may now expect it in full. */
		atomic_store(&m->cur_gen, g + 1);
		if (m->dir && g >= 2) {
			/* Readers look at cur - 1 and cur; a late one may still be
			 * on g - 2: it learns so from deleted_below. */
			atomic_store(&m->deleted_below, g - 1);
			delete_gen(m, g - 2);
		}
	}
	free(scratch);
	return NULL;
}

/* A generation to read: cur or cur - 1. *complete: written in full. */
static uint64_t pick_gen(struct mix *m, uint64_t *rnd, bool *complete)
{
	uint64_t cur = atomic_load(&m->cur_gen);
	uint64_t g = cur > 0 && test_mix((*rnd)++) % 2 ? cur - 1 : cur;
	*complete = g < cur;
	return g;
}

static void *getter_main(void *arg)
{
	struct mix *m = arg;
	size_t pb = hc_pool_page_bytes(m->pool);
	void *scratch = malloc(pb);
	uint64_t rnd = 1000;
	while (!atomic_load(&m->stop)) {
		bool complete;
		uint64_t g = pick_gen(m, &rnd, &complete);
		unsigned n = 1 + (unsigned)(test_mix(rnd++) % MAX_BATCH);
		struct hc_key keys[MAX_BATCH];
		uint64_t pages[MAX_BATCH];
		int res[MAX_BATCH];
		for (unsigned i = 0; i < n; i++) {
			keys[i] = gen_key(g, (unsigned)(test_mix(rnd++) % GEN_KEYS));
			pages[i] = MAX_BATCH + i;
		}
		int64_t lead = hc_store_get(m->st, keys, n, pages, res);
		bool deleted = g < atomic_load(&m->deleted_below);
		atomic_fetch_add(&m->get_calls, 1);
		if (lead < 0 || lead > (int64_t)n) {
			mix_fail(m, "get returned %lld of %u", (long long)lead, n);
			break;
		}
		for (unsigned i = 0; i < n; i++) {
			if (res[i] == 0) {
				atomic_fetch_add(&m->get_hits, 1);
				if (!rt_page_ok(m->pool, pages[i], &keys[i], scratch))
					mix_fail(m, "get: page of generation %llu is wrong",
						 (unsigned long long)g);
			} else if (res[i] != -ENOENT) {
				mix_fail(m, "get: result %d (expected 0 or -ENOENT)", res[i]);
			} else if (complete && !deleted) {
				mix_fail(m, "get: miss in complete generation %llu",
					 (unsigned long long)g);
			}
		}
	}
	free(scratch);
	return NULL;
}

static void *exists_main(void *arg)
{
	struct mix *m = arg;
	size_t pb = hc_pool_page_bytes(m->pool);
	void *scratch = malloc(pb);
	uint64_t rnd = 2000;
	while (!atomic_load(&m->stop)) {
		bool complete;
		uint64_t g = pick_gen(m, &rnd, &complete);
		unsigned n = 1 + (unsigned)(test_mix(rnd++) % MAX_BATCH);
		unsigned first = (unsigned)(test_mix(rnd++) % GEN_KEYS);
		struct hc_key keys[MAX_BATCH];
		uint64_t pages[MAX_BATCH];
		int res[MAX_BATCH];
		for (unsigned i = 0; i < n; i++) {
			keys[i] = gen_key(g, (first + i) % GEN_KEYS);
			pages[i] = 2 * MAX_BATCH + i;
		}
		int64_t lead = hc_store_exists(m->st, keys, n);
		atomic_fetch_add(&m->exists_calls, 1);
		if (lead < 0 || lead > (int64_t)n) {
			mix_fail(m, "exists returned %lld of %u", (long long)lead, n);
			break;
		}
		if (complete && lead != (int64_t)n && g >= atomic_load(&m->deleted_below)) {
			mix_fail(m, "exists: %lld of %u in complete generation %llu",
				 (long long)lead, n, (unsigned long long)g);
			break;
		}
		if (lead == 0)
			continue;
		/* What exists says is there must read back, whole and right. */
		int64_t got = hc_store_get(m->st, keys, (size_t)lead, pages, res);
		bool deleted = g < atomic_load(&m->deleted_below);
		if (got != lead && !deleted) {
			mix_fail(m, "exists said %lld pages, get found %lld", (long long)lead,
				 (long long)got);
			break;
		}
		atomic_fetch_add(&m->exists_checked, (uint64_t)lead);
		for (int64_t i = 0; i < lead; i++) {
			if (res[i] == 0 && !rt_page_ok(m->pool, pages[i], &keys[i], scratch))
				mix_fail(m, "exists+get: wrong content");
			if (res[i] != 0 && res[i] != -ENOENT)
				mix_fail(m, "exists+get: result %d", res[i]);
		}
	}
	free(scratch);
	return NULL;
}

static void run_mix(const char *dir, bool bounce)
{
	struct mix m = {.dir = dir};
	pthread_mutex_init(&m.err_lock, NULL);
	m.pool = rt_pool(TOKENS, 3 * MAX_BATCH);
	m.st = rt_open_ok(dir, dir ? "\"l3_cleaner_interval_s\": 0" : NULL, bounce, m.pool);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(m.st, "kv", &info), 0);
	m.zero_copy = info.zero_copy;
	assert_int_equal(m.zero_copy, !bounce);

	pthread_t th[3];
	assert_int_equal(pthread_create(&th[0], NULL, setter_main, &m), 0);
	assert_int_equal(pthread_create(&th[1], NULL, getter_main, &m), 0);
	assert_int_equal(pthread_create(&th[2], NULL, exists_main, &m), 0);
	double end = rt_now() + MIX_SECONDS;
	while (rt_now() < end && !atomic_load(&m.stop))
		rt_sleep_ms(20);
	atomic_store(&m.stop, true);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);

	print_message("%s%s: %llu generations, %llu gets (%llu hits), %llu exists (%llu pages "
		      "re-read)\n",
		      dir ? "file" : "mem", bounce ? " bounce" : "", (unsigned long long)m.gens,
		      (unsigned long long)m.get_calls, (unsigned long long)m.get_hits,
		      (unsigned long long)m.exists_calls, (unsigned long long)m.exists_checked);
	if (m.err[0])
		fail_msg("%s", m.err);
	/* It did real work in each thread. */
	assert_true(m.gens >= 1);
	assert_true(m.get_calls >= 10);
	assert_true(m.get_hits > 0);
	assert_true(m.exists_calls >= 10);
	assert_true(m.exists_checked > 0);
	struct hc_store_stats s;
	assert_int_equal(hc_store_stats(m.st, NULL, &s), 0);
	assert_int_equal(s.corrupt, 0);
	assert_int_equal(s.failures, 0);
	hc_store_close(m.st);
	hc_pool_destroy(m.pool);
	pthread_mutex_destroy(&m.err_lock);
	if (dir) {
		assert_int_equal(rt_count_temps(dir), 0);
		struct hc_fsck_report r = rt_fsck(dir, false);
		assert_int_equal(r.corrupt, 0);
		assert_int_equal(r.orphaned_temp, 0);
		assert_true(r.ok > 0);
	}
}

static void test_mix_file_zero_copy(void **state)
{
	const char *dir = *state;
	run_mix(dir, false);
}

static void test_mix_file_bounce(void **state)
{
	const char *dir = *state;
	run_mix(dir, true);
}

static void test_mix_mem(void **state)
{
	(void)state;
	run_mix(NULL, false);
}

/* ---- several setters on the same keys ---- */

#define NSETTERS 4
#define RACE_BATCH 16
#define RACE_ROUNDS 40

struct race {
	struct hc_store *st;
	struct hc_pool *pool;
	pthread_barrier_t start, done;
	_Atomic int round; /* keys being raced on; -1 before the first */
	_Atomic bool stop;
	_Atomic uint64_t reads, read_hits;
	int results[NSETTERS][RACE_ROUNDS][RACE_BATCH];
	int rcs[NSETTERS][RACE_ROUNDS];
	pthread_mutex_t err_lock;
	char err[512];
};

struct setter_arg {
	struct race *r;
	unsigned id;
};

static struct hc_key race_key(int round, unsigned i)
{
	return rt_key(7000000 + (uint64_t)round * RACE_BATCH + i);
}

/* Which setter's content does buf[off, off + len) hold? -1: none. */
static int which_variant(const void *buf, size_t off, size_t len, const struct hc_key *k)
{
	for (unsigned v = 0; v < NSETTERS; v++)
		if (rt_matches(buf, off, len, k, v + 1))
			return (int)v;
	return -1;
}

/* Is pool page p, read for key k, made of whole objects of one setter
 * each? */
static bool race_page_ok(struct hc_pool *pool, uint64_t p, const struct hc_key *k, void *scratch)
{
	size_t pb = hc_pool_page_bytes(pool);
	hc_pool_gather(pool, p, scratch, pb);
	/* A page_first page is two objects (K and V) in either mode, each
	 * published whole: a page may hold one setter's K and another's V. */
	return which_variant(scratch, 0, pb / 2, k) >= 0 &&
	       which_variant(scratch, pb / 2, pb / 2, k) >= 0;
}

static void *race_setter(void *arg)
{
	struct setter_arg *a = arg;
	struct race *r = a->r;
	size_t pb = hc_pool_page_bytes(r->pool);
	void *scratch = malloc(pb);
	for (int round = 0; round < RACE_ROUNDS; round++) {
		struct hc_key keys[RACE_BATCH];
		uint64_t pages[RACE_BATCH];
		for (unsigned i = 0; i < RACE_BATCH; i++) {
			keys[i] = race_key(round, i);
			pages[i] = a->id * RACE_BATCH + i;
			rt_fill(scratch, pb, &keys[i], a->id + 1);
			hc_pool_scatter(r->pool, pages[i], scratch, pb);
		}
		pthread_barrier_wait(&r->start);
		if (a->id == 0)
			atomic_store(&r->round, round);
		r->rcs[a->id][round] = hc_store_set(r->st, keys, RACE_BATCH, pages,
						    r->results[a->id][round]);
		pthread_barrier_wait(&r->done);
	}
	free(scratch);
	return NULL;
}

static void *race_reader(void *arg)
{
	struct race *r = arg;
	size_t pb = hc_pool_page_bytes(r->pool);
	void *scratch = malloc(pb);
	while (!atomic_load(&r->stop)) {
		int round = atomic_load(&r->round);
		if (round < 0) {
			sched_yield();
			continue;
		}
		struct hc_key keys[RACE_BATCH];
		uint64_t pages[RACE_BATCH];
		int res[RACE_BATCH];
		for (unsigned i = 0; i < RACE_BATCH; i++) {
			keys[i] = race_key(round, i);
			pages[i] = NSETTERS * RACE_BATCH + i;
		}
		hc_store_get(r->st, keys, RACE_BATCH, pages, res);
		atomic_fetch_add(&r->reads, 1);
		for (unsigned i = 0; i < RACE_BATCH; i++) {
			if (res[i] == -ENOENT)
				continue;
			if (res[i] || !race_page_ok(r->pool, pages[i], &keys[i], scratch)) {
				pthread_mutex_lock(&r->err_lock);
				snprintf(r->err, sizeof(r->err),
					 "reader: round %d page %u: result %d or mixed content",
					 round, i, res[i]);
				pthread_mutex_unlock(&r->err_lock);
			} else {
				atomic_fetch_add(&r->read_hits, 1);
			}
		}
	}
	free(scratch);
	return NULL;
}

static void run_race(const char *dir, bool bounce)
{
	struct race *r = calloc(1, sizeof(*r));
	pthread_mutex_init(&r->err_lock, NULL);
	atomic_store(&r->round, -1);
	r->pool = rt_pool(TOKENS, (NSETTERS + 2) * RACE_BATCH);
	r->st = rt_open_ok(dir, dir ? "\"l3_cleaner_interval_s\": 0" : NULL, bounce, r->pool);
	/* Bounce or not, a page is its K and V objects. */
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(r->st, "kv", &info), 0);
	assert_int_equal(info.objects, 2);
	if (bounce)
		assert_false(info.zero_copy);
	pthread_barrier_init(&r->start, NULL, NSETTERS);
	pthread_barrier_init(&r->done, NULL, NSETTERS);
	pthread_t th[NSETTERS], reader;
	struct setter_arg args[NSETTERS];
	assert_int_equal(pthread_create(&reader, NULL, race_reader, r), 0);
	for (unsigned t = 0; t < NSETTERS; t++) {
		args[t] = (struct setter_arg){r, t};
		assert_int_equal(pthread_create(&th[t], NULL, race_setter, &args[t]), 0);
	}
	for (unsigned t = 0; t < NSETTERS; t++)
		pthread_join(th[t], NULL);
	atomic_store(&r->stop, true);
	pthread_join(reader, NULL);
	print_message("%s%s race: reader did %llu gets, %llu hits\n", dir ? "file" : "mem",
		      bounce ? " bounce" : "", (unsigned long long)r->reads,
		      (unsigned long long)r->read_hits);
	if (r->err[0])
		fail_msg("%s", r->err);

	/* Every setter succeeded on every page (an existing page is 0 too). */
	for (unsigned t = 0; t < NSETTERS; t++)
		for (int round = 0; round < RACE_ROUNDS; round++) {
			assert_int_equal(r->rcs[t][round], 0);
			for (unsigned i = 0; i < RACE_BATCH; i++)
				assert_int_equal(r->results[t][round][i], 0);
		}
	struct hc_store_stats s;
	assert_int_equal(hc_store_stats(r->st, NULL, &s), 0);
	uint64_t total = (uint64_t)NSETTERS * RACE_ROUNDS * RACE_BATCH;
	assert_int_equal(s.pages_written + s.pages_existing, total);
	assert_true(s.pages_written >= (uint64_t)RACE_ROUNDS * RACE_BATCH);
	assert_int_equal(s.failures, 0);
	assert_int_equal(s.corrupt, 0);

	/* Every page reads back whole, each object one setter's. */
	size_t pb = hc_pool_page_bytes(r->pool);
	void *scratch = malloc(pb);
	for (int round = 0; round < RACE_ROUNDS; round++) {
		struct hc_key keys[RACE_BATCH];
		uint64_t pages[RACE_BATCH];
		int res[RACE_BATCH];
		for (unsigned i = 0; i < RACE_BATCH; i++) {
			keys[i] = race_key(round, i);
			pages[i] = NSETTERS * RACE_BATCH + RACE_BATCH + i % RACE_BATCH;
		}
		assert_int_equal(hc_store_get(r->st, keys, RACE_BATCH, pages, res), RACE_BATCH);
		for (unsigned i = 0; i < RACE_BATCH; i++) {
			if (!race_page_ok(r->pool, pages[i], &keys[i], scratch))
				fail_msg("round %d page %u: content is not one setter's", round, i);
			if (dir)
				assert_int_equal(rt_objects_present(dir, &keys[i]), 2);
		}
	}
	free(scratch);
	hc_store_close(r->st);
	hc_pool_destroy(r->pool);
	pthread_barrier_destroy(&r->start);
	pthread_barrier_destroy(&r->done);
	pthread_mutex_destroy(&r->err_lock);
	free(r);
	if (dir) {
		assert_int_equal(rt_count_temps(dir), 0);
		struct hc_ls_report ls = rt_ls(dir);
		assert_int_equal(ls.pages, (uint64_t)RACE_ROUNDS * RACE_BATCH);
		assert_int_equal(ls.objects, ls.pages * 2); /* K and V, bounce or not */
		struct hc_fsck_report f = rt_fsck(dir, false);
		assert_int_equal(f.corrupt, 0);
		assert_int_equal(f.ok, ls.objects);
		assert_int_equal(f.orphaned_temp, 0);
	}
}

static void test_race_file_zero_copy(void **state)
{
	const char *dir = *state;
	run_race(dir, false);
}

static void test_race_file_bounce(void **state)
{
	const char *dir = *state;
	run_race(dir, true);
}

static void test_race_mem(void **state)
{
	(void)state;
	run_race(NULL, false);
}

static int dir_setup(void **state)
{
	char *dir = malloc(PATH_MAX);
	rt_mkdtemp(dir, "conc");
	*state = dir;
	return 0;
}

static int dir_teardown(void **state)
{
	rt_rmtree(*state);
	free(*state);
	return 0;
}

int main(void)
{
	rt_skip_without_engine();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_mix_file_zero_copy, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_mix_file_bounce, dir_setup, dir_teardown),
		cmocka_unit_test(test_mix_mem),
		cmocka_unit_test_setup_teardown(test_race_file_zero_copy, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_race_file_bounce, dir_setup, dir_teardown),
		cmocka_unit_test(test_race_mem),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
