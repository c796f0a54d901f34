/*
 * hicache bench store: what one thread does with its page range (batches,
 * or --pipeline lanes of started calls), and the phases that run every
 * thread at once. Only the store calls are timed.
 */
#define _GNU_SOURCE
#include "bench.h"

#include "../commands.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- one thread ---- */

static void worker_fail(struct worker *w, const char *what, int rc)
{
	const char *msg = hc_last_error();
	if (w->rc)
		return; /* the first failure is the one to report */
	w->rc = rc;
	w->what = what;
	snprintf(w->err, sizeof(w->err), "%s", msg[0] ? msg : hc_strerror(rc));
}

static void note_page_error(struct tally *t, uint64_t page, int rc)
{
	if (!t->first_err) {
		t->first_err = rc;
		t->first_err_page = page;
	}
}

/* Keys of pages [first, first + n) into w->keys[base...]. */
static int batch_keys(struct worker *w, size_t base, uint64_t first, size_t n)
{
	struct hc_key *keys = &w->keys[base];
	for (size_t j = 0; j < n; j++) {
		int rc = bench_page_key(w->b->a->seed, first + j, &keys[j]);
		if (rc) {
			worker_fail(w, "page key", rc);
			return rc;
		}
	}
	return 0;
}

/* One store call of direction op into the worker's record: lat_ns from its
 * start to its end, busy_ns of that inside the store's functions. */
static void note_call(struct worker *w, enum bench_op op, uint64_t lat_ns, uint64_t busy_ns,
		      size_t n)
{
	w->lat_ns[w->nlat] = lat_ns;
	w->lat_op[w->nlat++] = (uint8_t)op;
	w->busy_ns[op] += busy_ns;
	w->pages[op] += n;
}

static void note_batch(struct worker *w, enum bench_op op, uint64_t t0, size_t n)
{
	uint64_t dt = bench_now_ns() - t0;
	note_call(w, op, dt, dt, n);
}

/* Pages [first, first + n) into the pool slots w->slots[base...]; their
 * results marked. */
static int set_fill(struct worker *w, size_t base, uint64_t first, size_t n)
{
	const struct bench_args *a = w->b->a;

	for (size_t j = 0; j < n; j++) {
		bench_fill_page(a->seed, first + j, w->flat, a->page_bytes);
		int rc = hc_pool_scatter(w->b->pool, w->slots[base + j], w->flat, a->page_bytes);
		if (rc) {
			worker_fail(w, "filling the pool", rc);
			return rc;
		}
		/* Marks pages the call never reached (a whole-call error). */
		w->results[base + j] = 1;
	}
	return 0;
}

static int set_done(struct worker *w, size_t base, uint64_t first, size_t n, int rc,
		    const char *what)
{
	struct tally *t = &w->tally[OP_SET];
	const int *results = &w->results[base];

	for (size_t j = 0; j < n; j++) {
		if (results[j] == 1) {
			worker_fail(w, what, rc ? rc : -EIO);
			return w->rc;
		}
		if (results[j]) {
			t->errors++;
			note_page_error(t, first + j, results[j]);
		}
	}
	return 0;
}

/* One synchronous call of pages [first, first + n), whose keys, slots and
 * results are those at base. */
static int batch_set(struct worker *w, size_t base, uint64_t first, size_t n)
{
	if (set_fill(w, base, first, n))
		return w->rc;
	uint64_t t0 = bench_now_ns();
	int rc = hc_store_set(w->b->store, &w->keys[base], n, &w->slots[base], &w->results[base]);
	note_batch(w, OP_SET, t0, n);
	return set_done(w, base, first, n, rc, "hc_store_set");
}

