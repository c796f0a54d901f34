/*
 * hicache replay: drive the cache controller (L1 device, L2 host, L3 store)
 * with a Mooncake-format trace or a built-in multi-turn workload, and report
 * hit tokens per tier, bytes moved, L3 throughput and a modelled TTFT.
 *
 *   tokens     the trace has no tokens, only chained block ids (one per
 *              512-token block): token j of block b is fmix32(b * 512 + j),
 *              a bijection for b < 2^23, so distinct blocks give distinct
 *              token sequences and the cache's own prefix keys reproduce the
 *              trace's sharing exactly. The last block covers
 *              input_length - 512 * (n - 1) tokens. Multi-turn: token i of
 *              client c's conversation is fmix32 of a 64-bit mix of (c, i).
 *   pages      default 512 tokens = one trace block (smaller pages only
 *              split blocks: more pages, same sharing, except that the full
 *              pages of a partial last block can then hit). A page size that
 *              does not divide 512 is allowed; pages then straddle blocks.
 *   request    at its start: match -> prefetch_wait(wait_complete) -> load ->
 *              layer_wait -> [verify loaded pages] -> alloc + dev_write of the
 *              missing full pages; at its end: insert them -> release.
 *              Hit tokens = matched pages x page size (never more than the
 *              input: matches are page-aligned prefixes of it).
 *   time       virtual (struct sim): background copies and L3 writes finish
 *              before a request starts (real-time lag has no place on a
 *              virtual clock). Timed mode starts a request at its trace
 *              timestamp / speed (multi-turn: when the client's previous
 *              round ends) on one of --concurrency servers and ends it after
 *              its transfer time plus the prefill of what missed, so requests
 *              overlap as on a server; --sequential runs them one after the
 *              other in trace order.
 *   contents   page p (tokens [p*ps, (p+1)*ps)) of a sequence is 8-byte words
 *              w_i = s ^ (i * golden), s = splitmix64(first token << 32 | p):
 *              cheap to write and to check, and distinct for distinct
 *              prefixes because the first token already names (block, offset).
 *   configs    every run replays the trace three times on fresh caches:
 *              L1 only (the host tier then holds a single page, the minimum
 *              the controller accepts), L1+L2, and L1+L2+L3 (skipped with
 *              --l3 none). The summary and the top-level JSON fields are the
 *              last configuration's.
 *   TTFT       end - arrival. A request's service is (input - hit) / prefill
 *              rate + the transfer time of the hit pages: measured (prefetch
 *              wait + load) in data mode, modelled in --no-data as bytes /
 *              20 GB/s for L2 hits and bytes / 5 GB/s for L3 hits. Without
 *              cache: the same queue with service input / prefill rate.
 *              Sequential: service time only (no queueing).
 */
#define _GNU_SOURCE
#include "commands.h"

#include <hicache/cache.h>
#include <hicache/config.h>
#include <hicache/hicache.h>
#include <hicache/store.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TRACE_BLOCK 512u
#define REPLAY_LINE_MAX (64u << 20) /* a line longer than this is not a trace */
#define PROGRESS_NS 100000000ull
/* Modelled bandwidths for --no-data TTFT (bytes per second). */
#define MODEL_H2D_BPS 20e9
#define MODEL_L3_BPS 5e9

enum l3_kind { L3_NONE, L3_MEM, L3_FILE };

struct replay_args {
	const char *trace;
	bool sequential;
	uint64_t concurrency; /* requests in flight at once (timed mode) */
	double speed;         /* timed mode: trace time runs this much faster */
	bool no_data;
	bool json;
	bool multiturn;
	uint32_t page_tokens;
	uint64_t l1_tokens, l2_tokens; /* UINT64_MAX: unlimited */
	enum l3_kind l3;
	const char *l3_dir; /* L3_FILE; NULL: a temporary dir */
	uint64_t kv_bytes; /* per token, all layers */
	double prefill_tps;
	uint64_t clients, rounds, request_tokens, output_tokens;
	uint64_t mamba_bytes;       /* hybrid: state bytes per request; 0: not hybrid */
	uint64_t mamba_host_states; /* host state slots; 0: the cache's default */
};

/* One request: either trace blocks or a prefix of a multi-turn stream. */
struct request {
	uint64_t input;
	uint64_t output;
	const uint64_t *blocks; /* trace: ceil(input / 512) ids; NULL: multi-turn */
	uint64_t stream;        /* multi-turn: the client */
	double arrival;         /* trace: timestamp in seconds */
};

struct workload {
	struct request *req;
	size_t n, cap;
	uint64_t *ids;
	size_t nids, ids_cap;
	uint64_t total_input, max_input; /* tokens inserted (input, + output in multi-turn) */
};

struct result {
	const char *name;
	uint64_t requests, input_tokens, skipped;
	uint64_t hit[3];
	uint64_t verified, corrupt;
	uint64_t bytes_h2d, bytes_d2h, bytes_l3_read, bytes_l3_write;
	double l3_seconds; /* time spent waiting for prefetches that read L3 */
	double seconds;
	double virtual_seconds; /* the replay clock at the last request's end */
	double ttft[3];    /* p50, p90, p99 with the cache (seconds) */
	double ttft_no[3]; /* the same without */
};

/* ---- token and page content synthesis ---- */

static inline uint32_t fmix32(uint32_t h)
{
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

static inline uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Tokens of one whole block. Replay spends much of its --no-data time
 * here: the AVX2 clone does 8 tokens per instruction (SSE2 has no 32-bit
 * vector multiply, so the default build would stay scalar). */
__attribute__((target_clones("avx2", "default"))) static void fmix_block(uint32_t *out,
									  uint32_t base)
{
	for (uint32_t j = 0; j < TRACE_BLOCK; j++)
		out[j] = fmix32(base + j);
}

/* The tokens a request inserts: its input, and for a multi-turn request
 * also its output (the next round's prompt contains it, as a server's
 * decode would have cached it). Trace outputs are unknown: input only. */
static uint64_t insert_len(const struct request *r)
{
	return r->blocks ? r->input : r->input + r->output;
}

static void gen_tokens(const struct request *r, uint32_t *tok)
{
	if (r->blocks) {
		for (uint64_t i = 0; i < r->input; i += TRACE_BLOCK) {
			uint64_t base = r->blocks[i / TRACE_BLOCK] * TRACE_BLOCK;
			uint64_t len = r->input - i < TRACE_BLOCK ? r->input - i : TRACE_BLOCK;
			uint32_t *out = tok + i;
			/* b < 2^23 keeps b * 512 + j injective in 32 bits; beyond
			 * that the mix of a 64-bit value is used (collisions then
			 * only as likely as any 32-bit hash collision). */
			if ((base + TRACE_BLOCK - 1) >> 32) {
				for (uint64_t j = 0; j < len; j++)
					out[j] = (uint32_t)splitmix64(base + j);
			} else if (len == TRACE_BLOCK) {
				fmix_block(out, (uint32_t)base);
			} else {
				for (uint64_t j = 0; j < len; j++)
					out[j] = fmix32((uint32_t)(base + j));
			}
		}
	} else {
		uint64_t s = splitmix64(r->stream + 1);
		for (uint64_t i = 0; i < insert_len(r); i++)
			tok[i] = (uint32_t)splitmix64(s + i);
	}
}

static void fill_page(uint8_t *dst, size_t len, uint32_t first, uint64_t page)
{
	uint64_t s = splitmix64((uint64_t)first << 32 | (page & 0xffffffffu));
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t w = s ^ ((i / 8) * 0x9e3779b97f4a7c15ull);
		memcpy(dst + i, &w, 8);
	}
	if (i < len) {
		uint64_t w = s ^ ((i / 8) * 0x9e3779b97f4a7c15ull);
		memcpy(dst + i, &w, len - i);
	}
}

