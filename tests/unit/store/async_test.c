/*
 * Started v1 operations (hc_store_set_start / _get_start, hc_store_op_wait;
 * HC_TEST_CONCURRENCY: also runs under TSan). They run in start order on
 * one store thread, same-direction ops queued together sharing one stream,
 * so everything here must hold however the ops happen to be grouped:
 *
 * round_trip  sets started back to back, then gets into other slots: the
 *             same returns, results and bytes as the synchronous calls;
 *             misses are -ENOENT and a hole at page k gives k hits.
 * order       a get started right after a set of its keys sees the data, a
 *             get started before that set does not; ops waited out of
 *             order and from other threads.
 * duplicate_sets  a set started behind a set of the same keys (likely in
 *             one stream with it) leaves the first one's bytes, whole,
 *             and counts as existing.
 * mixed_sync  sync calls see what a waited op stored, ops see what sync
 *             calls stored, and sync calls run while ops are queued.
 * bad_calls   whole-call errors as the sync calls, with *op NULL and
 *             nothing stored or read; op_wait(NULL); n == 0; no anchor;
 *             a logical anchor (set yes, get no).
 * null_results  results may be NULL: wait still says the right thing.
 * stats       one set/get batch per op, page and byte counts per page.
 * threads     4 threads starting and waiting their own ops and one using
 *             the sync API, on one store at once.
 * close       no thread until the first start, one thread for all ops,
 *             no thread or fd left after close.
 * failed_page a bucket dir replaced by a file: that page's op fails with
 *             -ENOTDIR in its result, the ops grouped with it succeed.
 * v2          started v2 calls over the KV anchor and an indexer pool:
 *             the same keys in two pools are two pages (merged sets of
 *             them both land), returns as set_v2/get_v2, per-pool stats,
 *             bad calls.
 * File backend (zero-copy and bounce) and mem.
 */
#include "robust_test.h"
#include "store_test.h"

#include <dirent.h>
#include <pthread.h>

enum { KV_ID = 1, OTHER_ID = 2 };

#define SLOTS 96
#define TOKENS 8
#define NP 8

struct variant {
	bool file, bounce;
	/* layer_first KV: one object per page (page_first has K and V
	 * objects in either mode). */
	bool one_object;
};

static const struct variant variants[] = {
	{true, false, false},
	{true, true, false},
	{false, false, false},
};
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

struct fx {
	char dir[PATH_MAX];
	bool file;
	struct hc_store *st;
	struct hc_pool *pool;
	unsigned objects; /* per page */
};

static void fx_open(struct fx *f, const struct variant *v)
{
	memset(f, 0, sizeof(*f));
	f->file = v->file;
	if (v->file) {
		st_mkdtemp(f->dir);
		f->st = st_open_file(f->dir, true, v->bounce, NULL);
	} else {
		f->st = st_open_mem(v->bounce);
	}
	struct hc_kv_geometry g = st_kv_geo(v->one_object ? HC_LAYOUT_LAYER_FIRST
							  : HC_LAYOUT_PAGE_FIRST,
					    false, SLOTS);
	f->pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(f->st, "kv", f->pool, true), 0);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(f->st, "kv", &info), 0);
	f->objects = info.objects;
}

static void fx_close(struct fx *f)
{
	hc_store_close(f->st);
	hc_pool_destroy(f->pool);
	if (f->file)
		st_rmrf(f->dir);
}

/* A start that must succeed. */
static struct hc_store_op *set_start(struct fx *f, const struct hc_key *keys, size_t n,
				     const uint64_t *pages, int *results)
{
	struct hc_store_op *op = NULL;
	int rc = hc_store_set_start(f->st, keys, n, pages, results, &op);
	if (rc)
		fail_msg("hc_store_set_start: %s (%s)", hc_strerror(rc), hc_last_error());
	assert_non_null(op);
	return op;
}

static struct hc_store_op *get_start(struct fx *f, const struct hc_key *keys, size_t n,
				     const uint64_t *pages, int *results)
{
	struct hc_store_op *op = NULL;
	int rc = hc_store_get_start(f->st, keys, n, pages, results, &op);
	if (rc)
		fail_msg("hc_store_get_start: %s (%s)", hc_strerror(rc), hc_last_error());
	assert_non_null(op);
	return op;
}

static void assert_results(const int *res, size_t n, int want)
{
	for (size_t i = 0; i < n; i++)
		if (res[i] != want)
			fail_msg("result %zu is %d, expected %d", i, res[i], want);
}

/* The slot still holds the zeros st_clear() put there (no get wrote it). */
static void assert_slot_zero(struct hc_pool *pool, uint64_t slot)
{
	size_t pb = hc_pool_page_bytes(pool);
	uint8_t *buf = malloc(pb), *zero = calloc(1, pb);
	assert_non_null(buf);
	assert_non_null(zero);
	assert_int_equal(hc_pool_gather(pool, slot, buf, pb), 0);
	if (memcmp(buf, zero, pb))
		fail_msg("slot %llu was written", (unsigned long long)slot);
	free(buf);
	free(zero);
}

static void clear_all(struct hc_pool *pool)
{
	for (uint64_t s = 0; s < SLOTS; s++)
		st_clear(pool, s);
}

static void for_each_variant(void (*fn)(const struct variant *))
{
	for (size_t i = 0; i < NVARIANTS; i++)
		fn(&variants[i]);
}

/* ---- round trip ---- */

#define NOPS 4