static void check_read(struct worker *w, uint64_t page, int result, uint64_t slot)
{
	const struct bench_args *a = w->b->a;
	struct tally *t = &w->tally[OP_GET];

	if (result == -ENOENT) {
		t->misses++;
		return;
	}
	if (result) {
		if (result == -EBADMSG)
			t->corrupt++;
		else
			t->errors++;
		note_page_error(t, page, result);
		return;
	}
	t->hits++;
	if (!a->verify)
		return;
	/* A stale slot cannot pass: every page index has its own content. */
	if (!hc_pool_gather(w->b->pool, slot, w->flat, a->page_bytes) &&
	    bench_page_matches(a->seed, page, w->flat, a->page_bytes))
		t->verified++;
	else
		t->mismatched++;
}

static int get_done(struct worker *w, size_t base, uint64_t first, size_t n, int64_t hits,
		    const char *what)
{
	if (hits < 0) {
		worker_fail(w, what, (int)hits);
		return w->rc;
	}
	for (size_t j = 0; j < n; j++)
		check_read(w, first + j, w->results[base + j], w->slots[base + j]);
	return 0;
}

static int batch_get(struct worker *w, size_t base, uint64_t first, size_t n)
{
	uint64_t t0 = bench_now_ns();
	int64_t hits = hc_store_get(w->b->store, &w->keys[base], n, &w->slots[base],
				    &w->results[base]);
	note_batch(w, OP_GET, t0, n);
	return get_done(w, base, first, n, hits, "hc_store_get");
}

/* --pipeline: start the call of pages [first, first + n) in lane l. The
 * pages' keys, slots and results are those at their offset in the
 * thread's range (all filled before the timed loop). */
static int lane_start(struct worker *w, size_t l, enum bench_op op, uint64_t first, size_t n)
{
	struct lane *ln = &w->lanes[l];
	size_t base = (size_t)(first - w->first);

	*ln = (struct lane){.dir = op, .first = first, .n = n, .t_start = bench_now_ns()};
	int rc = op == OP_SET ? hc_store_set_start(w->b->store, &w->keys[base], n, &w->slots[base],
						   &w->results[base], &ln->op)
			      : hc_store_get_start(w->b->store, &w->keys[base], n, &w->slots[base],
						   &w->results[base], &ln->op);
	if (rc)
		worker_fail(w, op == OP_SET ? "hc_store_set_start" : "hc_store_get_start", rc);
	return rc;
}

static void progress_add(struct worker *w, enum bench_op op, const struct tally *before, size_t n);

/* --pipeline: wait for lane l's call, if any, and count it (its latency
 * runs from its start). */
static int lane_finish(struct worker *w, size_t l)
{
	struct lane *ln = &w->lanes[l];

	if (!ln->op)
		return 0;
	int64_t r = hc_store_op_wait(ln->op);
	ln->op = NULL;
	note_call(w, ln->dir, bench_now_ns() - ln->t_start, 0, ln->n);
	struct tally before = w->tally[ln->dir];
	size_t base = (size_t)(ln->first - w->first);
	int rc = ln->dir == OP_SET ? set_done(w, base, ln->first, ln->n, (int)r, "hc_store_op_wait")
				   : get_done(w, base, ln->first, ln->n, r, "hc_store_op_wait");
	progress_add(w, ln->dir, &before, ln->n);
	return rc;
}

static int batch_exists(struct worker *w, size_t base, size_t n)
{
	uint64_t t0 = bench_now_ns();
	int64_t hits = hc_store_exists(w->b->store, &w->keys[base], n);
	note_batch(w, OP_EXISTS, t0, n);
	if (hits < 0) {
		worker_fail(w, "hc_store_exists", (int)hits);
		return w->rc;
	}
	w->tally[OP_EXISTS].hits += (uint64_t)hits;
	w->tally[OP_EXISTS].misses += n - (uint64_t)hits;
	return 0;
}

struct phase {
	struct worker *w;
	enum phase_kind kind;
	enum bench_op op; /* PHASE_ALL */
};

/* The direction of batch j of a phase, or OP_COUNT to skip it. */
static enum bench_op batch_op(const struct phase *ph, uint64_t j)
{
	bool get = (j + ph->w->index) % 2 == 0;

