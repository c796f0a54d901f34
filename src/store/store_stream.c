/*
 * Streams, and the started operations.
 *
 * Every call, synchronous or started, is moved by a stream: chunks of its
 * entries (a work area each) fed to the backend, which (put_feed/get_feed)
 * keeps io_depth pages in flight across chunks, so the disk does not idle
 * while a chunk's last pages are checked and the next chunk is made.
 *
 * hc_store_*_start plans the call on the caller's thread (so a bad call
 * fails there, as the synchronous one would) and queues it. One thread per
 * store runs a stream that takes the queued ops in order while they go the
 * same way; an op is over (and its waiter woken) as soon as its own pages
 * are, while the stream goes on with the ops behind it. The caller
 * meanwhile prepares and starts the next ones. The calls that store_plan, run,
 * queue and wait for ops are in store_call.c.
 */
#define _GNU_SOURCE
#include "store/registry.h"
#include "store/store_cq.h"
#include "store/store_stats.h"
#include "store/store_stream.h"
#include "store/store_work.h"
#include "store/store_xfer.h"
#include "util/hashset.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* Op o's entries are all over: counted, and its waiter (if any) woken; o
 * may be freed by the waiter from then on. */
void store_op_over(struct stream *s, struct hc_store_op *o)
{
	stat_call(s->st, o->touched, o->ntouched, o->dir, o->t0);
	/* Nothing of the op touches its pools from here on. */
	store_release(s->st, o->touched, o->ntouched);
	o->ntouched = 0;
	if (s->cur == o)
		s->cur = NULL;
	if (!s->queue)
		return;
	for (struct hc_store_op **p = &s->live; *p; p = &(*p)->live_next) {
		if (*p == o) {
			*p = o->live_next;
			break;
		}
	}
	store_op_done(s->st, o);
}

static void op_entries_over(struct stream *s, struct hc_store_op *o, size_t k)
{
	o->left -= k;
	if (!o->left)
		store_op_over(s, o);
}

static bool same_page(const struct entry *a, const struct entry *b)
{
	if (a->ctx != b->ctx || !a->key != !b->key)
		return false; /* a name is never a key's (plan made those keys) */
	return a->key ? !memcmp(a->key, b->key, sizeof(*a->key)) : !strcmp(a->name, b->name);
}

static size_t page_hash(const struct entry *e)
{
	size_t h;
	if (e->key)
		memcpy(&h, e->key->bytes, sizeof(h));
	else
		h = (size_t)XXH3_64bits(e->name, strlen(e->name));
	return h;
}

/* Elements of the live-entry set: const struct entry pointers. */
static size_t entry_hash(const void *e)
{
	return page_hash(*(const struct entry *const *)e);
}

static bool entry_eq(const void *a, const void *b)
{
	return same_page(*(const struct entry *const *)a, *(const struct entry *const *)b);
}

/* Whether op o sets a page (pool and key) that a live op sets too. Both
 * objects would be written at once, and which one stays (page by page,
 * even object by object) would be the race's: o waits for a stream after
 * theirs instead, as if their calls had returned. */
static bool keys_overlap(const struct hc_store_op *live, const struct hc_store_op *o)
{
	size_t before = 0;
	for (const struct hc_store_op *p = live; p; p = p->live_next)
		before += p->ne;
	if (!before)
		return false;
	/* A set of the live entries; 2x room, at least 64 slots. */
	size_t cap = 64;
	while (cap < 2 * before)
		cap <<= 1;
	struct hashset set;
	if (hashset_init(&set, sizeof(const struct entry *), cap, entry_hash, entry_eq))
		return true; /* waiting is always correct */
	bool hit = false;
	for (const struct hc_store_op *p = live; p && !hit; p = p->live_next)
		for (size_t i = 0; i < p->ne && !hit; i++) {
			const struct entry *e = &p->e[i];
			hit = hashset_add(&set, &e) != 0; /* no room: wait */
		}
	for (size_t i = 0; i < o->ne && !hit; i++) {
		const struct entry *e = &o->e[i];
		hit = hashset_has(&set, &e);
	}
	hashset_free(&set);
	return hit;
}

/* The queue's head becomes the stream's op if it goes the stream's way
 * (and, for a set, writes no page a live op writes); false if not. */
static bool stream_take_op(struct stream *s)
{
	s->cur = NULL;
	if (!s->queue)
		return false;
	struct hc_store *st = s->st;
	pthread_mutex_lock(&st->async_lock);
	struct hc_store_op *o = st->async_head;
	pthread_mutex_unlock(&st->async_lock);
	/* Only this thread takes ops off the queue, and a queued op does not
	 * change: the head stays, and its keys are checked without the lock
	 * that callers starting ops wait for. */
	if (!o || o->dir != s->dir || (o->dir == OP_SET && keys_overlap(s->live, o)))
		return false;
	pthread_mutex_lock(&st->async_lock);
	st->async_head = o->next;
	if (!st->async_head)
		st->async_tail = NULL;
	o->next = NULL;
	pthread_mutex_unlock(&st->async_lock);
	o->left = o->ne;
	o->live_next = s->live;
	s->live = o;
	s->cur = o;
	s->pos = 0;
	if (!o->ne)
		store_op_over(s, o);
	return true;
}

