/*
 * hicache bench store: throughput and batch latency of hc_store_set, _get
 * and _exists on the file or mem backend, with page contents that a later
 * run can check byte for byte.
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
 *
 * Contents go through hc_pool_scatter / hc_pool_gather, so they are defined
 * on the flat page whatever the layout, and a page written under one layout
 * reads back identically under another (when the store finds it).
 *
 * Only the store calls are timed. "seconds" is the busiest thread's time
 * inside store calls (one thread: the sum of its batch latencies), so
 * filling and verifying pages never count against the store.
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
#define _GNU_SOURCE
#include "commands.h"

#include <hicache/hicache.h>
#include <hicache/store.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_PAGE_BYTES_MAX (1ull << 30)
#define BENCH_THREADS_MAX 1024u
#define BENCH_DIRS_MAX 64
/* The key tokens: seed and page index, 64 bits each as two u32. */
#define BENCH_KEY_TOKENS 4

enum bench_op { OP_SET, OP_GET, OP_EXISTS };

static const char *const op_names[] = {"set", "get", "exists"};

struct bench_args {
	const char *backend;
	const char *dirs[BENCH_DIRS_MAX];
	size_t ndirs;
	uint64_t page_bytes;
	uint64_t pages;
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
	uint64_t seed;
	bool drop_caches;
};

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

struct worker {
	struct bench *b;
	pthread_t tid;
	uint64_t first, end; /* page range [first, end) */
	uint64_t *slots;     /* this thread's pool pages */
	struct hc_key *keys;
	int *results;
	uint8_t *flat;       /* one flat page */
	uint64_t *lat_ns;    /* one per batch */
	size_t nlat;
	uint64_t busy_ns;    /* inside store calls */
	struct tally tally;
	/* A whole-call failure; the message is copied because hc_last_error()
	 * is per thread. */
	int rc;
	const char *what;
	char err[256];
};

struct bench {
	const struct bench_args *a;
	struct hc_pool *pool;
	struct hc_store *store;
	struct worker *workers;
};

struct summary {
	uint64_t pages, bytes, batches;
	double seconds, gbps, pages_per_s, p50_ms, p99_ms;
	struct tally t;
	uint64_t failed;
	const char *cache; /* get: o_direct, dropped, warm, mem; else n/a */
};

/* ---- usage and arguments ---- */

static void bench_usage(FILE *out)
{
	fprintf(out,
		"usage: hicache bench store --op set|get|exists --pages N --page-bytes N\n"
		"                           [--backend file|mem] [--dir DIR]... [--batch N]\n"
		"                           [--layout layer_first|page_first|page_first_direct]\n"
		"                           [--threads T] [--engine uring|threads|auto]\n"
		"                           [--direct on|off] [--zero-copy on|off] [--seed S]\n"
		"                           [--verify] [--drop-caches] [--json]\n"
		"\n"
		"Runs one store operation over pages 0..N-1 in batches and reports throughput\n"
		"and batch latency. Only the store calls are timed.\n"
		"\n"
		"Pages: the KV pool is MHA with 1 layer, 1 head, 1-byte elements and 1 token\n"
		"per page, head_dim = page_bytes/2, so a flat page (K half, V half) is exactly\n"
		"--page-bytes; an odd --page-bytes uses an MLA pool (one latent buffer) with\n"
		"head_dim = page_bytes. It holds batch x threads pages and is registered as\n"
		"the anchor \"kv\" (model \"bench\").\n"
		"Key of page i: hc_key_chain over one page of 4 tokens {seed_lo, seed_hi, i_lo,\n"
		"i_hi} with no prior. Content of page i: 8-byte little-endian words,\n"
		"word w = splitmix64(splitmix64(seed ^ splitmix64(i)) + w), so a later\n"
		"'--op get --verify' with the same --seed checks every byte.\n"
		"\n"
		"options:\n"
		"  -o, --op OP          set | get | exists (required)\n"
		"  -n, --pages N        pages to process (required)\n"
		"  -p, --page-bytes N   bytes of one flat page, 1..%llu (required)\n"
		"  -b, --backend B      file (default) or mem (lives in this process: get and\n"
		"                       exists store the pages first, untimed)\n"
		"  -d, --dir DIR        file backend base dir (repeat for several; default:\n"
		"                       config 'dirs', env HICACHE_STORAGE_DIR)\n"
		"  -B, --batch N        pages per store call (default 32)\n"
		"  -l, --layout L       pool layout (default page_first)\n"
		"  -t, --threads T      threads, 1..%u (default 1); thread t takes pages\n"
		"                       [t*N/T, (t+1)*N/T), all share one store\n"
		"  -e, --engine E       io_engine (default: config / HICACHE_IO_ENGINE)\n"
		"      --direct on|off  use_direct_io (default: config / HICACHE_USE_DIRECT_IO)\n"
		"      --zero-copy on|off  off forces bounce mode (default on: zero-copy where\n"
		"                       the store allows it). Get with the same setting as set.\n"
		"  -s, --seed S         key and content seed, a u64 (default 0)\n"
		"      --verify         get: check every byte of every page read\n"
		"      --drop-caches    get, as root: sync and drop the page cache first\n"
		"      --json           print one JSON object instead of the summary\n"
		"  -h, --help           print this help and exit\n"
		"\n"
		"Seconds are the busiest thread's time inside store calls. bytes: pages stored\n"
		"(set) or read (get) times page bytes; 0 for exists. failed: set and get pages\n"
		"with an error, a miss or (with --verify) a wrong byte; exists reports hits and\n"
		"misses but no failures.\n"
		"\n"
		"exit status: 0 ok, 1 a failure or a failed page, 2 bad usage\n",
		BENCH_PAGE_BYTES_MAX, BENCH_THREADS_MAX);
}