	switch (ph->kind) {
	case PHASE_MIXED:
		return get ? OP_GET : OP_SET;
	case PHASE_LAYOUT:
		return get ? OP_SET : OP_COUNT;
	default:
		return ph->op;
	}
}

/* Payload bytes a batch moved: stored or read pages, none for exists. */
static uint64_t batch_bytes(const struct worker *w, enum bench_op op, const struct tally *before,
			    size_t n)
{
	uint64_t pb = w->b->a->page_bytes;

	if (op == OP_SET)
		return (n - (w->tally[OP_SET].errors - before->errors)) * pb;
	if (op == OP_GET)
		return (w->tally[OP_GET].hits - before->hits) * pb;
	return 0;
}

static void progress_add(struct worker *w, enum bench_op op, const struct tally *before, size_t n)
{
	struct progress *p = w->b->progress;

	if (p) {
		atomic_fetch_add_explicit(&p->pages, n, memory_order_relaxed);
		atomic_fetch_add_explicit(&p->bytes, batch_bytes(w, op, before, n),
					  memory_order_relaxed);
	}
}

/* --pipeline: the thread's whole range, up to K calls started at a time.
 * Keys and (set) pool contents are made before the clock starts; the time
 * runs from the first start to the last wait, so the disk idling between
 * calls counts, while the bench's own page filling does not. */
static void worker_pipeline(struct worker *w, enum bench_op op)
{
	const struct bench_args *a = w->b->a;
	size_t total = (size_t)(w->end - w->first), lanes = (size_t)a->pipeline, k = 0;

	if (batch_keys(w, 0, w->first, total) || (op == OP_SET && set_fill(w, 0, w->first, total)))
		return;
	uint64_t t0 = bench_now_ns();
	for (size_t off = 0; off < total && !w->rc; off += (size_t)a->batch, k++) {
		size_t n = total - off < a->batch ? total - off : (size_t)a->batch;
		size_t l = k % lanes; /* its last call is the oldest one running */
		if (lane_finish(w, l) || lane_start(w, l, op, w->first + off, n))
			break;
	}
	/* Every started call is waited for, oldest first, also after a failure. */
	for (size_t i = 0; i < lanes; i++)
		lane_finish(w, (k + i) % lanes);
	w->busy_ns[op] += bench_now_ns() - t0;
}

static void *worker_main(void *arg)
{
	struct phase *ph = arg;
	struct worker *w = ph->w;
	uint64_t batch = w->b->a->batch, j = 0;

	if (ph->kind == PHASE_ALL && w->b->a->pipeline > 1) {
		worker_pipeline(w, ph->op);
		return NULL;
	}
	for (uint64_t first = w->first; first < w->end && !w->rc; first += batch, j++) {
		size_t n = (size_t)(w->end - first < batch ? w->end - first : batch);
		enum bench_op op = batch_op(ph, j);
		if (op == OP_COUNT)
			continue;
		size_t base = bench_slot_per_page(w->b->a) ? (size_t)(first - w->first) : 0;
		if (batch_keys(w, base, first, n))
			break;
		struct tally before = w->tally[op];
		if (op == OP_SET)
			batch_set(w, base, first, n);
		else if (op == OP_GET)
			batch_get(w, base, first, n);
		else
			batch_exists(w, base, n);
		progress_add(w, op, &before, n);
	}
	return NULL;
}

