/*
 * Thread engine: the io_uring chains done with plain system calls by a
 * pool of worker threads, for kernels or sandboxes without io_uring.
 *
 *   caller: job {reqs, n} --> queue (FIFO, one mutex) <-- workers take
 *           one page at a time; the caller takes pages of its own job too,
 *           then sleeps until the last page of its job is finished.
 *
 *   write  openat(tmp, O_CREAT|O_EXCL) -> pwritev until all is written ->
 *          close -> renameat2(tmp, final[, RENAME_NOREPLACE]); on any
 *          failure the temp file is unlinked.
 *   read   openat(name) -> one preadv(iov + scratch) -> close
 *
 * Results match the io_uring engine's: the read is one preadv, as there
 * (a short read of a regular file is its end), and a short write is
 * continued, as the io_uring engine resumes it, so a full disk reads
 * -ENOSPC in both.
 *
 * queue_depth does not apply here: at most `threads` pages plus one per
 * calling thread are in flight.
 *
 * Temp names must be unique among the pages in flight (the store puts a
 * random nonce and a sequence number in them): a page whose O_EXCL open
 * finds its temp name taken fails with -EBUSY and leaves that file alone
 * (it may be another writer's live temp file).
 *
 * Workers block every signal: a library thread must not take the
 * application's signals.
 */
#define _GNU_SOURCE
#include "io/io_stream.h"
#include "io/io_threads_engine.h"
#include "util/thread.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Per thread that runs pages (workers and helping callers). */
struct io_ctx {
	void *scratch;     /* IO_SCRATCH bytes, aligned for O_DIRECT */
	struct iovec *iov; /* IO_MAX_IOV entries */
};

struct io_job {
	struct io_job *prev, *next; /* in the queue while pages are unclaimed */
	bool write;
	void *reqs;
	size_t n;
	size_t claimed;  /* pages handed out */
	size_t finished; /* pages done */
	pthread_cond_t done;
};

struct io_worker {
	struct io_workers *pool;
	pthread_t tid;
	struct io_ctx ctx;
};

struct io_workers {
	pthread_mutex_t lock;
	pthread_cond_t work;
	struct io_job *head, *tail;
	bool stop;
	unsigned started; /* threads running, to join */
	unsigned count;
	struct io_worker *workers;
};

static int io_ctx_init(struct io_ctx *c)
{
	c->iov = util_fault_malloc(IO_MAX_IOV * sizeof(*c->iov));
	if (util_fault_hit(HC_FAULT_ALLOC) || posix_memalign(&c->scratch, IO_SCRATCH, IO_SCRATCH))
		c->scratch = NULL;
	return c->iov && c->scratch ? 0 : -ENOMEM;
}

static void io_ctx_fini(struct io_ctx *c)
{
	free(c->iov);
	free(c->scratch);
	c->iov = NULL;
	c->scratch = NULL;
}

static int io_sys_write(const struct io_write_req *q, struct io_ctx *c)
{
	if (q->prepare) {
		int prc = q->prepare(q->arg);
		if (prc)
			return prc < 0 ? prc : -EIO;
	}
	return io_write_file(q, c->iov);
}

static int io_sys_read(const struct io_read_req *q, struct io_ctx *c)
{
	int fd;
	do
		fd = io_openat_beneath(q->dirfd, q->name,
				       O_RDONLY | O_CLOEXEC | (q->direct ? O_DIRECT : 0), 0);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -errno;
	memcpy(c->iov, q->iov, q->iovcnt * sizeof(*c->iov));
	c->iov[q->iovcnt] = (struct iovec){.iov_base = c->scratch, .iov_len = IO_SCRATCH};
	ssize_t k;
	do
		k = HC_FAULT_SYS(HC_FAULT_READ, EIO, preadv(fd, c->iov, (int)q->iovcnt + 1, 0));
	while (k < 0 && errno == EINTR);
	int rc = k < 0 ? -errno : io_read_result(k, q->len);
	close(fd); /* nothing was written: a close error loses nothing */
	if (rc == 0 && q->arrived)
		q->arrived(q->arg);
	return rc;
}

static void io_job_run(struct io_job *j, size_t i, struct io_ctx *c)
{
	if (j->write) {
		struct io_write_req *q = (struct io_write_req *)j->reqs + i;
		if (q->result == IO_PENDING)
			q->result = io_sys_write(q, c);
	} else {
		struct io_read_req *q = (struct io_read_req *)j->reqs + i;
		if (q->result == IO_PENDING)
			q->result = io_sys_read(q, c);
	}
}

/* Under w->lock. A job leaves the queue when its last page is handed out,
 * so that a finished caller never leaves its (stack) job linked. */