static void round_trip(const struct variant *v)
{
	struct fx f;
	fx_open(&f, v);
	struct hc_key keys[NOPS][NP];
	uint64_t wslot[NOPS][NP], rslot[NOPS][NP];
	int res[NOPS][NP];
	struct hc_store_op *ops[NOPS];
	for (unsigned i = 0; i < NOPS; i++) {
		st_keys(10 + i, NP, TOKENS, keys[i]);
		for (unsigned p = 0; p < NP; p++) {
			uint64_t id = i * NP + p;
			wslot[i][p] = id;
			rslot[i][p] = SLOTS - 1 - id; /* other slots, other order */
			st_fill(f.pool, wslot[i][p], KV_ID, id);
		}
	}
	memset(res, 0x55, sizeof(res));
	for (unsigned i = 0; i < NOPS; i++)
		ops[i] = set_start(&f, keys[i], NP, wslot[i], res[i]);
	for (unsigned i = 0; i < NOPS; i++) {
		assert_int_equal(hc_store_op_wait(ops[i]), 0);
		assert_results(res[i], NP, 0);
	}
	assert_int_equal(hc_store_exists(f.st, keys[NOPS - 1], NP), NP);

	/* Only the store holds the data now. */
	clear_all(f.pool);
	memset(res, 0x55, sizeof(res));
	for (unsigned i = 0; i < NOPS; i++)
		ops[i] = get_start(&f, keys[i], NP, rslot[i], res[i]);
	for (unsigned i = 0; i < NOPS; i++) {
		assert_int_equal(hc_store_op_wait(ops[i]), NP);
		assert_results(res[i], NP, 0);
		for (unsigned p = 0; p < NP; p++)
			st_assert_page(f.pool, rslot[i][p], KV_ID, i * NP + p);
	}
	/* The slots the sets were made from were not read into. */
	for (uint64_t s = 0; s < NOPS * NP; s++)
		assert_slot_zero(f.pool, s);

	/* Keys never stored: no hits, every page a miss, nothing read in. */
	struct hc_key absent[NP];
	st_keys(90, NP, TOKENS, absent);
	memset(res[0], 0x55, sizeof(res[0]));
	struct hc_store_op *op = get_start(&f, absent, NP, wslot[0], res[0]);
	assert_int_equal(hc_store_op_wait(op), 0);
	assert_results(res[0], NP, -ENOENT);
	for (unsigned p = 0; p < NP; p++)
		assert_slot_zero(f.pool, wslot[0][p]);

	/* A hole at page 3 (stored by two ops around it): 3 leading hits, the
	 * pages after the hole are still read. The get is started before the
	 * sets are waited for. */
	struct hc_key holed[NP];
	st_keys(91, NP, TOKENS, holed);
	for (unsigned p = 0; p < NP; p++)
		st_fill(f.pool, wslot[1][p], KV_ID, 910 + p);
	struct hc_store_op *s1 = set_start(&f, holed, 3, wslot[1], NULL);
	struct hc_store_op *s2 = set_start(&f, holed + 4, NP - 4, wslot[1] + 4, NULL);
	memset(res[1], 0x55, sizeof(res[1]));
	op = get_start(&f, holed, NP, wslot[2], res[1]);
	assert_int_equal(hc_store_op_wait(op), 3);
	for (unsigned p = 0; p < NP; p++) {
		assert_int_equal(res[1][p], p == 3 ? -ENOENT : 0);
		if (p != 3)
			st_assert_page(f.pool, wslot[2][p], KV_ID, 910 + p);
	}
	assert_int_equal(hc_store_op_wait(s1), 0);
	assert_int_equal(hc_store_op_wait(s2), 0);

	if (f.file) {
		struct st_count c = st_count(f.dir);
		assert_int_equal(c.files, (NOPS * NP + NP - 1) * f.objects);
		assert_int_equal(c.tmps, 0);
		assert_int_equal(c.dirs, 256);
	}
	struct hc_store_stats s = st_stats(f.st, NULL);
	assert_int_equal(s.failures, 0);
	assert_int_equal(s.corrupt, 0);
	fx_close(&f);
}

static void test_round_trip(void **state)
{
	(void)state;
	for_each_variant(round_trip);
}

/* ---- order ---- */

#define NQ 12 /* queued ops of QP pages */
#define QP 4

struct waiter {
	struct hc_store_op **ops;
	size_t n;
	bool reverse;
	unsigned stride, first; /* wait ops first, first + stride, ... */
	int64_t *rcs;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	for (size_t k = 0; k < w->n; k++) {
		size_t i = w->reverse ? w->n - 1 - k : k;
		if (i % w->stride == w->first)
			w->rcs[i] = hc_store_op_wait(w->ops[i]);
	}
	return NULL;
}

static void order(const struct variant *v)
{
	struct fx f;
	fx_open(&f, v);
	uint64_t a[NP], b[NP], c[NP], d[NP];
	for (unsigned p = 0; p < NP; p++) {
		a[p] = p;
		b[p] = NP + p;
		c[p] = 2 * NP + p;
		d[p] = 3 * NP + p;
	}

	/* A get started right behind the set of its keys sees the data, even
	 * when it is waited for first. */
	struct hc_key k1[NP];
	int sres[NP], gres[NP], gres0[NP], gres2[NP], sres2[NP];
	st_keys(20, NP, TOKENS, k1);
	for (unsigned p = 0; p < NP; p++)
		st_fill(f.pool, a[p], KV_ID, 200 + p);
	memset(sres, 0x55, sizeof(sres));
	memset(gres, 0x55, sizeof(gres));
	struct hc_store_op *s = set_start(&f, k1, NP, a, sres);
	struct hc_store_op *g = get_start(&f, k1, NP, b, gres);
	assert_int_equal(hc_store_op_wait(g), NP);
	assert_results(gres, NP, 0);
	for (unsigned p = 0; p < NP; p++)
		st_assert_page(f.pool, b[p], KV_ID, 200 + p);
	assert_int_equal(hc_store_op_wait(s), 0);
	assert_results(sres, NP, 0);

	/* Interleaved: a get started before the set of its keys misses, one
	 * started after hits; waited in reverse. */
	clear_all(f.pool);
	struct hc_key k2[NP], k3[NP];
	st_keys(21, NP, TOKENS, k2);
	st_keys(22, NP, TOKENS, k3);
	for (unsigned p = 0; p < NP; p++) {
		st_fill(f.pool, a[p], KV_ID, 210 + p);
		st_fill(f.pool, b[p], KV_ID, 220 + p);
	}
	memset(gres0, 0x55, sizeof(gres0));
	memset(gres, 0x55, sizeof(gres));
	memset(gres2, 0x55, sizeof(gres2));
	struct hc_store_op *ops[5];
	ops[0] = get_start(&f, k2, NP, c, gres0);
	ops[1] = set_start(&f, k2, NP, a, sres);
	ops[2] = get_start(&f, k2, NP, d, gres);
	ops[3] = set_start(&f, k3, NP, b, sres2);
	ops[4] = get_start(&f, k3, NP, c, gres2);
	/* ops[4] reads into c after ops[0] left c alone (it missed). */
	assert_int_equal(hc_store_op_wait(ops[4]), NP);
	assert_int_equal(hc_store_op_wait(ops[3]), 0);
	assert_int_equal(hc_store_op_wait(ops[2]), NP);
	assert_int_equal(hc_store_op_wait(ops[1]), 0);
	assert_int_equal(hc_store_op_wait(ops[0]), 0);
	assert_results(gres0, NP, -ENOENT);
	assert_results(sres, NP, 0);
	assert_results(gres, NP, 0);
	assert_results(sres2, NP, 0);
	assert_results(gres2, NP, 0);
	for (unsigned p = 0; p < NP; p++) {
		st_assert_page(f.pool, d[p], KV_ID, 210 + p);
		st_assert_page(f.pool, c[p], KV_ID, 220 + p);
	}

	/* Many ops queued at once; another thread waits for them in reverse,
	 * then the gets are waited by two threads at once. */
	clear_all(f.pool);
	struct hc_key qk[NQ][QP];
	uint64_t qw[NQ][QP], qr[NQ][QP];
	int qres[NQ][QP];
	int64_t rcs[NQ];
	struct hc_store_op *qops[NQ];
	for (unsigned q = 0; q < NQ; q++) {
		st_keys(300 + q, QP, TOKENS, qk[q]);
		for (unsigned p = 0; p < QP; p++) {
			qw[q][p] = q * QP + p;
			qr[q][p] = NQ * QP + q * QP + p;
			st_fill(f.pool, qw[q][p], KV_ID, 3000 + q * QP + p);
		}
	}
	_Static_assert(2 * NQ * QP <= SLOTS, "write and read slots fit the pool");
	memset(qres, 0x55, sizeof(qres));
	for (unsigned q = 0; q < NQ; q++)
		qops[q] = set_start(&f, qk[q], QP, qw[q], qres[q]);
	memset(rcs, 0x55, sizeof(rcs));
	struct waiter w = {qops, NQ, true, 1, 0, rcs};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	for (unsigned q = 0; q < NQ; q++) {
		assert_int_equal(rcs[q], 0);
		assert_results(qres[q], QP, 0);
	}
	memset(qres, 0x55, sizeof(qres));
	for (unsigned q = 0; q < NQ; q++)
		qops[q] = get_start(&f, qk[q], QP, qr[q], qres[q]);
	memset(rcs, 0x55, sizeof(rcs));
	struct waiter odd = {qops, NQ, true, 2, 1, rcs}, even = {qops, NQ, false, 2, 0, rcs};
	assert_int_equal(pthread_create(&t, NULL, waiter_main, &odd), 0);
	waiter_main(&even);
	assert_int_equal(pthread_join(t, NULL), 0);
	for (unsigned q = 0; q < NQ; q++) {
		assert_int_equal(rcs[q], QP);
		assert_results(qres[q], QP, 0);
		for (unsigned p = 0; p < QP; p++)
			st_assert_page(f.pool, qr[q][p], KV_ID, 3000 + q * QP + p);
	}
	fx_close(&f);
}