/* ---- workload ---- */

static int wl_push_req(struct workload *w, const struct request *r)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 1024;
		struct request *p = realloc(w->req, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		w->req = p;
		w->cap = cap;
	}
	w->req[w->n++] = *r;
	w->total_input += insert_len(r);
	if (insert_len(r) > w->max_input)
		w->max_input = insert_len(r);
	return 0;
}

static int wl_push_id(struct workload *w, uint64_t id)
{
	if (w->nids == w->ids_cap) {
		size_t cap = w->ids_cap ? w->ids_cap * 2 : 65536;
		uint64_t *p = realloc(w->ids, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		w->ids = p;
		w->ids_cap = cap;
	}
	w->ids[w->nids++] = id;
	return 0;
}

static void wl_free(struct workload *w)
{
	free(w->req);
	free(w->ids);
}

static bool json_u64(const cJSON *o, const char *name, uint64_t max, uint64_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > (double)max ||
	    v->valuedouble != (double)(uint64_t)v->valuedouble)
		return false;
	*out = (uint64_t)v->valuedouble;
	return true;
}

/* Returns 0, 1 (a bad line or I/O error, said). Block ids are stored as
 * offsets into w->ids first (the array moves while it grows), then fixed. */
static int load_trace(const char *path, struct workload *w)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t len;
	int ret = 1;

	if (!f) {
		fprintf(stderr, "hicache replay: %s: %s\n", path, strerror(errno));
		return 1;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		if (strspn(line, " \t\r\n") == (size_t)len)
			continue; /* blank lines (a trailing newline) are not requests */
		cJSON *o = cJSON_ParseWithLength(line, (size_t)len);
		const char *what = NULL;
		struct request r = {0};
		uint64_t ts = 0;
		if (!o || !cJSON_IsObject(o))
			what = "not a JSON object";
		else if (!json_u64(o, "input_length", 1ull << 40, &r.input) || r.input == 0)
			what = "input_length must be an integer >= 1";
		else if (!json_u64(o, "output_length", 1ull << 40, &r.output))
			what = "output_length must be an integer >= 0";
		else if (cJSON_GetObjectItemCaseSensitive(o, "timestamp") &&
			 !json_u64(o, "timestamp", UINT64_MAX >> 11, &ts))
			what = "timestamp must be an integer >= 0 (milliseconds)";
		else if (cJSON_GetObjectItemCaseSensitive(o, "timestamp"))
			r.arrival = (double)ts / 1000.0;
		if (!what) {
			const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "hash_ids");
			uint64_t want = (r.input + TRACE_BLOCK - 1) / TRACE_BLOCK;
			const cJSON *id;
			if (!cJSON_IsArray(ids)) {
				what = "hash_ids must be an array";
			} else if ((uint64_t)cJSON_GetArraySize(ids) != want) {
				what = "hash_ids must hold ceil(input_length / 512) ids";
			} else {
				r.blocks = (const uint64_t *)(uintptr_t)w->nids;
				cJSON_ArrayForEach(id, ids) {
					if (!cJSON_IsNumber(id) || id->valuedouble < 0 ||
					    id->valuedouble > 9007199254740992.0 ||
					    id->valuedouble != (double)(uint64_t)id->valuedouble) {
						what = "hash_ids must be integers >= 0";
						break;
					}
					if (wl_push_id(w, (uint64_t)id->valuedouble)) {
						what = "out of memory";
						break;
					}
				}
			}
		}
		cJSON_Delete(o);
		if (!what && wl_push_req(w, &r))
			what = "out of memory";
		if (what) {
			fprintf(stderr, "hicache replay: %s:%zu: %s\n", path, lineno, what);
			goto out;
		}
	}
	if (ferror(f)) {
		fprintf(stderr, "hicache replay: %s: %s\n", path, strerror(errno));
		goto out;
	}
	if (w->n == 0) {
		fprintf(stderr, "hicache replay: %s: no requests\n", path);
		goto out;
	}
	for (size_t i = 0; i < w->n; i++)
		w->req[i].blocks = w->ids + (uintptr_t)w->req[i].blocks;
	ret = 0;
out:
	free(line);
	fclose(f);
	return ret;
}

/* Like SGLang's multi-turn benchmark: round k of client c sends its whole
 * conversation so far (k requests and k outputs) plus N new tokens; rounds
 * are interleaved across clients (round 0 of every client, then round 1 ...). */
static int gen_multiturn(const struct replay_args *a, struct workload *w)
{
	for (uint64_t k = 0; k < a->rounds; k++) {
		for (uint64_t c = 0; c < a->clients; c++) {
			struct request r = {
				.input = k * (a->request_tokens + a->output_tokens) +
					 a->request_tokens,
				.output = a->output_tokens,
				.stream = c,
			};
			if (wl_push_req(w, &r))
				return -ENOMEM;
		}
	}
	return 0;
}

