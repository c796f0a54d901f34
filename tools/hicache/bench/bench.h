/*
 * hicache bench store: throughput and batch latency of hc_store_set, _get
 * and _exists on the file, mem or s3 backend, with page contents that a later
 * run can check byte for byte. (What the files of tools/hicache/bench/
 * share; private to them.)
 *
 *   page i (0 <= i < --pages)
 *     key      hc_key_chain(NULL, {seed_lo, seed_hi, i_lo, i_hi}, page size 4):
 *              one page of four u32 tokens, no prior
 *     content  the flat page as 8-byte little-endian words,
 *              word w = splitmix64(splitmix64(seed ^ splitmix64(i)) + w);
 *              a partial last word keeps its low bytes
 *
 *   thread t of T   pages [t*N/T, (t+1)*N/T) in batches of --batch,
 *                   through pool slots [t*batch, (t+1)*batch)
 *                   one store shared by every thread
 *   --op mixed      batch j of thread t is a get when (j + t) is even, else
 *                   a set: half the batches read pages that exist, half
 *                   write new ones, and with two or more threads reads and
 *                   writes overlap (thread 1 starts with a set while thread
 *                   0 starts with a get). The get batches' pages are stored
 *                   first, untimed, so every get can hit.
 *
 * Contents go through hc_pool_scatter / hc_pool_gather, so they are defined
 * on the flat page whatever the layout, and a page written under one layout
 * reads back identically under another (when the store finds it).
 *
 * Only the store calls are timed. "seconds" is the busiest thread's time
 * inside store calls (one thread: the sum of its batch latencies), so
 * filling and verifying pages never count against the store. A mixed run
 * reports each direction the same way (the busiest thread's time inside
 * its set, or get, calls) besides the total.
 *
 * When stderr is a terminal a progress line (pages done, GB/s of wall time
 * so far) is redrawn in place at most 10 times a second; otherwise nothing
 * is printed, so logs and pipes stay clean.
 *
 * Caveats:
 *   - objects are immutable: a set of pages that already exist writes
 *     nothing and is fast;
 *   - a page written in zero-copy mode (objects _k, _v) is not the object a
 *     bounce-mode store reads (one plain object): get with the same
 *     --zero-copy, --direct and --page-bytes as the set;
 *   - the mem backend lives in this process only: get and exists first
 *     store the pages (untimed);
 *   - no cleaner runs during a bench (l3_cleaner_interval_s = 0), so no page
 *     is deleted under it.
 */
#ifndef HC_TOOLS_BENCH_H
#define HC_TOOLS_BENCH_H

#include <hicache/hicache.h>
#include <hicache/store.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define BENCH_PAGE_BYTES_MAX (1ull << 30)
#define BENCH_THREADS_MAX 1024u
#define BENCH_DIRS_MAX 64
/* The key tokens: seed and page index, 64 bits each as two u32. */
#define BENCH_KEY_TOKENS 4

/* OP_SET, OP_GET and OP_EXISTS are also the direction of one batch. */
enum bench_op { OP_SET, OP_GET, OP_EXISTS, OP_MIXED, OP_COUNT };

extern const char *const bench_op_names[OP_COUNT];

/* Progress redraws: a human cannot read faster, and each one is a write(2). */
#define BENCH_PROGRESS_NS 100000000ull

struct bench_args {
	const char *backend;
	const char *dirs[BENCH_DIRS_MAX];
	/* s3: NULL = config / environment */
	const char *endpoint, *bucket, *prefix;
	uint64_t max_inflight; /* 0 = config / environment */
	size_t ndirs;
	uint64_t page_bytes;
	uint64_t pages;
	uint64_t total_bytes; /* --total-bytes, 0 if not given */
	uint64_t batch;
	enum bench_op op;
	bool have_op;
	enum hc_kv_layout layout;
	bool verify;
	bool json;
	unsigned threads;
	const char *engine; /* NULL: config / environment */
	int direct;         /* -1: config / environment, else 0 or 1 */
	bool zero_copy;
	bool mla; /* one latent buffer: one object per page */
	bool pool_warmup;
	enum hc_huge_mode huge_mode; /* the pool's pages */
	uint64_t pipeline;           /* calls started per thread (1: synchronous calls) */
	/* --slots distinct: every page of a thread's range has a pool slot of
	 * its own, as an engine's large host pool gives (also with --pipeline);
	 * otherwise every batch reuses the thread's --batch slots. */
	bool distinct_slots;
	uint64_t seed;
	bool drop_caches;
};

/* The clock of every timing: the workers' and the progress line's. */
static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Every page of a thread's range has its own slot (and key entry). */
static inline bool bench_slot_per_page(const struct bench_args *a)
{
	return a->pipeline > 1 || a->distinct_slots;
}

/* What one thread saw. */
struct tally {
	uint64_t hits;       /* get: pages read; exists: leading hits per batch */
	uint64_t misses;     /* get: -ENOENT; exists: pages not in the leading hits */
	uint64_t corrupt;    /* get: -EBADMSG */
	uint64_t errors;     /* set and get: any other per-page error */
	uint64_t verified;   /* get --verify: every byte as expected */
	uint64_t mismatched; /* get --verify: a hit whose bytes differ */
	int first_err;       /* first per-page error other than a miss, 0 if none */
	uint64_t first_err_page;
};

