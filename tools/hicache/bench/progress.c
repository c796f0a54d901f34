/*
 * hicache bench store: the progress line on a terminal, redrawn by its own
 * thread at most every BENCH_PROGRESS_NS from counters the workers add to.
 */
#define _GNU_SOURCE
#include "bench.h"

#include "../commands.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

/* ---- the progress line ---- */

static void progress_draw(struct progress *p)
{
	uint64_t pages = atomic_load_explicit(&p->pages, memory_order_relaxed);
	uint64_t bytes = atomic_load_explicit(&p->bytes, memory_order_relaxed);
	double s = (double)(bench_now_ns() - p->t0) / 1e9;

	/* Wall time, fills included: the final summary has the store's own. */
	fprintf(stderr, "\rbench store %s: %llu/%llu pages (%.0f%%), %.3f GB/s so far", p->label,
		(unsigned long long)pages, (unsigned long long)p->total,
		p->total ? 100.0 * (double)pages / (double)p->total : 100.0,
		s > 0 ? (double)bytes / s / 1e9 : 0.0);
	fflush(stderr);
	p->printed = true;
}

static void *progress_main(void *arg)
{
	struct progress *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += (long)BENCH_PROGRESS_NS;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (!p->stop && pthread_cond_timedwait(&p->wake, &p->lock, &until) != ETIMEDOUT)
			;
		if (!p->stop)
			progress_draw(p);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Starts the line's thread; on any failure the phase runs without it. */
void bench_progress_start(struct bench *b, struct progress *p, const char *label, uint64_t total)
{
	pthread_condattr_t attr;

	if (!b->show_progress)
		return;
	*p = (struct progress){.total = total, .label = label, .t0 = bench_now_ns()};
	if (pthread_condattr_init(&attr))
		return;
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, &attr);
	pthread_condattr_destroy(&attr);
	if (pthread_create(&p->tid, NULL, progress_main, p)) {
		pthread_cond_destroy(&p->wake);
		pthread_mutex_destroy(&p->lock);
		return;
	}
	b->progress = p;
}

/* Stops the thread and erases the line, so the summary starts clean. */
void bench_progress_stop(struct bench *b)
{
	struct progress *p = b->progress;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->tid, NULL);
	if (p->printed) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	b->progress = NULL;
}
