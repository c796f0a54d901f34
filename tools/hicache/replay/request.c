/* One request of the replay on one instance: its start (match, prefetch,
 * load, checks, allocation of what it computes) and its end (insert,
 * release). With a fleet L3 set (sim.l3) the request also reads and
 * writes that set: in --no-data fleets it is the L3 itself (the caches
 * have no store, and a page found there counts as an L3 hit, brought to
 * the instance as a prefetch would: it joins its cache with the pages
 * the request computes); with a shared dir it records who wrote each
 * page, so that a read can be told apart as another instance's. */
#define _GNU_SOURCE
#include "replay.h"

#include "commands.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Check the pages a load brought to the device, and the Mamba state. */
static void sim_verify(struct sim *s, struct inst *in, struct hc_cache_req *req,
		       const uint32_t *tok, uint64_t dev_pages, uint64_t hit_pages)
{
	const struct replay_args *a = s->a;
	struct replay_buf *b = s->b;
	uint32_t ps = a->page_tokens;
	int64_t n = hc_cache_req_dev_slots(req, b->slots, s->maxpages);

	for (int64_t p = (int64_t)dev_pages; p < n && (uint64_t)p < hit_pages; p++) {
		replay_fill_page(b->want, s->pbytes, tok[p * ps], (uint64_t)p);
		if (hc_cache_dev_read(in->c, b->slots[p], b->page, s->pbytes) ||
		    memcmp(b->page, b->want, s->pbytes))
			s->res->corrupt++;
		else
			s->res->verified++;
	}
	if (a->mamba_bytes && hit_pages) {
		replay_fill_state(b->mwant, a->mamba_bytes, tok, hit_pages, ps);
		if (hc_cache_mamba_read(req, b->mstate, a->mamba_bytes) ||
		    memcmp(b->mstate, b->mwant, a->mamba_bytes))
			s->res->corrupt++;
		else
			s->res->verified++;
	}
}

/* Write the pages (and state) the request computes into its device slots. */
static int sim_compute(struct sim *s, struct inst *in, struct hc_cache_req *req,
		       const uint32_t *tok, uint64_t full, int64_t n)
{
	const struct replay_args *a = s->a;
	struct replay_buf *b = s->b;
	uint32_t ps = a->page_tokens;
	int rc;

	if (!a->no_data) {
		uint64_t first = full - (uint64_t)n;
		for (int64_t k = 0; k < n; k++) {
			uint64_t p = first + (uint64_t)k;
			replay_fill_page(b->page, s->pbytes, tok[p * ps], p);
			if ((rc = hc_cache_dev_write(in->c, b->slots[k], b->page, s->pbytes))) {
				cli_report("replay: device write", rc);
				return rc;
			}
		}
	}
	if (a->mamba_bytes) {
		if (!a->no_data)
			replay_fill_state(b->mstate, a->mamba_bytes, tok, full, ps);
		rc = hc_cache_mamba_write(req, a->no_data ? NULL : b->mstate,
					  a->no_data ? 0 : a->mamba_bytes);
		if (rc) {
			cli_report("replay: Mamba state write", rc);
			return rc;
		}
	}
	return 0;
}

/* Flush every instance's background work. The clock is virtual: copies
 * and L3 writes still running in real time have no place on it. Letting
 * them finish before a request starts makes what it finds depend on the
 * schedule, not on how the background threads ran, and publishes every
 * earlier request's L3 writes to the whole fleet. */
static void flush_all(struct sim *s)
{
	for (size_t k = 0; k < s->ninst; k++)
		hc_cache_flush(s->in[k].c);
}

/* Fleet L3 set: the pages f read from L3 (touched); those another
 * instance wrote are counted. */
void sim_l3_read(struct sim *s, struct inst *in, struct flight *f)
{
	uint32_t self = (uint32_t)(in - s->in);
	for (uint64_t p = f->l3_from; s->l3 && p < f->l3_from + f->l3_pages; p++) {
		int64_t w = lru_get(s->l3, f->keys[p]);
		if (w >= 0 && (uint32_t)w != self)
			s->res->l3_cross_pages++;
	}
}

/* Fleet L3 set: the pages f computed, written through by its instance. */
int sim_l3_publish(struct sim *s, struct inst *in, struct flight *f)
{
	for (uint64_t p = f->put_from; s->l3 && p < f->full; p++) {
		int rc = lru_put(s->l3, f->keys[p], (uint32_t)(in - s->in));
		if (rc) {
			fprintf(stderr, "hicache replay: out of memory\n");
			return rc;
		}
		s->res->l3_pages_written++;
	}
	return 0;
}

