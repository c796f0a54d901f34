/*
 * The request stream every engine pulls from: the bottom of src/io.
 *
 * An engine (io_uring*.c, io_threads.c) asks for one request at a time
 * (io_stream_next_req); the stream takes the feed's next array when the
 * current one is all started, validates it (bad requests get -EINVAL, the
 * rest IO_PENDING) and hands it back to the feed once the last request
 * that holds it is over (io_arr_put). The helpers that both engines share
 * to run a request (io_openat_beneath, io_iov_advance) live here too.
 *
 * It is a file of its own, apart from the engine choice in io_engine.c,
 * so that the engines depend on it and on nothing above them: it includes
 * no engine, and the engines never reach back into the front end.
 * Validation happens here, as each array is taken, so that both engines
 * see only requests they can run, and a bad request in a batch costs only
 * its own result.
 */
#define _GNU_SOURCE
#include "io/io_stream.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

int io_openat_beneath(int dirfd, const char *name, int flags, mode_t mode)
{
	/* Every open of an object or temp file passes here (fault sweeps). */
	if (util_fault_hit(HC_FAULT_OPEN)) {
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

/* ---- streams: feeds of arrays ---- */

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
		struct io_arr *a = util_fault_malloc(sizeof(*a));
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
