/*
 * Started operations that finish on their own (HC_TEST_CONCURRENCY: also
 * under TSan): hc_store_op_poll, hc_store_op_cancel, completion queues
 * with their eventfd, and lookups and deletes of pages.
 *
 * reap         sets then gets handed to a queue: every tag reaped once,
 *              with its op's outcome; the fd is readable exactly while
 *              something waits to be reaped; the bytes come back.
 * poll         an op polled until done, then waited at once; an op handed
 *              to a queue cannot be polled, waited or handed again.
 * late_submit  an op that finished before it was handed over is reaped.
 * cancel       a get queued behind a long set of the other direction and
 *              cancelled ends -ECANCELED, its pages untouched.
 * close        a queue closed with many ops in flight: every page ended
 *              0 or -ECANCELED, the pool can go at once (ASan sees any
 *              later use), nothing leaks.
 * lookup       per page, in key order: stored 0, absent -ENOENT, a
 *              truncated object -EBADMSG; by names too; started form.
 * delete       stored pages go (0), absent ones -ENOENT, a second delete
 *              finds nothing; started form; a bucket that is a symlink is
 *              not followed, the file it points at stays.
 * threads      4 submitting threads and one reaping thread that waits on
 *              the fd: every tag once.
 * bufs         a segments pool in bounce mode moves pages from and into a
 *              caller's unaligned buffers, shorter ones zero padded (and
 *              read back as the pool's pages, same objects); refused for a
 *              zero-copy pool, an empty buffer, one over the page.
 * bad_calls    NULLs, another store's op.
 * File backend (zero-copy and bounce) and mem.
 */
#include "store_test.h"

#include <poll.h>
#include <pthread.h>

enum { KV_ID = 1 };

#define SLOTS 256
#define TOKENS 8
#define NP 8

struct variant {
	bool file, bounce;
};

static const struct variant variants[] = {{true, false}, {true, true}, {false, false}};
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

struct fx {
	char dir[PATH_MAX];
	bool file;
	struct hc_store *st;
	struct hc_pool *pool;
	struct hc_store_cq *cq;
};

/* layer_first: one object per page, named with no component. */
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
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_LAYER_FIRST, false, SLOTS);
	f->pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(f->st, "kv", f->pool, true), 0);
	assert_int_equal(hc_store_cq_open(f->st, &f->cq), 0);
}

static void fx_close(struct fx *f)
{
	hc_store_cq_close(f->cq);
	hc_store_close(f->st);
	hc_pool_destroy(f->pool);
	if (f->file)
		st_rmrf(f->dir);
}

static bool fd_readable(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int rc = poll(&p, 1, timeout_ms);
	assert_true(rc >= 0);
	return rc == 1 && (p.revents & POLLIN);
}

/* Reap until want tags came back (each once, below ntags), waiting on the
 * fd; returns them in seen/outcomes. */
static void reap_n(struct hc_store_cq *cq, size_t want, size_t ntags, bool *seen, int64_t *outcome)
{
	size_t got = 0;
	while (got < want) {
		if (!fd_readable(hc_store_cq_fd(cq), 10000))
			fail_msg("no completion within 10 s (%zu of %zu reaped)", got, want);
		struct hc_store_cqe e[7];
		size_t n = hc_store_cq_reap(cq, e, 7);
		assert_true(n > 0); /* readable means something waits */
		for (size_t i = 0; i < n; i++) {
			assert_true(e[i].user_data < ntags);
			if (seen[e[i].user_data])
				fail_msg("tag %llu reaped twice",
					 (unsigned long long)e[i].user_data);
			seen[e[i].user_data] = true;
			outcome[e[i].user_data] = e[i].result;
		}
		got += n;
	}
}

