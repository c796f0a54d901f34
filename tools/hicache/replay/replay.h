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
#ifndef HC_TOOLS_REPLAY_H
#define HC_TOOLS_REPLAY_H

/* Private to tools/hicache/replay/: args.c (options), trace.c (the trace
 * parser and the multi-turn generator), tokens.c (token and page synthesis),
 * sim.c (the virtual-time queue), run.c (caches, stores, cmd_replay),
 * report.c (the summary and --json). */

#include <hicache/cache.h>
#include <hicache/store.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TRACE_BLOCK 512u
#define REPLAY_LINE_MAX (64u << 20) /* a line longer than this is not a trace */
#define PROGRESS_NS 100000000ull
/* Modelled bandwidths for --no-data TTFT (bytes per second). */
#define MODEL_H2D_BPS 20e9
#define MODEL_L3_BPS 5e9

enum l3_kind { L3_NONE, L3_MEM, L3_FILE, L3_S3 };
enum router { ROUTER_RR, ROUTER_RANDOM, ROUTER_PREFIX, ROUTER_TTFT };
#define REPLAY_MAX_INSTANCES 1024u

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
	const char *l3_dir;                /* L3_FILE; NULL: a temporary dir */
	const char *s3_bucket, *s3_prefix; /* L3_S3 s3://BUCKET/PREFIX; NULL: config */
	uint64_t kv_bytes;                 /* per token, all layers */
	double prefill_tps;
	uint64_t clients, rounds, request_tokens, output_tokens;
	uint64_t mamba_bytes;       /* hybrid: state bytes per request; 0: not hybrid */
	uint64_t mamba_host_states; /* host state slots; 0: the cache's default */
	/* Fleet (fleet.c): engine instances, each its own cache with the
	 * capacities above, sharing one L3 (none: each alone). */
	uint64_t instances;
	enum router router;
	uint64_t seed;      /* --router random */
	uint64_t l3_tokens; /* shared L3 capacity; 0: unlimited */
	bool processes;     /* each instance its own OS process (procs.c) */
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
	char what[192];                  /* replay_parse_line()'s message when it names a value */
};