/* Strict decimal: digits only, no sign, within [min, max]. */
static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (v < min || v > max)
		return false;
	*out = v;
	return true;
}

static bool parse_on_off(const char *s, bool *out)
{
	if (!strcmp(s, "on")) {
		*out = true;
		return true;
	}
	if (!strcmp(s, "off")) {
		*out = false;
		return true;
	}
	return false;
}

static bool parse_op(const char *s, enum bench_op *out)
{
	for (int i = 0; i < 3; i++) {
		if (!strcmp(s, op_names[i])) {
			*out = (enum bench_op)i;
			return true;
		}
	}
	return false;
}

static int bad_value(const char *opt, const char *val, const char *want)
{
	fprintf(stderr, "hicache bench: --%s '%s' is not %s\n", opt, val, want);
	return 2;
}

/* Long-only options. */
enum { OPT_DIRECT = 256, OPT_ZERO_COPY, OPT_VERIFY, OPT_JSON, OPT_DROP_CACHES };

/* Returns 0, 2 (bad usage, said) or -1 (--help printed). */
static int parse_option(struct bench_args *a, int c, const char *arg)
{
	uint64_t v;
	bool on;

	switch (c) {
	case 'o':
		if (!parse_op(arg, &a->op))
			return bad_value("op", arg, "set, get or exists");
		a->have_op = true;
		return 0;
	case 'n':
		if (!parse_u64(arg, 1, UINT64_MAX / 2, &a->pages))
			return bad_value("pages", arg, "a number of at least 1");
		return 0;
	case 'p':
		if (!parse_u64(arg, 1, BENCH_PAGE_BYTES_MAX, &a->page_bytes))
			return bad_value("page-bytes", arg, "a number in 1..2^30");
		return 0;
	case 'b':
		if (strcmp(arg, "file") && strcmp(arg, "mem"))
			return bad_value("backend", arg, "file or mem");
		a->backend = arg;
		return 0;
	case 'd':
		if (!arg[0])
			return bad_value("dir", arg, "a directory");
		if (a->ndirs == BENCH_DIRS_MAX) {
			fprintf(stderr, "hicache bench: at most %d --dir\n", BENCH_DIRS_MAX);
			return 2;
		}
		a->dirs[a->ndirs++] = arg;
		return 0;
	case 'B':
		if (!parse_u64(arg, 1, 1u << 20, &a->batch))
			return bad_value("batch", arg, "a number in 1..1048576");
		return 0;
	case 'l':
		if (hc_kv_layout_parse(arg, &a->layout))
			return bad_value("layout", arg,
					 "layer_first, page_first or page_first_direct");
		return 0;
	case 't':
		if (!parse_u64(arg, 1, BENCH_THREADS_MAX, &v))
			return bad_value("threads", arg, "a number in 1..1024");
		a->threads = (unsigned)v;
		return 0;
	case 'e':
		if (strcmp(arg, "uring") && strcmp(arg, "threads") && strcmp(arg, "auto"))
			return bad_value("engine", arg, "uring, threads or auto");
		a->engine = arg;
		return 0;
	case 's':
		if (!parse_u64(arg, 0, UINT64_MAX, &a->seed))
			return bad_value("seed", arg, "a number in 0..2^64-1");
		return 0;
	case OPT_DIRECT:
		if (!parse_on_off(arg, &on))
			return bad_value("direct", arg, "on or off");
		a->direct = on;
		return 0;
	case OPT_ZERO_COPY:
		if (!parse_on_off(arg, &a->zero_copy))
			return bad_value("zero-copy", arg, "on or off");
		return 0;
	case OPT_VERIFY: a->verify = true; return 0;
	case OPT_JSON: a->json = true; return 0;
	case OPT_DROP_CACHES: a->drop_caches = true; return 0;
	case 'h':
		bench_usage(stdout);
		return -1;
	default:
		return 2;
	}
}

