/*
 * io front end: engine choice, request validation, dispatch to the engine,
 * and the stat batch (the same code for both engines).
 *
 *   io_write_batch / io_read_batch (a feed of one array), io_*_feed
 *        |  validate every array the feed gives (bad requests get -EINVAL,
 *        |  the rest IO_PENDING)
 *        v
 *   io_ring_pool_*  (io_uring.c: up to queue_depth chains in flight, refilled as they end)
 *   io_workers_*    (io_threads.c: worker pool, one page at a time per worker)
 *
 * Validation happens here so that both engines see only requests they can
 * run, and so that a bad request in a batch costs only its own result.
 */
#define _GNU_SOURCE
#include "io/io_internal.h"
#include "util/util.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int io_openat_beneath(int dirfd, const char *name, int flags, mode_t mode)
{
	/* Every open of an object or temp file passes here (fault sweeps). */
	if (hc_fault_hit(HC_FAULT_OPEN)) {
		errno = EIO;
		return -1;
	}
	static _Atomic bool no_openat2;
	if (!atomic_load_explicit(&no_openat2, memory_order_relaxed)) {
		struct open_how how = {.flags = (uint64_t)flags,
				       .mode = flags & O_CREAT ? mode : 0,
				       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
		int fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
		if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
			return fd;
		atomic_store_explicit(&no_openat2, true, memory_order_relaxed);
	}
	/* Before 5.6 (or under a seccomp filter without openat2): the last
	 * component at least. */
	return openat(dirfd, name, flags | O_NOFOLLOW, mode);
}

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

	struct io_engine *e = hc_fault_calloc(1, sizeof(*e));
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

unsigned io_iov_advance(const struct iovec *src, unsigned cnt, size_t skip, struct iovec *dst)
{
	unsigned out = 0;
	for (unsigned i = 0; i < cnt; i++) {
		size_t l = src[i].iov_len;
		if (skip >= l) {
			skip -= l;
			continue;
		}
		dst[out].iov_base = (char *)src[i].iov_base + skip;
		dst[out].iov_len = l - skip;
		skip = 0;
		out++;
	}
	return out;
}

/* iov[0..cnt) holds exactly len bytes: a mismatch would make the result
 * (compared with len) meaningless. */
static bool io_iov_ok(const struct iovec *iov, unsigned cnt, unsigned max_cnt, size_t len)
{
	if (cnt > max_cnt || (cnt && !iov) || len > IO_MAX_LEN)
		return false;
	size_t sum = 0;
	for (unsigned i = 0; i < cnt; i++) {
		if (iov[i].iov_len > len - sum || (!iov[i].iov_base && iov[i].iov_len))
			return false;
		sum += iov[i].iov_len;
	}
	return sum == len;
}

/* One request: pending when named and its iovecs hold len, else -EINVAL
 * (the first of a batch said, what naming its direction). Returns whether
 * it is left to run. */
static bool io_req_ok(int *result, bool named, const struct iovec *iov, unsigned cnt,
		      unsigned max_cnt, size_t len, size_t i, const char *what, bool *said)
{
	*result = IO_PENDING;
	if (named && io_iov_ok(iov, cnt, max_cnt, len))
		return true;
	*result = -EINVAL;
	if (!*said)
		util_fail(-EINVAL,
			  "io: %s request %zu is invalid (NULL name, iovecs not adding up "
			  "to len %zu, more than %u iovecs, or len above %zu)",
			  what, i, len, max_cnt, IO_MAX_LEN);
	*said = true;
	return false;
}

/* Returns how many requests are left to run. */
static size_t io_validate_writes(struct io_write_req *reqs, size_t n)
{
	size_t ok = 0;
	bool said = false;
	for (size_t i = 0; i < n; i++) {
		struct io_write_req *q = &reqs[i];
		ok += io_req_ok(&q->result, q->tmp_name && q->final_name, q->iov, q->iovcnt,
				IO_MAX_IOV, q->len, i, "write", &said);
	}
	return ok;
}

static size_t io_validate_reads(struct io_read_req *reqs, size_t n)
{
	size_t ok = 0;
	bool said = false;
	for (size_t i = 0; i < n; i++) {
		struct io_read_req *q = &reqs[i];
		ok += io_req_ok(&q->result, q->name, q->iov, q->iovcnt, IO_MAX_IOV - 1, q->len, i,
				"read", &said);
	}
	return ok;
}

/* ---- streams: feeds of arrays, and batches as one-array feeds ---- */

static size_t io_validate(const struct io_stream *s, void *reqs, size_t n)
{
	return s->write ? io_validate_writes(reqs, n) : io_validate_reads(reqs, n);
}

/* The feed's next array, validated, or NULL when it has none now. */
static struct io_arr *io_stream_take(struct io_stream *s)
{
	void *reqs;
	size_t n;
	while ((n = s->feed->next(s->feed, &reqs))) {
		struct io_arr *a = hc_fault_malloc(sizeof(*a));
		if (!a) {
			for (size_t i = 0; i < n; i++)
				*io_req_result(s, (char *)reqs + i * s->req_size) = -ENOMEM;
			s->feed->done(s->feed, reqs, n);
			continue;
		}
		io_validate(s, reqs, n);
		*a = (struct io_arr){.reqs = reqs, .n = n, .holds = n};
		return a;
	}
	return NULL;
}

void io_arr_put(struct io_stream *s, struct io_arr *a)
{
	if (--a->holds)
		return;
	if (s->cur == a)
		s->cur = NULL;
	s->feed->done(s->feed, a->reqs, a->n);
	free(a);
}

void *io_stream_next_req(struct io_stream *s, struct io_arr **arr)
{
	for (;;) {
		if (!s->cur && !(s->cur = io_stream_take(s)))
			return NULL;
		struct io_arr *a = s->cur;
		void *q = (char *)a->reqs + a->next++ * s->req_size;
		if (a->next == a->n)
			s->cur = NULL;
		if (*io_req_result(s, q) != IO_PENDING) {
			io_arr_put(s, a);
			continue;
		}
		*arr = a;
		return q;
	}
}

void io_stream_fail_rest(struct io_stream *s, int rc)
{
	void *q;
	struct io_arr *a;
	while (s->ready_head != s->ready_tail) {
		struct io_taken *t = &s->ready[s->ready_head++];
		*io_req_result(s, t->q) = rc;
		io_arr_put(s, t->arr);
	}
	while ((q = io_stream_next_req(s, &a))) {
		*io_req_result(s, q) = rc;
		io_arr_put(s, a);
	}
}

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
 * measurement (IO-URING-NOTES.md; bench/io_batch.c prints both):
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