static struct hc_store_op *start(struct fx *f, bool set, const struct hc_key *keys, size_t n,
				 const uint64_t *pages, int *results)
{
	struct hc_store_op *op = NULL;
	int rc = set ? hc_store_set_start(f->st, keys, n, pages, results, &op)
		     : hc_store_get_start(f->st, keys, n, pages, results, &op);
	if (rc)
		fail_msg("start: %s (%s)", hc_strerror(rc), hc_last_error());
	return op;
}

/* ---- reap ---- */

#define NOPS 16

static void reap_variant(const struct variant *v)
{
	struct fx f;
	fx_open(&f, v);
	int fd = hc_store_cq_fd(f.cq);
	assert_true(fd >= 0);
	assert_false(fd_readable(fd, 0));
	static struct hc_key keys[NOPS][NP];
	uint64_t wslot[NOPS][NP], rslot[NOPS][NP];
	int res[NOPS][NP];
	for (unsigned i = 0; i < NOPS; i++) {
		st_keys(100 + i, NP, TOKENS, keys[i]);
		for (unsigned p = 0; p < NP; p++) {
			wslot[i][p] = i * NP + p;
			rslot[i][p] = SLOTS - 1 - (i * NP + p);
			st_fill(f.pool, wslot[i][p], KV_ID, i * NP + p);
		}
	}
	for (unsigned i = 0; i < NOPS; i++)
		assert_int_equal(hc_store_op_submit(f.cq,
						    start(&f, true, keys[i], NP, wslot[i], res[i]),
						    i),
				 0);
	bool seen[NOPS] = {0};
	int64_t out[NOPS];
	reap_n(f.cq, NOPS, NOPS, seen, out);
	for (unsigned i = 0; i < NOPS; i++) {
		assert_int_equal(out[i], 0);
		for (unsigned p = 0; p < NP; p++)
			assert_int_equal(res[i][p], 0);
	}
	assert_int_equal(hc_store_cq_pending(f.cq), 0);
	assert_false(fd_readable(fd, 0));

	for (uint64_t s = 0; s < SLOTS; s++)
		st_clear(f.pool, s);
	memset(seen, 0, sizeof(seen));
	for (unsigned i = 0; i < NOPS; i++)
		assert_int_equal(hc_store_op_submit(f.cq,
						    start(&f, false, keys[i], NP, rslot[i], res[i]),
						    i),
				 0);
	assert_true(hc_store_cq_pending(f.cq) <= NOPS);
	reap_n(f.cq, NOPS, NOPS, seen, out);
	for (unsigned i = 0; i < NOPS; i++) {
		assert_int_equal(out[i], NP);
		for (unsigned p = 0; p < NP; p++)
			st_assert_page(f.pool, rslot[i][p], KV_ID, i * NP + p);
	}
	assert_false(fd_readable(fd, 0));
	assert_int_equal(hc_store_cq_reap(f.cq, NULL, 0), 0);
	fx_close(&f);
}

static void test_reap(void **state)
{
	(void)state;
	for (size_t i = 0; i < NVARIANTS; i++)
		reap_variant(&variants[i]);
}

/* ---- poll ---- */

static void poll_variant(const struct variant *v)
{
	struct fx f;
	fx_open(&f, v);
	struct hc_key keys[NP];
	uint64_t slots[NP];
	int res[NP];
	st_keys(7, NP, TOKENS, keys);
	for (unsigned p = 0; p < NP; p++) {
		slots[p] = p;
		st_fill(f.pool, p, KV_ID, p);
	}
	struct hc_store_op *op = start(&f, true, keys, NP, slots, res);
	int rc;
	while ((rc = hc_store_op_poll(op)) == 0)
		usleep(100);
	assert_int_equal(rc, 1);
	for (unsigned p = 0; p < NP; p++)
		assert_int_equal(res[p], 0);
	assert_int_equal(hc_store_op_wait(op), 0);

	op = start(&f, false, keys, NP, slots, res);
	assert_int_equal(hc_store_op_submit(f.cq, op, 1), 0);
	assert_int_equal(hc_store_op_poll(op), -EINVAL);
	assert_int_equal(hc_store_op_submit(f.cq, op, 2), -EINVAL);
	assert_int_equal(hc_store_op_wait(op), -EINVAL);
	bool seen[3] = {0};
	int64_t out[3];
	reap_n(f.cq, 1, 3, seen, out);
	assert_true(seen[1]);
	assert_int_equal(out[1], NP);
	fx_close(&f);
}