static int parse_args(int argc, char **argv, struct bench_args *a)
{
	static const struct option opts[] = {
		{"op", required_argument, NULL, 'o'},
		{"pages", required_argument, NULL, 'n'},
		{"page-bytes", required_argument, NULL, 'p'},
		{"backend", required_argument, NULL, 'b'},
		{"dir", required_argument, NULL, 'd'},
		{"batch", required_argument, NULL, 'B'},
		{"layout", required_argument, NULL, 'l'},
		{"threads", required_argument, NULL, 't'},
		{"engine", required_argument, NULL, 'e'},
		{"seed", required_argument, NULL, 's'},
		{"direct", required_argument, NULL, OPT_DIRECT},
		{"zero-copy", required_argument, NULL, OPT_ZERO_COPY},
		{"verify", no_argument, NULL, OPT_VERIFY},
		{"json", no_argument, NULL, OPT_JSON},
		{"drop-caches", no_argument, NULL, OPT_DROP_CACHES},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c, rc;

	*a = (struct bench_args){
		.backend = "file",
		.batch = 32,
		.layout = HC_LAYOUT_PAGE_FIRST,
		.threads = 1,
		.direct = -1,
		.zero_copy = true,
	};
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:n:p:b:d:B:l:t:e:s:h", opts, NULL)) != -1) {
		if (c == ':') {
			fprintf(stderr, "hicache bench: option '%s' needs a value\n",
				argv[optind - 1]);
			return 2;
		}
		if (c == '?') {
			fprintf(stderr, "hicache bench: unknown option '%s' (see --help)\n",
				argv[optind - 1]);
			return 2;
		}
		if ((rc = parse_option(a, c, optarg)))
			return rc;
	}
	if (optind < argc) {
		fprintf(stderr, "hicache bench: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!a->have_op || !a->pages || !a->page_bytes) {
		fprintf(stderr, "hicache bench: --op, --pages and --page-bytes are required "
				"(see --help)\n");
		return 2;
	}
	if (a->verify && a->op != OP_GET) {
		fprintf(stderr, "hicache bench: --verify applies to --op get only\n");
		return 2;
	}
	if (a->ndirs && strcmp(a->backend, "file")) {
		fprintf(stderr, "hicache bench: --dir needs --backend file\n");
		return 2;
	}
	if (a->batch * a->threads > UINT64_MAX / a->page_bytes) {
		fprintf(stderr, "hicache bench: --batch x --threads x --page-bytes is too large\n");
		return 2;
	}
	return 0;
}

/* ---- keys and contents ---- */

static uint64_t splitmix64(uint64_t x)
{
	uint64_t z = x + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int page_key(uint64_t seed, uint64_t page, struct hc_key *out)
{
	const uint32_t tokens[BENCH_KEY_TOKENS] = {
		(uint32_t)seed, (uint32_t)(seed >> 32), (uint32_t)page, (uint32_t)(page >> 32),
	};
	int64_t n = hc_key_chain(NULL, tokens, BENCH_KEY_TOKENS, BENCH_KEY_TOKENS, out, 1);
	return n == 1 ? 0 : n < 0 ? (int)n : -EIO;
}

static uint64_t to_le(uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return __builtin_bswap64(v);
#else
	return v;
#endif
}

static uint64_t content_base(uint64_t seed, uint64_t page)
{
	return splitmix64(seed ^ splitmix64(page));
}

static void fill_page(uint64_t seed, uint64_t page, uint8_t *buf, size_t len)
{
	uint64_t base = content_base(seed, page), w = 0;

	for (; (w + 1) * 8 <= len; w++) {
		uint64_t v = to_le(splitmix64(base + w));
		memcpy(buf + w * 8, &v, 8);
	}
	if (w * 8 < len) {
		uint64_t v = to_le(splitmix64(base + w));
		memcpy(buf + w * 8, &v, len - w * 8);
	}
}

static bool page_matches(uint64_t seed, uint64_t page, const uint8_t *buf, size_t len)
{
	uint64_t base = content_base(seed, page), w = 0;

	for (; (w + 1) * 8 <= len; w++) {
		uint64_t v = to_le(splitmix64(base + w));
		if (memcmp(buf + w * 8, &v, 8))
			return false;
	}
	if (w * 8 < len) {
		uint64_t v = to_le(splitmix64(base + w));
		if (memcmp(buf + w * 8, &v, len - w * 8))
			return false;
	}
	return true;
}

/* ---- the pool and the store ---- */

static int create_pool(const struct bench_args *a, struct hc_pool **out)
{
	bool odd = a->page_bytes % 2;
	struct hc_kv_geometry geo = {
		.layers = 1,
		.heads = 1,
		.head_dim = (uint32_t)(odd ? a->page_bytes : a->page_bytes / 2),
		.elem_bytes = 1,
		.page_size = 1,
		.pages = a->batch * a->threads,
		.layout = a->layout,
		.mla = odd,
	};
	int rc = hc_pool_create_kv(&geo, NULL, out);
	if (rc)
		cli_report("bench: creating the KV pool", rc);
	else if (hc_pool_page_bytes(*out) != a->page_bytes)
		fprintf(stderr, "hicache bench: warning: pool pages are %zu bytes, not %llu\n",
			hc_pool_page_bytes(*out), (unsigned long long)a->page_bytes);
	return rc;
}

/* A bounded text buffer: appends past the end are dropped and remembered. */
struct text {
	char *buf;
	size_t len, cap;
	bool overflow;
};

static void text_add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void text_add(struct text *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= t->cap - t->len)
		t->overflow = true;
	else
		t->len += (size_t)n;
}

static void text_json_string(struct text *t, const char *s)
{
	text_add(t, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			text_add(t, "\\%c", c);
		else if (c < 0x20)
			text_add(t, "\\u%04x", c);
		else
			text_add(t, "%c", c);
	}
	text_add(t, "\"");
}

/* Config JSON from the flags; keys not given come from the environment. */
static char *config_json(const struct bench_args *a)
{
	struct text t = {.cap = 256};

	for (size_t i = 0; i < a->ndirs; i++)
		t.cap += 6 * strlen(a->dirs[i]) + 4;
	t.buf = malloc(t.cap);
	if (!t.buf)
		return NULL;
	/* A bench must not lose pages to the cleaner halfway through a run. */
	text_add(&t, "{\"l3_cleaner_interval_s\": 0");
	if (a->ndirs) {
		text_add(&t, ", \"dirs\": [");
		for (size_t i = 0; i < a->ndirs; i++) {
			text_add(&t, "%s", i ? ", " : "");
			text_json_string(&t, a->dirs[i]);
		}
		text_add(&t, "]");
	}
	if (a->engine)
		text_add(&t, ", \"io_engine\": \"%s\"", a->engine);
	if (a->direct >= 0)
		text_add(&t, ", \"use_direct_io\": %s", a->direct ? "true" : "false");
	text_add(&t, "}");
	if (t.overflow) {
		free(t.buf);
		return NULL;
	}
	return t.buf;
}

static int open_store(const struct bench_args *a, struct hc_pool *pool, struct hc_store **out)
{
	struct hc_config *cfg = NULL;
	struct hc_store_opts opts;
	char *json = config_json(a);
	int rc;

	*out = NULL;
	if (!json) {
		cli_report("bench: config", -ENOMEM);
		return -ENOMEM;
	}
	rc = hc_config_create(json, &cfg);
	free(json);
	if (rc) {
		cli_report("bench: config", rc);
		return rc;
	}
	hc_store_opts_init(&opts, sizeof(opts));
	opts.backend = a->backend;
	opts.config = cfg;
	opts.model = "bench";
	opts.force_bounce = !a->zero_copy;
	rc = hc_store_open(&opts, out);
	hc_config_destroy(cfg); /* read at open only */
	if (rc) {
		cli_report("bench: opening the store", rc);
		return rc;
	}
	rc = hc_store_register_pool(*out, "kv", pool, true);
	if (rc) {
		cli_report("bench: registering the pool", rc);
		hc_store_close(*out);
		*out = NULL;
	}
	return rc;
}

/* ---- one thread ---- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void worker_fail(struct worker *w, const char *what, int rc)
{
	const char *msg = hc_last_error();
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

/* Keys of pages [first, first + n) into w->keys. */
static int batch_keys(struct worker *w, uint64_t first, size_t n)
{
	for (size_t j = 0; j < n; j++) {
		int rc = page_key(w->b->a->seed, first + j, &w->keys[j]);
		if (rc) {
			worker_fail(w, "page key", rc);
			return rc;
		}
	}
	return 0;
}

static int batch_set(struct worker *w, uint64_t first, size_t n)
{
	const struct bench_args *a = w->b->a;
	struct hc_pool *pool = w->b->pool;

	for (size_t j = 0; j < n; j++) {
		fill_page(a->seed, first + j, w->flat, a->page_bytes);
		int rc = hc_pool_scatter(pool, w->slots[j], w->flat, a->page_bytes);
		if (rc) {
			worker_fail(w, "filling the pool", rc);
			return rc;
		}
		/* Marks pages the call never reached (a whole-call error). */
		w->results[j] = 1;
	}
	uint64_t t0 = now_ns();
	int rc = hc_store_set(w->b->store, w->keys, n, w->slots, w->results);
	w->lat_ns[w->nlat++] = now_ns() - t0;
	for (size_t j = 0; j < n; j++) {
		if (w->results[j] == 1) {
			worker_fail(w, "hc_store_set", rc ? rc : -EIO);
			return w->rc;
		}
		if (w->results[j]) {
			w->tally.errors++;
			note_page_error(&w->tally, first + j, w->results[j]);
		}
	}
	return 0;
}

static void check_read(struct worker *w, uint64_t page, int result, uint64_t slot)
{
	const struct bench_args *a = w->b->a;
	struct tally *t = &w->tally;

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
	    page_matches(a->seed, page, w->flat, a->page_bytes))
		t->verified++;
	else
		t->mismatched++;
}

