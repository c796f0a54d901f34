/*
 * The transfer calls: v1 (the anchor, keys or names) and v2 (transfers
 * over pools), synchronous (run here as one stream) or started (planned
 * here, queued for the store's thread, waited for).
 */
#define _GNU_SOURCE
#include "store/store_internal.h"
#include "util/thread.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* Plans, moves and counts a call on this thread (after the started
 * operations below, which share the plan and the outcome). */
static int64_t run_now(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
		       enum transfer_op dir, bool v1, const char *what);
/* A v1 call (keys or names: ids) on the anchor, as one transfer. */
static int check_v1(struct hc_store *st, const void *ids, size_t n, const uint64_t *pages,
		    const char *what)
{
	if (!st)
		return util_fail(-EINVAL, "%s: store is NULL", what);
	if (n && (!ids || !pages))
		return util_fail(-EINVAL, "%s: NULL keys or pages", what);
	return 0;
}

static struct hc_pool_transfer v1_transfer(const struct hc_key *keys, const char *const *names,
					   size_t n, const uint64_t *pages, int *results)
{
	return (struct hc_pool_transfer){NULL, keys, n, pages, HC_HIT_ALL_PAGES, results, names};
}

/* A synchronous v1 call: pages named by keys or (keys NULL) by names. */
static int64_t run_v1(struct hc_store *st, const struct hc_key *keys, const char *const *names,
		      size_t n, const uint64_t *pages, int *results, enum transfer_op dir,
		      const char *what)
{
	int rc = check_v1(st, keys ? (const void *)keys : (const void *)names, n, pages, what);
	if (rc)
		return rc;
	struct hc_pool_transfer t = v1_transfer(keys, names, n, pages, results);
	return run_now(st, &t, 1, dir, true, what);
}

/* What a set returns: a whole-call error, else the first failed page's. */
static int set_outcome(int rc, const int *results, size_t n)
{
	for (size_t i = 0; !rc && i < n; i++)
		if (results[i])
			rc = results[i];
	return rc;
}

static int64_t leading(const int *results, size_t n)
{
	size_t i = 0;
	while (i < n && results[i] == 0)
		i++;
	return (int64_t)i;
}

int hc_store_set(struct hc_store *st, const struct hc_key *keys, size_t n, const uint64_t *pages,
		 int *results)
{
	return (int)run_v1(st, keys, NULL, n, pages, results, OP_SET, "hc_store_set");
}

int hc_store_set_named(struct hc_store *st, const char *const *names, size_t n,
		       const uint64_t *pages, int *results)
{
	return (int)run_v1(st, NULL, names, n, pages, results, OP_SET, "hc_store_set_named");
}

int64_t hc_store_get(struct hc_store *st, const struct hc_key *keys, size_t n,
		     const uint64_t *pages, int *results)
{
	return run_v1(st, keys, NULL, n, pages, results, OP_GET, "hc_store_get");
}

int64_t hc_store_get_named(struct hc_store *st, const char *const *names, size_t n,
			   const uint64_t *pages, int *results)
{
	return run_v1(st, NULL, names, n, pages, results, OP_GET, "hc_store_get_named");
}

void store_op_free(struct hc_store_op *o)
{
	store_release(o->st, o->touched, o->ntouched);
	free(o->e);
	free(o->hexkeys);
	free(o->out);
	free(o->own);
	free(o);
}

/* Whether every transfer names its pages (keys or names) and, where it
 * moves them, pages. */
static int transfers_check(const struct hc_pool_transfer *t, size_t nt, bool moves)
{
	for (size_t i = 0; i < nt; i++)
		if (t[i].n && ((!t[i].keys && !t[i].names) || (moves && !t[i].pages)))
			return util_fail(-EINVAL,
					 "store: transfer %zu ('%s') has NULL keys or pages", i,
					 t[i].pool ? t[i].pool : "(null)");
	return 0;
}

/* Caller buffers (bufs, one per page of the one transfer t[0]) stand in
 * for the pages of a bounce pool whose page is one object: the object is
 * built in, and read into, the pool's bounce slot, so a buffer needs no
 * alignment and may be shorter than the page. */
static int bufs_check(struct store_ctx *const *ctxs, const struct hc_pool_transfer *t, size_t nt,
		      const struct iovec *bufs, const char *what)
{
	if (!bufs)
		return 0;
	if (nt != 1)
		return util_fail(-EINVAL, "%s: one transfer with buffers, not %zu", what, nt);
	const struct store_ctx *c = ctxs[0];
	if (c->marker || c->zero_copy || !c->split || c->nobj != 1)
		return util_fail(-EINVAL,
				 "%s: pool '%s' cannot take caller buffers: it must hold one "
				 "buffer per page (a segments or indexer pool) and be registered "
				 "in bounce mode (force_bounce)",
				 what, c->name);
	for (size_t i = 0; i < t->n; i++)
		if (!bufs[i].iov_base || !bufs[i].iov_len || bufs[i].iov_len > c->obj[0].payload)
			return util_fail(-EINVAL,
					 "%s: buffer %zu (%zu bytes at %p) must be non-empty and "
					 "at most the page's %llu bytes",
					 what, i, bufs[i].iov_len, bufs[i].iov_base,
					 (unsigned long long)c->obj[0].payload);
	return 0;
}

