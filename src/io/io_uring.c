/*
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
 * read CQE shows the whole file, after the freed slots were refilled.
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
 * Rings cost ~40 us to set up, so each engine keeps a pool of them; a call
 * holds one ring for its whole batch. Rings are created on demand, at most
 * IO_RING_POOL_MAX; more concurrent callers wait for one to come back.
 *
 * Caveats:
 *   - A temp name that exists already fails the O_EXCL open: the page gets
 *     -EBUSY (not -EEXIST, which means the final name) and the clean-up
 *     removes that file, taken to be a crashed writer's leftover. Temp
 *     names must therefore be unique among the pages in flight.
 *   - O_CLOEXEC is not passed to the direct opens: a fixed file has no fd
 *     to close on exec, and the kernel rejects the flag with a file slot.
 *   - With SUBMIT_ALL the kernel takes fewer SQEs than offered only when it
 *     cannot allocate requests. If that cuts a chain, the rest of the chain
 *     is turned into NOPs (it must never run on its own: a lone close ->
 *     rename could publish a partial file), the page fails with -EIO, the
 *     ring waits until nothing is in flight, cleans up and is discarded.
 */
#define _GNU_SOURCE
#include "io/io_internal.h"
#include "util/util.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define IO_RING_POOL_MAX 64
/* io-wq workers a submitting thread may have for blocking work (creates,
 * allocating O_DIRECT writes, renames): one per chain in flight, up to
 * this many. */
#define IO_WQ_BOUNDED_MAX 128
/* Submit retries when the kernel takes nothing (-EAGAIN: no memory for
 * requests right now), ~100 us apart. */
#define IO_SUBMIT_SPINS 1000
/* A write batch whose pages are prepared one by one (io_write_req.prepare)
 * is submitted whenever this many bytes are ready: each submit is a system
 * call that wakes io-wq workers (dear on this VM), each chain that waits for
 * it idles the disk. Pages of 1 MiB and more go out one by one (their
 * checksum is what the disk would wait for), 64 KiB pages 16 at a time.
 * 256 KiB and 1 MiB measured the same at 64 KiB and 512 KiB (noise). */
#define IO_SUBMIT_BYTES ((size_t)1 << 20)

int (*io_ring_submit_fn)(struct io_uring *ring) = io_uring_submit;

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
};

struct io_slot_iov {
	struct iovec *v;
	unsigned cap;
};

struct io_arrival {
	struct io_read_req *q;
	struct io_arr *arr; /* held until the hook has run */
};

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
	/* read: requests whose bytes arrived and whose arrived hook is due;
	 * run after the refill, so the disk has its next work meanwhile */
	struct io_arrival *arrivals; /* depth entries */
	unsigned narrivals;
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

static void io_ring_free(struct io_ring *r)
{
	if (!r)
		return;
	if (r->ring_ok)
		io_uring_queue_exit(&r->ring);
	free(r->scratch);
	for (unsigned s = 0; r->slot_iov && s < r->depth; s++)
		free(r->slot_iov[s].v);
	free(r->slot_iov);
	free(r->pages);
	free(r->free_slots);
	free(r->arrivals);
	free(r);
}