static int batch_get(struct worker *w, uint64_t first, size_t n)
{
	uint64_t t0 = now_ns();
	int64_t hits = hc_store_get(w->b->store, w->keys, n, w->slots, w->results);
	w->lat_ns[w->nlat++] = now_ns() - t0;
	if (hits < 0) {
		worker_fail(w, "hc_store_get", (int)hits);
		return w->rc;
	}
	for (size_t j = 0; j < n; j++)
		check_read(w, first + j, w->results[j], w->slots[j]);
	return 0;
}

static int batch_exists(struct worker *w, size_t n)
{
	uint64_t t0 = now_ns();
	int64_t hits = hc_store_exists(w->b->store, w->keys, n);
	w->lat_ns[w->nlat++] = now_ns() - t0;
	if (hits < 0) {
		worker_fail(w, "hc_store_exists", (int)hits);
		return w->rc;
	}
	w->tally.hits += (uint64_t)hits;
	w->tally.misses += n - (uint64_t)hits;
	return 0;
}

struct phase {
	struct worker *w;
	enum bench_op op;
};

static void *worker_main(void *arg)
{
	struct phase *ph = arg;
	struct worker *w = ph->w;
	uint64_t batch = w->b->a->batch;

	for (uint64_t first = w->first; first < w->end && !w->rc; first += batch) {
		size_t n = (size_t)(w->end - first < batch ? w->end - first : batch);
		if (batch_keys(w, first, n))
			break;
		uint64_t before = w->nlat;
		if (ph->op == OP_SET)
			batch_set(w, first, n);
		else if (ph->op == OP_GET)
			batch_get(w, first, n);
		else
			batch_exists(w, n);
		if (w->nlat > before)
			w->busy_ns += w->lat_ns[w->nlat - 1];
	}
	return NULL;
}

