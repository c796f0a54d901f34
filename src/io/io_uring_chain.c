/*
 * io_uring engine: chains. Submitting (a short submit cuts a chain, whose
 * rest becomes NOPs), waiting for completions, quiescing a ring after a cut
 * and the clean-up of failed pages; then the slots of a stream and the
 * arrays their requests hold. See io_ring.h for the chains.
 */
#define _GNU_SOURCE
#include "io/io_ring.h"
#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Submit retries when the kernel takes nothing (-EAGAIN: no memory for
 * requests right now), ~100 us apart. */
#define IO_SUBMIT_SPINS 1000

int (*io_ring_submit_fn)(struct io_uring *ring) = io_uring_submit;

/* Room for need iovecs in idle slot s; NULL without memory. */
struct iovec *io_slot_iovs(struct io_ring *r, unsigned s, unsigned need)
{
	struct io_slot_iov *si = &r->slot_iov[s];
	if (need > si->cap) {
		struct iovec *v = util_fault_realloc(si->v, need * sizeof(*v));
		if (!v)
			return NULL;
		si->v = v;
		si->cap = need;
	}
	return si->v;
}

static void io_ring_nop_range(struct io_ring *r, unsigned from, unsigned to)
{
	for (unsigned pos = from; pos != to; pos++) {
		struct io_uring_sqe *sqe = &r->ring.sq.sqes[pos & r->ring.sq.ring_mask];
		io_uring_prep_nop(sqe);
		io_sqe_finish(sqe, io_ud(r, 0, IO_STEP_NOP), IOSQE_CQE_SKIP_SUCCESS);
	}
}

void io_page_fail(struct io_ring_page *pg, int *result, int err)
{
	pg->state = IO_PG_FAILED;
	*result = err;
}

/*
 * The kernel consumed SQEs up to its head. A chain that straddles it was
 * cut: NOP out its unconsumed rest so that it can never run on its own.
 */
static void io_ring_fix_cut(struct io_ring *r, unsigned n)
{
	unsigned head = io_uring_smp_load_acquire(r->ring.sq.khead);
	for (unsigned i = 0; i < n; i++) {
		struct io_ring_page *pg = &r->pages[i];
		unsigned into = head - pg->sqe_first;
		if (pg->state != IO_PG_RUN || into == 0 || into >= pg->sqe_count)
			continue;
		io_ring_nop_range(r, head, pg->sqe_first + pg->sqe_count);
		pg->state = IO_PG_CUT;
		*pg->result = -EIO;
		r->broken = true;
		log_error("io: the kernel took a partial chain (page %u); it was cancelled", i);
	}
}

/*
 * Submit every queued SQE; pages [0, n) that are running can be failed
 * here (fail_pages: through their result pointers). On a hard error the unconsumed
 * SQEs become NOPs, their pages fail with that error (they never ran), and
 * the ring is marked broken.
 */
int io_ring_submit(struct io_ring *r, unsigned n, bool fail_pages)
{
	unsigned spins = 0;
	while (io_uring_sq_ready(&r->ring)) {
		int ret = io_ring_submit_fn(&r->ring);
		if (ret > 0) {
			spins = 0;
			if (fail_pages)
				io_ring_fix_cut(r, n);
			continue;
		}
		if ((ret == 0 || ret == -EINTR || ret == -EAGAIN || ret == -EBUSY) &&
		    ++spins < IO_SUBMIT_SPINS) {
			usleep(100);
			continue;
		}
		int err = ret ? ret : -EAGAIN;
		unsigned head = io_uring_smp_load_acquire(r->ring.sq.khead);
		unsigned tail = r->ring.sq.sqe_tail;
		io_ring_nop_range(r, head, tail);
		for (unsigned i = 0; fail_pages && i < n; i++) {
			struct io_ring_page *pg = &r->pages[i];
			if (pg->state == IO_PG_RUN && pg->sqe_first - head < tail - head) {
				pg->state = IO_PG_IDLE;
				*pg->result = err;
			}
		}
		r->broken = true;
		log_error("io: io_uring_submit failed: %s", strerrordesc_np(-err));
		return err;
	}
	return 0;
}

