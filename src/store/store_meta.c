/*
 * Lookups and deletes of pages: per page, in key order (an exists answers
 * a leading run), synchronous or started.
 *
 * Started ones run on a thread of their own, not the transfer thread: an
 * engine asks whether a block is stored while its loads run, and an answer
 * queued behind hundreds of megabytes of reads would stall its scheduler.
 * They are cheap (names and metadata, no payload), so one thread serves
 * every started lookup and delete of the store, in start order.
 */
#define _GNU_SOURCE
#include "store/names.h"
#include "store/registry.h"
#include "store/store_cq.h"
#include "store/store_meta.h"
#include "store/store_op.h"
#include "store/store_stats.h"
#include "store/store_work.h"
#include "util/thread.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A page's outcome from its objects' results: lookup 0 when every object
 * is there, -EBADMSG when one has the wrong size, else -ENOENT; delete 0
 * when one was deleted and none failed, the first other error, else
 * -ENOENT. */
static int page_result(enum transfer_op dir, const struct store_obj *objs, unsigned n)
{
	int rc = dir == OP_LOOKUP ? 0 : -ENOENT;
	for (unsigned i = 0; i < n; i++) {
		int r = objs[i].result;
		if (dir == OP_LOOKUP) {
			if (r == -EBADMSG)
				return r;
			if (r)
				rc = -ENOENT;
		} else if (r != -ENOENT) {
			if (r)
				return r;
			rc = 0;
		}
	}
	return rc;
}

/* Entries [from, to) of o, whose objects fit one work area, in one backend
 * call. 0 or a whole-chunk -errno. */
static int meta_chunk(struct hc_store *st, struct work *w, struct hc_store_op *o, size_t from,
		      size_t to)
{
	size_t k = 0;
	for (size_t i = from; i < to; i++) {
		const struct entry *e = &o->e[i];
		for (unsigned j = 0; j < e->ctx->nobj; j++, k++) {
			int rc = store_object_name(e->ctx, e->key, e->name, j, w->item[k].name);
			if (rc)
				return rc;
			w->objs[k] = (struct store_obj){.name = w->item[k].name,
							.route = hc_key_route_hash(w->item[k].name),
							.len = e->ctx->obj[j].len,
							.result = -ENOENT};
		}
	}
	if (o->dir == OP_LOOKUP) {
		st->ops->exists(st->be, w->objs, k, false);
	} else {
		int rc = st->ops->erase(st->be, w->objs, k);
		if (rc < 0)
			return rc;
	}
	k = 0;
	for (size_t i = from; i < to; i++) {
		const struct entry *e = &o->e[i];
		int r = page_result(o->dir, &w->objs[k], e->ctx->nobj);
		k += e->ctx->nobj;
		if (e->result)
			*e->result = r;
		if (o->dir == OP_LOOKUP)
			stat_add(e->ctx, st, r ? STAT(misses) : STAT(hits), 1);
		else if (r && r != -ENOENT)
			stat_add(e->ctx, st, STAT(failures), 1);
	}
	return 0;
}

/* Every entry's result, or o->rc for the whole call. */
static void meta_move(struct hc_store *st, struct hc_store_op *o)
{
	if (o->dir == OP_DELETE && !st->ops->erase) {
		o->rc = util_fail(-EOPNOTSUPP, "hc_store_delete: the %s backend cannot delete",
				  st->ops->name);
		return;
	}
	struct work *w = work_get(st);
	if (!w) {
		o->rc = util_fail(-ENOMEM, "store: no memory for a lookup");
		return;
	}
	for (size_t from = 0; from < o->ne && !o->rc;) {
		if (atomic_load_explicit(&o->cancel, memory_order_relaxed)) {
			o->rc = -ECANCELED;
			break;
		}
		size_t to = from, objs = 0;
		while (to < o->ne && objs + o->e[to].ctx->nobj <= CHUNK_OBJS)
			objs += o->e[to++].ctx->nobj;
		o->rc = meta_chunk(st, w, o, from, to);
		from = to;
	}
	work_put(st, w);
	if (o->rc == -ECANCELED)
		for (size_t i = 0; i < o->ne; i++)
			if (o->e[i].result && *o->e[i].result == -ENOENT)
				*o->e[i].result = -ECANCELED;
}