int bench_worker_init(struct bench *b, struct worker *w, unsigned t)
{
	const struct bench_args *a = b->a;
	uint64_t nbatches;

	w->b = b;
	w->index = t;
	/* In 128 bits: pages * t can pass 2^64. */
	w->first = (uint64_t)((unsigned __int128)a->pages * t / a->threads);
	w->end = (uint64_t)((unsigned __int128)a->pages * (t + 1) / a->threads);
	nbatches = (w->end - w->first + a->batch - 1) / a->batch;
	if (!nbatches)
		nbatches = 1;
	/* --pipeline, --slots distinct: every page of the range has its own
	 * slot (the pool holds all pages), so calls in flight never share one. */
	size_t lanes = (size_t)a->pipeline;
	bool per_page = bench_slot_per_page(a);
	size_t room = per_page ? (size_t)(w->end - w->first) : (size_t)a->batch;
	if (!room)
		room = 1;
	w->slots = malloc(room * sizeof(*w->slots));
	w->keys = malloc(room * sizeof(*w->keys));
	w->results = malloc(room * sizeof(*w->results));
	w->lanes = calloc(lanes, sizeof(*w->lanes));
	w->flat = malloc(a->page_bytes);
	w->lat_ns = malloc(nbatches * sizeof(*w->lat_ns));
	w->lat_op = malloc(nbatches * sizeof(*w->lat_op));
	if (!w->slots || !w->keys || !w->results || !w->flat || !w->lat_ns || !w->lat_op ||
	    !w->lanes)
		return -ENOMEM;
	for (size_t j = 0; j < room; j++)
		w->slots[j] = per_page ? w->first + j : t * a->batch + j;
	return 0;
}

static void worker_reset(struct worker *w)
{
	w->nlat = 0;
	memset(w->busy_ns, 0, sizeof(w->busy_ns));
	memset(w->pages, 0, sizeof(w->pages));
	memset(w->tally, 0, sizeof(w->tally));
}

void bench_worker_free(struct worker *w)
{
	free(w->slots);
	free(w->keys);
	free(w->results);
	free(w->flat);
	free(w->lat_ns);
	free(w->lat_op);
	free(w->lanes);
}

/* ---- phases ---- */

/* Pages a phase will touch, for the progress line. */
static uint64_t phase_pages(const struct bench *b, enum phase_kind kind)
{
	uint64_t total = 0;

	if (kind != PHASE_LAYOUT)
		return b->a->pages;
	for (unsigned t = 0; t < b->a->threads; t++) {
		const struct worker *w = &b->workers[t];
		struct phase ph = {.w = (struct worker *)w, .kind = kind};
		uint64_t j = 0;
		for (uint64_t first = w->first; first < w->end; first += b->a->batch, j++)
			if (batch_op(&ph, j) != OP_COUNT)
				total += w->end - first < b->a->batch ? w->end - first
								      : b->a->batch;
	}
	return total;
}

/* Run a phase on every thread; returns 0 or the first whole-call error
 * (said). */
int bench_run_phase(struct bench *b, enum phase_kind kind, enum bench_op op, const char *label)
{
	unsigned nt = b->a->threads;
	struct phase *ph = calloc(nt, sizeof(*ph));
	struct progress progress;
	int rc = 0;

	if (!ph) {
		cli_report("bench: threads", -ENOMEM);
		return -ENOMEM;
	}
	for (unsigned t = 0; t < nt; t++) {
		ph[t] = (struct phase){&b->workers[t], kind, op};
		worker_reset(&b->workers[t]);
	}
	bench_progress_start(b, &progress, label, phase_pages(b, kind));
	/* Thread 0 is this thread: one thread runs with no thread created. */
	for (unsigned t = 1; t < nt; t++) {
		int err = pthread_create(&b->workers[t].tid, NULL, worker_main, &ph[t]);
		if (err) {
			worker_fail(&b->workers[t], "starting a thread", -err);
			nt = t;
			break;
		}
	}
	worker_main(&ph[0]);
	for (unsigned t = 1; t < nt; t++)
		pthread_join(b->workers[t].tid, NULL);
	bench_progress_stop(b);
	for (unsigned t = 0; t < b->a->threads && !rc; t++) {
		struct worker *w = &b->workers[t];
		if (w->rc) {
			fprintf(stderr, "hicache: bench: %s: %s\n", w->what, w->err);
			rc = w->rc;
		}
	}
	free(ph);
	return rc;
}
