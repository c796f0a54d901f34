/*
 * Private to src/io, its bottom layer: the request stream (io_stream.c)
 * that both engines (io_uring*.c, io_threads.c) pull requests from, and
 * the helpers they share to run one.
 *
 * It is a header of its own, apart from io_internal.h, so that an engine
 * can include what it runs on without seeing the other engine or the
 * front end that chooses between them: nothing here names an engine.
 *
 * The stream validates every request first. A request that passed has
 * result == IO_PENDING; an engine runs exactly those and overwrites their
 * result, and leaves every other request alone. An engine's stream
 * function returns 0 once it has started on the stream, or -errno when it
 * could not start at all (no ring, no memory); the front end then sets
 * every result.
 */
#ifndef HC_SRC_IO_STREAM_H
#define HC_SRC_IO_STREAM_H

#include "io/io.h"

#include <errno.h>
#include <sys/types.h>
#include <sys/uio.h>

/* openat of name below dirfd following no symlink (see io.h); -1 and
 * errno on failure. */
int io_openat_beneath(int dirfd, const char *name, int flags, mode_t mode);

/* Never a final result: those are 0 or negative. */
#define IO_PENDING 1

/* The engine-owned tail of every read: a file longer than len spills into
 * it, which is how a longer file is told from an exact one in one read.
 * 4096 keeps it valid for O_DIRECT on any sector size up to 4Kn. */
#define IO_SCRATCH 4096

/* One read/write moves at most MAX_RW_COUNT (INT_MAX rounded down to a
 * page) bytes, and an io_uring result is an int; a read asks for len plus
 * the scratch block. Pages are far smaller; this only keeps the arithmetic
 * honest. */
#define IO_MAX_LEN ((size_t)0x7ffff000 - 2 * IO_SCRATCH)

/* A read needs one iovec more than the caller's, for the scratch block. */
#define IO_MAX_IOV 1024 /* UIO_MAXIOV, the kernel's IOV_MAX */

/* An array from a feed while an engine holds it. */
struct io_arr {
	void *reqs;
	size_t n;
	size_t next;  /* first request not started */
	size_t holds; /* requests not over, plus read hooks queued */
};

/* A request taken from its array, waiting for a slot. */
struct io_taken {
	void *q;
	struct io_arr *arr;
};

/* A feed as the engines see it: arrays validated as they are taken. */
struct io_stream {
	struct io_feed *feed;
	bool write;
	size_t req_size;
	size_t result_off;
	struct io_arr *cur; /* requests left to start; NULL: ask the feed */
	/* io_uring writes: requests already prepared (io_write_req.prepare
	 * ran) while every slot was busy, to start first, in order */
	struct io_taken *ready;
	unsigned ready_cap, ready_head, ready_tail;
};

/* The next request to start (its array in *arr, holding it), or NULL when
 * the feed has none now. Requests that are not IO_PENDING are over at once. */
void *io_stream_next_req(struct io_stream *s, struct io_arr **arr);
/* One hold on a is over; the last one hands the array back. */
void io_arr_put(struct io_stream *s, struct io_arr *a);
/* Every request not started yet (prepared ones, this array's and the
 * feed's later ones) gets rc, and each array goes back. */
void io_stream_fail_rest(struct io_stream *s, int rc);
static inline int *io_req_result(const struct io_stream *s, void *req)
{
	return (int *)((char *)req + s->result_off);
}

/* Copy src[0..cnt) minus its first skip bytes into dst (room for cnt
 * entries); returns the number of entries written. */
unsigned io_iov_advance(const struct iovec *src, unsigned cnt, size_t skip, struct iovec *dst);

/* Map a read's byte count to its result: exactly len is 0. */
static inline int io_read_result(long long got, size_t len)
{
	if (got < 0)
		return (int)got;
	if ((unsigned long long)got == len)
		return 0;
	return (unsigned long long)got < len ? -ENODATA : -EFBIG;
}

#endif
