/*
 * io_uring engine: the read stream. Each page is one chain open(name) ->
 * readv(iov + scratch) -> close; a slot is refilled as soon as its chain
 * posted everything, and the arrived hooks run after the refill. See
 * io_ring.h for the chains.
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
			r->arrivals[r->narrivals++] = (struct io_arrival){q, pg->arr};
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

/* The arrived hooks due. Called after the refill: a disk may complete a
 * batch's reads in one burst, and their checksums (memory-bound) taken
 * before the refill would leave it idle meanwhile. */
static void io_ring_arrivals_run(struct io_ring *r, struct io_stream *st)
{
	for (unsigned i = 0; i < r->narrivals; i++) {
		struct io_arrival *v = &r->arrivals[i];
		v->q->arrived(v->q->arg);
		io_arr_put(st, v->arr);
	}
	r->narrivals = 0;
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
		while (nfree && !r->broken) {
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
		io_ring_arrivals_run(r, st);
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
			for (unsigned s = 0; s < r->depth; s++) {
				struct io_ring_page *pg = &r->pages[s];
				if (pg->state == IO_PG_RUN) {
					pg->clean_close = true;
					io_page_fail(pg, pg->result, rc);
				}
			}
			break;
		}
	}
	/* Reads that arrived before the ring failed hold their bytes. */
	io_ring_arrivals_run(r, st);
	for (unsigned s = 0; s < r->depth; s++) {
		/* A cut read chain may have opened its slot. */
		if (r->pages[s].state == IO_PG_CUT)
			r->pages[s].clean_close = true;
	}
	io_ring_cleanup(r, r->depth);
	io_ring_release(r, st, true);
}