static void test_poll(void **state)
{
	(void)state;
	for (size_t i = 0; i < NVARIANTS; i++)
		poll_variant(&variants[i]);
}

/* ---- late submit ---- */

static void test_late_submit(void **state)
{
	(void)state;
	struct fx f;
	fx_open(&f, &variants[0]);
	struct hc_key keys[NP];
	uint64_t slots[NP];
	st_keys(8, NP, TOKENS, keys);
	for (unsigned p = 0; p < NP; p++) {
		slots[p] = p;
		st_fill(f.pool, p, KV_ID, p);
	}
	struct hc_store_op *op = start(&f, true, keys, NP, slots, NULL);
	while (hc_store_op_poll(op) == 0)
		usleep(100);
	assert_false(fd_readable(hc_store_cq_fd(f.cq), 0));
	assert_int_equal(hc_store_op_submit(f.cq, op, 0), 0);
	assert_true(fd_readable(hc_store_cq_fd(f.cq), 0));
	struct hc_store_cqe e[2];
	assert_int_equal(hc_store_cq_reap(f.cq, e, 2), 1);
	assert_int_equal(e[0].user_data, 0);
	assert_int_equal(e[0].result, 0);
	assert_false(fd_readable(hc_store_cq_fd(f.cq), 0));
	fx_close(&f);
}

/* ---- cancel ---- */

#define LONG_PAGES 192

/* A get started behind a long set cannot join the set's stream (another
 * direction), so a cancel right after its start reaches it before it
 * begins, but for a rare schedule: tried until it does, checking every
 * attempt's invariants. */
static void test_cancel(void **state)
{
	(void)state;
	struct fx f;
	fx_open(&f, &variants[0]);
	struct hc_key rkeys[NP];
	uint64_t rslots[NP];
	st_keys(9, NP, TOKENS, rkeys);
	for (unsigned p = 0; p < NP; p++) {
		rslots[p] = LONG_PAGES + p;
		st_fill(f.pool, p, KV_ID, p);
	}
	uint64_t s8[NP] = {0, 1, 2, 3, 4, 5, 6, 7};
	assert_int_equal(hc_store_set(f.st, rkeys, NP, s8, NULL), 0);
	bool cancelled = false;
	for (unsigned attempt = 0; attempt < 20 && !cancelled; attempt++) {
		struct hc_key lkeys[LONG_PAGES];
		uint64_t lslots[LONG_PAGES];
		st_keys(1000 + attempt, LONG_PAGES, TOKENS, lkeys);
		for (unsigned p = 0; p < LONG_PAGES; p++)
			lslots[p] = p;
		for (unsigned p = 0; p < NP; p++)
			st_clear(f.pool, rslots[p]);
		int res[NP];
		struct hc_store_op *lop = start(&f, true, lkeys, LONG_PAGES, lslots, NULL);
		struct hc_store_op *gop = start(&f, false, rkeys, NP, rslots, res);
		assert_int_equal(hc_store_op_cancel(gop), 0);
		int64_t got = hc_store_op_wait(gop);
		assert_int_equal(hc_store_op_wait(lop), 0);
		if (got == NP) {
			for (unsigned p = 0; p < NP; p++)
				st_assert_page(f.pool, rslots[p], KV_ID, p);
			continue;
		}
		assert_int_equal(got, -ECANCELED);
		cancelled = true;
		for (unsigned p = 0; p < NP; p++) {
			if (res[p] == 0)
				st_assert_page(f.pool, rslots[p], KV_ID, p);
			else
				assert_int_equal(res[p], -ECANCELED);
		}
		assert_int_equal(res[0], -ECANCELED); /* cancelled before it began */
	}
	assert_true(cancelled);
	fx_close(&f);
}