/* Plan transfers t[0..nt) into a new op (a started one, or run_now's),
 * holding its pools (v1: the anchor) until it is over. Transfers without
 * results get ours: the outcome needs every page's. */
int store_op_plan(struct hc_store *st, struct hc_pool_transfer *t, size_t nt, enum transfer_op dir,
		  bool v1, const struct iovec *bufs, struct hc_store_op **out, const char *what)
{
	*out = NULL;
	int rc = transfers_check(t, nt, (dir == OP_SET || dir == OP_GET) && !bufs);
	if (rc)
		return rc;
	size_t extra = 0;
	for (size_t i = 0; i < nt; i++)
		if (!t[i].results)
			extra += t[i].n;
	struct hc_store_op *o = util_fault_calloc(1, sizeof(*o));
	struct hc_pool_transfer *c = util_fault_malloc((nt ? nt : 1) * sizeof(*c));
	struct store_ctx **ctxs = util_fault_malloc((nt ? nt : 1) * sizeof(*ctxs));
	if (o) {
		o->st = st;
		o->out = util_fault_malloc((nt ? nt : 1) * sizeof(*o->out));
		o->own = util_fault_malloc((extra ? extra : 1) * sizeof(*o->own));
	}
	if (!o || !c || !ctxs || !o->out || !o->own) {
		if (o)
			store_op_free(o);
		free(c);
		free(ctxs);
		return util_fail(-ENOMEM, "%s: no memory", what);
	}
	o->dir = dir;
	o->nout = nt;
	for (size_t i = 0, off = 0; i < nt; i++) {
		c[i] = t[i];
		if (!c[i].results) {
			c[i].results = o->own + off;
			off += c[i].n;
		}
		o->out[i] = (struct op_out){c[i].results, c[i].n};
	}
	rc = store_hold(st, c, nt, v1, false, ctxs, o->touched, &o->ntouched, what);
	if (!rc && v1 && dir == OP_GET && ctxs[0]->marker)
		rc = util_fail(-EINVAL,
			       "%s: the anchor '%s' is a logical pool with no data; use "
			       "hc_store_get_v2",
			       what, ctxs[0]->name);
	if (!rc)
		rc = bufs_check(ctxs, c, nt, bufs, what);
	if (!rc)
		rc = store_plan(c, nt, ctxs, v1, bufs, &o->e, &o->ne, &o->hexkeys, what);
	/* Caller buffers are the caller's to keep apart (they are not pages). */
	if (!rc && dir == OP_GET && !bufs)
		rc = store_plan_check_dests(c, nt, v1, o->e, o->ne, what);
	free(c);
	free(ctxs);
	if (rc) {
		store_op_free(o);
		return rc;
	}
	o->t0 = now_us();
	if (dir == OP_SET)
		o->ne = store_drop_skipped_writes(o->e, o->ne);
	*out = o;
	return 0;
}

/* What a started op returns, as its synchronous call would. */
int64_t store_op_outcome(const struct hc_store_op *o)
{
	if (o->dir == OP_LOOKUP || o->dir == OP_DELETE) {
		if (o->rc)
			return o->rc;
		int64_t found = 0;
		for (size_t i = 0; i < o->nout; i++)
			for (size_t j = 0; j < o->out[i].n; j++)
				found += o->out[i].results[j] == 0;
		return found;
	}
	if (o->dir == OP_GET)
		return o->rc ? o->rc : o->nout ? leading(o->out[0].results, o->out[0].n) : 0;
	int rc = o->rc;
	for (size_t i = 0; !rc && i < o->nout; i++)
		rc = set_outcome(0, o->out[i].results, o->out[i].n);
	return rc;
}

static int64_t run_now(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
		       enum transfer_op dir, bool v1, const char *what)
{
	struct hc_store_op *o;
	int rc = store_op_plan(st, t, nt, dir, v1, NULL, &o, what);
	if (rc)
		return rc;
	struct stream s = {.st = st, .dir = dir, .cur = o};
	o->left = o->ne;
	if (o->ne)
		store_stream_run(&s);
	else
		store_op_over(&s, o);
	int64_t ret = store_op_outcome(o);
	store_op_free(o);
	return ret;
}

/* Queue a planned op, starting the store's thread on first use. */
static int op_queue(struct hc_store *st, struct hc_store_op *o, const char *what)
{
	int rc;
	pthread_mutex_lock(&st->async_lock);
	if (!st->async_started) {
		/* Every signal blocked: the embedding program's handlers must not
		 * run on a thread it does not know about. */
		rc = -util_thread_start(&st->async_thread, store_async_main, st);
		if (rc) {
			pthread_mutex_unlock(&st->async_lock);
			return util_fail(-rc, "%s: cannot start the store's thread: %s", what,
					 strerror(rc));
		}
		st->async_started = true;
	}
	if (st->async_tail)
		st->async_tail->next = o;
	else
		st->async_head = o;
	st->async_tail = o;
	pthread_cond_signal(&st->async_work);
	pthread_mutex_unlock(&st->async_lock);
	return 0;
}