static void test_order(void **state)
{
	(void)state;
	for_each_variant(order);
}

/* A set started behind a set of the same keys (other bytes) is as if the
 * first had returned: the first one's bytes are stored, the second finds
 * the pages existing. A long get in front keeps the store thread busy so
 * that the two sets are likely queued together and share one stream. */
#define DUP_ROUNDS 32

/* Slot holds page `page` as the first set (KV_ID) wrote it; else say
 * whether it holds the second set's (OTHER_ID) bytes or a mix of both. */
static void check_first_won(struct fx *f, const struct variant *v, unsigned round, unsigned p,
			    uint64_t slot, uint64_t page)
{
	size_t pb = hc_pool_page_bytes(f->pool);
	uint8_t *x = malloc(pb), *y = malloc(pb), *got = malloc(pb);
	assert_non_null(x);
	assert_non_null(y);
	assert_non_null(got);
	st_content(KV_ID, page, x, pb);
	st_content(OTHER_ID, page, y, pb);
	assert_int_equal(hc_pool_gather(f->pool, slot, got, pb), 0);
	size_t from_x = 0, from_y = 0;
	for (size_t i = 0; i < pb; i += 512) {
		from_x += !memcmp(got + i, x + i, 512);
		from_y += !memcmp(got + i, y + i, 512);
	}
	bool ok = !memcmp(got, x, pb);
	free(x);
	free(y);
	free(got);
	if (!ok)
		fail_msg("%s%s, round %u, page %u: not the first set's bytes; of %zu blocks "
			 "%zu are the first set's, %zu the second's",
			 v->file ? "file" : "mem", v->bounce ? " bounce" : " zero-copy", round, p,
			 pb / 512, from_x, from_y);
}

static void duplicate_sets(const struct variant *v)
{
	struct fx f;
	fx_open(&f, v);
	enum { BUSY = 48 };
	struct hc_key busy[BUSY];
	uint64_t bslots[BUSY];
	st_keys(49, BUSY, TOKENS, busy);
	for (unsigned p = 0; p < BUSY; p++) {
		bslots[p] = p;
		st_fill(f.pool, p, KV_ID, 4900 + p);
	}
	assert_int_equal(hc_store_set(f.st, busy, BUSY, bslots, NULL), 0);
	for (unsigned p = 0; p < BUSY; p++)
		bslots[p] = SLOTS - BUSY + p;

	for (unsigned round = 0; round < DUP_ROUNDS; round++) {
		struct hc_key keys[NP];
		uint64_t x[NP], y[NP], back[NP];
		int xres[NP], yres[NP];
		st_keys(400 + round, NP, TOKENS, keys);
		for (unsigned p = 0; p < NP; p++) {
			x[p] = p;
			y[p] = NP + p;
			back[p] = 2 * NP + p;
			st_fill(f.pool, x[p], KV_ID, 4000 + p);
			st_fill(f.pool, y[p], OTHER_ID, 4000 + p);
			st_clear(f.pool, back[p]);
		}
		struct hc_store_stats a = st_stats(f.st, NULL);
		struct hc_store_op *bop = get_start(&f, busy, BUSY, bslots, NULL);
		memset(xres, 0x55, sizeof(xres));
		memset(yres, 0x55, sizeof(yres));
		struct hc_store_op *sx = set_start(&f, keys, NP, x, xres);
		struct hc_store_op *sy = set_start(&f, keys, NP, y, yres);
		assert_int_equal(hc_store_op_wait(bop), BUSY);
		assert_int_equal(hc_store_op_wait(sy), 0);
		assert_int_equal(hc_store_op_wait(sx), 0);
		assert_results(xres, NP, 0);
		assert_results(yres, NP, 0);
		/* The bytes first: they say what went wrong when the counts are off
		 * too (a page counted twice as written is a page whose objects
		 * come from both sets). */
		assert_int_equal(hc_store_get(f.st, keys, NP, back, NULL), NP);
		for (unsigned p = 0; p < NP; p++)
			check_first_won(&f, v, round, p, back[p], 4000 + p);
		struct hc_store_stats b = st_stats(f.st, NULL);
		assert_int_equal(b.pages_written - a.pages_written, NP);
		assert_int_equal(b.pages_existing - a.pages_existing, NP);
	}
	fx_close(&f);
}

static void test_duplicate_sets(void **state)
{
	(void)state;
	for_each_variant(duplicate_sets);
}

/* ---- mixed with the synchronous calls ---- */

static void mixed_sync(const struct variant *v)
{
	struct fx f;
	fx_open(&f, v);
	struct hc_key ka[NP], kb[NP], kc[NP], kd[NP];
	st_keys(50, NP, TOKENS, ka);
	st_keys(51, NP, TOKENS, kb);
	st_keys(52, NP, TOKENS, kc);
	st_keys(53, NP, TOKENS, kd);
	uint64_t w[4][NP], r[NP];
	int res[NP];
	for (unsigned i = 0; i < 4; i++)
		for (unsigned p = 0; p < NP; p++) {
			w[i][p] = i * NP + p;
			st_fill(f.pool, w[i][p], KV_ID, 500 + i * NP + p);
		}
	for (unsigned p = 0; p < NP; p++)
		r[p] = 4 * NP + p;

	/* Sync calls see what a waited set stored. */
	assert_int_equal(hc_store_op_wait(set_start(&f, ka, NP, w[0], NULL)), 0);
	assert_int_equal(hc_store_exists(f.st, ka, NP), NP);
	memset(res, 0x55, sizeof(res));
	assert_int_equal(hc_store_get(f.st, ka, NP, r, res), NP);
	assert_results(res, NP, 0);
	for (unsigned p = 0; p < NP; p++)
		st_assert_page(f.pool, r[p], KV_ID, 500 + p);

	/* A started get sees what a sync set stored. */
	for (unsigned p = 0; p < NP; p++)
		st_clear(f.pool, r[p]);
	assert_int_equal(hc_store_set(f.st, kb, NP, w[1], NULL), 0);
	memset(res, 0x55, sizeof(res));
	assert_int_equal(hc_store_op_wait(get_start(&f, kb, NP, r, res)), NP);
	assert_results(res, NP, 0);
	for (unsigned p = 0; p < NP; p++)
		st_assert_page(f.pool, r[p], KV_ID, 500 + NP + p);

	/* Sync calls on other keys while an op is queued or running. */
	int cres[NP];
	memset(cres, 0x55, sizeof(cres));
	struct hc_store_op *op = set_start(&f, kc, NP, w[2], cres);
	assert_int_equal(hc_store_set(f.st, kd, NP, w[3], NULL), 0);
	for (unsigned p = 0; p < NP; p++)
		st_clear(f.pool, r[p]);
	assert_int_equal(hc_store_get(f.st, kd, NP, r, NULL), NP);
	for (unsigned p = 0; p < NP; p++)
		st_assert_page(f.pool, r[p], KV_ID, 500 + 3 * NP + p);
	assert_int_equal(hc_store_op_wait(op), 0);
	assert_results(cres, NP, 0);
	for (unsigned p = 0; p < NP; p++)
		st_clear(f.pool, r[p]);
	assert_int_equal(hc_store_get(f.st, kc, NP, r, NULL), NP);
	for (unsigned p = 0; p < NP; p++)
		st_assert_page(f.pool, r[p], KV_ID, 500 + 2 * NP + p);
	fx_close(&f);
}