/* Next completion of the current generation. */
int io_ring_next(struct io_ring *r, unsigned *page, unsigned *step, int *res)
{
	for (;;) {
		struct io_uring_cqe *cqe;
		int rc = io_uring_wait_cqe(&r->ring, &cqe);
		if (rc == -EINTR)
			continue;
		if (rc) {
			r->broken = true;
			return util_fail(rc, "io: waiting for io_uring completions failed: %s",
					 strerrordesc_np(-rc));
		}
		uint64_t ud = cqe->user_data;
		*res = cqe->res;
		io_uring_cqe_seen(&r->ring, cqe);
		if ((uint32_t)(ud >> 32) != r->gen)
			continue;
		*page = (unsigned)(ud >> 8) & 0xffffff;
		*step = (unsigned)ud & 0xff;
		if (*page < r->depth)
			return 0;
	}
}

int io_ring_reap(struct io_ring *r,
		 bool (*cqe)(struct io_ring *r, unsigned s, unsigned step, int res, void *arg),
		 void *arg, unsigned *running, unsigned *nfree, unsigned *failed)
{
	int rc;
	do {
		unsigned s, step;
		int res;
		rc = io_ring_next(r, &s, &step, &res);
		if (rc)
			break;
		struct io_ring_page *pg = &r->pages[s];
		if (pg->state != IO_PG_RUN)
			continue;
		if (cqe(r, s, step, res, arg)) {
			(*running)--;
			if (pg->state == IO_PG_IDLE)
				r->free_slots[(*nfree)++] = s;
			*failed += pg->state == IO_PG_FAILED;
		}
	} while (*running && io_uring_cq_ready(&r->ring));
	return rc;
}

/*
 * Cut chains post nothing when their head succeeds, so wait until the ring
 * has nothing in flight before their clean-up runs (which would otherwise
 * race with a still-running open). With CANCEL_ANY the sync cancel returns
 * how many requests it found. A linked step that is between its
 * predecessor's completion and its own issue (queued as task work, which
 * runs when this thread returns from the syscall) is not found, hence
 * several empty rounds in a row before the ring counts as idle.
 */
static void io_ring_quiesce(struct io_ring *r)
{
	int idle = 0;
	for (int i = 0; i < 200 && idle < 3; i++) {
		struct io_uring_sync_cancel_reg reg = {
			.fd = -1,
			.flags = IORING_ASYNC_CANCEL_ANY,
			.timeout = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000},
		};
		int rc = io_uring_register_sync_cancel(&r->ring, &reg);
		struct io_uring_cqe *cqe;
		while (io_uring_peek_cqe(&r->ring, &cqe) == 0)
			io_uring_cqe_seen(&r->ring, cqe); /* only cut chains' CQEs are left */
		if (rc == -EINVAL)
			break; /* no sync cancel (before 6.0) */
		idle = rc == 0 || rc == -ENOENT ? idle + 1 : 0;
		usleep(1000);
	}
	if (idle < 3)
		log_warn("io: could not confirm that a cut chain finished; a temp file may remain");
}

/*
 * Empty the slot and remove the temp file of every failed or cut page.
 * Counted, no SKIP: the slot must be empty before the ring is reused.
 */