/* ---- close with ops in flight ---- */

#define CLOSE_OPS 48

static void close_variant(const struct variant *v)
{
	struct fx f;
	fx_open(&f, v);
	static struct hc_key keys[CLOSE_OPS][NP];
	static uint64_t slots[CLOSE_OPS][NP];
	static int res[CLOSE_OPS][NP];
	for (unsigned i = 0; i < CLOSE_OPS; i++) {
		st_keys(300 + i, NP, TOKENS, keys[i]);
		for (unsigned p = 0; p < NP; p++) {
			slots[i][p] = (i * NP + p) % SLOTS;
			res[i][p] = 12345;
		}
	}
	for (unsigned i = 0; i < CLOSE_OPS; i++)
		assert_int_equal(
			hc_store_op_submit(f.cq,
					   start(&f, i % 2 == 0, keys[i], NP, slots[i], res[i]), i),
			0);
	hc_store_cq_close(f.cq);
	f.cq = NULL;
	/* Nothing of the queue's ops may touch the pool from here on. */
	struct hc_pool *pool = f.pool;
	f.pool = NULL;
	hc_pool_destroy(pool);
	for (unsigned i = 0; i < CLOSE_OPS; i++)
		for (unsigned p = 0; p < NP; p++) {
			int r = res[i][p];
			bool ok = r == 0 || r == -ECANCELED || (i % 2 == 1 && r == -ENOENT);
			if (!ok)
				fail_msg("op %u page %u ended %d", i, p, r);
		}
	hc_store_close(f.st);
	if (f.file)
		st_rmrf(f.dir);
}

static void test_close(void **state)
{
	(void)state;
	for (size_t i = 0; i < NVARIANTS; i++)
		close_variant(&variants[i]);
}

/* ---- lookup ---- */

static struct hc_pool_transfer kv_transfer(const struct hc_key *keys, const char *const *names,
					   size_t n, int *results)
{
	return (struct hc_pool_transfer){.pool = "kv",
					 .keys = keys,
					 .names = names,
					 .n = n,
					 .results = results};
}

static void lookup_variant(const struct variant *v)
{
	struct fx f;
	fx_open(&f, v);
	struct hc_key keys[2 * NP];
	st_keys(11, 2 * NP, TOKENS, keys);
	/* Even pages stored. */
	for (unsigned p = 0; p < 2 * NP; p += 2) {
		uint64_t slot = p;
		st_fill(f.pool, slot, KV_ID, p);
		assert_int_equal(hc_store_set(f.st, &keys[p], 1, &slot, NULL), 0);
	}
	int res[2 * NP];
	struct hc_pool_transfer t = kv_transfer(keys, NULL, 2 * NP, res);
	assert_int_equal(hc_store_lookup(f.st, &t, 1), NP);
	for (unsigned p = 0; p < 2 * NP; p++)
		assert_int_equal(res[p], p % 2 ? -ENOENT : 0);

	/* By names: a name of a key's hex digits is that key. */
	char hex[2][HC_NAME_MAX];
	assert_true(hc_key_name(&keys[0], "", "", hex[0], sizeof(hex[0])) > 0);
	snprintf(hex[1], sizeof(hex[1]), "never-stored");
	const char *names[2] = {hex[0], hex[1]};
	t = kv_transfer(NULL, names, 2, res);
	assert_int_equal(hc_store_lookup(f.st, &t, 1), 1);
	assert_int_equal(res[0], 0);
	assert_int_equal(res[1], -ENOENT);

	if (v->file) {
		/* A truncated object has the wrong size: -EBADMSG. */
		char path[PATH_MAX];
		st_obj_path(f.dir, &keys[2], ST_SUFFIX, "", path);
		assert_int_equal(truncate(path, 4096), 0);
		t = kv_transfer(keys, NULL, 4, res);
		assert_int_equal(hc_store_lookup(f.st, &t, 1), 1);
		assert_int_equal(res[0], 0);
		assert_int_equal(res[1], -ENOENT);
		assert_int_equal(res[2], -EBADMSG);
		assert_int_equal(res[3], -ENOENT);
	}

	/* Started, through the queue. */
	struct hc_store_op *op = NULL;
	memset(res, 0x55, sizeof(res));
	t = kv_transfer(&keys[4], NULL, 4, res);
	assert_int_equal(hc_store_lookup_start(f.st, &t, 1, &op), 0);
	assert_int_equal(hc_store_op_submit(f.cq, op, 0), 0);
	bool seen[1] = {0};
	int64_t out[1];
	reap_n(f.cq, 1, 1, seen, out);
	assert_int_equal(out[0], 2);
	assert_int_equal(res[0], 0);
	assert_int_equal(res[1], -ENOENT);
	assert_int_equal(res[2], 0);
	assert_int_equal(res[3], -ENOENT);
	/* Started and waited. */
	assert_int_equal(hc_store_lookup_start(f.st, &t, 1, &op), 0);
	assert_int_equal(hc_store_op_wait(op), 2);
	fx_close(&f);
}

