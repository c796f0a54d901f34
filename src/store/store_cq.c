/*
 * Started operations that finish on their own: a non-blocking poll of one
 * op, cancellation, and completion queues.
 *
 * A queue keeps the ops handed to it on one of two lists, both under the
 * store's async_lock (the lock every finishing op already takes): running
 * (not done) and finished (done, not reaped, in finish order). Its eventfd
 * is written when the finished list goes from empty to not empty and read
 * (cleared) when a reap empties it, both under the lock, so the fd is
 * readable exactly while something waits to be reaped: a caller that polls
 * the fd never misses a completion and never spins on a stale one.
 */
#define _GNU_SOURCE
#include "store/store_cq.h"
#include "store/store_op.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct op_list {
	struct hc_store_op *head, *tail;
};

struct hc_store_cq {
	struct hc_store *st;
	int efd;
	struct op_list running, finished;
	size_t pending; /* submitted, not reaped */
	bool closing;
};

static void list_append(struct op_list *l, struct hc_store_op *o)
{
	o->cq_next = NULL;
	o->cq_prev = l->tail;
	if (l->tail)
		l->tail->cq_next = o;
	else
		l->head = o;
	l->tail = o;
}

static void list_remove(struct op_list *l, struct hc_store_op *o)
{
	struct hc_store_op *prev = o->cq_prev;
	if (prev)
		prev->cq_next = o->cq_next;
	else
		l->head = o->cq_next;
	if (o->cq_next)
		o->cq_next->cq_prev = prev;
	else
		l->tail = prev;
	o->cq_next = NULL;
	o->cq_prev = NULL;
}

/* A finished op joins the queue's finished list; the fd is told when the
 * list was empty. Under async_lock. */
static void cq_finish(struct hc_store_cq *q, struct hc_store_op *o)
{
	bool was_empty = !q->finished.head;
	list_append(&q->finished, o);
	if (was_empty) {
		uint64_t one = 1;
		/* Cannot fail short of a counter at 2^64 - 2, which reaping
		 * keeps at 0 or 1. */
		if (write(q->efd, &one, sizeof(one)) != (ssize_t)sizeof(one))
			util_log(HC_LOG_ERROR, "store: completion queue eventfd: %s",
				 strerror(errno));
	}
}

void store_op_done(struct hc_store *st, struct hc_store_op *o)
{
	pthread_mutex_lock(&st->async_lock);
	o->done = true;
	if (o->cq) {
		list_remove(&o->cq->running, o);
		cq_finish(o->cq, o);
	}
	pthread_cond_broadcast(&st->async_done);
	pthread_mutex_unlock(&st->async_lock);
}

int hc_store_op_poll(struct hc_store_op *o)
{
	if (!o)
		return util_fail(-EINVAL, "hc_store_op_poll: op is NULL");
	pthread_mutex_lock(&o->st->async_lock);
	int rc = o->cq ? -EINVAL : o->done;
	pthread_mutex_unlock(&o->st->async_lock);
	if (rc < 0)
		return util_fail(rc, "hc_store_op_poll: the op belongs to a completion queue");
	return rc;
}

int hc_store_op_cancel(struct hc_store_op *o)
{
	if (!o)
		return util_fail(-EINVAL, "hc_store_op_cancel: op is NULL");
	atomic_store(&o->cancel, true);
	return 0;
}

int hc_store_cq_open(struct hc_store *st, struct hc_store_cq **out)
{
	if (!out)
		return util_fail(-EINVAL, "hc_store_cq_open: out is NULL");
	*out = NULL;
	if (!st)
		return util_fail(-EINVAL, "hc_store_cq_open: store is NULL");
	struct hc_store_cq *q = util_fault_calloc(1, sizeof(*q));
	if (!q)
		return util_fail(-ENOMEM, "hc_store_cq_open: no memory");
	q->st = st;
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->efd < 0) {
		int rc = -errno;
		free(q);
		return util_fail(rc, "hc_store_cq_open: eventfd: %s", strerror(-rc));
	}
	*out = q;
	return 0;
}

int hc_store_cq_fd(const struct hc_store_cq *q)
{
	if (!q)
		return util_fail(-EINVAL, "hc_store_cq_fd: queue is NULL");
	return q->efd;
}

int hc_store_op_submit(struct hc_store_cq *q, struct hc_store_op *o, uint64_t user_data)
{
	if (!q || !o)
		return util_fail(-EINVAL, "hc_store_op_submit: NULL %s", q ? "op" : "queue");
	if (o->st != q->st)
		return util_fail(-EINVAL, "hc_store_op_submit: the op is another store's");
	struct hc_store *st = q->st;
	pthread_mutex_lock(&st->async_lock);
	const char *why = q->closing ? "the queue is closing"
			  : o->cq    ? "the op was submitted already"
				     : NULL;
	if (!why) {
		o->cq = q;
		o->user_data = user_data;
		q->pending++;
		if (o->done)
			cq_finish(q, o);
		else
			list_append(&q->running, o);
	}
	pthread_mutex_unlock(&st->async_lock);
	if (why)
		return util_fail(-EINVAL, "hc_store_op_submit: %s", why);
	return 0;
}

size_t hc_store_cq_reap(struct hc_store_cq *q, struct hc_store_cqe *out, size_t max)
{
	if (!q || (max && !out))
		return 0;
	struct hc_store *st = q->st;
	struct hc_store_op *taken = NULL, **tail = &taken;
	size_t n = 0;
	pthread_mutex_lock(&st->async_lock);
	while (n < max && q->finished.head) {
		struct hc_store_op *o = q->finished.head;
		list_remove(&q->finished, o);
		*tail = o;
		tail = &o->cq_next;
		n++;
	}
	q->pending -= n;
	if (n && !q->finished.head) {
		uint64_t v;
		/* EAGAIN only if nothing was written, which n > 0 rules out. */
		if (read(q->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			util_log(HC_LOG_ERROR, "store: completion queue eventfd: %s",
				 strerror(errno));
	}
	pthread_mutex_unlock(&st->async_lock);
	/* Done ops no longer touch the store: outcome and free without the lock. */
	size_t i = 0;
	for (struct hc_store_op *o = taken, *next; o; o = next, i++) {
		next = o->cq_next;
		out[i] = (struct hc_store_cqe){o->user_data, store_op_outcome(o)};
		store_op_free(o);
	}
	return n;
}

size_t hc_store_cq_pending(struct hc_store_cq *q)
{
	if (!q)
		return 0;
	pthread_mutex_lock(&q->st->async_lock);
	size_t n = q->pending;
	pthread_mutex_unlock(&q->st->async_lock);
	return n;
}

void hc_store_cq_close(struct hc_store_cq *q)
{
	if (!q)
		return;
	struct hc_store *st = q->st;
	pthread_mutex_lock(&st->async_lock);
	q->closing = true;
	for (struct hc_store_op *o = q->running.head; o; o = o->cq_next)
		atomic_store(&o->cancel, true);
	while (q->running.head)
		pthread_cond_wait(&st->async_done, &st->async_lock);
	struct hc_store_op *left = q->finished.head;
	q->finished.head = q->finished.tail = NULL;
	pthread_mutex_unlock(&st->async_lock);
	for (struct hc_store_op *o = left, *next; o; o = next) {
		next = o->cq_next;
		store_op_free(o);
	}
	close(q->efd);
	free(q);
}