void io_ring_cleanup(struct io_ring *r, unsigned n)
{
	unsigned pages = 0;
	bool cut = false;
	for (unsigned i = 0; i < n; i++) {
		struct io_ring_page *pg = &r->pages[i];
		cut |= pg->state == IO_PG_CUT;
		if (pg->state == IO_PG_CUT)
			pg->state = IO_PG_FAILED;
		pages += pg->state == IO_PG_FAILED;
	}
	if (!pages)
		return;
	if (cut)
		io_ring_quiesce(r);
	unsigned want = 0;
	int rc = 0;
	/* After a failed submit the SQ may still hold NOPs. */
	if (io_uring_sq_space_left(&r->ring) < 2 * pages)
		rc = -EBUSY;
	for (unsigned i = 0; i < n && !rc; i++) {
		struct io_ring_page *pg = &r->pages[i];
		if (pg->state != IO_PG_FAILED)
			continue;
		struct io_uring_sqe *sqe;
		if (pg->clean_close) {
			sqe = io_uring_get_sqe(&r->ring);
			io_uring_prep_close_direct(sqe, i);
			io_sqe_finish(sqe, io_ud(r, i, IO_STEP_CLEAN_CLOSE), 0);
			want++;
		}
		if (pg->tmp) {
			sqe = io_uring_get_sqe(&r->ring);
			io_uring_prep_unlinkat(sqe, pg->dirfd, pg->tmp, 0);
			io_sqe_finish(sqe, io_ud(r, i, IO_STEP_CLEAN_UNLINK), 0);
			want++;
		}
	}
	if (!rc && want)
		rc = io_ring_submit(r, n, false);
	while (!rc && want) {
		unsigned i, step;
		int res;
		rc = io_ring_next(r, &i, &step, &res);
		if (rc)
			break;
		if (step != IO_STEP_CLEAN_CLOSE && step != IO_STEP_CLEAN_UNLINK)
			continue; /* a late CQE of a cut chain */
		struct io_ring_page *pg = &r->pages[i];
		want--;
		/* 0 or -EBADF (slot already empty); 0, -ENOENT or -ENOTDIR (no
		 * temp file: the open itself failed on the path). */
		if (step == IO_STEP_CLEAN_CLOSE && res && res != -EBADF)
			log_warn("io: clean-up close of slot %u: %s", i, strerrordesc_np(-res));
		if (step == IO_STEP_CLEAN_UNLINK && res && res != -ENOENT && res != -ENOTDIR)
			log_warn("io: clean-up unlink of %s: %s", pg->tmp, strerrordesc_np(-res));
		if (step == IO_STEP_CLEAN_UNLINK || !pg->tmp)
			pg->state = IO_PG_IDLE;
	}
	if (rc) {
		/* Without the ring: the temp files by hand; the slots go with the
		 * ring, which is discarded. */
		r->broken = true;
		for (unsigned i = 0; i < n; i++) {
			struct io_ring_page *pg = &r->pages[i];
			if (pg->state == IO_PG_FAILED && pg->tmp &&
			    unlinkat(pg->dirfd, pg->tmp, 0) && errno != ENOENT)
				log_warn("io: clean-up unlink of %s: %s", pg->tmp,
					 strerrordesc_np(errno));
		}
	}
	for (unsigned i = 0; i < n; i++)
		r->pages[i].state = IO_PG_IDLE;
}

/* ---- streams: slots and the arrays they hold ---- */

/* Slots free for a new chain (idle), onto r->free_slots; returns how many.
 * *running: chains in flight; *failed: slots waiting for their clean-up. */
unsigned io_ring_idle_slots(struct io_ring *r, unsigned *running, unsigned *failed)
{
	unsigned nfree = 0;
	*running = 0;
	*failed = 0;
	for (unsigned s = r->depth; s-- > 0;) {
		uint8_t st = r->pages[s].state;
		if (st == IO_PG_IDLE)
			r->free_slots[nfree++] = s;
		*running += st == IO_PG_RUN;
		*failed += st == IO_PG_FAILED || st == IO_PG_CUT;
	}
	return nfree;
}

/* Idle slots (or, at the end, all) let go of their requests' arrays. */
void io_ring_release(struct io_ring *r, struct io_stream *s, bool all)
{
	for (unsigned i = 0; i < r->depth; i++) {
		struct io_ring_page *pg = &r->pages[i];
		if (pg->arr && (all || pg->state == IO_PG_IDLE)) {
			struct io_arr *a = pg->arr;
			pg->arr = NULL;
			io_arr_put(s, a);
		}
	}
}

void io_ring_stream_begin(struct io_ring *r)
{
	r->gen++;
	r->arrival_head = 0;
	r->narrivals = 0;
	for (unsigned s = 0; s < r->depth; s++)
		r->pages[s] = (struct io_ring_page){.state = IO_PG_IDLE, .dirfd = -1};
}

/*
 * When a stream asks its feed for more. A slot waiting for its clean-up
 * holds its request's array, and the clean-up runs only once nothing is in
 * flight; so while one waits, no new array is taken and the stream drains:
 * a failed page costs a drain, not an unbounded wait for its caller.
 */
bool io_ring_may_take(const struct io_stream *s, unsigned failed)
{
	return s->cur || !failed;
}
