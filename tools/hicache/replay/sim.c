/* The replay's virtual-time queue: one configuration's requests on its
 * instances (one cache each; one instance unless --instances). */
#define _GNU_SOURCE
#include "replay.h"

#include "commands.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t replay_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void replay_progress_draw(struct progress *p, const char *name, size_t i, size_t n)
{
	uint64_t t = replay_now_ns();
	if (!p->on || (i < n && t - p->last < PROGRESS_NS))
		return;
	p->last = t;
	p->printed = true;
	fprintf(stderr, "\r%-10s %zu/%zu requests (%.0f%%)  ", name, i, n,
		n ? 100.0 * (double)i / (double)n : 100.0);
}

static bool ready_before(const struct sim *s, size_t x, size_t y)
{
	return s->ready_at[x] < s->ready_at[y] || (s->ready_at[x] == s->ready_at[y] && x < y);
}

/* Min-heaps of request indices by (ready time, index): the requests not
 * routed yet (s->heap) and each instance's queue. */
static void heap_push(struct sim *s, size_t *h, size_t *nh, size_t i, double t)
{
	size_t k = (*nh)++;
	s->ready_at[i] = t;
	h[k] = i;
	while (k > 0 && ready_before(s, h[k], h[(k - 1) / 2])) {
		size_t p = (k - 1) / 2, x = h[p];
		h[p] = h[k];
		h[k] = x;
		k = p;
	}
}

static size_t heap_pop(struct sim *s, size_t *h, size_t *nh)
{
	size_t top = h[0], k = 0;
	h[0] = h[--*nh];
	for (;;) {
		size_t l = 2 * k + 1, r = l + 1, m = k;
		if (l < *nh && ready_before(s, h[l], h[m]))
			m = l;
		if (r < *nh && ready_before(s, h[r], h[m]))
			m = r;
		if (m == k)
			return top;
		size_t x = h[m];
		h[m] = h[k];
		h[k] = x;
		k = m;
	}
}

/* A request arrives: first time only (a retry keeps its arrival). */
static void sim_arrive(struct sim *s, size_t i, double t)
{
	s->arrival[i] = t;
	heap_push(s, s->heap, &s->nheap, i, t);
}

/* Multi-turn (not sequential): the client's next round arrives now. */
static void sim_next_round(struct sim *s, size_t i)
{
	if (!s->a->sequential && !s->w->req[i].blocks && i + s->a->clients < s->w->n)
		sim_arrive(s, i + s->a->clients, s->now);
}

/* Route the next arrival (s->now is its ready time) to its instance's queue. */
static void sim_route(struct sim *s)
{
	size_t i = heap_pop(s, s->heap, &s->nheap);
	if (s->ready_at[i] > s->now)
		s->now = s->ready_at[i];
	struct inst *in = &s->in[fleet_route(s, i)];
	in->routed_tokens += s->w->req[i].input;
	in->queued_work += s->est[i];
	heap_push(s, in->q, &in->nq, i, s->ready_at[i]);
	s->queued++;
}

/* The instance whose queue has the earliest request that can start now. */
static struct inst *next_start(struct sim *s)
{
	struct inst *best = NULL;
	for (size_t k = 0; k < s->ninst; k++) {
		struct inst *in = &s->in[k];
		if (!in->blocked && in->inflight < s->nfl && in->nq > 0 &&
		    (!best || ready_before(s, in->q[0], best->q[0])))
			best = in;
	}
	return best;
}