/* ---- helpers ---- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void percentiles(double *v, size_t n, double out[3])
{
	static const double q[3] = {0.50, 0.90, 0.99};

	qsort(v, n, sizeof(*v), cmp_double);
	for (int i = 0; i < 3; i++) {
		size_t k = n ? (size_t)(q[i] * (double)(n - 1) + 0.5) : 0;
		out[i] = n ? v[k] : 0;
	}
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static int open_store(const struct replay_args *a, const char *dir, struct hc_store **out)
{
	struct hc_config *cfg = NULL;
	struct hc_store_opts opts;
	char json[4096];
	int rc;

	*out = NULL;
	/* No cleaner: nothing may disappear under a replay. */
	if (a->l3 == L3_FILE && !a->no_data) {
		cJSON *o = cJSON_CreateObject(), *dirs = cJSON_AddArrayToObject(o, "dirs");
		cJSON_AddItemToArray(dirs, cJSON_CreateString(dir));
		cJSON_AddNumberToObject(o, "l3_cleaner_interval_s", 0);
		if (!cJSON_PrintPreallocated(o, json, sizeof(json), false)) {
			cJSON_Delete(o);
			fprintf(stderr, "hicache replay: --l3 dir too long\n");
			return -EINVAL;
		}
		cJSON_Delete(o);
	} else {
		snprintf(json, sizeof(json), "{}");
	}
	if ((rc = hc_config_create(json, &cfg))) {
		cli_report("replay: store config", rc);
		return rc;
	}
	hc_store_opts_init(&opts, sizeof(opts));
	/* In --no-data mode the cache keeps L3 as a key set and never calls the
	 * store; a mem store only says that there is an L3. */
	opts.backend = a->l3 == L3_FILE && !a->no_data ? "file" : "mem";
	opts.config = cfg;
	opts.model = "replay";
	rc = hc_store_open(&opts, out);
	hc_config_destroy(cfg);
	if (rc)
		cli_report("replay: opening the store", rc);
	return rc;
}

/* ---- one configuration: a virtual-time queue ---- */

struct progress {
	bool on;
	uint64_t last;
	bool printed;
};

static void progress_draw(struct progress *p, const char *name, size_t i, size_t n)
{
	uint64_t t = now_ns();
	if (!p->on || (i < n && t - p->last < PROGRESS_NS))
		return;
	p->last = t;
	p->printed = true;
	fprintf(stderr, "\r%-10s %zu/%zu requests (%.0f%%)  ", name, i, n,
		n ? 100.0 * (double)i / (double)n : 100.0);
}

/* Scratch of one configuration (each runs on its own). */
struct replay_buf {
	uint64_t *slots;
	uint8_t *page, *want;
	uint8_t *mstate, *mwant; /* hybrid: mamba_bytes each */
};

/* Hybrid: the state after page `pages` of tok (a function of the prefix,
 * so a state served from any tier can be checked). */
static void fill_state(uint8_t *dst, size_t len, const uint32_t *tok, uint64_t pages,
		       uint32_t ps)
{
	fill_page(dst, len, tok[pages * ps - 1], pages | 1ull << 31);
}

/* A request being served: matched, loaded and allocated; its missing pages
 * are being computed until done_at, when they are inserted. */
struct flight {
	bool busy;
	size_t idx;
	struct hc_cache_req *req; /* NULL in the no-cache baseline */
	uint32_t *tok;
	uint64_t full; /* pages to insert at the end; 0: none */
	uint64_t dev_pages; /* baseline: device pages it holds while in flight */
	double done_at;
};

/*
 * The replay's clock. A request becomes ready at its arrival (timed: trace
 * timestamp / speed; multi-turn: when the client's previous round ends;
 * sequential: when the one before it ends), waits for one of `concurrency`
 * servers, and ends after its transfers (measured in data mode, modelled in
 * --no-data) plus the prefill of what missed. Time is virtual: nothing
 * sleeps, so a trace of an hour replays as fast as the cache works, while
 * requests still overlap as they would on a server (one in flight does not
 * see another's pages until it ends; its device pages stay allocated).
 */
struct sim {
	const struct replay_args *a;
	const struct workload *w;
	struct hc_cache *c; /* NULL: the no-cache baseline */
	struct replay_buf *b;
	struct result *res;
	size_t pbytes, maxpages;
	double *arrival, *ready_at, *ttft;
	size_t *heap, nheap;
	struct flight *fl;
	size_t nfl, inflight;
	/* Baseline: without a cache the device still holds the KV of the
	 * requests in flight; a request waits until its pages fit. */
	uint64_t dev_budget, dev_used; /* pages */
	double now;
};

static bool ready_before(const struct sim *s, size_t x, size_t y)
{
	return s->ready_at[x] < s->ready_at[y] || (s->ready_at[x] == s->ready_at[y] && x < y);
}

static void heap_push(struct sim *s, size_t i, double t)
{
	size_t k = s->nheap++;
	s->ready_at[i] = t;
	s->heap[k] = i;
	while (k > 0 && ready_before(s, s->heap[k], s->heap[(k - 1) / 2])) {
		size_t p = (k - 1) / 2, x = s->heap[p];
		s->heap[p] = s->heap[k];
		s->heap[k] = x;
		k = p;
	}
}

static size_t heap_pop(struct sim *s)
{
	size_t top = s->heap[0], k = 0;
	s->heap[0] = s->heap[--s->nheap];
	for (;;) {
		size_t l = 2 * k + 1, r = l + 1, m = k;
		if (l < s->nheap && ready_before(s, s->heap[l], s->heap[m]))
			m = l;
		if (r < s->nheap && ready_before(s, s->heap[r], s->heap[m]))
			m = r;
		if (m == k)
			return top;
		size_t x = s->heap[m];
		s->heap[m] = s->heap[k];
		s->heap[k] = x;
		k = m;
	}
}

/* A request arrives: first time only (a retry keeps its arrival). */
static void sim_arrive(struct sim *s, size_t i, double t)
{
	s->arrival[i] = t;
	heap_push(s, i, t);
}

/* Multi-turn (not sequential): the client's next round arrives now. */
static void sim_next_round(struct sim *s, size_t i)
{
	if (!s->a->sequential && !s->w->req[i].blocks && i + s->a->clients < s->w->n)
		sim_arrive(s, i + s->a->clients, s->now);
}

/* Check the pages a load brought to the device, and the Mamba state. */
static void sim_verify(struct sim *s, struct hc_cache_req *req, const uint32_t *tok,
		       uint64_t dev_pages, uint64_t hit_pages)
{
	const struct replay_args *a = s->a;
	struct replay_buf *b = s->b;
	uint32_t ps = a->page_tokens;
	int64_t n = hc_cache_req_dev_slots(req, b->slots, s->maxpages);

	for (int64_t p = (int64_t)dev_pages; p < n && (uint64_t)p < hit_pages; p++) {
		fill_page(b->want, s->pbytes, tok[p * ps], (uint64_t)p);
		if (hc_cache_dev_read(s->c, b->slots[p], b->page, s->pbytes) ||
		    memcmp(b->page, b->want, s->pbytes))
			s->res->corrupt++;
		else
			s->res->verified++;
	}
	if (a->mamba_bytes && hit_pages) {
		fill_state(b->mwant, a->mamba_bytes, tok, hit_pages, ps);
		if (hc_cache_mamba_read(req, b->mstate, a->mamba_bytes) ||
		    memcmp(b->mstate, b->mwant, a->mamba_bytes))
			s->res->corrupt++;
		else
			s->res->verified++;
	}
}