static void test_lookup(void **state)
{
	(void)state;
	for (size_t i = 0; i < NVARIANTS; i++)
		lookup_variant(&variants[i]);
}

/* ---- delete ---- */

static void delete_variant(const struct variant *v)
{
	struct fx f;
	fx_open(&f, v);
	struct hc_key keys[NP];
	uint64_t slots[NP];
	st_keys(12, NP, TOKENS, keys);
	for (unsigned p = 0; p < NP; p++) {
		slots[p] = p;
		st_fill(f.pool, p, KV_ID, p);
	}
	assert_int_equal(hc_store_set(f.st, keys, NP / 2, slots, NULL), 0);
	int res[NP];
	struct hc_pool_transfer t = kv_transfer(keys, NULL, NP, res);
	assert_int_equal(hc_store_delete(f.st, &t, 1), NP / 2);
	for (unsigned p = 0; p < NP; p++)
		assert_int_equal(res[p], p < NP / 2 ? 0 : -ENOENT);
	assert_int_equal(hc_store_lookup(f.st, &t, 1), 0);
	assert_int_equal(hc_store_exists(f.st, keys, NP), 0);
	assert_int_equal(hc_store_delete(f.st, &t, 1), 0);
	if (f.file)
		assert_int_equal(st_count(f.dir).files, 0);

	/* Started, through the queue; the pages can be stored again. */
	assert_int_equal(hc_store_set(f.st, keys, NP, slots, NULL), 0);
	struct hc_store_op *op = NULL;
	t = kv_transfer(keys, NULL, 2, res);
	assert_int_equal(hc_store_delete_start(f.st, &t, 1, &op), 0);
	assert_int_equal(hc_store_op_submit(f.cq, op, 0), 0);
	bool seen[1] = {0};
	int64_t out[1];
	reap_n(f.cq, 1, 1, seen, out);
	assert_int_equal(out[0], 2);
	assert_int_equal(hc_store_exists(f.st, keys, NP), 0);
	assert_int_equal(hc_store_exists(f.st, &keys[2], NP - 2), NP - 2);
	assert_int_equal(hc_store_set(f.st, keys, 2, slots, NULL), 0);
	assert_int_equal(hc_store_exists(f.st, keys, NP), NP);
	fx_close(&f);
}

static void test_delete(void **state)
{
	(void)state;
	for (size_t i = 0; i < NVARIANTS; i++)
		delete_variant(&variants[i]);
}

/* A bucket replaced by a symlink to a directory outside the store that
 * holds a file under the object's name: the delete does not follow it. */