/* Start the head of in's queue. 0 or -errno. */
static int sim_start_next(struct sim *s, struct inst *in, size_t *ended)
{
	size_t i = heap_pop(s, in->q, &in->nq);
	s->queued--;
	in->queued_work -= s->est[i];
	if (in->queued_work < 0 || in->nq == 0)
		in->queued_work = 0; /* rounding never leaves work behind */
	if (s->ready_at[i] > s->now)
		s->now = s->ready_at[i];
	if (s->a->sequential)
		s->arrival[i] = s->now; /* TTFT without queueing */
	struct flight *f = in->fl;
	while (f->busy)
		f++;
	int rc = sim_start(s, in, i, f);
	if (rc == 1 && in->inflight > 0) {
		heap_push(s, in->q, &in->nq, i, s->now);
		s->queued++;
		in->queued_work += s->est[i];
		in->blocked = true;
		rc = 0;
	} else if (rc == 1) {
		/* Alone and still no room: it runs without the cache. */
		const struct request *r = &s->w->req[i];
		s->res->skipped++;
		s->res->requests++;
		s->res->input_tokens += r->input;
		if (in->res) {
			in->res->requests++;
			in->res->input_tokens += r->input;
		}
		s->ttft[i] = s->now - s->arrival[i] + (double)r->input / s->a->prefill_tps;
		sim_next_round(s, i);
		(*ended)++;
		rc = 0;
	} else if (rc == 0) {
		f->busy = true;
		in->inflight++;
		s->inflight++;
	}
	return rc;
}

/*
 * Runs the whole workload; the flights' requests are ended on error too.
 * Events at one time go: starts (the earliest queued request first), then
 * arrivals (routed to an instance's queue), then ends. Sequential: a
 * request is routed only when nothing is in flight or queued, so the
 * fleet serves one request at a time in trace order.
 */
int sim_run(struct sim *s, struct progress *prog)
{
	const struct workload *w = s->w;
	size_t ended = 0;
	int rc = 0;

	for (size_t i = 0; i < w->n; i++) {
		if (s->a->sequential)
			heap_push(s, s->heap, &s->nheap, i, 0);
		else if (w->req[i].blocks || i < s->a->clients)
			sim_arrive(s, i, w->req[i].blocks ? w->req[i].arrival / s->a->speed : 0);
	}
	while (ended < w->n && !rc) {
		if (replay_stop) {
			rc = -EINTR; /* cmd_replay cleans up and dies of the signal */
			break;
		}
		struct inst *fin = NULL;
		struct flight *first = NULL;
		for (size_t k = 0; k < s->ninst; k++)
			for (size_t j = 0; j < s->nfl; j++) {
				struct flight *f = &s->in[k].fl[j];
				if (f->busy && (!first || f->done_at < first->done_at)) {
					first = f;
					fin = &s->in[k];
				}
			}
		struct inst *st = next_start(s);
		bool may_route = s->nheap > 0 &&
				 (!s->a->sequential || (s->inflight == 0 && s->queued == 0));
		if (st) {
			rc = sim_start_next(s, st, &ended);
		} else if (may_route && (!first || s->ready_at[s->heap[0]] <= first->done_at)) {
			sim_route(s);
		} else if (first) {
			if (first->done_at > s->now)
				s->now = first->done_at;
			rc = sim_finish(s, fin, first);
			first->busy = false;
			fin->inflight--;
			s->inflight--;
			fin->blocked = false;
			if (!rc)
				sim_next_round(s, first->idx);
			ended++;
		} else {
			break; /* nothing in flight and nothing ready: cannot happen */
		}
		replay_progress_draw(prog, s->res->name, ended, w->n);
	}
	for (size_t k = 0; k < s->ninst; k++)
		for (size_t j = 0; j < s->nfl; j++) {
			struct flight *f = &s->in[k].fl[j];
			if (f->busy && f->req)
				hc_cache_abort(f->req);
			f->busy = false;
		}
	return rc;
}

void sim_free(struct sim *s)
{
	for (size_t k = 0; s->in && k < s->ninst; k++) {
		struct inst *in = &s->in[k];
		for (size_t j = 0; in->fl && j < s->nfl; j++) {
			free(in->fl[j].tok);
			free(in->fl[j].keys);
		}
		free(in->fl);
		free(in->q);
		lru_destroy(in->view);
	}
	free(s->in);
	lru_destroy(s->l3);
	free(s->rkeys);
	free(s->rtok);
	free(s->est);
	free(s->arrival);
	free(s->ready_at);
	free(s->heap);
	if (s->b) {
		free(s->b->slots);
		free(s->b->page);
		free(s->b->want);
		free(s->b->mstate);
		free(s->b->mwant);
	}
}

/* Returns 0, or -ENOMEM (said). with_tokens: flights carry token buffers.
 * The caller sets each instance's cache, budget, view, result and the
 * fleet L3 set and views (sim_fleet_sets()). */