/* Write the pages (and state) the request computes into its device slots. */
static int sim_compute(struct sim *s, struct hc_cache_req *req, const uint32_t *tok,
		       uint64_t full, int64_t n)
{
	const struct replay_args *a = s->a;
	struct replay_buf *b = s->b;
	uint32_t ps = a->page_tokens;
	int rc;

	if (!a->no_data) {
		uint64_t first = full - (uint64_t)n;
		for (int64_t k = 0; k < n; k++) {
			uint64_t p = first + (uint64_t)k;
			fill_page(b->page, s->pbytes, tok[p * ps], p);
			if ((rc = hc_cache_dev_write(s->c, b->slots[k], b->page, s->pbytes))) {
				cli_report("replay: device write", rc);
				return rc;
			}
		}
	}
	if (a->mamba_bytes) {
		if (!a->no_data)
			fill_state(b->mstate, a->mamba_bytes, tok, full, ps);
		rc = hc_cache_mamba_write(req, a->no_data ? NULL : b->mstate,
					  a->no_data ? 0 : a->mamba_bytes);
		if (rc) {
			cli_report("replay: Mamba state write", rc);
			return rc;
		}
	}
	return 0;
}

/* Start request i at s->now on flight f: match, prefetch, load (checked),
 * allocate and compute the missing pages. Returns 0, 1 (no device room
 * now: aborted, to be retried after a request ends), or -errno (said). */
static int sim_start(struct sim *s, size_t i, struct flight *f)
{
	const struct replay_args *a = s->a;
	const struct request *r = &s->w->req[i];
	struct result *res = s->res;
	uint32_t ps = a->page_tokens;
	struct hc_cache_req_info info = {0};
	struct hc_cache_req *req = NULL;
	uint64_t hit_pages = 0;
	double xfer = 0;
	int rc;

	f->idx = i;
	f->req = NULL;
	f->full = 0;
	f->dev_pages = 0;
	if (!s->c) {
		uint64_t need = (insert_len(r) + ps - 1) / ps;
		if (s->inflight > 0 && s->dev_used + need > s->dev_budget)
			return 1;
		f->dev_pages = need;
		s->dev_used += need;
	} else {
		gen_tokens(r, f->tok);
		/* The clock is virtual: copies and L3 writes still running in
		 * real time have no place on it. Let them finish, so that what
		 * a request finds depends on the schedule, not on how the
		 * background threads were scheduled. */
		hc_cache_flush(s->c);
		uint64_t t0 = now_ns();
		if ((rc = hc_cache_match(s->c, f->tok, r->input, &req))) {
			cli_report("replay: match", rc);
			return rc;
		}
		hc_cache_prefetch_wait(req, HC_STOP_WAIT_COMPLETE);
		hc_cache_req_info(req, &info);
		/* Only real reads have a throughput. */
		if (info.l3_tokens && !a->no_data)
			res->l3_seconds += (double)(now_ns() - t0) / 1e9;
		int64_t loaded = hc_cache_load(req);
		if (loaded == -ENOSPC) {
			hc_cache_abort(req);
			return 1;
		}
		if (loaded < 0 || (rc = hc_cache_layer_wait(req, UINT32_MAX))) {
			rc = loaded < 0 ? (int)loaded : rc;
			cli_report("replay: load", rc);
			hc_cache_abort(req);
			return rc;
		}
		xfer = a->no_data ? (double)(info.host_tokens * a->kv_bytes) / MODEL_H2D_BPS +
					    (double)(info.l3_tokens * a->kv_bytes) / MODEL_L3_BPS
				  : (double)(now_ns() - t0) / 1e9;
		hit_pages = (info.dev_tokens + info.host_tokens + info.l3_tokens) / ps;
		if (!a->no_data)
			sim_verify(s, req, f->tok, info.dev_tokens / ps, hit_pages);
		uint64_t full = insert_len(r) / ps;
		if (full > hit_pages) {
			int64_t n = hc_cache_alloc(req, full * ps, s->b->slots, s->maxpages);
			if (n == -ENOSPC) {
				hc_cache_abort(req);
				return 1;
			}
			if (n < 0 || (rc = sim_compute(s, req, f->tok, full, n))) {
				if (n < 0)
					cli_report("replay: alloc", rc = (int)n);
				hc_cache_abort(req);
				return rc;
			}
			f->full = full;
		}
		f->req = req;
	}
	uint64_t hit = hit_pages * ps < r->input ? hit_pages * ps : r->input;
	res->requests++;
	res->input_tokens += r->input;
	res->hit[0] += info.dev_tokens;
	res->hit[1] += info.host_tokens;
	res->hit[2] += info.l3_tokens;
	f->done_at = s->now + xfer + (double)(r->input - hit) / a->prefill_tps;
	return 0;
}