static void test_mixed_sync(void **state)
{
	(void)state;
	for_each_variant(mixed_sync);
}

/* ---- bad calls ---- */

/* Not a real op: a start that fails must overwrite it with NULL. */
static struct hc_store_op *const NOT_AN_OP = (struct hc_store_op *)(uintptr_t)0x10;

typedef int (*start_fn)(struct hc_store *, const struct hc_key *, size_t, const uint64_t *, int *,
			struct hc_store_op **);

static void assert_start_fails(start_fn fn, struct hc_store *st, const struct hc_key *keys,
			       size_t n, const uint64_t *pages, int *results, int want)
{
	struct hc_store_op *op = NOT_AN_OP;
	int rc = fn(st, keys, n, pages, results, &op);
	if (rc != want)
		fail_msg("start returned %d (%s), expected %d", rc, hc_last_error(), want);
	assert_null(op);
}

static void assert_nothing_stored(struct fx *f)
{
	struct hc_store_stats s = st_stats(f->st, NULL);
	assert_int_equal(s.pages_written, 0);
	assert_int_equal(s.pages_existing, 0);
	assert_int_equal(s.failures, 0);
	assert_int_equal(s.set_batches, 0);
	assert_int_equal(s.get_batches, 0);
	if (f->file) {
		struct st_count c = st_count(f->dir);
		assert_int_equal(c.files, 0);
		assert_int_equal(c.dirs, 256);
	}
}

static void bad_calls(const struct variant *v)
{
	struct fx f;
	fx_open(&f, v);
	struct hc_key keys[3];
	st_keys(60, 3, TOKENS, keys);
	uint64_t ok[3] = {0, 1, 2}, bad[3] = {0, 1, SLOTS};
	int res[3] = {7, 7, 7};
	for (uint64_t i = 0; i < 3; i++)
		st_fill(f.pool, i, KV_ID, 600 + i);
	start_fn fns[2] = {hc_store_set_start, hc_store_get_start};

	for (int d = 0; d < 2; d++) {
		assert_int_equal(fns[d](f.st, keys, 3, ok, res, NULL), -EINVAL);
		assert_start_fails(fns[d], NULL, keys, 3, ok, res, -EINVAL);
		assert_start_fails(fns[d], f.st, NULL, 3, ok, res, -EINVAL);
		assert_start_fails(fns[d], f.st, keys, 3, NULL, res, -EINVAL);
		assert_start_fails(fns[d], f.st, keys, 3, bad, res, -EFAULT);
		assert_last_error_contains("outside");
		bad[2] = UINT64_MAX;
		assert_start_fails(fns[d], f.st, keys, 3, bad, NULL, -EFAULT);
		bad[2] = SLOTS;
	}
	assert_nothing_stored(&f);
	assert_int_equal(hc_store_exists(f.st, keys, 3), 0);

	/* A get outside the pool reads nothing in, not even the good pages. */
	assert_int_equal(hc_store_set(f.st, keys, 3, ok, NULL), 0);
	clear_all(f.pool);
	struct hc_store_stats a = st_stats(f.st, NULL);
	uint64_t back[3] = {5, 6, SLOTS + 1};
	assert_start_fails(hc_store_get_start, f.st, keys, 3, back, res, -EFAULT);
	struct hc_store_stats b = st_stats(f.st, NULL);
	assert_int_equal(b.pages_read, a.pages_read);
	assert_int_equal(b.get_batches, a.get_batches);
	assert_slot_zero(f.pool, 5);
	assert_slot_zero(f.pool, 6);

	assert_int_equal(hc_store_op_wait(NULL), -EINVAL);
	assert_last_error_contains("NULL");

	/* n == 0: an op that returns 0 and counts as the sync call does. */
	a = st_stats(f.st, NULL);
	assert_int_equal(hc_store_set(f.st, NULL, 0, NULL, NULL), 0);
	assert_int_equal(hc_store_get(f.st, NULL, 0, NULL, NULL), 0);
	b = st_stats(f.st, NULL);
	uint64_t sync_sets = b.set_batches - a.set_batches;
	uint64_t sync_gets = b.get_batches - a.get_batches;
	struct hc_store_op *op = NOT_AN_OP;
	assert_int_equal(hc_store_set_start(f.st, NULL, 0, NULL, NULL, &op), 0);
	assert_non_null(op);
	assert_int_equal(hc_store_op_wait(op), 0);
	op = NOT_AN_OP;
	assert_int_equal(hc_store_get_start(f.st, NULL, 0, NULL, NULL, &op), 0);
	assert_non_null(op);
	assert_int_equal(hc_store_op_wait(op), 0);
	int untouched = 7;
	uint64_t page = 0;
	assert_int_equal(hc_store_op_wait(set_start(&f, keys, 0, &page, &untouched)), 0);
	assert_int_equal(hc_store_op_wait(get_start(&f, keys, 0, &page, &untouched)), 0);
	assert_int_equal(untouched, 7);
	a = st_stats(f.st, NULL);
	assert_int_equal(a.set_batches - b.set_batches, 2 * sync_sets);
	assert_int_equal(a.get_batches - b.get_batches, 2 * sync_gets);
	assert_int_equal(a.pages_written, 3);
	fx_close(&f);

	/* No anchor registered. */
	struct fx n;
	memset(&n, 0, sizeof(n));
	n.file = v->file;
	if (v->file) {
		st_mkdtemp(n.dir);
		n.st = st_open_file(n.dir, true, v->bounce, NULL);
	} else {
		n.st = st_open_mem(v->bounce);
	}
	for (int d = 0; d < 2; d++)
		assert_start_fails(fns[d], n.st, keys, 3, ok, res, -EINVAL);
	assert_last_error_contains("anchor");

	/* A logical anchor: its pages are markers, so a get has no data to
	 * move (-EINVAL as hc_store_get) while a set stores the markers. */
	struct hc_pool *logical = st_anchor_pool(SLOTS, TOKENS);
	assert_int_equal(hc_store_register_pool(n.st, "anchor", logical, true), 0);
	assert_int_equal(hc_store_get(n.st, keys, 3, ok, res), -EINVAL);
	assert_start_fails(hc_store_get_start, n.st, keys, 3, ok, res, -EINVAL);
	assert_last_error_contains("logical");
	struct hc_store_op *lop = NULL;
	memset(res, 0x55, sizeof(res));
	assert_int_equal(hc_store_set_start(n.st, keys, 3, ok, res, &lop), 0);
	assert_int_equal(hc_store_op_wait(lop), 0);
	assert_results(res, 3, 0);
	assert_int_equal(hc_store_exists(n.st, keys, 3), 3);
	hc_store_close(n.st);
	hc_pool_destroy(logical);
	if (n.file)
		st_rmrf(n.dir);
}