static int op_start(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
		    enum transfer_op dir, bool v1, const struct iovec *bufs,
		    struct hc_store_op **out, const char *what)
{
	struct hc_store_op *o;
	int rc = store_op_plan(st, t, nt, dir, v1, bufs, &o, what);
	if (!rc && (rc = op_queue(st, o, what)))
		store_op_free(o);
	*out = rc ? NULL : o;
	return rc;
}

static int op_start_v1(struct hc_store *st, const struct hc_key *keys, size_t n,
		       const uint64_t *pages, int *results, enum transfer_op dir,
		       struct hc_store_op **out, const char *what)
{
	if (!out)
		return util_fail(-EINVAL, "%s: op is NULL", what);
	*out = NULL;
	int rc = check_v1(st, keys, n, pages, what);
	if (rc)
		return rc;
	struct hc_pool_transfer t = v1_transfer(keys, NULL, n, pages, results);
	return op_start(st, &t, 1, dir, true, NULL, out, what);
}

static int op_start_v2(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
		       enum transfer_op dir, struct hc_store_op **out, const char *what)
{
	if (!out)
		return util_fail(-EINVAL, "%s: op is NULL", what);
	*out = NULL;
	if (!st || (nt && !t))
		return util_fail(-EINVAL, "%s: NULL argument", what);
	return op_start(st, t, nt, dir, false, NULL, out, what);
}

int hc_store_set_start(struct hc_store *st, const struct hc_key *keys, size_t n,
		       const uint64_t *pages, int *results, struct hc_store_op **op)
{
	return op_start_v1(st, keys, n, pages, results, OP_SET, op, "hc_store_set_start");
}

int hc_store_get_start(struct hc_store *st, const struct hc_key *keys, size_t n,
		       const uint64_t *pages, int *results, struct hc_store_op **op)
{
	return op_start_v1(st, keys, n, pages, results, OP_GET, op, "hc_store_get_start");
}

int hc_store_set_v2_start(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
			  struct hc_store_op **op)
{
	return op_start_v2(st, t, nt, OP_SET, op, "hc_store_set_v2_start");
}

int hc_store_get_v2_start(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
			  struct hc_store_op **op)
{
	return op_start_v2(st, t, nt, OP_GET, op, "hc_store_get_v2_start");
}

static int op_start_bufs(struct hc_store *st, struct hc_pool_transfer *t, const struct iovec *bufs,
			 enum transfer_op dir, struct hc_store_op **out, const char *what)
{
	if (!out)
		return util_fail(-EINVAL, "%s: op is NULL", what);
	*out = NULL;
	if (!st || !t || (t->n && !bufs))
		return util_fail(-EINVAL, "%s: NULL argument", what);
	return op_start(st, t, 1, dir, false, bufs, out, what);
}

int hc_store_set_bufs_start(struct hc_store *st, struct hc_pool_transfer *t,
			    const struct iovec *bufs, struct hc_store_op **op)
{
	return op_start_bufs(st, t, bufs, OP_SET, op, "hc_store_set_bufs_start");
}

int hc_store_get_bufs_start(struct hc_store *st, struct hc_pool_transfer *t,
			    const struct iovec *bufs, struct hc_store_op **op)
{
	return op_start_bufs(st, t, bufs, OP_GET, op, "hc_store_get_bufs_start");
}

int64_t hc_store_op_wait(struct hc_store_op *o)
{
	if (!o)
		return util_fail(-EINVAL, "hc_store_op_wait: op is NULL");
	struct hc_store *st = o->st;
	pthread_mutex_lock(&st->async_lock);
	if (o->cq) {
		pthread_mutex_unlock(&st->async_lock);
		return util_fail(-EINVAL, "hc_store_op_wait: the op belongs to a completion queue");
	}
	while (!o->done)
		pthread_cond_wait(&st->async_done, &st->async_lock);
	pthread_mutex_unlock(&st->async_lock);
	int64_t ret = store_op_outcome(o);
	store_op_free(o);
	return ret;
}

int hc_store_set_v2(struct hc_store *st, struct hc_pool_transfer *t, size_t nt)
{
	if (!st || (nt && !t))
		return util_fail(-EINVAL, "hc_store_set_v2: NULL argument");
	return (int)run_now(st, t, nt, OP_SET, false, "hc_store_set_v2");
}

int hc_store_get_v2(struct hc_store *st, struct hc_pool_transfer *t, size_t nt)
{
	if (!st || (nt && !t))
		return util_fail(-EINVAL, "hc_store_get_v2: NULL argument");
	return (int)run_now(st, t, nt, OP_GET, false, "hc_store_get_v2");
}
