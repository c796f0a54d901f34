/*
 * io_uring engine: ring set-up, the kernel probe, and the pool of rings a
 * call takes one from for its whole stream. The design of the chains is at
 * the top of io_ring.h.
 */
#define _GNU_SOURCE
#include "io/io_ring.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IO_RING_POOL_MAX 64
/* io-wq workers a submitting thread may have for blocking work (creates,
 * allocating O_DIRECT writes, renames): one per chain in flight, up to
 * this many. */
#define IO_WQ_BOUNDED_MAX 128

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
	struct io_ring *r = util_fault_calloc(1, sizeof(*r));
	if (!r) {
		snprintf(why, why_len, "no memory");
		return -ENOMEM;
	}
	r->depth = depth;
	r->pages = util_fault_calloc(depth, sizeof(*r->pages));
	r->free_slots = util_fault_calloc(depth, sizeof(*r->free_slots));
	r->arrivals = util_fault_calloc(IO_ARRIVALS(depth), sizeof(*r->arrivals));
	r->slot_iov = util_fault_calloc(depth, sizeof(*r->slot_iov));
	int rc = util_fault_hit(HC_FAULT_ALLOC)
			 ? ENOMEM
			 : posix_memalign(&r->scratch, IO_SCRATCH, IO_SCRATCH);
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
	 * with an IPI, which on a paravirtualized guest traps to the
	 * hypervisor, a cost paid per page. This thread
	 * enters the kernel to submit or wait often enough to run them there.
	 * TASKRUN_FLAG: the kernel says in the SQ flags when such work waits,
	 * so a read stream busy with its hooks knows, without a system call,
	 * when entering the kernel would post completions (io_ring_cq_pending). */
	struct io_uring_params p = {.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
					     IORING_SETUP_TASKRUN_FLAG};
	rc = io_uring_queue_init_params(depth * 4, &r->ring, &p);
	if (rc == -EINVAL) {
		/* Linux 5.18 has SUBMIT_ALL but not COOP_TASKRUN nor
		 * TASKRUN_FLAG (5.19). */
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
	 * min(SQ entries, 4 x CPUs) bounded workers leaves the chains beyond
	 * that queued behind the others while those wait for the disk, so the
	 * rule is one worker per chain. The limit belongs to each thread that submits
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
	struct io_ring_pool *p = util_fault_calloc(1, sizeof(*p));
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