static int worker_init(struct bench *b, struct worker *w, unsigned t)
{
	const struct bench_args *a = b->a;
	uint64_t nbatches;

	w->b = b;
	/* In 128 bits: pages * t can pass 2^64. */
	w->first = (uint64_t)((unsigned __int128)a->pages * t / a->threads);
	w->end = (uint64_t)((unsigned __int128)a->pages * (t + 1) / a->threads);
	nbatches = (w->end - w->first + a->batch - 1) / a->batch;
	w->slots = malloc(a->batch * sizeof(*w->slots));
	w->keys = malloc(a->batch * sizeof(*w->keys));
	w->results = malloc(a->batch * sizeof(*w->results));
	w->flat = malloc(a->page_bytes);
	w->lat_ns = malloc((nbatches ? nbatches : 1) * sizeof(*w->lat_ns));
	if (!w->slots || !w->keys || !w->results || !w->flat || !w->lat_ns)
		return -ENOMEM;
	for (uint64_t j = 0; j < a->batch; j++)
		w->slots[j] = t * a->batch + j;
	return 0;
}

static void worker_reset(struct worker *w)
{
	w->nlat = 0;
	w->busy_ns = 0;
	w->tally = (struct tally){0};
}

static void worker_free(struct worker *w)
{
	free(w->slots);
	free(w->keys);
	free(w->results);
	free(w->flat);
	free(w->lat_ns);
}