static int io_ring_new(unsigned depth, struct io_ring **out, char *why, size_t why_len)
{
	*out = NULL;
	struct io_ring *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(why, why_len, "no memory");
		return -ENOMEM;
	}
	r->depth = depth;
	r->pages = calloc(depth, sizeof(*r->pages));
	r->free_slots = calloc(depth, sizeof(*r->free_slots));
	r->arrivals = calloc(depth, sizeof(*r->arrivals));
	r->slot_iov = calloc(depth, sizeof(*r->slot_iov));
	int rc = posix_memalign(&r->scratch, IO_SCRATCH, IO_SCRATCH);
	if (rc || !r->pages || !r->free_slots || !r->arrivals || !r->slot_iov) {
		r->scratch = rc ? NULL : r->scratch;
		snprintf(why, why_len, "no memory");
		rc = -ENOMEM;
		goto fail;
	}
	/* 4 SQEs per page for the write chain; SUBMIT_ALL so that one bad SQE
	 * does not stop the submission (and cut chains) after it.
	 * COOP_TASKRUN: io-wq frees every request of a chain through task work
	 * on this thread, and without it each of those interrupts the thread
	 * with an IPI, which on a paravirtualized guest traps to the hypervisor
	 * (~15 us of worker time per 64 KiB page measured here). This thread
	 * enters the kernel to submit or wait often enough to run them there. */
	struct io_uring_params p = {.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN};
	rc = io_uring_queue_init_params(depth * 4, &r->ring, &p);
	if (rc == -EINVAL) {
		/* Linux 5.18 has SUBMIT_ALL but not COOP_TASKRUN (5.19). */
		p = (struct io_uring_params){.flags = IORING_SETUP_SUBMIT_ALL};
		rc = io_uring_queue_init_params(depth * 4, &r->ring, &p);
	}
	if (rc) {
		/* The kernel's own answers; the engine then falls back to threads
		 * (AUTO) or reports why io_uring cannot be used (URING). */
		if (rc == -ENOSYS)
			snprintf(why, why_len, "io_uring_setup is not implemented by this kernel");
		else if (rc == -EPERM || rc == -EACCES)
			snprintf(why, why_len,
				 "io_uring_setup is not permitted (seccomp, container policy or "
				 "kernel.io_uring_disabled)");
		else if (rc == -EINVAL)
			snprintf(why, why_len,
				 "IORING_SETUP_SUBMIT_ALL rejected (needs Linux 5.18)");
		else
			snprintf(why, why_len, "io_uring_setup failed: %s", strerrordesc_np(-rc));
		/* io.h: -ENOSYS or -EPERM when io_uring cannot be used; a lack of
		 * resources is worth reporting as what it is. */
		if (rc == -EACCES)
			rc = -EPERM;
		else if (rc != -EPERM && rc != -ENOMEM && rc != -EMFILE && rc != -ENFILE)
			rc = -ENOSYS;
		goto fail;
	}
	r->ring_ok = true;
	if (!(p.features & IORING_FEAT_CQE_SKIP) || !(p.features & IORING_FEAT_NODROP)) {
		snprintf(why, why_len,
			 "kernel lacks IORING_FEAT_CQE_SKIP/NODROP (needs Linux 5.17)");
		rc = -ENOSYS;
		goto fail;
	}
	rc = io_uring_register_files_sparse(&r->ring, depth);
	if (rc) {
		snprintf(why, why_len, "registering a sparse table of %u files failed: %s%s", depth,
			 strerrordesc_np(-rc), rc == -EMFILE ? " (above RLIMIT_NOFILE)" : "");
		rc = rc == -EINVAL ? -ENOSYS : rc;
		goto fail;
	}
	/* A write chain holds its io-wq worker from the create to the rename,
	 * waiting for the disk in between (an O_DIRECT write that extends a
	 * file completes synchronously on ext4). The kernel's default of
	 * min(SQ entries, 4 x CPUs) bounded workers, 8 on 2 CPUs, left 24 of
	 * 32 chains queued behind 8; one worker per chain measured 1.5x the
	 * 64 KiB set rate here. The limit belongs to each thread that submits
	 * to this ring; before Linux 5.15 there is none to set. */
	unsigned workers[2] = {depth < IO_WQ_BOUNDED_MAX ? depth : IO_WQ_BOUNDED_MAX, 0};
	int wrc = io_uring_register_iowq_max_workers(&r->ring, workers);
	if (wrc)
		log_debug("io: io-wq worker limit not raised to %u: %s", workers[0],
			  strerrordesc_np(-wrc));
	*out = r;
	return 0;
fail:
	io_ring_free(r);
	return rc;
}

/* The opcodes the chains need. Probed once, on the engine's first ring. */
static int io_ring_probe_ops(struct io_ring *r, char *why, size_t why_len)
{
	static const struct {
		int op;
		const char *name;
	} need[] = {
		{IORING_OP_OPENAT, "OPENAT"},     {IORING_OP_CLOSE, "CLOSE"},
		{IORING_OP_RENAMEAT, "RENAMEAT"}, {IORING_OP_UNLINKAT, "UNLINKAT"},
		{IORING_OP_READV, "READV"},       {IORING_OP_WRITEV, "WRITEV"},
		{IORING_OP_NOP, "NOP"},
	};
	struct io_uring_probe *probe = io_uring_get_probe_ring(&r->ring);
	if (!probe) {
		snprintf(why, why_len, "IORING_REGISTER_PROBE failed");
		return -ENOSYS;
	}
	int rc = 0;
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		if (!io_uring_opcode_supported(probe, need[i].op)) {
			snprintf(why, why_len, "kernel lacks IORING_OP_%s", need[i].name);
			rc = -ENOSYS;
			break;
		}
	}
	io_uring_free_probe(probe);
	return rc;
}

int io_ring_pool_create(unsigned depth, struct io_ring_pool **out, char *why, size_t why_len)
{
	*out = NULL;
	struct io_ring_pool *p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(why, why_len, "no memory");
		return -ENOMEM;
	}
	struct io_ring *r;
	int rc = io_ring_new(depth, &r, why, why_len);
	if (rc) {
		free(p);
		return rc;
	}
	rc = io_ring_probe_ops(r, why, why_len);
	if (rc) {
		io_ring_free(r);
		free(p);
		return rc;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->returned, NULL);
	p->depth = depth;
	p->free = r; /* the probe's ring is the first of the pool */
	p->live = 1;
	*out = p;
	return 0;
}

