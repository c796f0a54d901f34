/*
 * io front end, the top of src/io: engine choice, dispatch of a feed or a
 * batch to the engine, and the stat batch (the same code for both engines).
 *
 *   io_write_batch / io_read_batch (a feed of one array), io_*_feed
 *        |  a stream over the feed (io_stream.c: each array the feed gives
 *        |  is validated as it is taken; bad requests get -EINVAL, the
 *        |  rest IO_PENDING)
 *        v
 *   io_ring_pool_*  (io_uring.c: up to queue_depth chains in flight, refilled as they end)
 *   io_workers_*    (io_threads.c: worker pool, one page at a time per worker)
 *
 * This is the one file that knows both engines (their creation functions
 * come in through io_internal.h); the engines know only the stream below
 * them, so the choice sits above what it chooses between.
 */
#define _GNU_SOURCE
#include "io/io_internal.h"
#include "util/util.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *io_engine_kind_name(enum io_engine_kind kind)
{
	switch (kind) {
	case IO_ENGINE_AUTO:
		return "auto";
	case IO_ENGINE_URING:
		return "uring";
	case IO_ENGINE_THREADS:
		return "threads";
	}
	return "unknown";
}

int io_engine_parse_kind(const char *text, enum io_engine_kind *out)
{
	if (!text || !out)
		return -EINVAL;
	if (!*text || !strcmp(text, "auto"))
		*out = IO_ENGINE_AUTO;
	else if (!strcmp(text, "uring"))
		*out = IO_ENGINE_URING;
	else if (!strcmp(text, "threads"))
		*out = IO_ENGINE_THREADS;
	else
		return -EINVAL;
	return 0;
}

enum io_engine_kind io_engine_kind(const struct io_engine *e)
{
	return e ? e->kind : IO_ENGINE_AUTO;
}

int io_engine_create(const struct io_engine_opts *opts, struct io_engine **out)
{
	if (!out)
		return util_fail(-EINVAL, "io_engine_create: out is NULL");
	*out = NULL;
	struct io_engine_opts o = {.kind = IO_ENGINE_AUTO};
	if (opts)
		o = *opts;
	if (o.kind != IO_ENGINE_AUTO && o.kind != IO_ENGINE_URING && o.kind != IO_ENGINE_THREADS)
		return util_fail(-EINVAL, "io: unknown engine kind %d", (int)o.kind);
	unsigned depth = o.queue_depth ? o.queue_depth : IO_DEFAULT_DEPTH;
	unsigned threads = o.threads ? o.threads : IO_DEFAULT_THREADS;
	if (depth > IO_MAX_DEPTH)
		return util_fail(-EINVAL, "io: queue_depth %u is above the maximum %u", depth,
				 IO_MAX_DEPTH);
	if (threads > IO_MAX_THREADS)
		return util_fail(-EINVAL, "io: %u threads is above the maximum %u", threads,
				 IO_MAX_THREADS);

	struct io_engine *e = util_fault_calloc(1, sizeof(*e));
	if (!e)
		return util_fail(-ENOMEM, "io: no memory for the engine");
	e->depth = depth;

	int rc;
	if (o.kind != IO_ENGINE_THREADS) {
		char why[256] = "";
		rc = io_ring_pool_create(depth, &e->rings, why, sizeof(why));
		if (rc == 0) {
			e->kind = IO_ENGINE_URING;
			*out = e;
			log_debug("io: io_uring engine, %u pages per submission", depth);
			return 0;
		}
		if (o.kind == IO_ENGINE_URING) {
			free(e);
			return util_fail(rc, "io: io_uring engine unavailable: %s", why);
		}
		log_info("io: io_uring unavailable (%s); using %u worker threads", why, threads);
	}
	rc = io_workers_create(threads, &e->workers);
	if (rc) {
		free(e);
		return rc; /* io_workers_create said why */
	}
	e->kind = IO_ENGINE_THREADS;
	*out = e;
	return 0;
}

void io_engine_destroy(struct io_engine *e)
{
	if (!e)
		return;
	io_ring_pool_destroy(e->rings);
	io_workers_destroy(e->workers);
	free(e);
}

/* ---- dispatch: feeds, and batches as one-array feeds ---- */