/* The request on f ends at s->now: insert what it computed, release. */
static int sim_finish(struct sim *s, struct flight *f)
{
	if (f->req) {
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
	s->dev_used -= f->dev_pages;
	s->ttft[f->idx] = f->done_at - s->arrival[f->idx];
	sim_next_round(s, f->idx);
	return 0;
}

/* Runs the whole workload; the flights' requests are ended on error too. */
static int sim_run(struct sim *s, struct progress *prog)
{
	const struct workload *w = s->w;
	size_t ended = 0;
	bool blocked = false; /* no device room: wait for a request to end */
	int rc = 0;

	for (size_t i = 0; i < w->n; i++) {
		if (s->a->sequential)
			heap_push(s, i, 0);
		else if (w->req[i].blocks || i < s->a->clients)
			sim_arrive(s, i, w->req[i].blocks ? w->req[i].arrival / s->a->speed : 0);
	}
	while (ended < w->n && !rc) {
		struct flight *first = NULL;
		for (size_t k = 0; k < s->nfl; k++)
			if (s->fl[k].busy && (!first || s->fl[k].done_at < first->done_at))
				first = &s->fl[k];
		bool can_start = !blocked && s->inflight < s->nfl && s->nheap > 0;
		if (can_start && (!first || s->ready_at[s->heap[0]] <= first->done_at)) {
			size_t i = heap_pop(s);
			if (s->ready_at[i] > s->now)
				s->now = s->ready_at[i];
			if (s->a->sequential)
				s->arrival[i] = s->now; /* TTFT without queueing */
			struct flight *f = s->fl;
			while (f->busy)
				f++;
			rc = sim_start(s, i, f);
			if (rc == 1 && s->inflight > 0) {
				heap_push(s, i, s->now);
				blocked = true;
				rc = 0;
			} else if (rc == 1) {
				/* Alone and still no room: it runs without the cache. */
				const struct request *r = &w->req[i];
				s->res->skipped++;
				s->res->requests++;
				s->res->input_tokens += r->input;
				s->ttft[i] = s->now - s->arrival[i] + (double)r->input / s->a->prefill_tps;
				sim_next_round(s, i);
				ended++;
				rc = 0;
			} else if (rc == 0) {
				f->busy = true;
				s->inflight++;
			}
		} else if (first) {
			if (first->done_at > s->now)
				s->now = first->done_at;
			rc = sim_finish(s, first);
			first->busy = false;
			s->inflight--;
			ended++;
			blocked = false;
		} else {
			break; /* nothing in flight and nothing ready: cannot happen */
		}
		progress_draw(prog, s->res->name, ended, w->n);
	}
	for (size_t k = 0; k < s->nfl; k++) {
		if (s->fl[k].busy && s->fl[k].req)
			hc_cache_abort(s->fl[k].req);
		s->fl[k].busy = false;
	}
	return rc;
}

static void sim_free(struct sim *s)
{
	for (size_t k = 0; s->fl && k < s->nfl; k++)
		free(s->fl[k].tok);
	free(s->fl);
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

/* Returns 0, or -ENOMEM (said). with_tokens: flights carry token buffers. */
static int sim_init(struct sim *s, const struct replay_args *a, const struct workload *w,
		    struct replay_buf *b, double *ttft, struct result *res, bool with_tokens)
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
	s->arrival = calloc(w->n, sizeof(*s->arrival));
	s->ready_at = calloc(w->n, sizeof(*s->ready_at));
	s->heap = calloc(w->n, sizeof(*s->heap));
	s->fl = calloc(s->nfl, sizeof(*s->fl));
	bool ok = s->arrival && s->ready_at && s->heap && s->fl;
	for (size_t k = 0; ok && with_tokens && k < s->nfl; k++)
		ok = (s->fl[k].tok = malloc((w->max_input + 1) * sizeof(uint32_t))) != NULL;
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

/* TTFT of every request with no cache: the same queue and device, prefill
 * only. */
static int replay_baseline(const struct replay_args *a, const struct workload *w,
			   uint64_t dev_tokens, double *ttft)
{
	struct sim s;
	struct replay_buf b;
	struct result res = {.name = "no cache"};
	struct progress prog = {0};
	int rc = sim_init(&s, a, w, &b, ttft, &res, false);
	s.dev_budget = dev_tokens / a->page_tokens;
	if (!rc)
		rc = sim_run(&s, &prog);
	sim_free(&s);
	return rc;
}

/* Returns 0, or a negative errno (said). */
static int replay_one(const struct replay_args *a, const struct workload *w, uint64_t l1,
		      uint64_t l2, struct hc_store *store, double *ttft, bool progress,
		      struct result *res)
{
	struct hc_cache_opts o;
	struct sim s;
	struct replay_buf b;
	struct progress prog = {.on = progress && isatty(STDERR_FILENO)};
	uint32_t ps = a->page_tokens;
	uint64_t t_start = now_ns();
	int rc;

	if ((rc = sim_init(&s, a, w, &b, ttft, res, true)))
		return rc;
	hc_cache_opts_init(&o, sizeof(o));
	o.page_size = ps;
	/* The MLA layout stores one latent buffer per layer: two layers of
	 * kv_bytes / 2 one-byte elements per token give exactly kv_bytes. */
	o.kv.layers = 2;
	o.kv.heads = 1;
	o.kv.head_dim = (uint32_t)(a->kv_bytes / 2);
	o.kv.elem_bytes = 1;
	o.kv.mla = true;
	o.kv.layout = HC_LAYOUT_LAYER_FIRST;
	o.device_tokens = l1;
	o.host_tokens = l2;
	/* Any L3 prefix of a page is worth fetching in a replay. */
	o.prefetch_threshold = ps;
	o.store = store;
	o.no_data = a->no_data;
	o.mamba_bytes = a->mamba_bytes;
	o.mamba_host_states = a->mamba_host_states;
	if ((rc = hc_cache_open(&o, &s.c))) {
		cli_report("replay: opening the cache", rc);
		sim_free(&s);
		return rc;
	}
	s.pbytes = hc_cache_page_bytes(s.c);
	rc = sim_run(&s, &prog);
	if (prog.printed)
		fputc('\n', stderr);
	if (!rc) {
		/* Backups still queued are part of the run's work (and its bytes). */
		hc_cache_flush(s.c);
		res->seconds = (double)(now_ns() - t_start) / 1e9;
		res->virtual_seconds = s.now;
		struct hc_cache_stats st;
		hc_cache_stats(s.c, &st, sizeof(st));
		if (a->no_data) {
			/* No bytes move: model them from the tokens each tier served. */
			res->bytes_h2d = (res->hit[1] + res->hit[2]) * a->kv_bytes;
			res->bytes_l3_read = res->hit[2] * a->kv_bytes;
			res->bytes_l3_write = st.pages_l3_write * ps * a->kv_bytes;
			res->bytes_d2h = 0;
		} else {
			res->bytes_h2d = st.bytes_h2d;
			res->bytes_d2h = st.bytes_d2h;
			res->bytes_l3_read = st.bytes_l3_read;
			res->bytes_l3_write = st.bytes_l3_write;
		}
	}
	hc_cache_close(s.c);
	sim_free(&s);
	return rc;
}

/* ---- output ---- */

static double hit_rate(const struct result *r)
{
	return r->input_tokens ?
		(double)(r->hit[0] + r->hit[1] + r->hit[2]) / (double)r->input_tokens : 0;
}

static double l3_gbps(const struct result *r)
{
	return r->l3_seconds > 0 ? (double)r->bytes_l3_read / r->l3_seconds / 1e9 : 0;
}

static void json_result(cJSON *o, const struct result *r, bool no_data)
{
	cJSON_AddStringToObject(o, "name", r->name);
	cJSON_AddNumberToObject(o, "requests", (double)r->requests);
	cJSON_AddNumberToObject(o, "input_tokens", (double)r->input_tokens);
	cJSON *h = cJSON_AddObjectToObject(o, "hit_tokens");
	cJSON_AddNumberToObject(h, "l1", (double)r->hit[0]);
	cJSON_AddNumberToObject(h, "l2", (double)r->hit[1]);
	cJSON_AddNumberToObject(h, "l3", (double)r->hit[2]);
	cJSON_AddNumberToObject(o, "hit_rate", hit_rate(r));
	cJSON_AddNumberToObject(o, "skipped_requests", (double)r->skipped);
	cJSON_AddNumberToObject(o, "verified_pages", (double)r->verified);
	cJSON_AddNumberToObject(o, "corrupt_pages", (double)r->corrupt);
	cJSON *b = cJSON_AddObjectToObject(o, "bytes");
	cJSON_AddBoolToObject(b, "modelled", no_data);
	cJSON_AddNumberToObject(b, "l2_to_l1", (double)r->bytes_h2d);
	cJSON_AddNumberToObject(b, "l1_to_l2", (double)r->bytes_d2h);
	cJSON_AddNumberToObject(b, "l3_read", (double)r->bytes_l3_read);
	cJSON_AddNumberToObject(b, "l3_write", (double)r->bytes_l3_write);
	cJSON_AddNumberToObject(o, "l3_read_gbps", l3_gbps(r));
	cJSON_AddNumberToObject(o, "seconds", r->seconds);
	cJSON_AddNumberToObject(o, "virtual_seconds", r->virtual_seconds);
	cJSON *t = cJSON_AddObjectToObject(o, "ttft_s");
	cJSON_AddNumberToObject(t, "p50", r->ttft[0]);
	cJSON_AddNumberToObject(t, "p90", r->ttft[1]);
	cJSON_AddNumberToObject(t, "p99", r->ttft[2]);
	t = cJSON_AddObjectToObject(o, "ttft_no_cache_s");
	cJSON_AddNumberToObject(t, "p50", r->ttft_no[0]);
	cJSON_AddNumberToObject(t, "p90", r->ttft_no[1]);
	cJSON_AddNumberToObject(t, "p99", r->ttft_no[2]);
}

static int print_json(const struct replay_args *a, const struct result *res, size_t n)
{
	cJSON *o = cJSON_CreateObject();
	json_result(o, &res[n - 1], a->no_data);
	cJSON_AddStringToObject(o, "mode", a->no_data ? "no_data" : "data");
	cJSON_AddStringToObject(o, "schedule", a->sequential ? "sequential" : "timed");
	cJSON_AddNumberToObject(o, "concurrency", a->sequential ? 1 : (double)a->concurrency);
	cJSON_AddNumberToObject(o, "speed", a->speed);
	cJSON_AddNumberToObject(o, "page_tokens", a->page_tokens);
	cJSON_AddNumberToObject(o, "kv_bytes_per_token", (double)a->kv_bytes);
	cJSON_AddNumberToObject(o, "mamba_bytes", (double)a->mamba_bytes);
	cJSON_AddNumberToObject(o, "mamba_host_states", (double)a->mamba_host_states);
	cJSON_AddNumberToObject(o, "prefill_tokens_per_s", a->prefill_tps);
	cJSON *cf = cJSON_AddArrayToObject(o, "configs");
	for (size_t i = 0; i < n; i++) {
		cJSON *x = cJSON_CreateObject();
		json_result(x, &res[i], a->no_data);
		cJSON_AddItemToArray(cf, x);
	}
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!s)
		return 1;
	printf("%s\n", s);
	free(s);
	return 0;
}

static void print_human(const struct replay_args *a, const struct result *res, size_t n)
{
	const struct result *r = &res[n - 1];

	printf("mode %s, page %u tokens, %" PRIu64 " KV bytes/token, prefill %.0f tokens/s\n",
	       a->no_data ? "no-data (bytes and transfer times modelled)" : "data",
	       a->page_tokens, a->kv_bytes, a->prefill_tps);
	if (a->sequential)
		printf("sequential: one request at a time, in trace order\n");
	else
		printf("timed: arrivals at trace time / %g, %" PRIu64 " requests served at once\n",
		       a->speed, a->concurrency);
	printf("requests %" PRIu64 ", input tokens %" PRIu64 "\n", r->requests,
	       r->input_tokens);
	printf("verified pages %" PRIu64 ", corrupt pages %" PRIu64 "\n\n", r->verified,
	       r->corrupt);
	printf("%-10s %8s %12s %12s %12s %9s %9s %9s %8s %8s %8s %8s %7s\n", "config",
	       "hit rate", "L1 hit", "L2 hit", "L3 hit", "L2->L1 MB", "L3 rd MB", "L3 wr MB",
	       "L3 GB/s", "TTFT p50", "p90", "p99", "secs");
	for (size_t i = 0; i < n; i++) {
		const struct result *x = &res[i];
		printf("%-10s %8.4f %12" PRIu64 " %12" PRIu64 " %12" PRIu64
		       " %9.1f %9.1f %9.1f %8.2f %8.3f %8.3f %8.3f %7.2f\n",
		       x->name, hit_rate(x), x->hit[0], x->hit[1], x->hit[2],
		       (double)x->bytes_h2d / 1e6, (double)x->bytes_l3_read / 1e6,
		       (double)x->bytes_l3_write / 1e6, l3_gbps(x), x->ttft[0], x->ttft[1],
		       x->ttft[2], x->seconds);
	}
	printf("%-10s %8.4f %12s %12s %12s %9s %9s %9s %8s %8.3f %8.3f %8.3f\n", "no cache", 0.0,
	       "-", "-", "-", "-", "-", "-", "-", r->ttft_no[0], r->ttft_no[1], r->ttft_no[2]);
	for (size_t i = 0; i < n; i++)
		if (res[i].skipped)
			printf("%s: %" PRIu64 " requests did not fit on the device (no cache)\n",
			       res[i].name, res[i].skipped);
}

/* ---- arguments ---- */

static void replay_usage(FILE *out)
{
	fprintf(out,
		"usage: hicache replay TRACE [options]\n"
		"       hicache replay --multiturn [--clients C] [--rounds R]\n"
		"                      [--request-tokens N] [--output-tokens M] [options]\n"
		"\n"
		"Replays a Mooncake trace (JSONL: timestamp, input_length, output_length,\n"
		"hash_ids with one chained id per 512-token block) through the cache, three\n"
		"times: L1 only, L1+L2, L1+L2+L3 (fresh caches), and reports hit tokens per\n"
		"tier, bytes moved, L3 read GB/s and TTFT percentiles with and without the\n"
		"cache. Token j of block b is fmix32(b*512 + j). Time is virtual: requests\n"
		"arrive at their timestamps, up to --concurrency are served at once, each\n"
		"ending after its transfers and the prefill of what missed; its pages join\n"
		"the cache when it ends.\n"
		"\n"
		"options:\n"
		"      --sequential         trace order, one request at a time, no queueing\n"
		"      --concurrency N      requests served at once (default 16)\n"
		"      --speed X            trace time runs X times faster: X times the load\n"
		"                           (default 1)\n"
		"      --no-data            metadata only: no bytes move; bytes and transfer\n"
		"                           times are modelled (L2 20 GB/s, L3 5 GB/s)\n"
		"      --page-tokens N      tokens per page (default 512 = one trace block)\n"
		"      --l1-tokens N|unlimited   device capacity (default 1000000)\n"
		"      --l2-tokens N|unlimited   host capacity (default 4000000); write-through\n"
		"                           keeps device pages on host too, so L2 should be\n"
		"                           larger than L1 to add anything\n"
		"      --l3 none|mem|file:DIR    L3 store (default file:<temporary dir>, removed\n"
		"                           at exit)\n"
		"      --kv-bytes-per-token N    KV bytes per token, even (default 128: 2 layers\n"
		"                           of 64 bytes)\n"
		"      --prefill-tokens-per-s R  modelled prefill rate (default 10000)\n"
		"      --multiturn          built-in multi-turn workload instead of TRACE:\n"
		"                           round k of client c sends its conversation so far\n"
		"                           plus N tokens; rounds interleave across clients\n"
		"      --clients C --rounds R --request-tokens N --output-tokens M\n"
		"                           (defaults 8, 4, 1024, 256)\n"
		"      --mamba-bytes N      hybrid (Mamba) model: N state bytes per request,\n"
		"                           stored after its last full page; a hit ends at the\n"
		"                           deepest cached state (default 0: not hybrid)\n"
		"      --mamba-host-states N     host state slots (default: one per host page);\n"
		"                           states also go to L3 unless --l3 none\n"
		"      --json               print one JSON object\n"
		"  -h, --help               print this help and exit\n"
		"\n"
		"unlimited = the workload's total input tokens (in data mode that many tokens\n"
		"of memory per tier). The L1-only run gives the host tier one page, the least\n"
		"the controller accepts. With --no-data any --l3 other than none is a key set\n"
		"inside the cache (no store I/O). L3 GB/s = bytes read from L3 / time spent in\n"
		"prefetch waits that got L3 pages (data mode only). Data mode checks every page\n"
		"loaded from L2 or L3 against its expected bytes (verified/corrupt pages).\n"
		"A progress line is drawn on stderr when it is a terminal.\n"
		"TTFT = end - arrival (sequential: the request's own time); without cache the\n"
		"same queue serves every request at the prefill rate. Multi-turn rounds of a\n"
		"client start when its previous round ends. With --no-data the three\n"
		"configurations run at once (data mode: one after the other).\n"
		"exit status: 0 ok, 1 a failure or a corrupt page, 2 bad usage\n");
}


static int bad_value(const char *opt, const char *val, const char *want)
{
	fprintf(stderr, "hicache replay: --%s '%s' is not %s\n", opt, val, want);
	return 2;
}

enum {
	OPT_SEQUENTIAL = 256,
	OPT_NO_DATA,
	OPT_PAGE_TOKENS,
	OPT_L1,
	OPT_L2,
	OPT_L3,
	OPT_KV_BYTES,
	OPT_PREFILL,
	OPT_JSON,
	OPT_MULTITURN,
	OPT_CLIENTS,
	OPT_ROUNDS,
	OPT_REQ_TOKENS,
	OPT_OUT_TOKENS,
	OPT_MAMBA_BYTES,
	OPT_MAMBA_HOST,
	OPT_CONCURRENCY,
	OPT_SPEED,
};

static int parse_args(int argc, char **argv, struct replay_args *a)
{
	static const struct option longopts[] = {
		{"sequential", no_argument, NULL, OPT_SEQUENTIAL},
		{"no-data", no_argument, NULL, OPT_NO_DATA},
		{"page-tokens", required_argument, NULL, OPT_PAGE_TOKENS},
		{"l1-tokens", required_argument, NULL, OPT_L1},
		{"l2-tokens", required_argument, NULL, OPT_L2},
		{"l3", required_argument, NULL, OPT_L3},
		{"kv-bytes-per-token", required_argument, NULL, OPT_KV_BYTES},
		{"prefill-tokens-per-s", required_argument, NULL, OPT_PREFILL},
		{"json", no_argument, NULL, OPT_JSON},
		{"multiturn", no_argument, NULL, OPT_MULTITURN},
		{"clients", required_argument, NULL, OPT_CLIENTS},
		{"rounds", required_argument, NULL, OPT_ROUNDS},
		{"request-tokens", required_argument, NULL, OPT_REQ_TOKENS},
		{"output-tokens", required_argument, NULL, OPT_OUT_TOKENS},
		{"mamba-bytes", required_argument, NULL, OPT_MAMBA_BYTES},
		{"mamba-host-states", required_argument, NULL, OPT_MAMBA_HOST},
		{"concurrency", required_argument, NULL, OPT_CONCURRENCY},
		{"speed", required_argument, NULL, OPT_SPEED},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		const char *arg = optarg;
		switch (c) {
		case OPT_SEQUENTIAL:
			a->sequential = true;
			break;
		case OPT_NO_DATA:
			a->no_data = true;
			break;
		case OPT_JSON:
			a->json = true;
			break;
		case OPT_MULTITURN:
			a->multiturn = true;
			break;
		case OPT_PAGE_TOKENS:
			if (!cli_parse_u64(arg, 1, 1u << 20, &v))
				return bad_value("page-tokens", arg, "a number in 1..1048576");
			a->page_tokens = (uint32_t)v;
			break;
		case OPT_L1:
		case OPT_L2:
			if (!strcmp(arg, "unlimited"))
				v = UINT64_MAX;
			else if (!cli_parse_u64(arg, 1, UINT64_MAX / 2, &v))
				return bad_value(c == OPT_L1 ? "l1-tokens" : "l2-tokens", arg,
						 "a number >= 1 or 'unlimited'");
			*(c == OPT_L1 ? &a->l1_tokens : &a->l2_tokens) = v;
			break;
		case OPT_L3:
			if (!strcmp(arg, "none")) {
				a->l3 = L3_NONE;
			} else if (!strcmp(arg, "mem")) {
				a->l3 = L3_MEM;
			} else if (!strncmp(arg, "file:", 5) && arg[5]) {
				a->l3 = L3_FILE;
				a->l3_dir = arg + 5;
			} else {
				return bad_value("l3", arg, "none, mem or file:DIR");
			}
			break;
		case OPT_KV_BYTES:
			if (!cli_parse_u64(arg, 2, 1u << 24, &v) || v % 2)
				return bad_value("kv-bytes-per-token", arg,
						 "an even number in 2..16777216");
			a->kv_bytes = v;
			break;
		case OPT_PREFILL:
		case OPT_SPEED: {
			char *end;
			errno = 0;
			double x = strtod(arg, &end);
			if (errno || *end || end == arg || !(x > 0) || x > 1e12)
				return bad_value(c == OPT_SPEED ? "speed" : "prefill-tokens-per-s",
						 arg, "a number > 0");
			*(c == OPT_SPEED ? &a->speed : &a->prefill_tps) = x;
			break;
		}
		case OPT_CONCURRENCY:
			if (!cli_parse_u64(arg, 1, 4096, &v))
				return bad_value("concurrency", arg, "a number in 1..4096");
			a->concurrency = v;
			break;
		case OPT_CLIENTS:
		case OPT_ROUNDS:
		case OPT_REQ_TOKENS:
		case OPT_OUT_TOKENS: {
			static const char *const names[] = {"clients", "rounds", "request-tokens",
							    "output-tokens"};
			uint64_t *dst[] = {&a->clients, &a->rounds, &a->request_tokens,
					   &a->output_tokens};
			int k = c - OPT_CLIENTS;
			if (!cli_parse_u64(arg, c == OPT_OUT_TOKENS ? 0 : 1, 1u << 24, &v))
				return bad_value(names[k], arg, "a number in range");
			*dst[k] = v;
			break;
		}
		case OPT_MAMBA_BYTES:
			if (!cli_parse_u64(arg, 0, 1u << 30, &v))
				return bad_value("mamba-bytes", arg, "a number in 0..1073741824");
			a->mamba_bytes = v;
			break;
		case OPT_MAMBA_HOST:
			if (!cli_parse_u64(arg, 1, 1u << 30, &v))
				return bad_value("mamba-host-states", arg,
						 "a number in 1..1073741824");
			a->mamba_host_states = v;
			break;
		case 'h':
			replay_usage(stdout);
			return -1;
		default:
			if (optopt)
				fprintf(stderr, "hicache replay: bad or incomplete option '-%c'\n",
					optopt);
			else
				fprintf(stderr, "hicache replay: bad option '%s'\n",
					argv[optind - 1]);
			replay_usage(stderr);
			return 2;
		}
	}
	if (a->multiturn ? optind != argc : optind != argc - 1) {
		fprintf(stderr, "hicache replay: %s\n",
			a->multiturn ? "--multiturn takes no TRACE" : "exactly one TRACE expected");
		replay_usage(stderr);
		return 2;
	}
	if (!a->multiturn)
		a->trace = argv[optind];
	return 0;
}

/* One configuration on its own thread (--no-data runs them at once). */
struct config_run {
	const struct replay_args *a;
	const struct workload *w;
	uint64_t l1, l2;
	struct hc_store *store;
	double *ttft;
	bool progress;
	struct result *res;
	int rc;
	pthread_t th;
	bool started;
};

static void *config_thread(void *arg)
{
	struct config_run *r = arg;
	r->rc = replay_one(r->a, r->w, r->l1, r->l2, r->store, r->ttft, r->progress, r->res);
	return NULL;
}

int cmd_replay(int argc, char **argv)
{
	struct replay_args a = {
		.concurrency = 16,
		.speed = 1,
		.page_tokens = TRACE_BLOCK,
		.l1_tokens = 1000000,
		.l2_tokens = 4000000,
		.l3 = L3_FILE,
		.kv_bytes = 128,
		.prefill_tps = 10000,
		.clients = 8,
		.rounds = 4,
		.request_tokens = 1024,
		.output_tokens = 256,
	};
	struct workload w = {0};
	struct result res[3] = {{.name = "L1"}, {.name = "L1+L2"}, {.name = "L1+L2+L3"}};
	struct config_run run[3] = {{0}};
	double *ttft[4] = {NULL};
	struct hc_store *store = NULL;
	char tmpdir[] = "/tmp/hicache-replay-XXXXXX";
	bool own_dir = false;
	int ret = 1, rc;

	if ((rc = parse_args(argc, argv, &a)))
		return rc < 0 ? 0 : rc;
	if (a.multiturn ? gen_multiturn(&a, &w) : load_trace(a.trace, &w)) {
		if (a.multiturn)
			fprintf(stderr, "hicache replay: out of memory\n");
		goto out;
	}
	uint64_t ps = a.page_tokens;
	/* unlimited: everything the workload could insert, plus a page. */
	uint64_t unl = (w.total_input / ps + 1) * ps;
	uint64_t l1 = a.l1_tokens == UINT64_MAX ? unl : a.l1_tokens;
	uint64_t l2 = a.l2_tokens == UINT64_MAX ? unl : a.l2_tokens;
	size_t nconf = a.l3 == L3_NONE ? 2 : 3;

	for (size_t i = 0; i < 4; i++) {
		if (!(ttft[i] = calloc(w.n, sizeof(double)))) {
			fprintf(stderr, "hicache replay: out of memory\n");
			goto out;
		}
	}
	if (a.l3 != L3_NONE) {
		const char *dir = a.l3_dir;
		if (a.l3 == L3_FILE && !a.no_data && !dir) {
			if (!mkdtemp(tmpdir)) {
				fprintf(stderr, "hicache replay: mkdtemp: %s\n", strerror(errno));
				goto out;
			}
			own_dir = true;
			dir = tmpdir;
		}
		if (open_store(&a, dir, &store))
			goto out;
	}
	for (size_t i = 0; i < nconf; i++) {
		/* L1 only: the controller needs a host page; one is the least. */
		run[i] = (struct config_run){.a = &a, .w = &w, .l1 = l1, .l2 = i == 0 ? ps : l2,
					     .store = i == 2 ? store : NULL, .ttft = ttft[i],
					     .progress = !a.no_data, .res = &res[i]};
		/* Data mode measures transfer times: one configuration at a time. */
		if (a.no_data && pthread_create(&run[i].th, NULL, config_thread, &run[i]) == 0)
			run[i].started = true;
		else
			config_thread(&run[i]);
	}
	rc = replay_baseline(&a, &w, l1, ttft[3]);
	for (size_t i = 0; i < nconf; i++) {
		if (run[i].started)
			pthread_join(run[i].th, NULL);
		if (run[i].rc)
			rc = run[i].rc;
	}
	if (rc)
		goto out;
	double no_cache[3];
	percentiles(ttft[3], w.n, no_cache);
	for (size_t i = 0; i < nconf; i++) {
		percentiles(ttft[i], w.n, res[i].ttft);
		memcpy(res[i].ttft_no, no_cache, sizeof(no_cache));
	}
	ret = a.json ? print_json(&a, res, nconf) : (print_human(&a, res, nconf), 0);
	for (size_t i = 0; i < nconf; i++)
		if (res[i].corrupt) {
			fprintf(stderr, "hicache replay: %s: %" PRIu64 " corrupt pages\n",
				res[i].name, res[i].corrupt);
			ret = 1;
		}
out:
	hc_store_close(store);
	if (own_dir)
		nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	for (size_t i = 0; i < 4; i++)
		free(ttft[i]);
	wl_free(&w);
	return ret;
}