static void test_bad_calls(void **state)
{
	(void)state;
	for_each_variant(bad_calls);
}

/* ---- results == NULL ---- */

static void null_results(const struct variant *v)
{
	struct fx f;
	fx_open(&f, v);
	struct hc_key keys[NP];
	st_keys(70, NP, TOKENS, keys);
	uint64_t w[NP], r[NP];
	for (unsigned p = 0; p < NP; p++) {
		w[p] = p;
		r[p] = NP + p;
		st_fill(f.pool, w[p], KV_ID, 700 + p);
	}
	/* All but page 5 stored, then all of them (5 new, the rest existing). */
	struct hc_store_op *s1 = set_start(&f, keys, 5, w, NULL);
	struct hc_store_op *s2 = set_start(&f, keys + 6, NP - 6, w + 6, NULL);
	struct hc_store_op *g1 = get_start(&f, keys, NP, r, NULL);
	struct hc_store_op *s3 = set_start(&f, keys, NP, w, NULL);
	struct hc_store_op *g2 = get_start(&f, keys, NP, r, NULL);
	struct hc_key absent[2];
	st_keys(71, 2, TOKENS, absent);
	struct hc_store_op *g3 = get_start(&f, absent, 2, r, NULL);
	assert_int_equal(hc_store_op_wait(s1), 0);
	assert_int_equal(hc_store_op_wait(s2), 0);
	assert_int_equal(hc_store_op_wait(g1), 5);
	assert_int_equal(hc_store_op_wait(s3), 0);
	assert_int_equal(hc_store_op_wait(g2), NP);
	assert_int_equal(hc_store_op_wait(g3), 0);
	for (unsigned p = 0; p < NP; p++)
		st_assert_page(f.pool, r[p], KV_ID, 700 + p);
	struct hc_store_stats s = st_stats(f.st, NULL);
	assert_int_equal(s.pages_written, NP);
	assert_int_equal(s.pages_existing, NP - 1);
	fx_close(&f);
}

static void test_null_results(void **state)
{
	(void)state;
	for_each_variant(null_results);
}

/* ---- stats ---- */

#define KSTAT 5

static uint64_t hist_sum(const uint64_t *h)
{
	uint64_t s = 0;
	for (int i = 0; i < HC_STORE_LAT_BUCKETS; i++)
		s += h[i];
	return s;
}

static void stats(const struct variant *v)
{
	struct fx f;
	fx_open(&f, v);
	size_t pb = hc_pool_page_bytes(f.pool);
	/* Something before, so that the counts below are deltas. */
	struct hc_key pre[2];
	st_keys(80, 2, TOKENS, pre);
	uint64_t pre_slots[2] = {0, 1};
	assert_int_equal(hc_store_set(f.st, pre, 2, pre_slots, NULL), 0);
	assert_int_equal(hc_store_get(f.st, pre, 2, pre_slots, NULL), 2);

	struct hc_key keys[KSTAT][KSTAT];
	uint64_t w[KSTAT][KSTAT], r[KSTAT][KSTAT];
	size_t total = 0;
	for (unsigned i = 0; i < KSTAT; i++) {
		st_keys(81 + i, i + 1, TOKENS, keys[i]);
		for (unsigned p = 0; p <= i; p++) {
			w[i][p] = total;
			r[i][p] = SLOTS - 1 - total;
			st_fill(f.pool, w[i][p], KV_ID, 800 + total);
			total++;
		}
	}
	struct hc_store_stats a = st_stats(f.st, NULL), ka = st_stats(f.st, "kv");
	struct hc_store_op *ops[KSTAT];
	for (unsigned i = 0; i < KSTAT; i++) /* op i: i + 1 pages */
		ops[i] = set_start(&f, keys[i], i + 1, w[i], NULL);
	for (unsigned i = 0; i < KSTAT; i++)
		assert_int_equal(hc_store_op_wait(ops[i]), 0);
	for (unsigned i = 0; i < KSTAT; i++)
		ops[i] = get_start(&f, keys[i], i + 1, r[i], NULL);
	for (unsigned i = 0; i < KSTAT; i++)
		assert_int_equal(hc_store_op_wait(ops[i]), (int64_t)i + 1);
	struct hc_store_stats b = st_stats(f.st, NULL), kb = st_stats(f.st, "kv");
	assert_int_equal(b.set_batches - a.set_batches, KSTAT);
	assert_int_equal(b.get_batches - a.get_batches, KSTAT);
	assert_int_equal(b.exists_batches, a.exists_batches);
	assert_int_equal(b.pages_written - a.pages_written, total);
	assert_int_equal(b.bytes_written - a.bytes_written, total * pb);
	assert_int_equal(b.pages_read - a.pages_read, total);
	assert_int_equal(b.bytes_read - a.bytes_read, total * pb);
	assert_int_equal(b.hits - a.hits, total);
	assert_int_equal(b.misses, a.misses);
	assert_int_equal(b.pages_existing, a.pages_existing);
	assert_int_equal(hist_sum(b.set_latency_us) - hist_sum(a.set_latency_us), KSTAT);
	assert_int_equal(hist_sum(b.get_latency_us) - hist_sum(a.get_latency_us), KSTAT);
	/* The anchor pool's own counters as well. */
	assert_int_equal(kb.set_batches - ka.set_batches, KSTAT);
	assert_int_equal(kb.get_batches - ka.get_batches, KSTAT);
	assert_int_equal(kb.pages_written - ka.pages_written, total);
	assert_int_equal(kb.pages_read - ka.pages_read, total);

	/* Misses and existing pages of ops. */
	struct hc_key absent[3];
	st_keys(89, 3, TOKENS, absent);
	a = b;
	assert_int_equal(hc_store_op_wait(get_start(&f, absent, 3, r[KSTAT - 1], NULL)), 0);
	assert_int_equal(hc_store_op_wait(set_start(&f, keys[KSTAT - 1], KSTAT, w[KSTAT - 1],
						    NULL)),
			 0);
	b = st_stats(f.st, NULL);
	assert_int_equal(b.misses - a.misses, 3);
	assert_int_equal(b.pages_existing - a.pages_existing, KSTAT);
	assert_int_equal(b.pages_written, a.pages_written);
	assert_int_equal(b.set_batches - a.set_batches, 1);
	assert_int_equal(b.get_batches - a.get_batches, 1);
	fx_close(&f);
}

static void test_stats(void **state)
{
	(void)state;
	for_each_variant(stats);
}

/* ---- threads ---- */

#define NTHREADS 5 /* the last one uses the sync API */
#define TSLOTS 16  /* per thread: NP to write from, NP to read into */
#define ROUNDS 8

struct worker {
	struct fx *f;
	unsigned id;
	bool sync;
	char err[256];
};