/* One instance's share of a configuration. */
struct inst_result {
	uint64_t requests, input_tokens, hit[3];
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
	double ttft[3];         /* p50, p90, p99 with the cache (seconds) */
	double ttft_no[3];      /* the same without */
	size_t ninst;
	struct inst_result *inst; /* ninst entries */
	/* Pages read from L3, and those of them another instance wrote. */
	uint64_t l3_pages_read, l3_cross_pages;
	uint64_t l3_pages_written; /* emulated L3 (the cache's stats count the rest) */
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

struct progress {
	bool on;
	uint64_t last;
	bool printed;
};

/* Scratch of one configuration (each runs on its own). */
struct replay_buf {
	uint64_t *slots;
	uint8_t *page, *want;
	uint8_t *mstate, *mwant; /* hybrid: mamba_bytes each */
};

/* A request being served: matched, loaded and allocated; its missing pages
 * are being computed until done_at, when they are inserted. */
struct flight {
	bool busy;
	size_t idx;
	struct hc_cache_req *req; /* NULL in the no-cache baseline */
	uint32_t *tok;
	uint64_t full;              /* pages to insert at the end; 0: none */
	uint64_t dev_pages;         /* baseline: device pages it holds while in flight */
	uint64_t put_from;          /* fleet L3: pages [put_from, full) are its L3 writes */
	uint64_t *keys;             /* fleet L3: the request's page keys (NULL: none kept) */
	uint64_t l3_from, l3_pages; /* pages [l3_from, +l3_pages) came from L3 */
	double done_at;
};

/* ---- fleet: a replay-level LRU set of 64-bit page keys (lruset.c) ---- */

struct lruset;
/* cap: pages kept (0: unlimited). Returns 0 or -ENOMEM. */
int lru_create(uint64_t cap, struct lruset **out);
void lru_destroy(struct lruset *l);
/* How many of keys[0..n) lead the set (present), without touching them. */
size_t lru_prefix(const struct lruset *l, const uint64_t *keys, size_t n);
/* Touch key (most recently used): its writer, or -1 when absent. */
int64_t lru_get(struct lruset *l, uint64_t key);
/* Add key as written by writer, or refresh it (its writer stays); the
 * least recently used key goes when the set is full. 0 or -ENOMEM. */
int lru_put(struct lruset *l, uint64_t key, uint32_t writer);

/* One engine instance of the fleet in a sim: its cache, its servers and
 * its queue (requests routed to it, waiting: a heap by ready time). */
struct inst {
	struct hc_cache *c; /* NULL in the no-cache baseline */
	struct flight *fl;  /* the sim's nfl servers */
	size_t inflight;
	bool blocked; /* no device room: waits for one of its requests to end */
	size_t *q, nq;
	double queued_work;            /* ttft router: estimated service of q */
	uint64_t dev_budget, dev_used; /* baseline: device pages */
	uint64_t routed_tokens;
	uint64_t host_pages; /* its host tier (caps an emulated L3 prefetch) */
	struct lruset *view; /* prefix/ttft routers: what it was sent (NULL: none) */
	struct inst_result *res;
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
	struct replay_buf *b;
	struct result *res;
	size_t pbytes, maxpages;
	double *arrival, *ready_at, *ttft;
	size_t *heap, nheap; /* requests not routed yet, by ready time */
	/* The instances (one unless --instances), each with nfl servers.
	 * Baseline (no cache): the device still holds the KV of the requests
	 * in flight; a request waits until its pages fit. */
	struct inst *in;
	size_t ninst, nfl, inflight, queued;
	/* Fleet L3 bookkeeping, NULL without: with l3_emulated it is the L3
	 * itself (--no-data: the caches have no store); otherwise the caches
	 * share a file dir and this only records who wrote each page. */
	struct lruset *l3;
	bool l3_emulated;
	uint64_t *rkeys; /* page keys of the request being routed */
	uint32_t *rtok;  /* its tokens */
	double *est;     /* ttft router: estimated service of each request */
	double now;
	/* --processes: the instances' caches live in child processes; the
	 * sim here routes and keeps time, sim_start/sim_finish ask them. */
	struct procs *procs;
};

/* tokens.c */
uint64_t replay_insert_len(const struct request *r);
void replay_gen_tokens(const struct request *r, uint32_t *tok);
void replay_fill_page(uint8_t *dst, size_t len, uint32_t first, uint64_t page);
void replay_fill_state(uint8_t *dst, size_t len, const uint32_t *tok, uint64_t pages, uint32_t ps);

/* trace.c: returns 0, or 1 (a bad line or an I/O error, said). */
int replay_load_trace(const char *path, struct workload *w);
/* Parses one trace line (len bytes, NUL-terminated after them) and appends
 * its request: NULL, or what is wrong with it (nothing appended). The
 * request's blocks field is an offset into w->ids until
 * replay_load_trace() fixes it up. Exactly one JSON object per line, no
 * key twice. */
const char *replay_parse_line(struct workload *w, const char *line, size_t len);
int replay_gen_multiturn(const struct replay_args *a, struct workload *w);
void replay_wl_free(struct workload *w);

/* run.c: set by SIGINT or SIGTERM; the replay stops at the next request,
 * cleans up (its temporary L3 dir too) and dies of the signal. */
#include <signal.h>
extern volatile sig_atomic_t replay_stop;

/* sim.c */
uint64_t replay_now_ns(void);
void replay_progress_draw(struct progress *p, const char *name, size_t i, size_t n);
/* ninst instances. sim_fleet_sets(): the fleet L3 set (cap pages, 0:
 * unlimited; emulated: it is the L3) and the routers' views. */
int sim_init(struct sim *s, const struct replay_args *a, const struct workload *w,
	     struct replay_buf *b, double *ttft, struct result *res, bool with_tokens,
	     size_t ninst);
int sim_fleet_sets(struct sim *s, bool l3, uint64_t cap, bool emulated, bool views,
		   uint64_t view_cap);
int sim_run(struct sim *s, struct progress *prog);
void sim_free(struct sim *s);
int replay_baseline(const struct replay_args *a, const struct workload *w, uint64_t dev_tokens,
		    double *ttft);

/* request.c: one request's start and end on an instance (see sim.c). */
int sim_start(struct sim *s, struct inst *in, size_t i, struct flight *f);
int sim_finish(struct sim *s, struct inst *in, struct flight *f);

/* The parent's share of a request's start and end: the fleet L3 set's
 * reads (after a start) and writes (at the end). */
void sim_l3_read(struct sim *s, struct inst *in, struct flight *f);
int sim_l3_publish(struct sim *s, struct inst *in, struct flight *f);

/* run.c: one store handle on the configured L3 (a->l3_dir resolved), and
 * one instance's cache on it (store NULL: no L3). 0 or -errno (said). */
int replay_open_store(const struct replay_args *a, struct hc_store **out);
int replay_open_cache(const struct replay_args *a, uint64_t l1, uint64_t l2, struct hc_store *store,
		      struct hc_cache **out);

/* procs.c: --processes. procs_spawn() forks one child per instance of s
 * (each opens its own store when with_l3, and its cache); procs_collect()
 * ends them and adds their counters and cache stats into s->res and *st;
 * procs_free() closes what is left and reaps every child (also after an
 * error: a child ends when its socket closes or its parent dies). */
struct procs;
int procs_spawn(struct sim *s, uint64_t l1, uint64_t l2, bool with_l3);
int procs_start(struct sim *s, struct inst *in, size_t i, struct flight *f);
int procs_finish(struct sim *s, struct inst *in, struct flight *f);
int procs_collect(struct sim *s, struct hc_cache_stats *st);
void procs_free(struct sim *s);

/* fleet.c */
const char *replay_router_name(enum router r);
/* 64-bit chained keys of the first n full pages of tok. */
void fleet_page_keys(const uint32_t *tok, size_t n, uint32_t ps, uint64_t *keys);
/* The instance request i goes to at s->now (its est filled for ttft). */
size_t fleet_route(struct sim *s, size_t i);
/* Whether the L3 of a fleet replay is the replay's key set (no-data mode
 * with a shared L3 over several instances, or capped by --l3-tokens). */
bool fleet_l3_emulated(const struct replay_args *a);
/* Checks the fleet options against the others: 0 or 2 (bad usage, said). */
int fleet_check_args(const struct replay_args *a);

/* report.c */
void replay_percentiles(double *v, size_t n, double out[3]);
double replay_hit_rate(const struct result *r);
double replay_l3_gbps(const struct result *r);
int replay_print_json(const struct replay_args *a, const struct result *res, size_t n);
void replay_print_human(const struct replay_args *a, const struct result *res, size_t n);

/* args.c: 0, -1 (--help printed) or 2 (bad usage, said). */
void replay_usage(FILE *out);
int replay_parse_args(int argc, char **argv, struct replay_args *a);

#endif