int sim_init(struct sim *s, const struct replay_args *a, const struct workload *w,
	     struct replay_buf *b, double *ttft, struct result *res, bool with_tokens, size_t ninst)
{
	uint32_t ps = a->page_tokens;
	memset(s, 0, sizeof(*s));
	memset(b, 0, sizeof(*b));
	s->a = a;
	s->w = w;
	s->b = b;
	s->res = res;
	s->ttft = ttft;
	s->maxpages = w->max_input / ps + 1;
	s->nfl = a->sequential ? 1 : a->concurrency;
	s->ninst = ninst;
	s->arrival = calloc(w->n, sizeof(*s->arrival));
	s->ready_at = calloc(w->n, sizeof(*s->ready_at));
	s->heap = calloc(w->n, sizeof(*s->heap));
	s->est = calloc(w->n, sizeof(*s->est));
	s->in = calloc(ninst, sizeof(*s->in));
	bool ok = s->arrival && s->ready_at && s->heap && s->est && s->in;
	for (size_t k = 0; ok && k < ninst; k++) {
		struct inst *in = &s->in[k];
		in->fl = calloc(s->nfl, sizeof(*in->fl));
		in->q = calloc(w->n, sizeof(*in->q));
		ok = in->fl && in->q;
		for (size_t j = 0; ok && with_tokens && j < s->nfl; j++)
			ok = (in->fl[j].tok = malloc((w->max_input + 1) * sizeof(uint32_t))) !=
			     NULL;
	}
	if (ok && ninst > 1) {
		s->rkeys = malloc(s->maxpages * sizeof(*s->rkeys));
		s->rtok = malloc((w->max_input + 1) * sizeof(*s->rtok));
		ok = s->rkeys && s->rtok;
	}
	if (ok && with_tokens) {
		b->slots = malloc(s->maxpages * sizeof(*b->slots));
		b->page = malloc(ps * a->kv_bytes);
		b->want = malloc(ps * a->kv_bytes);
		b->mstate = malloc(a->mamba_bytes ? a->mamba_bytes : 1);
		b->mwant = malloc(a->mamba_bytes ? a->mamba_bytes : 1);
		ok = b->slots && b->page && b->want && b->mstate && b->mwant;
	}
	if (!ok) {
		sim_free(s);
		fprintf(stderr, "hicache replay: out of memory\n");
		return -ENOMEM;
	}
	return 0;
}

/* The fleet L3 set (cap pages, 0: unlimited) and the flights' key
 * buffers; views: each instance's router view of view_cap pages.
 * 0 or -ENOMEM (said). */
int sim_fleet_sets(struct sim *s, bool l3, uint64_t cap, bool emulated, bool views,
		   uint64_t view_cap)
{
	bool ok = true;
	if (l3) {
		ok = lru_create(cap, &s->l3) == 0;
		s->l3_emulated = emulated;
		for (size_t k = 0; ok && k < s->ninst; k++)
			for (size_t j = 0; ok && j < s->nfl; j++)
				ok = (s->in[k].fl[j].keys = malloc(s->maxpages *
								   sizeof(uint64_t))) != NULL;
	}
	for (size_t k = 0; ok && views && k < s->ninst; k++)
		ok = lru_create(view_cap, &s->in[k].view) == 0;
	if (!ok) {
		fprintf(stderr, "hicache replay: out of memory\n");
		return -ENOMEM;
	}
	return 0;
}

/* TTFT of every request with no cache: the same queue and device, prefill
 * only. */
int replay_baseline(const struct replay_args *a, const struct workload *w, uint64_t dev_tokens,
		    double *ttft)
{
	struct sim s;
	struct replay_buf b;
	struct result res = {.name = "no cache"};
	struct progress prog = {0};
	size_t n = (size_t)a->instances;
	int rc = sim_init(&s, a, w, &b, ttft, &res, false, n);
	for (size_t k = 0; !rc && k < n; k++)
		s.in[k].dev_budget = dev_tokens / a->page_tokens;
	if (!rc)
		rc = sim_run(&s, &prog);
	sim_free(&s);
	return rc;
}