/* Thread-safe page helpers (cmocka's assertions are for the main thread). */
static bool put_page(struct hc_pool *pool, uint64_t slot, uint32_t pool_id, uint64_t page,
		     uint8_t *buf)
{
	size_t pb = hc_pool_page_bytes(pool);
	if (pool_id)
		st_content(pool_id, page, buf, pb);
	else
		memset(buf, 0, pb);
	return hc_pool_scatter(pool, slot, buf, pb) == 0;
}

static bool page_ok(struct hc_pool *pool, uint64_t slot, uint64_t page, uint8_t *want, uint8_t *got)
{
	size_t pb = hc_pool_page_bytes(pool);
	st_content(KV_ID, page, want, pb);
	return hc_pool_gather(pool, slot, got, pb) == 0 && !memcmp(want, got, pb);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct hc_pool *pool = w->f->pool;
	struct hc_store *st = w->f->st;
	size_t pb = hc_pool_page_bytes(pool);
	uint8_t *a = malloc(pb), *b = malloc(pb);
	if (!a || !b) {
		snprintf(w->err, sizeof(w->err), "no memory");
		goto out;
	}
	uint64_t base = (uint64_t)w->id * TSLOTS;
	for (unsigned round = 0; round < ROUNDS; round++) {
		uint32_t seed = 1000 + w->id * 100 + round;
		struct hc_key keys[NP];
		/* st_keys() asserts only on failure, which does not happen for
		 * n > 0 tokens; it is what the main thread uses too. */
		st_keys(seed, NP, TOKENS, keys);
		uint64_t ws[NP], rs[NP];
		int sres[NP], gres[NP];
		for (unsigned p = 0; p < NP; p++) {
			ws[p] = base + p;
			rs[p] = base + NP + p;
			if (!put_page(pool, ws[p], KV_ID, (uint64_t)seed * NP + p, a) ||
			    !put_page(pool, rs[p], 0, 0, a)) {
				snprintf(w->err, sizeof(w->err), "scatter failed");
				goto out;
			}
			sres[p] = gres[p] = 0x55;
		}
		int64_t set_rc, get_rc;
		if (w->sync) {
			set_rc = hc_store_set(st, keys, NP, ws, sres);
			get_rc = hc_store_get(st, keys, NP, rs, gres);
			if (hc_store_exists(st, keys, NP) != NP) {
				snprintf(w->err, sizeof(w->err), "round %u: exists", round);
				goto out;
			}
		} else {
			struct hc_store_op *s = NULL, *g = NULL;
			int rc = hc_store_set_start(st, keys, NP, ws, sres, &s);
			if (rc || !s) {
				snprintf(w->err, sizeof(w->err), "round %u: set_start %d", round,
					 rc);
				goto out;
			}
			rc = hc_store_get_start(st, keys, NP, rs, gres, &g);
			if (rc || !g) {
				hc_store_op_wait(s);
				snprintf(w->err, sizeof(w->err), "round %u: get_start %d", round,
					 rc);
				goto out;
			}
			/* Odd rounds wait for the get first. */
			if (round % 2) {
				get_rc = hc_store_op_wait(g);
				set_rc = hc_store_op_wait(s);
			} else {
				set_rc = hc_store_op_wait(s);
				get_rc = hc_store_op_wait(g);
			}
		}
		if (set_rc != 0 || get_rc != NP) {
			snprintf(w->err, sizeof(w->err), "round %u: set %lld, get %lld", round,
				 (long long)set_rc, (long long)get_rc);
			goto out;
		}
		for (unsigned p = 0; p < NP; p++) {
			if (sres[p] || gres[p]) {
				snprintf(w->err, sizeof(w->err), "round %u page %u: results %d %d",
					 round, p, sres[p], gres[p]);
				goto out;
			}
			if (!page_ok(pool, rs[p], (uint64_t)seed * NP + p, a, b)) {
				snprintf(w->err, sizeof(w->err), "round %u page %u: wrong bytes",
					 round, p);
				goto out;
			}
		}
	}
out:
	free(a);
	free(b);
	return NULL;
}

static void threads(const struct variant *v)
{
	_Static_assert(NTHREADS * TSLOTS <= SLOTS, "every thread has its slots");
	struct fx f;
	fx_open(&f, v);
	struct worker w[NTHREADS];
	pthread_t t[NTHREADS];
	for (unsigned i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){.f = &f, .id = i, .sync = i == NTHREADS - 1};
		assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	for (unsigned i = 0; i < NTHREADS; i++)
		if (w[i].err[0])
			fail_msg("thread %u (%s): %s", i, w[i].sync ? "sync" : "started", w[i].err);
	struct hc_store_stats s = st_stats(f.st, NULL);
	assert_int_equal(s.pages_written, NTHREADS * ROUNDS * NP);
	assert_int_equal(s.pages_read, NTHREADS * ROUNDS * NP);
	assert_int_equal(s.set_batches, NTHREADS * ROUNDS);
	assert_int_equal(s.get_batches, NTHREADS * ROUNDS);
	assert_int_equal(s.failures, 0);
	fx_close(&f);
}

static void test_threads(void **state)
{
	(void)state;
	for_each_variant(threads);
}

/* ---- close ---- */

/* Threads of this process, not counting the kernel's io_uring workers
 * ("iou-wrk-*", "iou-sqp-*"), which come and go as the kernel likes. */
static int count_threads_once(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		fail_msg("opendir /proc/self/task: %s", strerror(errno));
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char path[300], comm[32] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		FILE *fp = fopen(path, "re");
		if (!fp)
			continue; /* gone meanwhile */
		if (!fgets(comm, sizeof(comm), fp))
			comm[0] = 0;
		fclose(fp);
		if (strncmp(comm, "iou-", 4))
			n++;
	}
	closedir(d);
	return n;
}

/* A new io-wq worker carries the process's name for a moment before it is
 * renamed iou-wrk-*: count until two reads 10 ms apart agree. */
static int count_threads(void)
{
	int n = count_threads_once();
	for (int i = 0; i < 100; i++) {
		usleep(10 * 1000);
		int again = count_threads_once();
		if (again == n)
			break;
		n = again;
	}
	return n;
}

/* The thread count once it is want, or after 2 s the last count: a thread
 * that close joined may take a moment to leave /proc on a loaded host, and
 * an io-wq worker to be renamed. */
static int threads_settle(int want)
{
	int n = count_threads();
	for (int i = 0; i < 200 && n != want; i++) {
		usleep(10 * 1000);
		n = count_threads_once();
	}
	return n;
}

/* Sync I/O, so that whatever the engine starts on first use is there. */
static void warm_up(struct fx *f, uint32_t seed)
{
	struct hc_key keys[2];
	st_keys(seed, 2, TOKENS, keys);
	uint64_t slots[2] = {0, 1};
	assert_int_equal(hc_store_set(f->st, keys, 2, slots, NULL), 0);
	assert_int_equal(hc_store_get(f->st, keys, 2, slots, NULL), 2);
}