/* Run op on every thread; returns 0 or the first whole-call error (said). */
static int run_phase(struct bench *b, enum bench_op op)
{
	unsigned nt = b->a->threads;
	struct phase *ph = calloc(nt, sizeof(*ph));
	int rc = 0;

	if (!ph) {
		cli_report("bench: threads", -ENOMEM);
		return -ENOMEM;
	}
	for (unsigned t = 0; t < nt; t++) {
		ph[t] = (struct phase){&b->workers[t], op};
		worker_reset(&b->workers[t]);
	}
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

/* ---- results ---- */

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a > b) - (a < b);
}

/* Nearest rank: the smallest latency with at least q of the batches at or
 * below it. */
static double quantile_ms(const uint64_t *sorted, size_t n, double q)
{
	if (!n)
		return 0;
	size_t rank = (size_t)(q * (double)n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return (double)sorted[rank - 1] / 1e6;
}

static void tally_add(struct tally *sum, const struct tally *t)
{
	sum->hits += t->hits;
	sum->misses += t->misses;
	sum->corrupt += t->corrupt;
	sum->errors += t->errors;
	sum->verified += t->verified;
	sum->mismatched += t->mismatched;
	if (!sum->first_err && t->first_err) {
		sum->first_err = t->first_err;
		sum->first_err_page = t->first_err_page;
	}
}

static int summarize(const struct bench *b, struct summary *s)
{
	const struct bench_args *a = b->a;
	uint64_t *lat, busiest = 0;
	size_t n = 0;

	for (unsigned t = 0; t < a->threads; t++)
		n += b->workers[t].nlat;
	lat = malloc((n ? n : 1) * sizeof(*lat));
	if (!lat) {
		cli_report("bench: latencies", -ENOMEM);
		return -ENOMEM;
	}
	n = 0;
	for (unsigned t = 0; t < a->threads; t++) {
		const struct worker *w = &b->workers[t];
		memcpy(lat + n, w->lat_ns, w->nlat * sizeof(*lat));
		n += w->nlat;
		if (w->busy_ns > busiest)
			busiest = w->busy_ns;
		tally_add(&s->t, &w->tally);
	}
	qsort(lat, n, sizeof(*lat), cmp_u64);
	s->batches = n;
	s->p50_ms = quantile_ms(lat, n, 0.50);
	s->p99_ms = quantile_ms(lat, n, 0.99);
	free(lat);

	s->pages = a->pages;
	if (a->op == OP_SET) {
		s->failed = s->t.errors;
		s->bytes = (a->pages - s->failed) * a->page_bytes;
	} else if (a->op == OP_GET) {
		s->failed = s->t.misses + s->t.corrupt + s->t.errors + s->t.mismatched;
		s->bytes = s->t.hits * a->page_bytes;
	}
	s->seconds = (double)busiest / 1e9;
	if (s->seconds > 0) {
		s->gbps = (double)s->bytes / s->seconds / 1e9;
		s->pages_per_s = (double)s->pages / s->seconds;
	}
	return 0;
}

static const char *on_off(bool v)
{
	return v ? "on" : "off";
}

static const char *cache_note(const char *cache)
{
	if (!strcmp(cache, "o_direct"))
		return "cold (O_DIRECT reads bypass the page cache)";
	if (!strcmp(cache, "dropped"))
		return "cold (page cache dropped)";
	if (!strcmp(cache, "warm"))
		return "warm or partly cached (page cache not dropped: --drop-caches, as root)";
	return "n/a (mem backend)";
}

struct env_info {
	const char *engine;
	bool direct, zero_copy;
};

static void print_human(const struct bench_args *a, const struct env_info *e,
			const struct summary *s)
{
	printf("bench store: op %s, backend %s, engine %s, direct %s, zero-copy %s, layout %s\n",
	       op_names[a->op], a->backend, e->engine, on_off(e->direct), on_off(e->zero_copy),
	       hc_kv_layout_name(a->layout));
	printf("  pages      %llu x %llu bytes, batch %llu, %u thread(s), seed %llu\n",
	       (unsigned long long)s->pages, (unsigned long long)a->page_bytes,
	       (unsigned long long)a->batch, a->threads, (unsigned long long)a->seed);
	if (a->op == OP_EXISTS)
		printf("  time       %.6f s: %.0f pages/s\n", s->seconds, s->pages_per_s);
	else
		printf("  moved      %llu bytes in %.6f s: %.3f GB/s, %.0f pages/s\n",
		       (unsigned long long)s->bytes, s->seconds, s->gbps, s->pages_per_s);
	printf("  batch      p50 %.3f ms, p99 %.3f ms (%llu batches)\n", s->p50_ms, s->p99_ms,
	       (unsigned long long)s->batches);
	if (a->op == OP_SET)
		printf("  failed     %llu\n", (unsigned long long)s->failed);
	if (a->op == OP_GET) {
		printf("  read       %llu hits, %llu misses, %llu corrupt, %llu errors\n",
		       (unsigned long long)s->t.hits, (unsigned long long)s->t.misses,
		       (unsigned long long)s->t.corrupt, (unsigned long long)s->t.errors);
		if (a->verify)
			printf("  verified   %llu, mismatched %llu\n",
			       (unsigned long long)s->t.verified,
			       (unsigned long long)s->t.mismatched);
		else
			printf("  verified   not checked (--verify)\n");
		printf("  failed     %llu\n", (unsigned long long)s->failed);
		printf("  cache      %s\n", cache_note(s->cache));
	}
	if (a->op == OP_EXISTS)
		printf("  exists     %llu hits, %llu misses\n", (unsigned long long)s->t.hits,
		       (unsigned long long)s->t.misses);
}

static void print_json(const struct bench_args *a, const struct env_info *e,
		       const struct summary *s)
{
	printf("{\"op\": \"%s\", \"backend\": \"%s\", \"engine\": \"%s\", \"direct\": %s, "
	       "\"zero_copy\": %s, \"layout\": \"%s\", \"page_bytes\": %llu, \"pages\": %llu, "
	       "\"batch\": %llu, \"threads\": %u, \"seed\": %llu, \"bytes\": %llu, "
	       "\"seconds\": %.9f, \"gbps\": %.6f, \"pages_per_s\": %.3f, \"p50_ms\": %.6f, "
	       "\"p99_ms\": %.6f, \"batches\": %llu, \"hits\": %llu, \"misses\": %llu, "
	       "\"corrupt\": %llu, \"errors\": %llu, \"verify\": %s, \"verified_pages\": %llu, "
	       "\"mismatched_pages\": %llu, \"failed_pages\": %llu, \"cache\": \"%s\"}\n",
	       op_names[a->op], a->backend, e->engine, e->direct ? "true" : "false",
	       e->zero_copy ? "true" : "false", hc_kv_layout_name(a->layout),
	       (unsigned long long)a->page_bytes, (unsigned long long)s->pages,
	       (unsigned long long)a->batch, a->threads, (unsigned long long)a->seed,
	       (unsigned long long)s->bytes, s->seconds, s->gbps, s->pages_per_s, s->p50_ms,
	       s->p99_ms, (unsigned long long)s->batches, (unsigned long long)s->t.hits,
	       (unsigned long long)s->t.misses, (unsigned long long)s->t.corrupt,
	       (unsigned long long)s->t.errors, a->verify ? "true" : "false",
	       (unsigned long long)s->t.verified, (unsigned long long)s->t.mismatched,
	       (unsigned long long)s->failed, s->cache);
}

/* ---- the page cache ---- */

/* Returns true when the page cache was dropped. */
static bool drop_page_cache(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "hicache bench: --drop-caches needs root; the page cache "
				"was not dropped\n");
		return false;
	}
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	int err = fd < 0 ? errno : write(fd, "3", 1) == 1 ? 0 : errno ? errno : EIO;
	if (fd >= 0)
		close(fd);
	if (err)
		fprintf(stderr, "hicache bench: cannot write /proc/sys/vm/drop_caches: %s\n",
			hc_strerror(-err));
	return !err;
}

