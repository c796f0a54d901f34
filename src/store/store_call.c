/*
 * The transfer calls: v1 (the anchor, keys or names) and v2 (transfers
 * over pools), synchronous (run here as one stream) or started (planned
 * here, queued for the store's thread, waited for).
 */
#define _GNU_SOURCE
#include "store/store_op.h"
#include "store/store_stream.h"
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