static void close_store(const struct variant *v)
{
	/* First open outside the counts: a library may keep something for
	 * good on first use. */
	struct fx f;
	fx_open(&f, v);
	warm_up(&f, 90);
	assert_int_equal(hc_store_op_wait(set_start(&f, NULL, 0, NULL, NULL)), 0);
	fx_close(&f);
	int fds0 = rt_count_fds(), threads0 = count_threads();

	/* Never started: no store thread, and close leaves nothing. */
	fx_open(&f, v);
	warm_up(&f, 91);
	int threads1 = count_threads();
	fx_close(&f);
	assert_int_equal(rt_count_fds(), fds0);
	assert_int_equal(threads_settle(threads0), threads0);

	/* Started: one thread, for every op; all waited, close joins it. */
	fx_open(&f, v);
	warm_up(&f, 92);
	assert_int_equal(threads_settle(threads1), threads1);
	struct hc_key keys[NP];
	st_keys(93, NP, TOKENS, keys);
	uint64_t w[NP], r[NP];
	for (unsigned p = 0; p < NP; p++) {
		w[p] = p;
		r[p] = NP + p;
		st_fill(f.pool, w[p], KV_ID, 930 + p);
	}
	assert_int_equal(hc_store_op_wait(set_start(&f, keys, NP, w, NULL)), 0);
	assert_int_equal(threads_settle(threads1 + 1), threads1 + 1);
	struct hc_store_op *ops[4];
	for (unsigned i = 0; i < 4; i++)
		ops[i] = i % 2 ? get_start(&f, keys, NP, r, NULL)
			       : set_start(&f, keys, NP, w, NULL);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(hc_store_op_wait(ops[i]), i % 2 ? NP : 0);
	assert_int_equal(threads_settle(threads1 + 1), threads1 + 1);
	fx_close(&f);
	assert_int_equal(rt_count_fds(), fds0);
	assert_int_equal(threads_settle(threads0), threads0);
}

static void test_close(void **state)
{
	(void)state;
	for_each_variant(close_store);
}

/* ---- a page that fails inside a stream ---- */

#define FOPS 4 /* a long set, then A, B, C */

static void bucket_of(const struct hc_key *k, char out[3])
{
	char name[HC_NAME_MAX];
	assert_true(hc_key_name(k, ST_SUFFIX, "", name, sizeof(name)) > 0);
	hc_key_bucket_hex(hc_key_route_hash(name), out);
}

/* A layer_first pool: one object per page, named with no component. The bucket
 * of B's page 5 becomes a plain file, so writing (and reading) any page
 * routed there fails with -ENOTDIR; the first op is a long set, so that A,
 * B and C are likely queued behind it and share one stream. */
static void test_failed_page(void **state)
{
	(void)state;
	const struct variant v = {true, true, true};
	struct fx f;
	fx_open(&f, &v);
	assert_int_equal(f.objects, 1);
	static const size_t n[FOPS] = {48, NP, NP, NP};
	enum { BAD_OP = 2, BAD_PAGE = 5 };
	struct hc_key keys[FOPS][48];
	uint64_t w[FOPS][48], r[FOPS][48];
	int res[FOPS][48];
	bool broken[FOPS][48];
	size_t next = 0;
	for (unsigned i = 0; i < FOPS; i++) {
		st_keys(95 + i, n[i], TOKENS, keys[i]);
		for (size_t p = 0; p < n[i]; p++) {
			w[i][p] = next % SLOTS;
			next++;
		}
	}
	char bad_bucket[3], bpath[PATH_MAX + 8];
	bucket_of(&keys[BAD_OP][BAD_PAGE], bad_bucket);
	snprintf(bpath, sizeof(bpath), "%s/%s", f.dir, bad_bucket);
	size_t nbroken = 0;
	int64_t first_bad[FOPS];
	for (unsigned i = 0; i < FOPS; i++) {
		first_bad[i] = -1;
		for (size_t p = 0; p < n[i]; p++) {
			char b[3];
			bucket_of(&keys[i][p], b);
			broken[i][p] = !strcmp(b, bad_bucket);
			nbroken += broken[i][p];
			if (broken[i][p] && first_bad[i] < 0)
				first_bad[i] = (int64_t)p;
		}
	}
	/* The ops other than B must have good pages for the check to mean
	 * anything: A and C all good, B good before its page 5. */
	if (first_bad[1] >= 0 || first_bad[3] >= 0 || first_bad[BAD_OP] != BAD_PAGE)
		fail_msg("pick other seeds: a page of A or C, or of B before page 5, is in "
			 "bucket %s",
			 bad_bucket);
	assert_int_equal(rmdir(bpath), 0);
	int fd = open(bpath, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);

	/* The long set's pages spread over the slots; A, B and C each write
	 * from their own. */
	for (unsigned i = 0; i < FOPS; i++)
		for (size_t p = 0; p < n[i]; p++)
			st_fill(f.pool, w[i][p], KV_ID, 9500 + i * 100 + p);
	struct hc_store_stats a = st_stats(f.st, NULL);
	memset(res, 0x55, sizeof(res));
	struct hc_store_op *ops[FOPS];
	for (unsigned i = 0; i < FOPS; i++)
		ops[i] = set_start(&f, keys[i], n[i], w[i], res[i]);
	for (unsigned i = 0; i < FOPS; i++) {
		int64_t want = first_bad[i] < 0 ? 0 : -ENOTDIR;
		int64_t got = hc_store_op_wait(ops[i]);
		if (got != want)
			fail_msg("set op %u returned %lld, expected %lld", i, (long long)got,
				 (long long)want);
		for (size_t p = 0; p < n[i]; p++)
			if (res[i][p] != (broken[i][p] ? -ENOTDIR : 0))
				fail_msg("set op %u page %zu: result %d", i, p, res[i][p]);
	}
	struct hc_store_stats b = st_stats(f.st, NULL);
	assert_int_equal(b.failures - a.failures, nbroken);
	assert_int_equal(b.pages_written - a.pages_written, 48 + 3 * NP - nbroken);
	assert_int_equal(b.set_batches - a.set_batches, FOPS);
	assert_int_equal(st_count(f.dir).tmps, 0);

	/* Without a results array the op still reports the failure. */
	assert_int_equal(hc_store_op_wait(set_start(&f, keys[BAD_OP], NP, w[BAD_OP], NULL)),
			 -ENOTDIR);

	/* Read back A, B and C as one group: B's broken page is an error (not a
	 * miss) and ends its hits; the others are whole. */
	clear_all(f.pool);
	for (unsigned i = 1; i < FOPS; i++)
		for (size_t p = 0; p < NP; p++)
			r[i][p] = SLOTS - 1 - ((i - 1) * NP + p);
	memset(res, 0x55, sizeof(res));
	for (unsigned i = 1; i < FOPS; i++)
		ops[i] = get_start(&f, keys[i], NP, r[i], res[i]);
	for (unsigned i = 1; i < FOPS; i++) {
		assert_int_equal(hc_store_op_wait(ops[i]), i == BAD_OP ? BAD_PAGE : NP);
		for (size_t p = 0; p < NP; p++) {
			assert_int_equal(res[i][p], broken[i][p] ? -ENOTDIR : 0);
			if (!broken[i][p])
				st_assert_page(f.pool, r[i][p], KV_ID, 9500 + i * 100 + p);
		}
	}

	/* Repaired, the same op stores the rest. */
	assert_int_equal(unlink(bpath), 0);
	assert_int_equal(mkdir(bpath, 0700), 0);
	for (size_t p = 0; p < NP; p++)
		st_fill(f.pool, w[BAD_OP][p], KV_ID, 9500 + BAD_OP * 100 + p);
	assert_int_equal(hc_store_op_wait(set_start(&f, keys[BAD_OP], NP, w[BAD_OP], res[0])), 0);
	assert_results(res[0], NP, 0);
	assert_int_equal(hc_store_op_wait(get_start(&f, keys[BAD_OP], NP, r[BAD_OP], NULL)), NP);
	for (size_t p = 0; p < NP; p++)
		st_assert_page(f.pool, r[BAD_OP][p], KV_ID, 9500 + BAD_OP * 100 + p);
	fx_close(&f);
}