/* The entries of op o from `from` on fail with rc (a whole-chunk error,
 * no memory): the call's outcome, and every page's that had none. */
static void op_fail_rest(struct stream *s, struct hc_store_op *o, size_t from, int rc)
{
	for (size_t j = from; j < o->ne; j++)
		if (o->e[j].result && *o->e[j].result == -ENOENT)
			*o->e[j].result = rc;
	o->rc = rc;
	s->pos = o->ne;
	op_entries_over(s, o, o->ne - from);
}

static struct work *work_of(struct store_obj *objs)
{
	return (struct work *)((char *)objs - offsetof(struct work, objs));
}

static void stream_done(struct store_feed *f, struct store_obj *objs, size_t n)
{
	(void)n;
	struct stream *s = (struct stream *)f;
	struct work *w = work_of(objs);
	struct hc_store_op *o = w->op;
	if (s->dir == OP_SET)
		store_set_chunk_finish(s->st, w, o->e);
	else
		store_get_chunk_finish(s->st, w, o->e);
	size_t k = w->to - w->from;
	s->bounced_live -= w->bounced;
	work_put(s->st, w);
	op_entries_over(s, o, k);
}

/* The next chunk: of the current op, else of the next op it may take. */
static size_t stream_next(struct store_feed *f, struct store_obj **objs)
{
	struct stream *s = (struct stream *)f;
	struct hc_store *st = s->st;
	s->paused = false;
	for (;;) {
		struct hc_store_op *o = s->cur;
		if (!o || s->pos == o->ne) {
			if (!stream_take_op(s))
				return 0;
			continue;
		}
		if (atomic_load_explicit(&o->cancel, memory_order_relaxed)) {
			op_fail_rest(s, o, s->pos, -ECANCELED);
			continue;
		}
		size_t bounce, from = s->pos, end = store_chunk_end(o->e, from, o->ne, &bounce);
		/* No more chunks with bounce slots on their way than were
		 * reserved: a work area made inside a stream costs its first
		 * touch. The feed is asked again as each chunk is over (only a
		 * stream fed to the engine has chunks on their way here). */
		if (bounce && s->bounced_live >= BOUNCE_RESERVED_WORKS) {
			s->paused = true;
			return 0;
		}
		struct work *w = work_get(st);
		int rc = !w                 ? util_fail(-ENOMEM, "store: no memory for a transfer")
			 : s->dir == OP_SET ? store_set_chunk_build(st, w, o->e, from, end, bounce)
					    : store_get_chunk_build(st, w, o->e, from, end, bounce);
		if (rc) {
			if (w)
				work_put(st, w);
			op_fail_rest(s, o, from, rc);
			continue;
		}
		w->op = o;
		w->from = from;
		w->to = end;
		w->bounced = bounce > 0;
		s->bounced_live += w->bounced;
		s->pos = end;
		if (!w->nmove) { /* every object of the chunk exists already */
			stream_done(f, w->objs, 0);
			continue;
		}
		*objs = w->objs;
		return w->nmove;
	}
}

/* Moves the stream's ops (one direction) until it has none left. */
void store_stream_run(struct stream *s)
{
	const struct store_backend_ops *ops = s->st->ops;
	s->feed = (struct store_feed){stream_next, stream_done};
	int (*feed)(void *, struct store_feed *) = s->dir == OP_SET ? ops->put_feed : ops->get_feed;
	if (feed) {
		/* A feed that ended just after it paused goes on: a read stream
		 * may see nothing in flight once its last arrivals' hooks have
		 * run, and those hooks are what ended the chunks it waited for. */
		do
			feed(s->st->be, &s->feed);
		while (s->paused);
		return;
	}
	struct store_obj *objs;
	size_t n;
	while ((n = stream_next(&s->feed, &objs))) {
		if (s->dir == OP_SET)
			ops->put(s->st->be, objs, n);
		else
			ops->get(s->st->be, objs, n);
		stream_done(&s->feed, objs, n);
	}
}

void *store_async_main(void *arg)
{
	struct hc_store *st = arg;
	pthread_mutex_lock(&st->async_lock);
	for (;;) {
		while (!st->async_head && !st->async_stop)
			pthread_cond_wait(&st->async_work, &st->async_lock);
		if (!st->async_head)
			break;
		struct stream s = {.st = st, .dir = st->async_head->dir, .queue = true};
		pthread_mutex_unlock(&st->async_lock);
		store_stream_run(&s);
		pthread_mutex_lock(&st->async_lock);
	}
	pthread_mutex_unlock(&st->async_lock);
	return NULL;
}