static void test_delete_symlink_bucket(void **state)
{
	(void)state;
	struct fx f;
	fx_open(&f, &variants[0]);
	struct hc_key key;
	st_keys(13, 1, TOKENS, &key);
	uint64_t slot = 0;
	st_fill(f.pool, 0, KV_ID, 0);
	assert_int_equal(hc_store_set(f.st, &key, 1, &slot, NULL), 0);
	char path[PATH_MAX], bucket[PATH_MAX], outside[PATH_MAX], victim[PATH_MAX + 300];
	st_obj_path(f.dir, &key, ST_SUFFIX, "", path);
	snprintf(bucket, sizeof(bucket), "%s", path);
	*strrchr(bucket, '/') = '\0';
	st_mkdtemp(outside);
	snprintf(victim, sizeof(victim), "%s/%s", outside, strrchr(path, '/') + 1);
	assert_int_equal(rename(path, victim), 0);
	st_rmrf(bucket);
	assert_int_equal(symlink(outside, bucket), 0);
	int res[1];
	struct hc_pool_transfer t = kv_transfer(&key, NULL, 1, res);
	assert_int_equal(hc_store_delete(f.st, &t, 1), 0);
	assert_true(res[0] < 0 && res[0] != -ENOENT);
	assert_true(st_file_size(victim) > 0);
	unlink(bucket);
	st_rmrf(outside);
	fx_close(&f);
}

/* ---- threads ---- */

#define TH_SUBMITTERS 4
#define TH_OPS 24

struct th_arg {
	struct fx *f;
	unsigned id;
	struct hc_key keys[TH_OPS][2];
	uint64_t slots[TH_OPS][2];
	int res[TH_OPS][2];
};

static void *submitter(void *p)
{
	struct th_arg *a = p;
	for (unsigned i = 0; i < TH_OPS; i++) {
		st_keys(2000 + a->id * TH_OPS + i, 2, TOKENS, a->keys[i]);
		a->slots[i][0] = a->id * 2 * TH_OPS + 2 * i;
		a->slots[i][1] = a->slots[i][0] + 1;
		struct hc_store_op *op = NULL;
		int rc;
		if (i % 3 == 2) {
			struct hc_pool_transfer t = kv_transfer(a->keys[i], NULL, 2, a->res[i]);
			rc = hc_store_lookup_start(a->f->st, &t, 1, &op);
		} else {
			rc = hc_store_set_start(a->f->st, a->keys[i], 2, a->slots[i], a->res[i],
						&op);
		}
		if (rc || hc_store_op_submit(a->f->cq, op, a->id * TH_OPS + i))
			abort();
	}
	return NULL;
}

struct reaper_arg {
	struct hc_store_cq *cq;
	bool seen[TH_SUBMITTERS * TH_OPS];
	int64_t out[TH_SUBMITTERS * TH_OPS];
};

static void *reaper(void *p)
{
	struct reaper_arg *r = p;
	reap_n(r->cq, TH_SUBMITTERS * TH_OPS, TH_SUBMITTERS * TH_OPS, r->seen, r->out);
	return NULL;
}

static void test_threads(void **state)
{
	(void)state;
	struct fx f;
	fx_open(&f, &variants[0]);
	static struct th_arg args[TH_SUBMITTERS];
	static struct reaper_arg r;
	memset(&r, 0, sizeof(r));
	r.cq = f.cq;
	pthread_t th[TH_SUBMITTERS], rt;
	assert_int_equal(pthread_create(&rt, NULL, reaper, &r), 0);
	for (unsigned i = 0; i < TH_SUBMITTERS; i++) {
		args[i].f = &f;
		args[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, submitter, &args[i]), 0);
	}
	for (unsigned i = 0; i < TH_SUBMITTERS; i++)
		pthread_join(th[i], NULL);
	pthread_join(rt, NULL);
	for (unsigned i = 0; i < TH_SUBMITTERS * TH_OPS; i++) {
		assert_true(r.seen[i]);
		if (i % TH_OPS % 3 != 2)
			assert_int_equal(r.out[i], 0);
		else
			assert_true(r.out[i] >= 0 && r.out[i] <= 2);
	}
	assert_int_equal(hc_store_cq_pending(f.cq), 0);
	assert_false(fd_readable(hc_store_cq_fd(f.cq), 0));
	fx_close(&f);
}

