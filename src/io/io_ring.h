/*
 * Private to the io_uring engine (io_uring.c: ring set-up, probe and pool;
 * io_uring_chain.c: submit, cut chains, quiesce, clean-up and the slots of
 * a stream; io_uring_write.c and io_uring_read.c: the two streams).
 *
 * What all four share: the ring, its pages and the inline chain helpers.
 * It is named for the ring, not for io_uring.c, because it sits below
 * every file of the engine, io_uring.c included, whose pool runs the two
 * streams on top of it. The engine's entry points are in
 * io_uring_engine.h; the request stream it pulls from is io_stream.h.
 *
 * io_uring engine: each page is one chain of linked requests, and up to
 * queue_depth chains are in flight at once. A batch streams through the
 * ring: a chain's slot takes the next page as soon as its chain is over
 * (fio's way), so the disk does not idle while the slowest page of a
 * chunk finishes, and one submission carries every chain that is ready.
 *
 *   write  open_direct(tmp)  --LINK,SKIP-->  writev(slot)  --LINK,SKIP-->
 *          close_direct(slot)  --LINK,SKIP-->  renameat(tmp, final)
 *   read   open_direct(name)  --LINK,SKIP-->  readv(slot, iov + scratch)
 *          --HARDLINK-->  close_direct(slot)
 *
 * The slot of a page is a free index in a sparse file table registered
 * once per ring; a slot is reused only after its chain posted its last
 * CQE (a failed chain's slot only after its clean-up). CQE_SKIP_SUCCESS on a step that fails makes the
 * kernel post that step's CQE and nothing for the cancelled rest, so:
 *   - a write chain posts exactly one CQE: the rename's (0 = published) or
 *     that of the first failing step;
 *   - a read chain posts the open's CQE when the open fails, else the
 *     read's and the close's. The close is counted on purpose: an
 *     uncounted close still pending would close the file of the next
 *     page (or call) put into the same slot.
 * A failed chain leaves its slot open (the close was cancelled) and its
 * temp file on disk, so every failed page gets a clean-up once nothing
 * else is in flight: close_direct(slot) and unlinkat(tmp), both counted.
 *
 * Per-request hooks: a write's prepare runs before its chain is queued:
 * while every slot is busy, for the next requests (so that slots that free
 * take them at once, in one submit), else when the page gets its slot (and
 * then what is ready is submitted every IO_SUBMIT_BYTES, so the caller's
 * work on the next pages overlaps the disk). A read's arrived runs once its
 * read CQE shows the whole file, after the freed slots were refilled, one
 * page at a time: between two pages' hooks, completions that came in are
 * reaped and their slots refilled, so a burst of arrivals whose hooks take
 * long (checksums) never leaves the disk without work.
 *
 * A call runs a stream: the front end's feed gives arrays of requests, and
 * the stream asks for the next one whenever a slot is free and the current
 * one is all started, so there is no drain between arrays. A slot holds its
 * request's array until the chain is over (after a failed chain, until its
 * clean-up); the last hold hands the array back.
 *
 * A short write is a failure for the link, but the slot is still open with
 * the bytes so far, so the page is resumed with writev at the offset
 * reached -> close -> rename, like the thread engine's pwritev loop. Both
 * engines thus report the error the kernel gave (e.g. -ENOSPC) rather
 * than a bare short count.
 *
 * user_data = generation << 32 | slot << 8 | step. The generation changes
 * per stream, so a completion that belongs to an earlier call can never be
 * taken for one of this call.
 *
 * Setting a ring up (the SQ and CQ memory, the sparse file table) costs
 * more than a small batch, so each engine keeps a pool of them; a call
 * holds one ring for its whole batch. Rings are created on demand, at most
 * IO_RING_POOL_MAX; more concurrent callers wait for one to come back.
 *
 * Caveats:
 *   - A temp name that exists already fails the O_EXCL open: the page gets
 *     -EBUSY (not -EEXIST, which means the final name) and that file is
 *     left alone: it may be another writer's live temp file (the caller
 *     retries under another name). Only a temp file this chain created is
 *     ever removed.
 *   - O_CLOEXEC is not passed to the direct opens: a fixed file has no fd
 *     to close on exec, and the kernel rejects the flag with a file slot.
 *   - Fault injection (util/fault.h, for the fault sweeps): the ops run
 *     in the kernel, so a fault point that hits while a chain is prepared
 *     makes the kernel fail that step for real: the open and the rename
 *     get dirfd -1, the readv or writev a fixed-file slot past the table,
 *     all refused with -EBADF before they touch a file. The page records
 *     the step (inject) and its completion reports -EIO, as the thread
 *     engine's injected failures do; the chain's own cancellation and the
 *     clean-up (close_direct, unlink of the temp file) run as for any
 *     failure.
 *   - With SUBMIT_ALL the kernel takes fewer SQEs than offered only when it
 *     cannot allocate requests. If that cuts a chain, the rest of the chain
 *     is turned into NOPs (it must never run on its own: a lone close ->
 *     rename could publish a partial file), the page fails with -EIO, the
 *     ring waits until nothing is in flight, cleans up and is discarded.
 */