/* Prepare a get and say how cold it will be. */
static const char *prepare_get(const struct bench_args *a, bool direct)
{
	if (strcmp(a->backend, "file"))
		return "mem";
	bool dropped = a->drop_caches && drop_page_cache();
	if (direct)
		return "o_direct";
	return dropped ? "dropped" : "warm";
}

/* ---- the command ---- */

static int bench_run(struct bench *b)
{
	const struct bench_args *a = b->a;
	struct hc_store_pool_info info;
	struct summary s = {.cache = "n/a"};
	int rc;

	rc = hc_store_pool_info(b->store, "kv", &info);
	if (rc) {
		cli_report("bench: pool info", rc);
		return 1;
	}
	struct env_info e = {
		.engine = hc_store_io_engine(b->store),
		.direct = hc_store_direct_io(b->store),
		.zero_copy = info.zero_copy,
	};
	/* The mem backend starts empty in every process. */
	if (a->op != OP_SET && !strcmp(a->backend, "mem") && run_phase(b, OP_SET))
		return 1;
	if (a->op == OP_GET)
		s.cache = prepare_get(a, e.direct);
	if (run_phase(b, a->op) || summarize(b, &s))
		return 1;
	if (a->json)
		print_json(a, &e, &s);
	else
		print_human(a, &e, &s);
	if (s.t.first_err)
		fprintf(stderr, "hicache: bench: page %llu: %s (first page error)\n",
			(unsigned long long)s.t.first_err_page, hc_strerror(s.t.first_err));
	if (fflush(stdout)) {
		cli_report("bench: writing stdout", -EIO);
		return 1;
	}
	return s.failed ? 1 : 0;
}

