/*
 * hicache replay --instances N: the routers and the fleet's rules.
 *
 * A router decides when a request arrives (sequential: when it is next),
 * from what a router can know without asking the engines: the requests it
 * sent to each instance (its view: their pages, LRU to the instance's
 * capacity, like SGLang's cache-aware router keeps an approximate tree per
 * worker), the L3's key set, and each instance's queue. It never touches
 * a cache (a match would refresh the instance's LRU).
 *
 *   round-robin   request i (trace order) goes to instance i mod N
 *   random        splitmix64 of (seed, i) mod N: the same choice in every
 *                 configuration and in the no-cache baseline
 *   prefix        the longest prefix in the instance's view; ties go to
 *                 the instance with the fewest tokens routed so far
 *   ttft          Mooncake's conductor: the smallest estimated TTFT, the
 *                 queue wait (the rest of the earliest running request
 *                 when every server is busy, plus the estimated service of
 *                 the queued requests over the servers) + the prefill of
 *                 what it would miss + the transfer of what it would load
 *                 (its view's prefix at L2 speed, then the L3's at L3
 *                 speed); ties as prefix. Timed schedule only: without a
 *                 queue there is nothing to estimate but the prefix.
 */
#define _GNU_SOURCE
#include "replay.h"

#include <string.h>
#include <xxhash.h>

const char *replay_router_name(enum router r)
{
	static const char *const names[] = {"round-robin", "random", "prefix", "ttft"};
	return names[r];
}

bool fleet_l3_emulated(const struct replay_args *a)
{
	return a->no_data && a->l3 != L3_NONE && (a->instances > 1 || a->l3_tokens);
}

int fleet_check_args(const struct replay_args *a)
{
	const char *why = NULL;

	if (a->router == ROUTER_TTFT && a->sequential)
		why = "--router ttft needs the timed schedule (its estimate is a queue wait): "
		      "drop --sequential";
	else if (a->processes && a->l3 == L3_MEM)
		why = "--processes with --l3 mem: a mem store lives inside one process and "
		      "cannot be shared; use --l3 file:DIR (or the default temporary dir), "
		      "--l3 s3 or --l3 none";
	else if (a->instances > 1 && !a->no_data && a->l3 == L3_MEM)
		why = "--instances > 1 in data mode shares the L3 through a directory: use "
		      "--l3 file:DIR (or the default temporary dir), --l3 s3 or --l3 none; a mem "
		      "store serves one cache";
	else if (fleet_l3_emulated(a) && a->mamba_bytes)
		why = "--mamba-bytes with --no-data and a shared or capped L3 (--instances > 1 "
		      "or --l3-tokens): the replay's L3 key set holds pages, not states; use "
		      "data mode or --l3 none";
	else if (a->processes && fleet_l3_emulated(a))
		why = "--processes with --no-data and a shared or capped L3 (--instances > 1 "
		      "or --l3-tokens): that L3 is a key set inside the replay, not a store the "
		      "processes share; drop --no-data (data mode) or use --l3 none";
	else if (a->l3_tokens && a->l3 == L3_S3)
		why = "--l3-tokens with --l3 s3: a bucket has no capacity here; cap it with "
		      "hicache gc, or use --l3 file:DIR";
	else if (a->l3_tokens && a->l3 == L3_NONE)
		why = "--l3-tokens with --l3 none: there is no L3 to cap";
	else if (a->l3_tokens && a->l3_tokens < a->page_tokens)
		why = "--l3-tokens is less than a page";
	if (why) {
		fprintf(stderr, "hicache replay: %s\n", why);
		return 2;
	}
	return 0;
}

void fleet_page_keys(const uint32_t *tok, size_t n, uint32_t ps, uint64_t *keys)
{
	uint64_t k = 0x6a09e667f3bcc908ull;
	for (size_t p = 0; p < n; p++)
		keys[p] = k = XXH3_64bits_withSeed(tok + p * ps, (size_t)ps * sizeof(*tok), k);
}

/* The wait before a request sent to in now could start. */
static double queue_wait(const struct sim *s, const struct inst *in)
{
	double wait = in->queued_work / (double)s->nfl;
	if (in->inflight == s->nfl) {
		double first = -1;
		for (size_t k = 0; k < s->nfl; k++)
			if (in->fl[k].busy && (first < 0 || in->fl[k].done_at < first))
				first = in->fl[k].done_at;
		if (first > s->now)
			wait += first - s->now;
	}
	return wait;
}

static bool fewer_tokens(const struct inst *x, const struct inst *best)
{
	return x->routed_tokens < best->routed_tokens;
}

size_t fleet_route(struct sim *s, size_t i)
{
	const struct replay_args *a = s->a;
	const struct request *r = &s->w->req[i];
	uint32_t ps = a->page_tokens;
	size_t n = s->ninst, best = 0;

	if (n == 1)
		return 0;
	if (a->router == ROUTER_RR)
		return i % n;
	if (a->router == ROUTER_RANDOM)
		return (size_t)(splitmix64(a->seed ^ splitmix64(i)) % n);
	/* The view and the L3 see the request's full pages. */
	size_t full = replay_insert_len(r) / ps, npin = r->input / ps;
	bool views = s->in[0].view != NULL;
	if (views) {
		replay_gen_tokens(r, s->rtok);
		fleet_page_keys(s->rtok, full, ps, s->rkeys);
	}
	double best_est = 0;
	size_t best_loc = 0;
	for (size_t k = 0; k < n; k++) {
		struct inst *in = &s->in[k];
		size_t loc = views ? lru_prefix(in->view, s->rkeys, npin) : 0;
		bool better;
		if (a->router == ROUTER_PREFIX) {
			better = k == 0 || loc > best_loc ||
				 (loc == best_loc && fewer_tokens(in, &s->in[best]));
		} else {
			size_t l3 = s->l3 && views ? lru_prefix(s->l3, s->rkeys + loc, npin - loc)
						   : 0;
			uint64_t hit = (loc + l3) * ps < r->input ? (loc + l3) * ps : r->input;
			double service = (double)(r->input - hit) / a->prefill_tps +
					 (double)(loc * ps * a->kv_bytes) / MODEL_H2D_BPS +
					 (double)(l3 * ps * a->kv_bytes) / MODEL_L3_BPS;
			double est = queue_wait(s, in) + service;
			better = k == 0 || est < best_est ||
				 (est == best_est && fewer_tokens(in, &s->in[best]));
			if (better) {
				s->est[i] = service;
				best_est = est;
			}
		}
		if (better) {
			best = k;
			best_loc = loc;
		}
	}
	if (views)
		for (size_t p = 0; p < full; p++)
			if (lru_put(s->in[best].view, s->rkeys[p], (uint32_t)best))
				break; /* out of memory: the view only guides */
	return best;
}