#ifndef HC_SRC_IO_RING_H
#define HC_SRC_IO_RING_H

#include "io/io_stream.h"
#include "io/io_uring_engine.h"
#include "util/fault.h"

#include <linux/openat2.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>

enum io_step {
	IO_STEP_OPEN = 1,
	IO_STEP_RW,
	IO_STEP_CLOSE,
	IO_STEP_RENAME,
	IO_STEP_CLEAN_CLOSE,
	IO_STEP_CLEAN_UNLINK,
	IO_STEP_NOP,
};

enum io_page_state {
	IO_PG_IDLE,   /* free, or finished */
	IO_PG_START,  /* write: the whole chain is to be submitted */
	IO_PG_RESUME, /* write: short write, continue at `done` */
	IO_PG_RUN,    /* submitted, its completion is outstanding */
	IO_PG_CUT,    /* its chain was cut by a short submit; see Caveats */
	IO_PG_FAILED, /* finished with an error; the clean-up is due */
};

struct io_ring_page {
	uint8_t state;
	uint8_t inject; /* the io_step a fault injection made fail, or 0 */
	bool got_read;
	bool got_close;
	bool clean_close; /* the clean-up must empty the slot */
	int dirfd;        /* the clean-up must unlink tmp relative to dirfd */
	const char *tmp;
	int *result;        /* its request's result */
	void *q;            /* its request */
	struct io_arr *arr; /* its request's array, held while the slot is */
	int res;            /* read: the readv result */
	size_t done;        /* write: bytes written so far */
	unsigned sqe_first; /* SQ position of its chain's first SQE */
	unsigned sqe_count;
	struct open_how how; /* its open's, read by the kernel at submission */
};

struct io_slot_iov {
	struct iovec *v;
	unsigned cap;
};

struct io_arrival {
	struct io_read_req *q;
	struct io_arr *arr; /* held until the hook has run */
};

/* Arrivals a read stream may have waiting: it takes no new request while
 * depth wait, and each of the depth chains in flight adds at most one. */
#define IO_ARRIVALS(depth) (2 * (depth))

struct io_ring {
	struct io_ring *next; /* pool free list */
	struct io_uring ring;
	bool ring_ok; /* ring is initialised (teardown on partial state) */
	bool broken;  /* state unknown: destroy instead of reusing */
	unsigned depth;
	uint32_t gen;
	void *scratch; /* IO_SCRATCH bytes, 4096-aligned */
	/* Per slot: iovecs the kernel reads when the chain's read or write is
	 * issued, which may be long after the submit; grown only while the
	 * slot is idle. */
	struct io_slot_iov *slot_iov; /* depth entries */
	struct io_ring_page *pages;   /* depth entries */
	unsigned *free_slots;         /* depth entries: a stream's idle slots */
	/* read: requests whose bytes arrived and whose arrived hook is due,
	 * oldest first (a FIFO from arrival_head); run one at a time between
	 * refills, so the disk has its next work meanwhile */
	struct io_arrival *arrivals; /* IO_ARRIVALS(depth) entries */
	unsigned arrival_head, narrivals;
};