static int bench_store(int argc, char **argv)
{
	struct bench_args a;
	struct bench b = {.a = &a};
	int rc = parse_args(argc, argv, &a);

	if (rc)
		return rc < 0 ? 0 : rc;
	b.workers = calloc(a.threads, sizeof(*b.workers));
	if (!b.workers) {
		cli_report("bench: threads", -ENOMEM);
		return 1;
	}
	rc = 1;
	for (unsigned t = 0; t < a.threads; t++) {
		if (worker_init(&b, &b.workers[t], t)) {
			cli_report("bench: buffers", -ENOMEM);
			goto out;
		}
	}
	if (create_pool(&a, &b.pool) || open_store(&a, b.pool, &b.store))
		goto out;
	rc = bench_run(&b);
out:
	hc_store_close(b.store); /* before the pool it points into */
	hc_pool_destroy(b.pool);
	for (unsigned t = 0; t < a.threads; t++)
		worker_free(&b.workers[t]);
	free(b.workers);
	return rc;
}

int cmd_bench(int argc, char **argv)
{
	if (argc < 2) {
		bench_usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		bench_usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "store")) {
		fprintf(stderr, "hicache bench: unknown benchmark '%s' (only 'store')\n", argv[1]);
		return 2;
	}
	return bench_store(argc - 1, argv + 1);
}
