/*
 * io_uring engine: the read stream. Each page is one chain open(name) ->
 * readv(iov + scratch) -> close; a slot is refilled as soon as its chain
 * posted everything, and the arrived hooks run after the refill, one page
 * at a time, with the completions that came meanwhile reaped (and their
 * slots refilled) between two pages. See io_ring.h for the chains.
 */
#define _GNU_SOURCE
#include "io/io_ring.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

static void io_ring_prep_read(struct io_ring *r, unsigned i, const struct io_read_req *q)
{
	struct io_ring_page *pg = &r->pages[i];
	/* The slot's iovecs hold q->iovcnt + 1 (io_ring_read_stream). */
	struct iovec *iov = r->slot_iov[i].v;
	memcpy(iov, q->iov, q->iovcnt * sizeof(*iov));
	iov[q->iovcnt] = (struct iovec){.iov_base = r->scratch, .iov_len = IO_SCRATCH};
	pg->sqe_first = r->ring.sq.sqe_tail;
	pg->sqe_count = 3;
	pg->inject = 0;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
	pg->how = (struct open_how){.flags = O_RDONLY | (q->direct ? O_DIRECT : 0),
				    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
	int dirfd = io_ring_inject(pg, HC_FAULT_OPEN, IO_STEP_OPEN) ? -1 : q->dirfd;
	io_uring_prep_openat2_direct(sqe, dirfd, q->name, &pg->how, i);
	io_sqe_finish(sqe, io_ud(r, i, IO_STEP_OPEN), IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS);
	/* HARDLINK: a short read (the normal answer for a shorter file) must
	 * not cancel the close. */
	sqe = io_uring_get_sqe(&r->ring);
	/* Slot depth is past the table: -EBADF (fault injection); the close
	 * still runs and empties slot i. */
	unsigned slot = io_ring_inject(pg, HC_FAULT_READ, IO_STEP_RW) ? r->depth : i;
	io_uring_prep_readv(sqe, (int)slot, iov, q->iovcnt + 1, 0);
	io_sqe_finish(sqe, io_ud(r, i, IO_STEP_RW), IOSQE_IO_HARDLINK | IOSQE_FIXED_FILE);
	sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_close_direct(sqe, i);
	io_sqe_finish(sqe, io_ud(r, i, IO_STEP_CLOSE), 0);
	pg->state = IO_PG_RUN;
}

/* One completion of page i's read chain; returns true when its request
 * is finished (its result is set, its slot idle or due for clean-up).
 * The read stream's io_ring_reap step (arg unused). */
static bool io_ring_read_cqe(struct io_ring *r, unsigned i, unsigned step, int res, void *arg)
{
	(void)arg;
	struct io_ring_page *pg = &r->pages[i];
	struct io_read_req *q = pg->q;
	res = io_ring_res(pg, step, res);
	if (step == IO_STEP_OPEN) {
		/* A failed open cancels read and close without a CQE; nothing is
		 * open. (A successful open posts nothing.) */
		if (res < 0) {
			pg->state = IO_PG_IDLE;
			q->result = res;
		} else {
			/* Never seen: a successful open posted. Its slot may be
			 * open, and its read never ran. */
			pg->clean_close = true;
			io_page_fail(pg, &q->result, -EIO);
		}
		return true;
	}
	if (step == IO_STEP_RW) {
		pg->res = res;
		pg->got_read = true;
		/* The bytes are in place once the read posts; its close only
		 * frees the slot. The array stays held until the hook ran. */
		if (q->arrived && io_read_result(res, q->len) == 0) {
			unsigned at = (r->arrival_head + r->narrivals++) % IO_ARRIVALS(r->depth);
			r->arrivals[at] = (struct io_arrival){q, pg->arr};
			pg->arr->holds++;
		}
	} else if (step == IO_STEP_CLOSE) {
		pg->got_close = true;
		if (res < 0) {
			log_warn("io: close of slot %u after a read: %s", i, strerrordesc_np(-res));
			pg->clean_close = true;
		}
	}
	if (!pg->got_read || !pg->got_close)
		return false;
	q->result = io_read_result(pg->res, q->len);
	pg->state = pg->clean_close ? IO_PG_FAILED : IO_PG_IDLE;
	return true;
}

/* The oldest arrived hook due. Run after the refill: a disk may complete
 * a batch's reads in one burst, and their checksums (memory-bound) taken
 * before the refill would leave it idle meanwhile. */
static void io_ring_arrival_run(struct io_ring *r, struct io_stream *st)
{
	struct io_arrival v = r->arrivals[r->arrival_head];
	r->arrival_head = (r->arrival_head + 1) % IO_ARRIVALS(r->depth);
	r->narrivals--;
	v.q->arrived(v.q->arg);
	io_arr_put(st, v.arr);
}

/* Whether completions wait to be reaped: posted, or due to be posted by
 * task work that entering the kernel runs (COOP_TASKRUN defers it until
 * then; TASKRUN_FLAG says so in the SQ flags). No system call unless the
 * kernel has work for this thread. */
static bool io_ring_cq_pending(struct io_ring *r)
{
	if (io_uring_cq_ready(&r->ring))
		return true;
	if (!(IO_URING_READ_ONCE(*r->ring.sq.kflags) & IORING_SQ_TASKRUN))
		return false;
	io_uring_get_events(&r->ring);
	return io_uring_cq_ready(&r->ring) > 0;
}

/* The ring failed while waiting: every running page fails with rc. */
static void io_ring_read_fail_running(struct io_ring *r, int rc)
{
	for (unsigned s = 0; s < r->depth; s++) {
		struct io_ring_page *pg = &r->pages[s];
		if (pg->state == IO_PG_RUN) {
			pg->clean_close = true;
			io_page_fail(pg, pg->result, rc);
		}
	}
}

/*
 * Read the stream's requests keeping up to depth chains in flight: each
 * slot gets the next request as soon as its chain has posted everything,
 * so the disk never waits for the slowest page (fio's way), and the feed
 * is asked for more as soon as there is room. Returns when the feed has
 * nothing more and nothing is in flight, or when the ring broke (the
 * caller goes on with another ring).
 */
void io_ring_read_stream(struct io_ring *r, struct io_stream *st)
{
	io_ring_stream_begin(r);
	unsigned running, failed;
	unsigned nfree = io_ring_idle_slots(r, &running, &failed);
	int rc = 0;
	for (;;) {
		io_ring_release(r, st, false);
		bool queued = false, dry = false;
		/* With depth hooks waiting, the next pages wait for them: that
		 * bounds the arrivals (IO_ARRIVALS). */
		while (nfree && !r->broken && r->narrivals < r->depth) {
			struct io_arr *a;
			struct io_read_req *q;
			if (!io_ring_may_take(st, failed) || !(q = io_stream_next_req(st, &a))) {
				dry = true;
				break;
			}
			unsigned s = r->free_slots[nfree - 1];
			if (!io_slot_iovs(r, s, q->iovcnt + 1)) {
				q->result = -ENOMEM;
				io_arr_put(st, a);
				continue;
			}
			nfree--;
			r->pages[s] = (struct io_ring_page){.state = IO_PG_IDLE,
							    .dirfd = -1,
							    .result = &q->result,
							    .q = q,
							    .arr = a};
			io_ring_prep_read(r, s, q);
			queued = true;
		}
		if (queued) {
			io_ring_submit(r, r->depth, true);
			/* A failed submit left some pages idle with their error. */
			nfree = io_ring_idle_slots(r, &running, &failed);
		}
		if (r->narrivals) {
			/* One page's hook, then the completions that came in
			 * meanwhile (without waiting), then refill: the next
			 * pages are on their way while this one is checked. */
			io_ring_arrival_run(r, st);
			if (running && io_ring_cq_pending(r)) {
				rc = io_ring_reap(r, io_ring_read_cqe, NULL, &running, &nfree,
						  &failed);
				if (rc) {
					io_ring_read_fail_running(r, rc);
					break;
				}
			}
			continue;
		}
		if (!running) {
			if (r->broken)
				break;
			if (failed && (!nfree || dry)) {
				/* Failed closes wait for their clean-up. */
				io_ring_cleanup(r, r->depth);
				nfree = io_ring_idle_slots(r, &running, &failed);
				continue;
			}
			if (dry)
				break;
			continue;
		}
		/* One completion (waiting for it), then whatever else is ready,
		 * then refill, then the hooks: one submit per round of
		 * completions. */
		rc = io_ring_reap(r, io_ring_read_cqe, NULL, &running, &nfree, &failed);
		if (rc) {
			io_ring_read_fail_running(r, rc);
			break;
		}
	}
	/* Reads that arrived before the ring failed hold their bytes. */
	while (r->narrivals)
		io_ring_arrival_run(r, st);
	for (unsigned s = 0; s < r->depth; s++) {
		/* A cut read chain may have opened its slot. */
		if (r->pages[s].state == IO_PG_CUT)
			r->pages[s].clean_close = true;
	}
	io_ring_cleanup(r, r->depth);
	io_ring_release(r, st, true);
}