/* What the start of one request found: the cache's answer, and what the
 * request is charged for bringing it in. */
struct start {
	struct hc_cache_req *req;
	struct hc_cache_req_info info;
	uint64_t t0;        /* replay_now_ns() at the match */
	uint64_t local;     /* pages on device or host */
	uint64_t l3_extra;  /* pages from the emulated L3 */
	uint64_t hit_pages; /* pages the request need not compute */
	double xfer;        /* seconds to bring them in */
};

/* No cache (the baseline): only the device pages the request holds while
 * in flight. 0, or 1 (no device room now). */
static int sim_start_baseline(struct inst *in, const struct request *r, struct flight *f,
			      uint32_t ps)
{
	uint64_t need = (replay_insert_len(r) + ps - 1) / ps;
	if (in->inflight > 0 && in->dev_used + need > in->dev_budget)
		return 1;
	f->dev_pages = need;
	in->dev_used += need;
	return 0;
}

/* Match the request's tokens and wait for its prefetch; with an emulated
 * L3, what the cache's prefetch would find there. 0 or -errno (said). */
static int sim_match(struct sim *s, struct inst *in, const struct request *r, struct flight *f,
		     struct start *st)
{
	const struct replay_args *a = s->a;
	uint32_t ps = a->page_tokens;
	replay_gen_tokens(r, f->tok);
	if (f->keys)
		fleet_page_keys(f->tok, replay_insert_len(r) / ps, ps, f->keys);
	flush_all(s);
	st->t0 = replay_now_ns();
	int rc = hc_cache_match(in->c, f->tok, r->input, &st->req);
	if (rc) {
		cli_report("replay: match", rc);
		return rc;
	}
	hc_cache_prefetch_wait(st->req, HC_STOP_WAIT_COMPLETE);
	hc_cache_req_info(st->req, &st->info);
	/* Only real reads have a throughput. */
	if (st->info.l3_tokens && !a->no_data)
		s->res->l3_seconds += (double)(replay_now_ns() - st->t0) / 1e9;
	st->local = (st->info.dev_tokens + st->info.host_tokens) / ps;
	uint64_t npin = r->input / ps;
	if (s->l3_emulated && npin > st->local) {
		/* What the cache's prefetch would find, at most half its host
		 * tier (the cache's own bound on a prefetch). */
		st->l3_extra = lru_prefix(s->l3, f->keys + st->local, npin - st->local);
		if (st->l3_extra > in->host_pages / 2)
			st->l3_extra = in->host_pages / 2;
	}
	return 0;
}

/* Load the matched pages to the device. 0, 1 (no device room now) or
 * -errno (said); req is aborted unless 0. */
static int sim_load(struct hc_cache_req *req)
{
	int64_t loaded = hc_cache_load(req);
	if (loaded == -ENOSPC) {
		hc_cache_abort(req);
		return 1;
	}
	int rc = 0;
	if (loaded < 0 || (rc = hc_cache_layer_wait(req, UINT32_MAX))) {
		rc = loaded < 0 ? (int)loaded : rc;
		cli_report("replay: load", rc);
		hc_cache_abort(req);
		return rc;
	}
	return 0;
}

/* Device slots for the pages up to full, and compute them. 0, 1 (no
 * device room now) or -errno (said); req is aborted unless 0. */
static int sim_alloc(struct sim *s, struct inst *in, struct hc_cache_req *req, struct flight *f,
		     uint64_t full)
{
	int rc = 0;
	int64_t n = hc_cache_alloc(req, full * s->a->page_tokens, s->b->slots, s->maxpages);
	if (n == -ENOSPC) {
		hc_cache_abort(req);
		return 1;
	}
	if (n < 0 || (rc = sim_compute(s, in, req, f->tok, full, n))) {
		if (n < 0)
			cli_report("replay: alloc", rc = (int)n);
		hc_cache_abort(req);
		return rc;
	}
	return 0;
}

/* Through the cache: match, prefetch, load (checked), allocate and compute
 * the missing pages. 0, 1 (no device room now: aborted) or -errno. */