/* ---- caller buffers ---- */

#define BUF_PAGE 8192
#define BUF_PAGES 8

static struct hc_pool *seg_pool(uint8_t **mem)
{
	*mem = aligned_alloc(4096, BUF_PAGES * BUF_PAGE);
	assert_non_null(*mem);
	memset(*mem, 0, BUF_PAGES * BUF_PAGE);
	struct hc_segment_buffer b = {.base = *mem,
				      .len = BUF_PAGES * BUF_PAGE,
				      .page_stride = BUF_PAGE,
				      .seg_len = BUF_PAGE,
				      .component = HC_COMP_PLAIN};
	struct hc_pool *p = NULL;
	assert_int_equal(hc_pool_wrap_segments(&b, 1, BUF_PAGES, 16, &p), 0);
	return p;
}

static int bufs_op(struct hc_store *st, bool set, const char *const *names, size_t n,
		   const struct iovec *bufs, int *res)
{
	struct hc_pool_transfer t = {.pool = "kv", .names = names, .n = n, .results = res};
	struct hc_store_op *op = NULL;
	int rc = set ? hc_store_set_bufs_start(st, &t, bufs, &op)
		     : hc_store_get_bufs_start(st, &t, bufs, &op);
	if (rc)
		return rc;
	return (int)hc_store_op_wait(op);
}

static void test_bufs(void **state)
{
	(void)state;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	struct hc_store *st = st_open_file(dir, true, false, NULL);
	uint8_t *mem;
	struct hc_pool *pool = seg_pool(&mem);
	struct hc_pool_reg reg;
	hc_pool_reg_init(&reg, sizeof(reg));
	reg.anchor = true;
	reg.force_bounce = true;
	assert_int_equal(hc_store_register_pool_ex(st, "kv", pool, &reg), 0);
	/* Unaligned sources, one full page and two shorter. */
	uint8_t *src = malloc(3 * BUF_PAGE + 8), *dst = malloc(3 * BUF_PAGE + 8);
	assert_non_null(src);
	assert_non_null(dst);
	for (size_t i = 0; i < 3 * BUF_PAGE + 8; i++)
		src[i] = (uint8_t)(i * 7 + 3);
	size_t lens[3] = {BUF_PAGE, 5000, 1};
	struct iovec in[3], out[3];
	for (int i = 0; i < 3; i++) {
		in[i] = (struct iovec){src + 1 + i * BUF_PAGE, lens[i]};
		out[i] = (struct iovec){dst + 3 + i * BUF_PAGE, lens[i]};
	}
	const char *names[3] = {"full", "short", "byte"};
	int res[3];
	assert_int_equal(bufs_op(st, true, names, 3, in, res), 0);
	memset(dst, 0xEE, 3 * BUF_PAGE + 8);
	assert_int_equal(bufs_op(st, false, names, 3, out, res), 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(res[i], 0);
		assert_memory_equal(out[i].iov_base, in[i].iov_base, lens[i]);
	}
	assert_int_equal(dst[3 + BUF_PAGE + 5000], 0xEE); /* nothing past a short buffer */
	/* The same objects as the pool's own pages: zero padded. */
	uint64_t pages[3] = {0, 1, 2};
	assert_int_equal(hc_store_get_named(st, names, 3, pages, res), 3);
	assert_memory_equal(mem + BUF_PAGE, in[1].iov_base, 5000);
	for (size_t i = 5000; i < BUF_PAGE; i++)
		assert_int_equal(mem[BUF_PAGE + i], 0);
	/* A full page read into a shorter buffer: its first bytes. */
	struct iovec part = {dst, 100};
	assert_int_equal(bufs_op(st, false, names, 1, &part, res), 1);
	assert_memory_equal(dst, in[0].iov_base, 100);
	/* A miss and a damaged object are not hits. */
	const char *absent[1] = {"absent"};
	assert_int_equal(bufs_op(st, false, absent, 1, out, res), 0);
	assert_int_equal(res[0], -ENOENT);
	/* Refused: an empty buffer, one over the page, no buffers. */
	struct iovec bad[2] = {{src, 0}, {src, BUF_PAGE + 1}};
	assert_int_equal(bufs_op(st, true, names, 1, &bad[0], res), -EINVAL);
	assert_int_equal(bufs_op(st, true, names, 1, &bad[1], res), -EINVAL);
	assert_int_equal(bufs_op(st, true, names, 1, NULL, res), -EINVAL);
	hc_store_close(st);
	/* A zero-copy pool cannot take them. */
	st = st_open_file(dir, true, false, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "kv", &info), 0);
	if (info.zero_copy)
		assert_int_equal(bufs_op(st, true, names, 1, in, res), -EINVAL);
	hc_store_close(st);
	hc_pool_destroy(pool);
	free(mem);
	free(src);
	free(dst);
	st_rmrf(dir);
}