void store_meta_run(struct hc_store *st, struct hc_store_op *o)
{
	meta_move(st, o);
	store_release(st, o->touched, o->ntouched);
	o->ntouched = 0;
}

static void *meta_main(void *arg)
{
	struct hc_store *st = arg;
	pthread_mutex_lock(&st->async_lock);
	for (;;) {
		while (!st->meta_head && !st->async_stop)
			pthread_cond_wait(&st->meta_work, &st->async_lock);
		struct hc_store_op *o = st->meta_head;
		if (!o)
			break;
		st->meta_head = o->next;
		if (!st->meta_head)
			st->meta_tail = NULL;
		o->next = NULL;
		pthread_mutex_unlock(&st->async_lock);
		store_meta_run(st, o);
		store_op_done(st, o);
		pthread_mutex_lock(&st->async_lock);
	}
	pthread_mutex_unlock(&st->async_lock);
	return NULL;
}

int store_meta_queue(struct hc_store *st, struct hc_store_op *o, const char *what)
{
	pthread_mutex_lock(&st->async_lock);
	if (!st->meta_started) {
		int rc = util_thread_start(&st->meta_thread, meta_main, st);
		if (rc) {
			pthread_mutex_unlock(&st->async_lock);
			return util_fail(rc, "%s: cannot start the store's lookup thread: %s", what,
					 strerror(-rc));
		}
		st->meta_started = true;
	}
	if (st->meta_tail)
		st->meta_tail->next = o;
	else
		st->meta_head = o;
	st->meta_tail = o;
	pthread_cond_signal(&st->meta_work);
	pthread_mutex_unlock(&st->async_lock);
	return 0;
}

void store_meta_stop(struct hc_store *st)
{
	pthread_mutex_lock(&st->async_lock);
	st->async_stop = true;
	pthread_cond_broadcast(&st->meta_work);
	pthread_mutex_unlock(&st->async_lock);
	if (st->meta_started)
		pthread_join(st->meta_thread, NULL);
	st->meta_started = false;
}

static int meta_check(struct hc_store *st, struct hc_pool_transfer *t, size_t nt, const char *what)
{
	if (!st || (nt && !t))
		return util_fail(-EINVAL, "%s: NULL argument", what);
	return 0;
}

static int64_t meta_now(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
			enum transfer_op dir, const char *what)
{
	int rc = meta_check(st, t, nt, what);
	struct hc_store_op *o = NULL;
	if (!rc)
		rc = store_op_plan(st, t, nt, dir, false, NULL, &o, what);
	if (rc)
		return rc;
	store_meta_run(st, o);
	int64_t ret = store_op_outcome(o);
	store_op_free(o);
	return ret;
}

static int meta_start(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
		      enum transfer_op dir, struct hc_store_op **out, const char *what)
{
	if (!out)
		return util_fail(-EINVAL, "%s: op is NULL", what);
	*out = NULL;
	int rc = meta_check(st, t, nt, what);
	struct hc_store_op *o = NULL;
	if (!rc)
		rc = store_op_plan(st, t, nt, dir, false, NULL, &o, what);
	if (!rc && (rc = store_meta_queue(st, o, what)))
		store_op_free(o);
	if (!rc)
		*out = o;
	return rc;
}

int64_t hc_store_lookup(struct hc_store *st, struct hc_pool_transfer *t, size_t nt)
{
	return meta_now(st, t, nt, OP_LOOKUP, "hc_store_lookup");
}

int64_t hc_store_delete(struct hc_store *st, struct hc_pool_transfer *t, size_t nt)
{
	return meta_now(st, t, nt, OP_DELETE, "hc_store_delete");
}

int hc_store_lookup_start(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
			  struct hc_store_op **op)
{
	return meta_start(st, t, nt, OP_LOOKUP, op, "hc_store_lookup_start");
}

int hc_store_delete_start(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
			  struct hc_store_op **op)
{
	return meta_start(st, t, nt, OP_DELETE, op, "hc_store_delete_start");
}
