/*
 * io_uring engine: the write stream. Each page is one chain open(tmp) ->
 * writev -> close -> rename; a short write resumes at the offset reached.
 * See io_ring.h for the chains.
 */
#define _GNU_SOURCE
#include "io/io_ring.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

/* A write batch whose pages are prepared one by one (io_write_req.prepare)
 * is submitted whenever this many bytes are ready: each submit is a system
 * call that wakes io-wq workers, each chain that waits for it idles the
 * disk. Pages of 1 MiB and more go out one by one (their checksum is what
 * the disk would wait for), 64 KiB pages 16 at a time. */
#define IO_SUBMIT_BYTES ((size_t)1 << 20)

static void io_ring_prep_write(struct io_ring *r, unsigned i, const struct io_write_req *q)
{
	struct io_ring_page *pg = &r->pages[i];
	bool first = pg->state == IO_PG_START;
	const struct iovec *iov = q->iov;
	unsigned cnt = q->iovcnt;
	if (!first) {
		/* The slot's iovecs hold q->iovcnt (io_ring_write_stream). */
		cnt = io_iov_advance(q->iov, q->iovcnt, pg->done, r->slot_iov[i].v);
		iov = r->slot_iov[i].v;
	}
	pg->sqe_first = r->ring.sq.sqe_tail;
	pg->sqe_count = first ? 4 : 3;
	pg->inject = 0;
	struct io_uring_sqe *sqe;
	if (first) {
		/* openat2 copies the how at submission: *how stays valid. */
		sqe = io_uring_get_sqe(&r->ring);
		pg->how = (struct open_how){.flags = O_CREAT | O_EXCL | O_WRONLY |
						     (q->direct ? O_DIRECT : 0),
					    .mode = q->mode ? q->mode : 0600,
					    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
		int dirfd = io_ring_inject(pg, HC_FAULT_OPEN, IO_STEP_OPEN) ? -1 : q->dirfd;
		io_uring_prep_openat2_direct(sqe, dirfd, q->tmp_name, &pg->how, i);
		io_sqe_finish(sqe, io_ud(r, i, IO_STEP_OPEN),
			      IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS);
	}
	sqe = io_uring_get_sqe(&r->ring);
	/* Slot depth is past the table: -EBADF (fault injection). */
	unsigned slot = io_ring_inject(pg, HC_FAULT_WRITE, IO_STEP_RW) ? r->depth : i;
	io_uring_prep_writev(sqe, (int)slot, iov, cnt, pg->done);
	io_sqe_finish(sqe, io_ud(r, i, IO_STEP_RW),
		      IOSQE_IO_LINK | IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS);
	sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_close_direct(sqe, i);
	io_sqe_finish(sqe, io_ud(r, i, IO_STEP_CLOSE), IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS);
	sqe = io_uring_get_sqe(&r->ring);
	int olddir = io_ring_inject(pg, HC_FAULT_RENAME, IO_STEP_RENAME) ? -1 : q->dirfd;
	io_uring_prep_renameat(sqe, olddir, q->tmp_name, q->dirfd, q->final_name,
			       q->noreplace ? RENAME_NOREPLACE : 0);
	io_sqe_finish(sqe, io_ud(r, i, IO_STEP_RENAME), 0);
	pg->state = IO_PG_RUN;
}

/* The one CQE of page i's write chain (see the top): the chain is over,
 * published, failed, or short and to be resumed. */
static void io_ring_write_cqe(struct io_ring *r, unsigned i, unsigned step, int res,
			      struct io_write_req *q)
{
	struct io_ring_page *pg = &r->pages[i];
	if (step == IO_STEP_RENAME && res == 0) {
		pg->state = IO_PG_IDLE;
		q->result = 0;
	} else if (step == IO_STEP_RW && res > 0 && (size_t)res < q->len - pg->done) {
		log_debug("io: short write of %s (%d of %zu bytes left); resuming", q->tmp_name,
			  res, q->len - pg->done);
		pg->done += (size_t)res;
		pg->state = IO_PG_RESUME;
	} else {
		/* A write CQE with res >= 0 here wrote nothing or (never seen)
		 * posted a full count: neither can make progress. */
		res = io_ring_res(pg, step, res);
		if (step == IO_STEP_OPEN && res == -EEXIST) {
			/* The temp name, not the final name: another writer's
			 * file, never removed. (Other open failures may have
			 * created the file, e.g. O_DIRECT refused after it.) */
			pg->tmp = NULL;
			res = -EBUSY;
		}
		io_page_fail(pg, &q->result, res < 0 ? res : -EIO);
	}
}

/* The feed's next request whose prepare succeeds; NULL when there is
 * none now. */
static struct io_write_req *io_ring_write_prepare(struct io_stream *st, unsigned failed,
						  struct io_arr **arr)
{
	struct io_write_req *q;
	while (io_ring_may_take(st, failed) && (q = io_stream_next_req(st, arr))) {
		int prc = q->prepare ? q->prepare(q->arg) : 0;
		if (!prc)
			return q;
		q->result = prc < 0 ? prc : -EIO;
		io_arr_put(st, *arr);
	}
	return NULL;
}

/* The next request to write, prepared: one prepared ahead, else the
 * feed's next (*fresh: its prepare ran just now). */
static struct io_write_req *io_ring_write_take(struct io_stream *st, unsigned failed,
					       struct io_arr **arr, bool *fresh)
{
	*fresh = st->ready_head == st->ready_tail;
	if (*fresh)
		return io_ring_write_prepare(st, failed, arr);
	struct io_taken *t = &st->ready[st->ready_head++];
	*arr = t->arr;
	return t->q;
}

/*
 * While every slot is busy, prepare the next requests (a store's lookups
 * and checksums), so that slots that free take them at once and go out in
 * one submit, instead of each waiting for its own preparation; stops as
 * soon as a completion is there, at depth requests ahead, or without
 * memory for them.
 */
static void io_ring_write_ahead(struct io_ring *r, struct io_stream *st, unsigned failed)
{
	if (st->ready_head) {
		st->ready_tail -= st->ready_head;
		memmove(st->ready, st->ready + st->ready_head, st->ready_tail * sizeof(*st->ready));
		st->ready_head = 0;
	}
	if (!st->ready) {
		st->ready = util_fault_malloc(r->depth * sizeof(*st->ready));
		if (!st->ready)
			return;
		st->ready_cap = r->depth;
	}
	while (st->ready_tail < st->ready_cap && !io_uring_cq_ready(&r->ring)) {
		struct io_arr *a;
		struct io_write_req *q = io_ring_write_prepare(st, failed, &a);
		if (!q)
			break;
		st->ready[st->ready_tail++] = (struct io_taken){q, a};
	}
}

/* The write stream's io_ring_reap step: the one CQE finishes the chain;
 * *(unsigned *)resume counts the short ones to resume. */
static bool write_reaped(struct io_ring *r, unsigned s, unsigned step, int res, void *resume)
{
	io_ring_write_cqe(r, s, step, res, r->pages[s].q);
	*(unsigned *)resume += r->pages[s].state == IO_PG_RESUME;
	return true;
}

/*
 * Write the stream's requests keeping up to depth chains in flight: a slot
 * takes the next request as soon as its chain is over, so the disk never
 * waits for the slowest page, and the feed is asked for more as soon as
 * there is room. A request's prepare hook runs when it gets its slot.
 * Failed slots stay out of use until the clean-up. Returns when the feed
 * has nothing more and nothing is in flight, or when the ring broke.
 */
void io_ring_write_stream(struct io_ring *r, struct io_stream *st)
{
	io_ring_stream_begin(r);
	unsigned running, failed, resume = 0;
	unsigned nfree = io_ring_idle_slots(r, &running, &failed);
	int rc = 0;
	for (;;) {
		io_ring_release(r, st, false);
		bool queued = false, dry = false;
		size_t unsent = 0; /* bytes of chains queued since the last submit */
		for (unsigned s = 0; resume && s < r->depth && !r->broken; s++) {
			if (r->pages[s].state == IO_PG_RESUME) {
				io_ring_prep_write(r, s, r->pages[s].q);
				queued = true;
				resume--;
			}
		}
		while (nfree && !r->broken) {
			struct io_arr *a;
			bool fresh;
			struct io_write_req *q = io_ring_write_take(st, failed, &a, &fresh);
			if (!q) {
				dry = true;
				break;
			}
			unsigned s = r->free_slots[nfree - 1];
			/* Room to resume a short write: the chain's iovecs, cut. */
			if (!io_slot_iovs(r, s, q->iovcnt)) {
				q->result = -ENOMEM;
				io_arr_put(st, a);
				continue;
			}
			nfree--;
			/* Whatever fails from the open on, the slot may be open and
			 * the temp file may exist. */
			r->pages[s] = (struct io_ring_page){.state = IO_PG_START,
							    .clean_close = true,
							    .dirfd = q->dirfd,
							    .tmp = q->tmp_name,
							    .result = &q->result,
							    .q = q,
							    .arr = a};
			io_ring_prep_write(r, s, q);
			queued = true;
			/* The caller's preparation of the next pages overlaps the
			 * disk only if what is ready goes out now; without it the
			 * chains go out together, in one system call. */
			unsent += fresh ? q->len : 0;
			if (q->prepare && unsent >= IO_SUBMIT_BYTES) {
				/* A failed submit gave its pages the error and broke
				 * the ring: take no more work into it. */
				if (io_ring_submit(r, r->depth, true))
					break;
				unsent = 0;
			}
		}
		if (queued) {
			io_ring_submit(r, r->depth, true);
			/* A failed submit left some pages idle with their error. */
			nfree = io_ring_idle_slots(r, &running, &failed);
		}
		if (!running) {
			if (r->broken)
				break;
			if (failed && (!nfree || dry)) {
				/* Every slot waits for its clean-up, or the feed waits
				 * for the failed ones' (io_ring_may_take). */
				io_ring_cleanup(r, r->depth);
				nfree = io_ring_idle_slots(r, &running, &failed);
				continue;
			}
			if (dry && !resume)
				break;
			continue;
		}
		if (!nfree && !r->broken)
			io_ring_write_ahead(r, st, failed);
		/* One completion (waiting for it), then whatever else is ready,
		 * then refill: one submit per round of completions. */
		rc = io_ring_reap(r, write_reaped, &resume, &running, &nfree, &failed);
		if (rc)
			break;
	}
	if (rc || r->broken) {
		/* Nothing more can be learnt from (or done on) this ring. */
		for (unsigned s = 0; s < r->depth; s++) {
			struct io_ring_page *pg = &r->pages[s];
			if (pg->state == IO_PG_RUN || pg->state == IO_PG_RESUME)
				io_page_fail(pg, pg->result, rc ? rc : -EIO);
		}
	}
	io_ring_cleanup(r, r->depth);
	io_ring_release(r, st, true);
}