/* ---- bad calls ---- */

static void test_bad_calls(void **state)
{
	(void)state;
	struct fx f, g;
	fx_open(&f, &variants[2]);
	fx_open(&g, &variants[2]);
	struct hc_store_cq *q = (struct hc_store_cq *)1;
	assert_int_equal(hc_store_cq_open(NULL, &q), -EINVAL);
	assert_null(q);
	assert_int_equal(hc_store_cq_open(f.st, NULL), -EINVAL);
	assert_int_equal(hc_store_cq_fd(NULL), -EINVAL);
	assert_int_equal(hc_store_op_poll(NULL), -EINVAL);
	assert_int_equal(hc_store_op_cancel(NULL), -EINVAL);
	assert_int_equal(hc_store_cq_reap(NULL, NULL, 4), 0);
	assert_int_equal(hc_store_cq_pending(NULL), 0);
	hc_store_cq_close(NULL);
	struct hc_key key;
	st_keys(14, 1, TOKENS, &key);
	uint64_t slot = 0;
	struct hc_store_op *op = start(&f, true, &key, 1, &slot, NULL);
	assert_int_equal(hc_store_op_submit(NULL, op, 0), -EINVAL);
	assert_int_equal(hc_store_op_submit(f.cq, NULL, 0), -EINVAL);
	assert_int_equal(hc_store_op_submit(g.cq, op, 0), -EINVAL); /* another store's */
	assert_int_equal(hc_store_op_wait(op), 0);                  /* still the caller's */
	struct hc_pool_transfer t = kv_transfer(&key, NULL, 1, NULL);
	assert_int_equal(hc_store_lookup(NULL, &t, 1), -EINVAL);
	assert_int_equal(hc_store_lookup(f.st, NULL, 1), -EINVAL);
	assert_int_equal(hc_store_lookup_start(f.st, &t, 1, NULL), -EINVAL);
	t.pool = "nope";
	assert_int_equal(hc_store_lookup(f.st, &t, 1), -EINVAL);
	assert_int_equal(hc_store_delete_start(f.st, &t, 1, &op), -EINVAL);
	assert_null(op);
	t.pool = "kv";
	t.keys = NULL;
	assert_int_equal(hc_store_delete(f.st, &t, 1), -EINVAL); /* neither keys nor names */
	fx_close(&g);
	fx_close(&f);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reap),        cmocka_unit_test(test_poll),
		cmocka_unit_test(test_late_submit), cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_close),       cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_delete),      cmocka_unit_test(test_delete_symlink_bucket),
		cmocka_unit_test(test_threads),     cmocka_unit_test(test_bufs),
		cmocka_unit_test(test_bad_calls),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