struct bench;

/* One started call of a --pipeline run. */
struct lane {
	struct hc_store_op *op; /* NULL: idle */
	enum bench_op dir;
	uint64_t first;
	size_t n;
	uint64_t t_start;
};

struct worker {
	struct bench *b;
	pthread_t tid;
	unsigned index;      /* t of T: a mixed run's first batch depends on it */
	uint64_t first, end; /* page range [first, end) */
	/* One batch's worth; with --pipeline or --slots distinct one entry per
	 * page of the range, so that calls in flight never share an entry. */
	uint64_t *slots; /* this thread's pool pages */
	struct hc_key *keys;
	int *results;
	struct lane *lanes; /* --pipeline: the calls started */
	uint8_t *flat;      /* one flat page */
	uint64_t *lat_ns;   /* one per batch */
	uint8_t *lat_op;    /* the direction (OP_SET, OP_GET, OP_EXISTS) of each */
	size_t nlat;
	/* Per direction, so that a mixed run can report set and get apart. */
	uint64_t busy_ns[OP_MIXED]; /* inside store calls */
	uint64_t pages[OP_MIXED];
	struct tally tally[OP_MIXED];
	/* A whole-call failure; the message is copied because hc_last_error()
	 * is per thread. */
	int rc;
	const char *what;
	char err[256];
};

/* A progress line on a terminal, drawn by its own thread so that a long
 * batch on any worker does not stall it. */
struct progress {
	_Atomic uint64_t pages, bytes; /* done in this phase */
	uint64_t total;
	const char *label;
	uint64_t t0;
	bool printed;
	bool stop;
	pthread_t tid;
	pthread_mutex_t lock;
	pthread_cond_t wake;
};

struct bench {
	const struct bench_args *a;
	struct hc_pool *pool;
	struct hc_store *store;
	struct worker *workers;
	bool show_progress;        /* stderr is a terminal */
	struct progress *progress; /* the running phase's, or NULL */
};

/* One direction of a run (or all of it). */
struct part {
	uint64_t pages, bytes, batches, failed;
	double seconds, gbps, pages_per_s, p50_ms, p99_ms;
	struct tally t;
};

struct summary {
	struct part all;
	struct part set, get; /* --op mixed only */
	uint64_t existing;    /* set pages that were stored already: nothing written */
	bool warmed;          /* the pool was read into once before the timed reads */
	const char *cache;    /* get and mixed: o_direct, dropped, warm, mem; else n/a */
};

/* What a phase does with each batch. */
enum phase_kind {
	PHASE_ALL,    /* every batch: op */
	PHASE_MIXED,  /* batch j of thread t: get if j + t is even, else set */
	PHASE_LAYOUT, /* a set of the batches a mixed run will get, and no others */
};

/* What the opened store does, for the report. */
struct env_info {
	const char *engine;
	bool direct, zero_copy;
	bool mla;
	unsigned objects;      /* files per page */
	uint64_t object_bytes; /* of each: payload rounded up to 4096, + the trailer block */
};

/* ---- args.c ---- */

/* Returns 0, 1 (printing --help failed), 2 (bad usage, said) or -1
 * (--help printed). */
int bench_parse_args(int argc, char **argv, struct bench_args *a);

/* ---- pages.c: page keys and contents ---- */

int bench_page_key(uint64_t seed, uint64_t page, struct hc_key *out);
void bench_fill_page(uint64_t seed, uint64_t page, uint8_t *buf, size_t len);
bool bench_page_matches(uint64_t seed, uint64_t page, const uint8_t *buf, size_t len);

/* ---- setup.c: the pool and the store (failures said) ---- */

int bench_create_pool(const struct bench_args *a, struct hc_pool **out);
int bench_open_store(const struct bench_args *a, struct hc_pool *pool, struct hc_store **out);

/* ---- worker.c: threads and phases ---- */

/* Buffers of thread t; -ENOMEM (bench_worker_free() cleans up either way). */
int bench_worker_init(struct bench *b, struct worker *w, unsigned t);
void bench_worker_free(struct worker *w);
/* Run a phase on every thread; returns 0 or the first whole-call error
 * (said). */
int bench_run_phase(struct bench *b, enum phase_kind kind, enum bench_op op, const char *label);

/* ---- progress.c: the progress line ---- */

/* Starts the line's thread; on any failure the phase runs without it. */
void bench_progress_start(struct bench *b, struct progress *p, const char *label, uint64_t total);
/* Stops the thread and erases the line, so the summary starts clean. */
void bench_progress_stop(struct bench *b);

/* ---- report.c: the summary ---- */

int bench_summarize(const struct bench *b, struct summary *s);
void bench_print_human(const struct bench_args *a, const struct env_info *e,
		       const struct summary *s);
void bench_print_json(const struct bench_args *a, const struct env_info *e,
		      const struct summary *s);
/* A run with failed pages: how many of which direction, and why, on stderr. */
void bench_say_failed(const struct bench_args *a, const struct summary *s);

/* ---- store.c ---- */

/* hicache bench store: argv[0] is "store". Returns the exit status. */
int bench_store(int argc, char **argv);

#endif