static int sim_start_cached(struct sim *s, struct inst *in, const struct request *r,
			    struct flight *f, struct start *st)
{
	const struct replay_args *a = s->a;
	uint32_t ps = a->page_tokens;
	uint64_t full = replay_insert_len(r) / ps;
	int rc = sim_match(s, in, r, f, st);
	if (!rc)
		rc = sim_load(st->req);
	if (rc)
		return rc;
	uint64_t l3_tokens = st->info.l3_tokens + st->l3_extra * ps;
	st->xfer = a->no_data ? (double)(st->info.host_tokens * a->kv_bytes) / MODEL_H2D_BPS +
					(double)(l3_tokens * a->kv_bytes) / MODEL_L3_BPS
			      : (double)(replay_now_ns() - st->t0) / 1e9;
	st->hit_pages = st->local + st->info.l3_tokens / ps; /* what the cache holds now */
	if (!a->no_data)
		sim_verify(s, in, st->req, f->tok, st->info.dev_tokens / ps, st->hit_pages);
	if (full > st->hit_pages) {
		if ((rc = sim_alloc(s, in, st->req, f, full)))
			return rc;
		f->full = full;
	}
	f->req = st->req;
	f->l3_from = st->local;
	f->l3_pages = st->l3_extra + st->info.l3_tokens / ps;
	if (f->keys)
		sim_l3_read(s, in, f);
	st->hit_pages += st->l3_extra;
	/* Its L3 writes: the pages it computes (those it read from L3 are
	 * there already; its local prefix was written before). */
	f->put_from = st->hit_pages;
	st->info.l3_tokens = l3_tokens;
	s->res->l3_pages_read += l3_tokens / ps;
	return 0;
}

/* Count a started request's hits, and when its first token comes. */
static void sim_account(struct sim *s, struct inst *in, const struct request *r,
			const struct start *st, struct flight *f)
{
	const struct replay_args *a = s->a;
	uint32_t ps = a->page_tokens;
	struct result *res = s->res;
	struct inst_result *ir = in->res;
	uint64_t hit = st->hit_pages * ps < r->input ? st->hit_pages * ps : r->input;
	res->requests++;
	res->input_tokens += r->input;
	res->hit[0] += st->info.dev_tokens;
	res->hit[1] += st->info.host_tokens;
	res->hit[2] += st->info.l3_tokens;
	if (ir) {
		ir->requests++;
		ir->input_tokens += r->input;
		ir->hit[0] += st->info.dev_tokens;
		ir->hit[1] += st->info.host_tokens;
		ir->hit[2] += st->info.l3_tokens;
	}
	f->done_at = s->now + st->xfer + (double)(r->input - hit) / a->prefill_tps;
}

/* Start request i at s->now on flight f of instance in: match, prefetch,
 * load (checked), allocate and compute the missing pages. Returns 0, 1
 * (no device room now: aborted, to be retried after a request ends), or
 * -errno (said). */
int sim_start(struct sim *s, struct inst *in, size_t i, struct flight *f)
{
	const struct request *r = &s->w->req[i];
	struct start st = {0};

	if (s->procs)
		return procs_start(s, in, i, f);
	f->idx = i;
	f->req = NULL;
	f->full = 0;
	f->dev_pages = 0;
	f->put_from = 0;
	f->l3_from = f->l3_pages = 0;
	int rc = in->c ? sim_start_cached(s, in, r, f, &st)
		       : sim_start_baseline(in, r, f, s->a->page_tokens);
	if (rc)
		return rc;
	sim_account(s, in, r, &st, f);
	return 0;
}

/* The request on f ends at s->now: insert what it computed (its pages
 * also go to the fleet L3 set, as write-through backs them up), release. */
int sim_finish(struct sim *s, struct inst *in, struct flight *f)
{
	int rc;

	if (s->procs) {
		if ((rc = procs_finish(s, in, f)))
			return rc;
	} else if (f->req) {
		int64_t ins = f->full ? hc_cache_insert(f->req, f->tok, f->full * s->a->page_tokens)
				      : 0;
		if (ins < 0) {
			cli_report("replay: insert", (int)ins);
			hc_cache_abort(f->req);
			f->req = NULL;
			return (int)ins;
		}
		hc_cache_release(f->req);
		f->req = NULL;
	}
	if ((rc = sim_l3_publish(s, in, f)))
		return rc;
	in->dev_used -= f->dev_pages;
	s->ttft[f->idx] = f->done_at - s->arrival[f->idx];
	return 0;
}