struct io_ring_pool {
	pthread_mutex_t lock;
	pthread_cond_t returned;
	struct io_ring *free;
	unsigned live; /* rings that exist, in use or free */
	unsigned depth;
};

static inline uint64_t io_ud(const struct io_ring *r, unsigned page, unsigned step)
{
	return (uint64_t)r->gen << 32 | (uint64_t)page << 8 | step;
}

/* Flags go on after the prep call: every io_uring_prep_* zeroes them. */
static inline void io_sqe_finish(struct io_uring_sqe *sqe, uint64_t ud, unsigned flags)
{
	sqe->flags |= flags;
	sqe->user_data = ud;
}

/* A fault point for one step of page pg's chain (see Caveats): true when
 * the step is to fail; the page remembers which. */
static inline bool io_ring_inject(struct io_ring_page *pg, enum util_fault_kind kind,
				  enum io_step step)
{
	if (!util_fault_hit(kind))
		return false;
	pg->inject = (uint8_t)step;
	return true;
}

/* What a completion of step reports: the injected failure as -EIO, not as
 * the -EBADF the kernel gave for the invalid file it was handed. */
static inline int io_ring_res(const struct io_ring_page *pg, unsigned step, int res)
{
	return pg->inject && pg->inject == step && res < 0 ? -EIO : res;
}

/* io_uring_chain.c: chains and the slots of a stream */

/* Room for need iovecs in idle slot s; NULL without memory. */
struct iovec *io_slot_iovs(struct io_ring *r, unsigned s, unsigned need);
void io_page_fail(struct io_ring_page *pg, int *result, int err);
/* Submit every queued SQE; pages [0, n) that are running can be failed
 * (fail_pages). 0, or the error that broke the ring. */
int io_ring_submit(struct io_ring *r, unsigned n, bool fail_pages);
/* Next completion of the current generation. */
int io_ring_next(struct io_ring *r, unsigned *page, unsigned *step, int *res);
/* A stream's round of completions: one (waiting for it), then whatever
 * else is ready, each of a running chain handed to cqe, which returns
 * true when it finished the chain's request; then one fewer runs, and its
 * slot is free again (onto free_slots, *nfree) when idle, or counted in
 * *failed. Returns 0, or io_ring_next's error. */
int io_ring_reap(struct io_ring *r,
		 bool (*cqe)(struct io_ring *r, unsigned s, unsigned step, int res, void *arg),
		 void *arg, unsigned *running, unsigned *nfree, unsigned *failed);
/* Empty the slot and remove the temp file of every failed or cut page. */
void io_ring_cleanup(struct io_ring *r, unsigned n);
/* Slots free for a new chain, onto r->free_slots; returns how many. */
unsigned io_ring_idle_slots(struct io_ring *r, unsigned *running, unsigned *failed);
/* Idle slots (or, at the end, all) let go of their requests' arrays. */
void io_ring_release(struct io_ring *r, struct io_stream *s, bool all);
void io_ring_stream_begin(struct io_ring *r);
/* Whether a stream may ask its feed for more. */
bool io_ring_may_take(const struct io_stream *s, unsigned failed);

/* io_uring_write.c and io_uring_read.c: run the stream on ring r until the
 * feed has nothing more and nothing is in flight, or until r broke. */
void io_ring_write_stream(struct io_ring *r, struct io_stream *st);
void io_ring_read_stream(struct io_ring *r, struct io_stream *st);

#endif