void io_ring_pool_destroy(struct io_ring_pool *p)
{
	if (!p)
		return;
	while (p->free) {
		struct io_ring *r = p->free;
		p->free = r->next;
		io_ring_free(r);
	}
	pthread_cond_destroy(&p->returned);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static int io_ring_get(struct io_ring_pool *p, struct io_ring **out)
{
	pthread_mutex_lock(&p->lock);
	for (;;) {
		if (p->free) {
			*out = p->free;
			p->free = (*out)->next;
			pthread_mutex_unlock(&p->lock);
			return 0;
		}
		if (p->live < IO_RING_POOL_MAX) {
			p->live++;
			pthread_mutex_unlock(&p->lock);
			char why[256];
			int rc = io_ring_new(p->depth, out, why, sizeof(why));
			if (rc == 0)
				return 0;
			pthread_mutex_lock(&p->lock);
			p->live--;
			if (!p->live) {
				pthread_mutex_unlock(&p->lock);
				return util_fail(rc, "io: cannot set up an io_uring ring: %s", why);
			}
			/* Others exist: wait for one of them rather than retry at once. */
			log_debug("io: extra ring not created (%s); waiting for a free one", why);
			if (p->free)
				continue;
		}
		pthread_cond_wait(&p->returned, &p->lock);
	}
}

static void io_ring_put(struct io_ring_pool *p, struct io_ring *r)
{
	pthread_mutex_lock(&p->lock);
	if (r->broken) {
		p->live--;
		io_ring_free(r);
	} else {
		r->next = p->free;
		p->free = r;
	}
	pthread_cond_signal(&p->returned);
	pthread_mutex_unlock(&p->lock);
}

/* Room for need iovecs in idle slot s; NULL without memory. */
static struct iovec *io_slot_iovs(struct io_ring *r, unsigned s, unsigned need)
{
	struct io_slot_iov *si = &r->slot_iov[s];
	if (need > si->cap) {
		struct iovec *v = realloc(si->v, need * sizeof(*v));
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

static void io_page_fail(struct io_ring_page *pg, int *result, int err)
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
static int io_ring_submit(struct io_ring *r, unsigned n, bool fail_pages)
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
static int io_ring_next(struct io_ring *r, unsigned *page, unsigned *step, int *res)
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
static void io_ring_cleanup(struct io_ring *r, unsigned n)
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
static unsigned io_ring_idle_slots(struct io_ring *r, unsigned *running, unsigned *failed)
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
static void io_ring_release(struct io_ring *r, struct io_stream *s, bool all)
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

static void io_ring_stream_begin(struct io_ring *r)
{
	r->gen++;
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
static bool io_ring_may_take(const struct io_stream *s, unsigned failed)
{
	return s->cur || !failed;
}

/* ---- writes ---- */

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
	struct io_uring_sqe *sqe;
	if (first) {
		sqe = io_uring_get_sqe(&r->ring);
		io_uring_prep_openat_direct(
			sqe, q->dirfd, q->tmp_name,
			O_CREAT | O_EXCL | O_WRONLY | (q->direct ? O_DIRECT : 0), 0600, i);
		io_sqe_finish(sqe, io_ud(r, i, IO_STEP_OPEN),
			      IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS);
	}
	sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_writev(sqe, (int)i, iov, cnt, pg->done);
	io_sqe_finish(sqe, io_ud(r, i, IO_STEP_RW),
		      IOSQE_IO_LINK | IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS);
	sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_close_direct(sqe, i);
	io_sqe_finish(sqe, io_ud(r, i, IO_STEP_CLOSE), IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS);
	sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_renameat(sqe, q->dirfd, q->tmp_name, q->dirfd, q->final_name,
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
		if (step == IO_STEP_OPEN && res == -EEXIST)
			res = -EBUSY; /* the temp name, not the final name */
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
		st->ready = malloc(r->depth * sizeof(*st->ready));
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

/*
 * Write the stream's requests keeping up to depth chains in flight: a slot
 * takes the next request as soon as its chain is over, so the disk never
 * waits for the slowest page, and the feed is asked for more as soon as
 * there is room. A request's prepare hook runs when it gets its slot.
 * Failed slots stay out of use until the clean-up. Returns when the feed
 * has nothing more and nothing is in flight, or when the ring broke.
 */
static void io_ring_write_stream(struct io_ring *r, struct io_stream *st)
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
			r->pages[s] = (struct io_ring_page){
				.state = IO_PG_START, .clean_close = true, .dirfd = q->dirfd,
				.tmp = q->tmp_name, .result = &q->result, .q = q, .arr = a};
			io_ring_prep_write(r, s, q);
			queued = true;
			/* The caller's preparation of the next pages overlaps the
			 * disk only if what is ready goes out now; without it the
			 * chains go out together, in one system call. */
			unsent += fresh ? q->len : 0;
			if (q->prepare && unsent >= IO_SUBMIT_BYTES) {
				io_ring_submit(r, r->depth, true);
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
		do {
			unsigned s, step;
			int res;
			rc = io_ring_next(r, &s, &step, &res);
			if (rc)
				break;
			struct io_ring_page *pg = &r->pages[s];
			if (pg->state != IO_PG_RUN)
				continue;
			io_ring_write_cqe(r, s, step, res, pg->q);
			running--;
			if (pg->state == IO_PG_IDLE)
				r->free_slots[nfree++] = s;
			failed += pg->state == IO_PG_FAILED;
			resume += pg->state == IO_PG_RESUME;
		} while (running && io_uring_cq_ready(&r->ring));
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

/* ---- reads: streamed, a slot refilled as soon as its chain is done ---- */

static void io_ring_prep_read(struct io_ring *r, unsigned i, const struct io_read_req *q)
{
	struct io_ring_page *pg = &r->pages[i];
	/* The slot's iovecs hold q->iovcnt + 1 (io_ring_read_stream). */
	struct iovec *iov = r->slot_iov[i].v;
	memcpy(iov, q->iov, q->iovcnt * sizeof(*iov));
	iov[q->iovcnt] = (struct iovec){.iov_base = r->scratch, .iov_len = IO_SCRATCH};
	pg->sqe_first = r->ring.sq.sqe_tail;
	pg->sqe_count = 3;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_openat_direct(sqe, q->dirfd, q->name, O_RDONLY | (q->direct ? O_DIRECT : 0),
				    0, i);
	io_sqe_finish(sqe, io_ud(r, i, IO_STEP_OPEN), IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS);
	/* HARDLINK: a short read (the normal answer for a shorter file) must
	 * not cancel the close. */
	sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_readv(sqe, (int)i, iov, q->iovcnt + 1, 0);
	io_sqe_finish(sqe, io_ud(r, i, IO_STEP_RW), IOSQE_IO_HARDLINK | IOSQE_FIXED_FILE);
	sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_close_direct(sqe, i);
	io_sqe_finish(sqe, io_ud(r, i, IO_STEP_CLOSE), 0);
	pg->state = IO_PG_RUN;
}

/* One completion of page i's read chain; returns true when its request
 * is finished (its result is set, its slot idle or due for clean-up). */
static bool io_ring_read_cqe(struct io_ring *r, unsigned i, unsigned step, int res)
{
	struct io_ring_page *pg = &r->pages[i];
	struct io_read_req *q = pg->q;
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

/* The arrived hooks due. Called after the refill: this disk completes a
 * batch's reads in one burst, and their checksums (memory-bound, ~30 us per
 * cold 512 KiB object) taken before the refill would leave it idle
 * meanwhile. */
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
static void io_ring_read_stream(struct io_ring *r, struct io_stream *st)
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
			r->pages[s] = (struct io_ring_page){.state = IO_PG_IDLE, .dirfd = -1,
							    .result = &q->result, .q = q, .arr = a};
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
		do {
			unsigned s, step;
			int res;
			rc = io_ring_next(r, &s, &step, &res);
			if (rc)
				break;
			struct io_ring_page *pg = &r->pages[s];
			if (pg->state != IO_PG_RUN)
				continue;
			if (io_ring_read_cqe(r, s, step, res)) {
				running--;
				if (pg->state == IO_PG_IDLE)
					r->free_slots[nfree++] = s;
				failed += pg->state == IO_PG_FAILED;
			}
		} while (running && io_uring_cq_ready(&r->ring));
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

/* ---- streams: all on one ring while it works ---- */

int io_ring_pool_stream(struct io_ring_pool *p, struct io_stream *s)
{
	struct io_ring *r;
	int rc = io_ring_get(p, &r);
	if (rc)
		return rc;
	for (;;) {
		if (s->write)
			io_ring_write_stream(r, s);
		else
			io_ring_read_stream(r, s);
		if (!r->broken)
			break;
		io_ring_put(p, r);
		rc = io_ring_get(p, &r);
		if (rc) {
			io_stream_fail_rest(s, rc);
			return 0;
		}
	}
	io_ring_put(p, r);
	return 0;
}