static bool io_job_claim(struct io_workers *w, struct io_job *j, size_t *i)
{
	if (j->claimed == j->n)
		return false;
	*i = j->claimed++;
	if (j->claimed == j->n) {
		if (j->prev)
			j->prev->next = j->next;
		else
			w->head = j->next;
		if (j->next)
			j->next->prev = j->prev;
		else
			w->tail = j->prev;
		j->prev = j->next = NULL;
	}
	return true;
}

/* Under w->lock, which it drops while the page runs. */
static void io_job_page(struct io_workers *w, struct io_job *j, size_t i, struct io_ctx *c)
{
	pthread_mutex_unlock(&w->lock);
	io_job_run(j, i, c);
	pthread_mutex_lock(&w->lock);
	if (++j->finished == j->n)
		pthread_cond_signal(&j->done);
}

static void *io_worker_main(void *arg)
{
	struct io_worker *me = arg;
	struct io_workers *w = me->pool;
	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct io_job *j = w->head;
		size_t i;
		if (j && io_job_claim(w, j, &i)) {
			io_job_page(w, j, i, &me->ctx);
			continue;
		}
		if (w->stop)
			break;
		pthread_cond_wait(&w->work, &w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

void io_workers_destroy(struct io_workers *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->work);
	pthread_mutex_unlock(&w->lock);
	for (unsigned i = 0; i < w->started; i++)
		pthread_join(w->workers[i].tid, NULL);
	for (unsigned i = 0; i < w->count; i++)
		io_ctx_fini(&w->workers[i].ctx);
	pthread_cond_destroy(&w->work);
	pthread_mutex_destroy(&w->lock);
	free(w->workers);
	free(w);
}

int io_workers_create(unsigned threads, struct io_workers **out)
{
	*out = NULL;
	struct io_workers *w = util_fault_calloc(1, sizeof(*w));
	if (!w)
		return util_fail(-ENOMEM, "io: no memory for the thread engine");
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->work, NULL);
	w->workers = util_fault_calloc(threads, sizeof(*w->workers));
	if (!w->workers) {
		io_workers_destroy(w);
		return util_fail(-ENOMEM, "io: no memory for %u worker threads", threads);
	}
	w->count = threads;
	for (unsigned i = 0; i < threads; i++) {
		w->workers[i].pool = w;
		if (io_ctx_init(&w->workers[i].ctx)) {
			io_workers_destroy(w);
			return util_fail(-ENOMEM, "io: no memory for %u worker threads", threads);
		}
	}
	int rc = 0;
	for (unsigned i = 0; i < threads; i++) {
		rc = -util_thread_start(&w->workers[i].tid, io_worker_main, &w->workers[i]);
		if (rc)
			break;
		pthread_setname_np(w->workers[i].tid, "hicache-io");
		w->started++;
	}
	if (rc) {
		io_workers_destroy(w);
		return util_fail(-rc, "io: cannot start %u worker threads: %s", threads,
				 strerrordesc_np(rc));
	}
	*out = w;
	return 0;
}

static int io_workers_run(struct io_workers *w, bool write, void *reqs, size_t n)
{
	struct io_ctx ctx;
	/* Without memory of its own the caller only waits. */
	bool help = io_ctx_init(&ctx) == 0;
	struct io_job j = {.write = write, .reqs = reqs, .n = n};
	pthread_cond_init(&j.done, NULL);
	pthread_mutex_lock(&w->lock);
	j.prev = w->tail;
	if (w->tail)
		w->tail->next = &j;
	else
		w->head = &j;
	w->tail = &j;
	/* The caller takes a page itself; wake only as many workers as there
	 * are other pages. */
	size_t wake = help ? n - 1 : n;
	if (wake >= w->count)
		pthread_cond_broadcast(&w->work);
	else
		for (size_t k = 0; k < wake; k++)
			pthread_cond_signal(&w->work);
	size_t i;
	while (help && io_job_claim(w, &j, &i))
		io_job_page(w, &j, i, &ctx);
	while (j.finished < n)
		pthread_cond_wait(&j.done, &w->lock);
	pthread_mutex_unlock(&w->lock);
	pthread_cond_destroy(&j.done);
	io_ctx_fini(&ctx);
	return 0;
}

int io_workers_stream(struct io_workers *w, struct io_stream *s)
{
	void *q;
	struct io_arr *a;
	/* Taking the first request takes its array; the workers run all of it,
	 * and it is over (and handed back) when its holds are. */
	while ((q = io_stream_next_req(s, &a))) {
		size_t first = (size_t)((char *)q - (char *)a->reqs) / s->req_size;
		size_t left = a->n - first;
		s->cur = NULL;
		a->next = a->n;
		io_workers_run(w, s->write, q, left);
		a->holds -= left - 1;
		io_arr_put(s, a);
	}
	return 0;
}