/* ---- v2 ---- */

#define IDX_TOKENS TOKENS
#define IDX_BYTES (IDX_TOKENS * 132) /* not a multiple of 4096 */

static struct hc_store_op *v2_start(struct fx *f, bool set, struct hc_pool_transfer *t, size_t nt)
{
	struct hc_store_op *op = NULL;
	int rc = set ? hc_store_set_v2_start(f->st, t, nt, &op)
		     : hc_store_get_v2_start(f->st, t, nt, &op);
	if (rc)
		fail_msg("hc_store_%s_v2_start: %s (%s)", set ? "set" : "get", hc_strerror(rc),
			 hc_last_error());
	assert_non_null(op);
	return op;
}

static void v2_case(const struct variant *v)
{
	struct fx f;
	fx_open(&f, v);
	struct hc_pool *idx = st_indexer_pool(SLOTS, IDX_TOKENS, IDX_BYTES);
	assert_int_equal(hc_store_register_pool(f.st, "idx", idx, false), 0);
	struct hc_store_stats kv0 = st_stats(f.st, "kv"), idx0 = st_stats(f.st, "idx");

	struct hc_key a[NP], b[NP];
	st_keys(300, NP, TOKENS, a);
	st_keys(301, NP, TOKENS, b);
	uint64_t wa[NP], wb[NP], ra[NP];
	int res[4][NP];
	for (unsigned p = 0; p < NP; p++) {
		wa[p] = p;
		wb[p] = NP + p;
		ra[p] = SLOTS - 1 - p;
		st_fill(f.pool, wa[p], KV_ID, p);
		st_fill(idx, wa[p], OTHER_ID, p);
		st_fill(f.pool, wb[p], KV_ID, NP + p);
		st_fill(idx, wb[p], OTHER_ID, NP + p);
	}
	/* The same keys a in both pools, in one call and across two calls
	 * queued together: pages of different pools, all written. */
	struct hc_pool_transfer s1[2] = {
		{"kv", a, NP, wa, HC_HIT_ALL_PAGES, res[0], NULL},
		{"idx", a, NP, wa, HC_HIT_ALL_PAGES, res[1], NULL},
	};
	struct hc_pool_transfer s2[2] = {
		{"kv", b, NP, wb, HC_HIT_ALL_PAGES, res[2], NULL},
		{"idx", b, NP, wb, HC_HIT_ALL_PAGES, NULL, NULL},
	};
	memset(res, 0x55, sizeof(res));
	struct hc_store_op *o1 = v2_start(&f, true, s1, 2);
	struct hc_store_op *o2 = v2_start(&f, true, s2, 2);
	memset(s1, 0, sizeof(s1)); /* the transfers are read at start */
	assert_int_equal(hc_store_op_wait(o2), 0);
	assert_int_equal(hc_store_op_wait(o1), 0);
	assert_results(res[0], NP, 0);
	assert_results(res[1], NP, 0);
	assert_results(res[2], NP, 0);

	/* Read back into other slots; the first transfer's leading hits. */
	for (uint64_t sl = 0; sl < SLOTS; sl++) {
		st_clear(f.pool, sl);
		st_clear(idx, sl);
	}
	struct hc_key absent[NP];
	st_keys(302, NP, TOKENS, absent);
	struct hc_pool_transfer g1[2] = {
		{"idx", a, NP, ra, HC_HIT_ALL_PAGES, res[0], NULL},
		{"kv", a, NP, ra, HC_HIT_ALL_PAGES, res[1], NULL},
	};
	struct hc_pool_transfer g2[2] = {
		{"kv", absent, NP, wa, HC_HIT_ALL_PAGES, NULL, NULL},
		{"idx", b, NP, wb, HC_HIT_ALL_PAGES, res[3], NULL},
	};
	memset(res, 0x55, sizeof(res));
	o1 = v2_start(&f, false, g1, 2);
	o2 = v2_start(&f, false, g2, 2);
	assert_int_equal(hc_store_op_wait(o1), NP);
	assert_int_equal(hc_store_op_wait(o2), 0); /* its first transfer: all absent */
	assert_results(res[0], NP, 0);
	assert_results(res[1], NP, 0);
	assert_results(res[3], NP, 0);
	for (unsigned p = 0; p < NP; p++) {
		st_assert_page(idx, ra[p], OTHER_ID, p);
		st_assert_page(f.pool, ra[p], KV_ID, p);
		st_assert_page(idx, wb[p], OTHER_ID, NP + p);
		assert_slot_zero(f.pool, wa[p]);
	}

	/* Each pool counts the calls that moved its pages. */
	struct hc_store_stats kv1 = st_stats(f.st, "kv"), idx1 = st_stats(f.st, "idx");
	assert_int_equal(kv1.set_batches - kv0.set_batches, 2);
	assert_int_equal(idx1.set_batches - idx0.set_batches, 2);
	assert_int_equal(kv1.get_batches - kv0.get_batches, 2);
	assert_int_equal(idx1.get_batches - idx0.get_batches, 2);
	assert_int_equal(idx1.pages_written - idx0.pages_written, 2 * NP);
	assert_int_equal(idx1.pages_read - idx0.pages_read, 2 * NP);

	/* Bad calls fail at start, with *op NULL. */
	struct hc_store_op *op = (struct hc_store_op *)(uintptr_t)1;
	struct hc_pool_transfer bad = {"nosuch", a, NP, wa, HC_HIT_ALL_PAGES, NULL, NULL};
	assert_int_equal(hc_store_set_v2_start(f.st, &bad, 1, &op), -EINVAL);
	assert_null(op);
	op = (struct hc_store_op *)(uintptr_t)1;
	assert_int_equal(hc_store_get_v2_start(f.st, NULL, 1, &op), -EINVAL);
	assert_null(op);
	assert_int_equal(hc_store_get_v2_start(f.st, g1, 2, NULL), -EINVAL);
	uint64_t outside[NP];
	for (unsigned p = 0; p < NP; p++)
		outside[p] = p ? SLOTS : 0;
	struct hc_pool_transfer far = {"idx", b, NP, outside, HC_HIT_ALL_PAGES, NULL, NULL};
	op = (struct hc_store_op *)(uintptr_t)1;
	assert_int_equal(hc_store_set_v2_start(f.st, &far, 1, &op), -EFAULT);
	assert_null(op);
	/* nt == 0: nothing to do, and a get has no first transfer */
	assert_int_equal(hc_store_op_wait(v2_start(&f, true, NULL, 0)), 0);
	assert_int_equal(hc_store_op_wait(v2_start(&f, false, NULL, 0)), 0);

	fx_close(&f);
	hc_pool_destroy(idx);
}

static void test_v2(void **state)
{
	(void)state;
	for_each_variant(v2_case);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_duplicate_sets),
		cmocka_unit_test(test_mixed_sync),
		cmocka_unit_test(test_bad_calls),
		cmocka_unit_test(test_null_results),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_close),
		cmocka_unit_test(test_failed_page),
		cmocka_unit_test(test_v2),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
