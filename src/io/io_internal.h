/*
 * Private to src/io: what the front end (io_engine.c) shares with the two
 * engines (io_uring.c, io_threads.c).
 *
 * The front end validates every request first. A request that passed has
 * result == IO_PENDING; an engine runs exactly those and overwrites their
 * result, and leaves every other request alone. An engine batch function
 * returns 0 once it has started on the batch, or -errno when it could not
 * start at all (no ring, no memory); the front end then sets every result.
 */
#ifndef HC_SRC_IO_INTERNAL_H
#define HC_SRC_IO_INTERNAL_H

#include "io/io.h"

#include <errno.h>
#include <limits.h>
#include <sys/uio.h>

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

#define IO_DEFAULT_DEPTH 64
/* The sparse file table must stay under RLIMIT_NOFILE (the kernel refuses
 * a larger one with EMFILE), and the SQ holds 4 entries per page. */
#define IO_MAX_DEPTH 4096
#define IO_DEFAULT_THREADS 8
#define IO_MAX_THREADS 1024

struct io_ring_pool;
struct io_workers;

struct io_engine {
	enum io_engine_kind kind; /* URING or THREADS, never AUTO */
	unsigned depth;
	struct io_ring_pool *rings; /* kind URING */
	struct io_workers *workers; /* kind THREADS */
};

/* io_uring.c. create probes the kernel: on failure it returns -errno and
 * writes the reason to why (never calls util_fail: AUTO only logs it). */
int io_ring_pool_create(unsigned depth, struct io_ring_pool **out, char *why, size_t why_len);
void io_ring_pool_destroy(struct io_ring_pool *p);
int io_ring_pool_write(struct io_ring_pool *p, struct io_write_req *reqs, size_t n);
int io_ring_pool_read(struct io_ring_pool *p, struct io_read_req *reqs, size_t n);

/* Test hook: how io_uring.c submits (io_uring_submit). A test may swap in
 * a function that makes the kernel take fewer SQEs, to reach the cut-chain
 * path. Not thread-safe; set it before any batch runs. */
struct io_uring;
extern int (*io_ring_submit_fn)(struct io_uring *ring);

/* io_threads.c */
int io_workers_create(unsigned threads, struct io_workers **out);
void io_workers_destroy(struct io_workers *w);
int io_workers_write(struct io_workers *w, struct io_write_req *reqs, size_t n);
int io_workers_read(struct io_workers *w, struct io_read_req *reqs, size_t n);

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