static int io_run(struct io_engine *e, struct io_feed *f, bool write, const char *what)
{
	if (!f || !f->next || !f->done)
		return util_fail(-EINVAL, "%s: feed is NULL or incomplete", what);
	struct io_stream s = {
		.feed = f,
		.write = write,
		.req_size = write ? sizeof(struct io_write_req) : sizeof(struct io_read_req),
		.result_off = write ? offsetof(struct io_write_req, result)
				    : offsetof(struct io_read_req, result),
	};
	int rc;
	if (!e)
		rc = util_fail(-EINVAL, "%s: engine is NULL", what);
	else
		rc = e->rings ? io_ring_pool_stream(e->rings, &s)
			      : io_workers_stream(e->workers, &s);
	if (rc)
		io_stream_fail_rest(&s, rc);
	free(s.ready);
	return rc;
}

int io_write_feed(struct io_engine *e, struct io_feed *f)
{
	return io_run(e, f, true, "io_write_feed");
}

int io_read_feed(struct io_engine *e, struct io_feed *f)
{
	return io_run(e, f, false, "io_read_feed");
}

/* A batch: a feed of one array. */
struct io_once {
	struct io_feed feed;
	void *reqs;
	size_t n;
};

static size_t io_once_next(struct io_feed *f, void **reqs)
{
	struct io_once *o = (struct io_once *)f;
	size_t n = o->n;
	*reqs = o->reqs;
	o->n = 0;
	return n;
}

static void io_once_done(struct io_feed *f, void *reqs, size_t n)
{
	(void)f, (void)reqs, (void)n;
}

static int io_batch(struct io_engine *e, void *reqs, size_t n, bool write, const char *what)
{
	if (n == 0)
		return 0;
	if (!reqs)
		return util_fail(-EINVAL, "%s: reqs is NULL", what);
	struct io_once o = {{io_once_next, io_once_done}, reqs, n};
	return io_run(e, &o.feed, write, what);
}

int io_write_batch(struct io_engine *e, struct io_write_req *reqs, size_t n)
{
	return io_batch(e, reqs, n, true, "io_write_batch");
}

int io_read_batch(struct io_engine *e, struct io_read_req *reqs, size_t n)
{
	return io_batch(e, reqs, n, false, "io_read_batch");
}

/*
 * A plain fstatat loop, for both engines, chosen over io_uring statx by
 * measurement (bench/io_batch.c prints both; docs/PERFORMANCE-HISTORY.md):
 *   - warm dentries, quiet machine (the notes): the loop costs 0.4-1 us per
 *     name, io_uring statx 2.4-4 us, because the kernel punts every statx to
 *     an io-wq worker;
 *   - warm, the same VM under load 4-5 on 2 vCPUs (bench, median of 15):
 *     loop 1.9-3.6 us, io_uring 0.8-2 us per name at batch 16-256. There a
 *     bare getppid() cost 2-4 us: what io_uring saved was syscall entries
 *     made dear by contention, not work;
 *   - cold dentries (the notes): io_uring 4.5 ms against 13 ms for 128 names,
 *     its lookups overlap.
 * A cache checks pages it recently wrote or read, so warm and uncontended
 * is the case to serve; and stop_at_miss is sequential by nature: the loop
 * stops at the first miss, a submitted batch looks up every name. Should
 * cold lookups come to dominate (e.g. a large store right after start),
 * io_uring statx in waves is the alternative.
 */
int64_t io_stat_batch(struct io_engine *e, struct io_stat_req *reqs, size_t n, bool stop_at_miss)
{
	if (n == 0)
		return 0;
	if (!reqs)
		return util_fail(-EINVAL, "io_stat_batch: reqs is NULL");
	if (!e) {
		for (size_t i = 0; i < n; i++)
			reqs[i].result = -EINVAL;
		return util_fail(-EINVAL, "io_stat_batch: engine is NULL");
	}
	int64_t hits = 0;
	bool missed = false;
	for (size_t i = 0; i < n; i++) {
		struct io_stat_req *q = &reqs[i];
		q->size = 0;
		q->mtime_ns = 0;
		if (missed && stop_at_miss) {
			q->result = -ENOENT;
			continue;
		}
		struct stat st;
		if (!q->name)
			q->result = -EINVAL;
		else if (fstatat(q->dirfd, q->name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			q->result = -errno;
		else if (!S_ISREG(st.st_mode))
			q->result = -ENOENT; /* a symlink or a dir is no object */
		else {
			q->result = 0;
			q->size = (uint64_t)st.st_size;
			q->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		}
		if (q->result)
			missed = true;
		else if (!missed)
			hits++;
	}
	return hits;
}
