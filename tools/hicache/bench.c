/*
 * hicache bench store: throughput and batch latency of hc_store_set, _get
 * and _exists on the file, mem or s3 backend, with page contents that a later
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
#define _GNU_SOURCE
#include "commands.h"

#include <hicache/hicache.h>
#include <hicache/store.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
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

/* OP_SET, OP_GET and OP_EXISTS are also the direction of one batch. */
enum bench_op { OP_SET, OP_GET, OP_EXISTS, OP_MIXED, OP_COUNT };

static const char *const op_names[] = {"set", "get", "exists", "mixed"};

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
	bool mla; /* one latent buffer: one object per page in zero-copy mode */
	bool pool_warmup;
	enum hc_huge_mode huge_mode; /* the pool's pages */
	uint64_t pipeline;           /* calls started per thread (1: synchronous calls) */
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
	/* One batch's worth; with --pipeline one entry per page of the range,
	 * so that calls in flight never share an entry. */
	uint64_t *slots;     /* this thread's pool pages */
	struct hc_key *keys;
	int *results;
	struct lane *lanes;  /* --pipeline: the calls started */
	uint8_t *flat;       /* one flat page */
	uint64_t *lat_ns;    /* one per batch */
	uint8_t *lat_op;     /* the direction (OP_SET, OP_GET, OP_EXISTS) of each */
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
	bool show_progress; /* stderr is a terminal */
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

/* ---- usage and arguments ---- */

static void bench_usage(FILE *out)
{
	fprintf(out,
		"usage: hicache bench store --op set|get|exists|mixed\n"
		"                           (--pages N | --total-bytes N) --page-bytes N\n"
		"                           [--backend file|mem|s3] [--dir DIR]... [--batch N]\n"
		"                           [--endpoint URL] [--bucket B] [--prefix P]\n"
		"                           [--max-inflight N]\n"
		"                           [--layout layer_first|page_first|page_first_direct]\n"
		"                           [--mla] [--threads T] [--engine uring|threads|auto]\n"
		"                           [--direct on|off] [--zero-copy on|off] [--seed S]\n"
		"                           [--verify] [--drop-caches] [--pool-warmup on|off]\n"
		"                           [--json]\n"
		"\n"
		"Runs one store operation over pages 0..N-1 in batches and reports throughput\n"
		"and batch latency. Only the store calls are timed.\n"
		"\n"
		"Pages: the KV pool is MHA with 1 layer, 1 head, 1-byte elements and 1 token\n"
		"per page, head_dim = page_bytes/2, so a flat page (K half, V half) is exactly\n"
		"--page-bytes: two objects per page in zero-copy mode (_k, _v), one in bounce\n"
		"mode. --mla, or an odd --page-bytes, uses an MLA pool (one latent buffer,\n"
		"head_dim = page_bytes): one object per page in either mode. The pool holds\n"
		"batch x threads pages (every page with --pipeline) and is registered as\n"
		"the anchor \"kv\" (model \"bench\"). Every object also carries a\n"
		"4096-byte trailer block (docs/FORMAT.md); bytes and GB/s count the page\n"
		"payload only.\n"
		"Key of page i: hc_key_chain over one page of 4 tokens {seed_lo, seed_hi, i_lo,\n"
		"i_hi} with no prior. Content of page i: 8-byte little-endian words,\n"
		"word w = splitmix64(splitmix64(seed ^ splitmix64(i)) + w), so a later\n"
		"'--op get --verify' with the same --seed checks every byte.\n"
		"\n"
		"--op mixed: batch j of thread t is a get when j + t is even, else a set of\n"
		"new pages, so half the batches read and half write (with 2+ threads, at the\n"
		"same time). The pages of the get batches are stored first, untimed (then\n"
		"--drop-caches applies). It reports both directions and their sum. Use a\n"
		"fresh --dir or --seed: a set of a page that exists leaves it as it is\n"
		"(reported as existing).\n"
		"\n"
		"options:\n"
		"  -o, --op OP          set | get | exists | mixed (required)\n"
		"  -n, --pages N        pages to process\n"
		"      --total-bytes N  instead of --pages: pages = N / page bytes (rounded\n"
		"                       down); N may end in K, M, G or T (powers of 1024)\n"
		"  -p, --page-bytes N   bytes of one flat page, 1..%llu, K/M/G suffix\n"
		"                       allowed (required)\n"
		"  -b, --backend B      file (default), mem (lives in this process: get and\n"
		"                       exists store the pages first, untimed) or s3\n"
		"  -d, --dir DIR        file backend base dir (repeat for several; default:\n"
		"                       config 'dirs', env HICACHE_STORAGE_DIR)\n"
		"      --endpoint URL   s3: [http[s]://]host[:port] (default: config 'endpoint',\n"
		"                       env HICACHE_S3_ENDPOINT); credentials come from\n"
		"                       AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY\n"
		"      --bucket B       s3: bucket (default: config, env AWS_DEFAULT_BUCKET)\n"
		"      --prefix P       s3: object key prefix (default: config, HICACHE_S3_PREFIX)\n"
		"      --max-inflight N s3: requests in flight per store call, 1..1024\n"
		"                       (default: config, HICACHE_S3_MAX_INFLIGHT, 32)\n"
		"  -B, --batch N        pages per store call (default 32)\n"
		"  -l, --layout L       pool layout (default page_first)\n"
		"      --mla            MLA pool: one object per page (see Pages)\n"
		"  -t, --threads T      threads, 1..%u (default 1); thread t takes pages\n"
		"                       [t*N/T, (t+1)*N/T), all share one store\n"
		"  -e, --engine E       io_engine (default: config / HICACHE_IO_ENGINE)\n"
		"      --direct on|off  use_direct_io (default: config / HICACHE_USE_DIRECT_IO)\n"
		"      --zero-copy on|off  off forces bounce mode (default on: zero-copy where\n"
		"                       the store allows it). Get with the same setting as set.\n"
		"  -s, --seed S         key and content seed, a u64 (default 0)\n"
		"      --verify         get, mixed: check every byte of every page read\n"
		"      --drop-caches    get, mixed, as root: sync and drop the page cache\n"
		"                       (and dentries, inodes) before the timed reads\n"
		"      --pool-warmup on|off  get, mixed, file backend: before the timed reads\n"
		"                       (and before --drop-caches), read each thread's first\n"
		"                       get page into all its pool slots, untimed, so that\n"
		"                       every slot has been read into once (default off:\n"
		"                       it reads that page many times, which a store that\n"
		"                       removes corrupt objects on read would act on)\n"
		"      --huge-pages off|thp|prefer|required  the pool's memory: 2 MiB pages\n"
		"                       (thp, the default: transparent huge pages where the\n"
		"                       kernel gives them; prefer: hugetlb, else THP with a\n"
		"                       warning; off: 4 KiB pages). O_DIRECT transfers from\n"
		"                       huge pages map fewer pages and split less.\n"
		"      --pipeline K     set, get: keep K calls of --batch pages started per\n"
		"                       thread (hc_store_set_start/get_start, hc_store_op_wait;\n"
		"                       the store merges queued ones into one stream). The\n"
		"                       pool then holds every page (--pages x --page-bytes),\n"
		"                       filled before the clock starts; seconds run from the\n"
		"                       first start to the last wait. Default 1: hc_store_set\n"
		"                       and hc_store_get, one call at a time\n"
		"      --json           print one JSON object instead of the summary\n"
		"  -h, --help           print this help and exit\n"
		"\n"
		"Seconds are the busiest thread's time inside store calls. bytes: pages stored\n"
		"(set) or read (get) times page bytes; 0 for exists. failed: set and get pages\n"
		"with an error, a miss or (with --verify) a wrong byte; exists reports hits and\n"
		"misses but no failures. cache says how cold the reads were: o_direct (they\n"
		"bypass the page cache), dropped, warm (possibly cached) or mem.\n"
		"When stderr is a terminal, a progress line is redrawn up to 10 times a second.\n"
		"\n"
		"Pool warm-up: on some VMs the first device write into a fresh memory page makes\n"
		"the next CPU touch of that page cost microseconds (measured here: ~6.5 us per\n"
		"4 KiB page, i.e. ~0.6 GB/s for the checksum that follows). A long-running\n"
		"server pays that once per pool page; a short bench pays it on every page of\n"
		"its first batch: --pool-warmup on takes it out of the timed reads.\n"
		"\n"
		"exit status: 0 ok, 1 a failure or a failed page, 2 bad usage\n",
		BENCH_PAGE_BYTES_MAX, BENCH_THREADS_MAX);
}

/* A byte count: decimal digits, then optionally K, M, G or T (powers of
 * 1024, either case, "iB" may follow), within [min, max]. */
static bool parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	static const char units[] = "kmgt";
	char digits[32];
	size_t n = strspn(s, "0123456789");
	uint64_t v, mul = 1;

	if (!n || n >= sizeof(digits))
		return false;
	memcpy(digits, s, n);
	digits[n] = '\0';
	if (!cli_parse_u64(digits, 0, UINT64_MAX, &v))
		return false;
	s += n;
	if (*s) {
		const char *u = strchr(units, s[0] | 0x20);
		if (!u || !*u)
			return false;
		mul = 1ull << (10 * (u - units + 1));
		s++;
		if (*s && strcmp(s, "iB") && strcmp(s, "ib"))
			return false;
	}
	if (v > UINT64_MAX / mul)
		return false;
	v *= mul;
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
	for (int i = 0; i < OP_COUNT; i++) {
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
enum {
	OPT_DIRECT = 256,
	OPT_ZERO_COPY,
	OPT_VERIFY,
	OPT_JSON,
	OPT_DROP_CACHES,
	OPT_TOTAL_BYTES,
	OPT_MLA,
	OPT_POOL_WARMUP,
	OPT_HUGE_PAGES,
	OPT_PIPELINE,
	OPT_ENDPOINT,
	OPT_BUCKET,
	OPT_PREFIX,
	OPT_MAX_INFLIGHT,
};

/* Returns 0, 2 (bad usage, said) or -1 (--help printed). */
static int parse_option(struct bench_args *a, int c, const char *arg)
{
	uint64_t v;
	bool on;

	switch (c) {
	case 'o':
		if (!parse_op(arg, &a->op))
			return bad_value("op", arg, "set, get, exists or mixed");
		a->have_op = true;
		return 0;
	case 'n':
		if (!cli_parse_u64(arg, 1, UINT64_MAX / 2, &a->pages))
			return bad_value("pages", arg, "a number of at least 1");
		return 0;
	case 'p':
		if (!parse_size(arg, 1, BENCH_PAGE_BYTES_MAX, &a->page_bytes))
			return bad_value("page-bytes", arg, "a size in 1..2^30 (K/M/G allowed)");
		return 0;
	case OPT_TOTAL_BYTES:
		if (!parse_size(arg, 1, UINT64_MAX, &a->total_bytes))
			return bad_value("total-bytes", arg,
					 "a size of at least 1 (K/M/G/T allowed)");
		return 0;
	case 'b':
		if (strcmp(arg, "file") && strcmp(arg, "mem") && strcmp(arg, "s3"))
			return bad_value("backend", arg, "file, mem or s3");
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
		if (!cli_parse_u64(arg, 1, 1u << 20, &a->batch))
			return bad_value("batch", arg, "a number in 1..1048576");
		return 0;
	case 'l':
		if (hc_kv_layout_parse(arg, &a->layout))
			return bad_value("layout", arg,
					 "layer_first, page_first or page_first_direct");
		return 0;
	case 't':
		if (!cli_parse_u64(arg, 1, BENCH_THREADS_MAX, &v))
			return bad_value("threads", arg, "a number in 1..1024");
		a->threads = (unsigned)v;
		return 0;
	case 'e':
		if (strcmp(arg, "uring") && strcmp(arg, "threads") && strcmp(arg, "auto"))
			return bad_value("engine", arg, "uring, threads or auto");
		a->engine = arg;
		return 0;
	case 's':
		if (!cli_parse_u64(arg, 0, UINT64_MAX, &a->seed))
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
	case OPT_ENDPOINT:
		if (!arg[0])
			return bad_value("endpoint", arg, "[http[s]://]host[:port]");
		a->endpoint = arg;
		return 0;
	case OPT_BUCKET:
		if (!arg[0])
			return bad_value("bucket", arg, "a bucket name");
		a->bucket = arg;
		return 0;
	case OPT_PREFIX: a->prefix = arg; return 0;
	case OPT_MAX_INFLIGHT:
		if (!cli_parse_u64(arg, 1, 1024, &a->max_inflight))
			return bad_value("max-inflight", arg, "a number in 1..1024");
		return 0;
	case OPT_VERIFY: a->verify = true; return 0;
	case OPT_JSON: a->json = true; return 0;
	case OPT_DROP_CACHES: a->drop_caches = true; return 0;
	case OPT_MLA: a->mla = true; return 0;
	case OPT_POOL_WARMUP:
		if (!parse_on_off(arg, &a->pool_warmup))
			return bad_value("pool-warmup", arg, "on or off");
		return 0;
	case OPT_PIPELINE:
		if (!cli_parse_u64(arg, 1, 64, &a->pipeline))
			return bad_value("pipeline", arg, "a number in 1..64");
		return 0;
	case OPT_HUGE_PAGES:
		if (hc_mem_parse_huge_mode(arg, &a->huge_mode))
			return bad_value("huge-pages", arg, "off, thp, prefer or required");
		return 0;
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
		{"total-bytes", required_argument, NULL, OPT_TOTAL_BYTES},
		{"mla", no_argument, NULL, OPT_MLA},
		{"pool-warmup", required_argument, NULL, OPT_POOL_WARMUP},
		{"huge-pages", required_argument, NULL, OPT_HUGE_PAGES},
		{"pipeline", required_argument, NULL, OPT_PIPELINE},
		{"endpoint", required_argument, NULL, OPT_ENDPOINT},
		{"bucket", required_argument, NULL, OPT_BUCKET},
		{"prefix", required_argument, NULL, OPT_PREFIX},
		{"max-inflight", required_argument, NULL, OPT_MAX_INFLIGHT},
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
		.huge_mode = HC_HUGE_THP, /* the library's default for a pool */
		.pipeline = 1,
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
	if (a->pages && a->total_bytes) {
		fprintf(stderr, "hicache bench: give --pages or --total-bytes, not both\n");
		return 2;
	}
	if (!a->have_op || !(a->pages || a->total_bytes) || !a->page_bytes) {
		fprintf(stderr, "hicache bench: --op, --pages (or --total-bytes) and --page-bytes "
				"are required (see --help)\n");
		return 2;
	}
	if (a->total_bytes) {
		a->pages = a->total_bytes / a->page_bytes;
		if (!a->pages) {
			fprintf(stderr, "hicache bench: --total-bytes %llu is less than one page "
					"of %llu bytes\n", (unsigned long long)a->total_bytes,
				(unsigned long long)a->page_bytes);
			return 2;
		}
		if (a->pages > UINT64_MAX / 2) {
			fprintf(stderr, "hicache bench: --total-bytes gives too many pages\n");
			return 2;
		}
	}
	if (a->verify && a->op != OP_GET && a->op != OP_MIXED) {
		fprintf(stderr, "hicache bench: --verify applies to --op get and mixed only\n");
		return 2;
	}
	if (a->ndirs && strcmp(a->backend, "file")) {
		fprintf(stderr, "hicache bench: --dir needs --backend file\n");
		return 2;
	}
	if ((a->endpoint || a->bucket || a->prefix || a->max_inflight) && strcmp(a->backend, "s3")) {
		fprintf(stderr, "hicache bench: --endpoint, --bucket, --prefix and --max-inflight "
				"need --backend s3\n");
		return 2;
	}
	if (a->pipeline > 1 && a->op != OP_SET && a->op != OP_GET) {
		fprintf(stderr, "hicache bench: --pipeline applies to --op set and get only\n");
		return 2;
	}
	if (a->batch * a->threads > UINT64_MAX / a->page_bytes ||
	    (a->pipeline > 1 && a->pages > SIZE_MAX / a->page_bytes)) {
		fprintf(stderr, "hicache bench: the pool (--batch x --threads, or with --pipeline "
				"--pages, x --page-bytes) is too large\n");
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

static const char *const huge_names[] = {
	[HC_HUGE_OFF] = "off", [HC_HUGE_PREFER] = "prefer", [HC_HUGE_REQUIRED] = "required",
	[HC_HUGE_THP] = "thp",
};

static int create_pool(const struct bench_args *a, struct hc_pool **out)
{
	/* An odd page cannot be split into K and V halves. */
	bool mla = a->mla || a->page_bytes % 2;
	struct hc_kv_geometry geo = {
		.layers = 1,
		.heads = 1,
		.head_dim = (uint32_t)(mla ? a->page_bytes : a->page_bytes / 2),
		.elem_bytes = 1,
		.page_size = 1,
		.pages = a->pipeline > 1 ? a->pages : a->batch * a->threads,
		.layout = a->layout,
		.mla = mla,
	};
	struct hc_mem_opts mo;
	hc_mem_opts_init(&mo, sizeof(mo));
	mo.huge_mode = a->huge_mode;
	mo.huge_page_size = HC_HUGE_2MB;
	int rc = hc_pool_create_kv(&geo, &mo, out);
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
	const char *s3_keys[3] = {"endpoint", "bucket", "prefix"};
	const char *s3_values[3] = {a->endpoint, a->bucket, a->prefix};
	for (int i = 0; i < 3; i++)
		t.cap += s3_values[i] ? 6 * strlen(s3_values[i]) + 32 : 0;
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
	for (int i = 0; i < 3; i++) {
		if (!s3_values[i])
			continue;
		text_add(&t, ", \"%s\": ", s3_keys[i]);
		text_json_string(&t, s3_values[i]);
	}
	if (a->max_inflight)
		text_add(&t, ", \"max_inflight\": %llu", (unsigned long long)a->max_inflight);
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
		int rc = page_key(w->b->a->seed, first + j, &keys[j]);
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
	uint64_t dt = now_ns() - t0;
	note_call(w, op, dt, dt, n);
}

/* Pages [first, first + n) into the pool slots w->slots[base...]; their
 * results marked. */
static int set_fill(struct worker *w, size_t base, uint64_t first, size_t n)
{
	const struct bench_args *a = w->b->a;

	for (size_t j = 0; j < n; j++) {
		fill_page(a->seed, first + j, w->flat, a->page_bytes);
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

static int batch_set(struct worker *w, uint64_t first, size_t n)
{
	if (set_fill(w, 0, first, n))
		return w->rc;
	uint64_t t0 = now_ns();
	int rc = hc_store_set(w->b->store, w->keys, n, w->slots, w->results);
	note_batch(w, OP_SET, t0, n);
	return set_done(w, 0, first, n, rc, "hc_store_set");
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
	    page_matches(a->seed, page, w->flat, a->page_bytes))
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

static int batch_get(struct worker *w, uint64_t first, size_t n)
{
	uint64_t t0 = now_ns();
	int64_t hits = hc_store_get(w->b->store, w->keys, n, w->slots, w->results);
	note_batch(w, OP_GET, t0, n);
	return get_done(w, 0, first, n, hits, "hc_store_get");
}

/* --pipeline: start the call of pages [first, first + n) in lane l. The
 * pages' keys, slots and results are those at their offset in the
 * thread's range (all filled before the timed loop). */
static int lane_start(struct worker *w, size_t l, enum bench_op op, uint64_t first, size_t n)
{
	struct lane *ln = &w->lanes[l];
	size_t base = (size_t)(first - w->first);

	*ln = (struct lane){.dir = op, .first = first, .n = n, .t_start = now_ns()};
	int rc = op == OP_SET ? hc_store_set_start(w->b->store, &w->keys[base], n,
						   &w->slots[base], &w->results[base], &ln->op)
			      : hc_store_get_start(w->b->store, &w->keys[base], n,
						   &w->slots[base], &w->results[base], &ln->op);
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
	note_call(w, ln->dir, now_ns() - ln->t_start, 0, ln->n);
	struct tally before = w->tally[ln->dir];
	size_t base = (size_t)(ln->first - w->first);
	int rc = ln->dir == OP_SET ? set_done(w, base, ln->first, ln->n, (int)r, "hc_store_op_wait")
				   : get_done(w, base, ln->first, ln->n, r, "hc_store_op_wait");
	progress_add(w, ln->dir, &before, ln->n);
	return rc;
}

static int batch_exists(struct worker *w, size_t n)
{
	uint64_t t0 = now_ns();
	int64_t hits = hc_store_exists(w->b->store, w->keys, n);
	note_batch(w, OP_EXISTS, t0, n);
	if (hits < 0) {
		worker_fail(w, "hc_store_exists", (int)hits);
		return w->rc;
	}
	w->tally[OP_EXISTS].hits += (uint64_t)hits;
	w->tally[OP_EXISTS].misses += n - (uint64_t)hits;
	return 0;
}

/* What a phase does with each batch. */
enum phase_kind {
	PHASE_ALL,    /* every batch: op */
	PHASE_MIXED,  /* batch j of thread t: get if j + t is even, else set */
	PHASE_LAYOUT, /* a set of the batches a mixed run will get, and no others */
};

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

	if (batch_keys(w, 0, w->first, total) ||
	    (op == OP_SET && set_fill(w, 0, w->first, total)))
		return;
	uint64_t t0 = now_ns();
	for (size_t off = 0; off < total && !w->rc; off += (size_t)a->batch, k++) {
		size_t n = total - off < a->batch ? total - off : (size_t)a->batch;
		size_t l = k % lanes; /* its last call is the oldest one running */
		if (lane_finish(w, l) || lane_start(w, l, op, w->first + off, n))
			break;
	}
	/* Every started call is waited for, oldest first, also after a failure. */
	for (size_t i = 0; i < lanes; i++)
		lane_finish(w, (k + i) % lanes);
	w->busy_ns[op] += now_ns() - t0;
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
		if (batch_keys(w, 0, first, n))
			break;
		struct tally before = w->tally[op];
		if (op == OP_SET)
			batch_set(w, first, n);
		else if (op == OP_GET)
			batch_get(w, first, n);
		else
			batch_exists(w, n);
		progress_add(w, op, &before, n);
	}
	return NULL;
}

static int worker_init(struct bench *b, struct worker *w, unsigned t)
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
	/* --pipeline: every page of the range has its own slot (the pool holds
	 * all pages), so calls in flight never share one. */
	size_t lanes = (size_t)a->pipeline;
	size_t room = lanes > 1 ? (size_t)(w->end - w->first) : (size_t)a->batch;
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
		w->slots[j] = lanes > 1 ? w->first + j : t * a->batch + j;
	return 0;
}

static void worker_reset(struct worker *w)
{
	w->nlat = 0;
	memset(w->busy_ns, 0, sizeof(w->busy_ns));
	memset(w->pages, 0, sizeof(w->pages));
	memset(w->tally, 0, sizeof(w->tally));
}

static void worker_free(struct worker *w)
{
	free(w->slots);
	free(w->keys);
	free(w->results);
	free(w->flat);
	free(w->lat_ns);
	free(w->lat_op);
	free(w->lanes);
}

/* ---- the progress line ---- */

static void progress_draw(struct progress *p)
{
	uint64_t pages = atomic_load_explicit(&p->pages, memory_order_relaxed);
	uint64_t bytes = atomic_load_explicit(&p->bytes, memory_order_relaxed);
	double s = (double)(now_ns() - p->t0) / 1e9;

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
static void progress_start(struct bench *b, struct progress *p, const char *label,
			   uint64_t total)
{
	pthread_condattr_t attr;

	if (!b->show_progress)
		return;
	*p = (struct progress){.total = total, .label = label, .t0 = now_ns()};
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
static void progress_stop(struct bench *b)
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
static int run_phase(struct bench *b, enum phase_kind kind, enum bench_op op, const char *label)
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
	progress_start(b, &progress, label, phase_pages(b, kind));
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
	progress_stop(b);
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

/* Sum the directions in mask (bit op) over every thread into *p. */
static int summarize_part(const struct bench *b, unsigned mask, struct part *p)
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
		uint64_t busy = 0;
		for (size_t i = 0; i < w->nlat; i++)
			if (mask & (1u << w->lat_op[i]))
				lat[n++] = w->lat_ns[i];
		for (unsigned op = 0; op < OP_MIXED; op++) {
			if (!(mask & (1u << op)))
				continue;
			busy += w->busy_ns[op];
			p->pages += w->pages[op];
			tally_add(&p->t, &w->tally[op]);
			if (op == OP_SET) {
				p->failed += w->tally[op].errors;
				p->bytes += (w->pages[op] - w->tally[op].errors) * a->page_bytes;
			} else if (op == OP_GET) {
				const struct tally *g = &w->tally[op];
				p->failed += g->misses + g->corrupt + g->errors + g->mismatched;
				p->bytes += g->hits * a->page_bytes;
			}
		}
		if (busy > busiest)
			busiest = busy;
	}
	qsort(lat, n, sizeof(*lat), cmp_u64);
	p->batches = n;
	p->p50_ms = quantile_ms(lat, n, 0.50);
	p->p99_ms = quantile_ms(lat, n, 0.99);
	free(lat);
	p->seconds = (double)busiest / 1e9;
	if (p->seconds > 0) {
		p->gbps = (double)p->bytes / p->seconds / 1e9;
		p->pages_per_s = (double)p->pages / p->seconds;
	}
	return 0;
}

static int summarize(const struct bench *b, struct summary *s)
{
	enum bench_op op = b->a->op;

	if (op != OP_MIXED)
		return summarize_part(b, 1u << op, &s->all);
	if (summarize_part(b, 1u << OP_SET | 1u << OP_GET, &s->all) ||
	    summarize_part(b, 1u << OP_SET, &s->set) || summarize_part(b, 1u << OP_GET, &s->get))
		return -ENOMEM;
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
	if (!strcmp(cache, "s3"))
		return "n/a (object store over the network)";
	return "n/a (mem backend)";
}

struct env_info {
	const char *engine;
	bool direct, zero_copy;
	bool mla;
	unsigned objects;      /* files per page */
	uint64_t object_bytes; /* of each: payload rounded up to 4096, + the trailer block */
};

static void print_part_human(const char *name, const struct part *p)
{
	printf("  %-10s %llu pages, %llu bytes in %.6f s: %.3f GB/s, %.0f pages/s\n", name,
	       (unsigned long long)p->pages, (unsigned long long)p->bytes, p->seconds, p->gbps,
	       p->pages_per_s);
	printf("  %-10s p50 %.3f ms, p99 %.3f ms (%llu batches)\n", "", p->p50_ms, p->p99_ms,
	       (unsigned long long)p->batches);
}

static void print_human(const struct bench_args *a, const struct env_info *e,
			const struct summary *s)
{
	const struct part *p = &s->all;
	const struct tally *t = &p->t;

	printf("bench store: op %s, backend %s, engine %s, direct %s, zero-copy %s, layout %s\n",
	       op_names[a->op], a->backend, e->engine, on_off(e->direct), on_off(e->zero_copy),
	       hc_kv_layout_name(a->layout));
	printf("  pages      %llu x %llu bytes, batch %llu, %u thread(s), seed %llu\n",
	       (unsigned long long)p->pages, (unsigned long long)a->page_bytes,
	       (unsigned long long)a->batch, a->threads, (unsigned long long)a->seed);
	if (!strcmp(a->backend, "file"))
		printf("  objects    %u per page (%s pool), %llu bytes each on disk\n", e->objects,
		       e->mla ? "MLA" : "MHA", (unsigned long long)e->object_bytes);
	if (a->op == OP_EXISTS)
		printf("  time       %.6f s: %.0f pages/s\n", p->seconds, p->pages_per_s);
	else
		printf("  moved      %llu bytes in %.6f s: %.3f GB/s, %.0f pages/s\n",
		       (unsigned long long)p->bytes, p->seconds, p->gbps, p->pages_per_s);
	printf("  batch      p50 %.3f ms, p99 %.3f ms (%llu batches)\n", p->p50_ms, p->p99_ms,
	       (unsigned long long)p->batches);
	if (a->op == OP_MIXED) {
		print_part_human("set", &s->set);
		print_part_human("get", &s->get);
	}
	if (a->op == OP_SET || a->op == OP_MIXED)
		printf("  existing   %llu%s\n", (unsigned long long)s->existing,
		       s->existing ? " (already stored: nothing written, so the set was fast; use "
				     "a fresh --dir or --seed)" : "");
	if (a->op == OP_GET || a->op == OP_MIXED) {
		printf("  read       %llu hits, %llu misses, %llu corrupt, %llu errors\n",
		       (unsigned long long)t->hits, (unsigned long long)t->misses,
		       (unsigned long long)t->corrupt,
		       (unsigned long long)(a->op == OP_MIXED ? s->get.t.errors : t->errors));
		if (a->verify)
			printf("  verified   %llu, mismatched %llu\n",
			       (unsigned long long)t->verified, (unsigned long long)t->mismatched);
		else
			printf("  verified   not checked (--verify)\n");
	}
	if (a->op != OP_EXISTS)
		printf("  failed     %llu\n", (unsigned long long)p->failed);
	if (a->op == OP_GET || a->op == OP_MIXED) {
		printf("  cache      %s\n", cache_note(s->cache));
		printf("  pool       %s\n", s->warmed ? "warmed up (each thread's first get page "
				"read into all its slots, untimed)" : "not warmed up");
	}
	if (a->op == OP_EXISTS)
		printf("  exists     %llu hits, %llu misses\n", (unsigned long long)t->hits,
		       (unsigned long long)t->misses);
}

static void print_part_json(const char *name, const struct part *p)
{
	printf(", \"%s\": {\"pages\": %llu, \"bytes\": %llu, \"seconds\": %.9f, \"gbps\": %.6f, "
	       "\"pages_per_s\": %.3f, \"p50_ms\": %.6f, \"p99_ms\": %.6f, \"batches\": %llu, "
	       "\"failed_pages\": %llu}",
	       name, (unsigned long long)p->pages, (unsigned long long)p->bytes, p->seconds,
	       p->gbps, p->pages_per_s, p->p50_ms, p->p99_ms, (unsigned long long)p->batches,
	       (unsigned long long)p->failed);
}

static void print_json(const struct bench_args *a, const struct env_info *e,
		       const struct summary *s)
{
	const struct part *p = &s->all;

	printf("{\"op\": \"%s\", \"backend\": \"%s\", \"engine\": \"%s\", \"direct\": %s, "
	       "\"zero_copy\": %s, \"layout\": \"%s\", \"kv\": \"%s\", \"objects_per_page\": %u, "
	       "\"object_bytes\": %llu, \"page_bytes\": %llu, \"pages\": %llu, "
	       "\"batch\": %llu, \"threads\": %u, \"seed\": %llu, \"bytes\": %llu, "
	       "\"seconds\": %.9f, \"gbps\": %.6f, \"pages_per_s\": %.3f, \"p50_ms\": %.6f, "
	       "\"p99_ms\": %.6f, \"batches\": %llu, \"hits\": %llu, \"misses\": %llu, "
	       "\"corrupt\": %llu, \"errors\": %llu, \"verify\": %s, \"verified_pages\": %llu, "
	       "\"mismatched_pages\": %llu, \"failed_pages\": %llu, \"existing_pages\": %llu, "
	       "\"cache\": \"%s\", \"pool_warmup\": %s, \"huge_pages\": \"%s\", "
	       "\"pipeline\": %llu",
	       op_names[a->op], a->backend, e->engine, e->direct ? "true" : "false",
	       e->zero_copy ? "true" : "false", hc_kv_layout_name(a->layout),
	       e->mla ? "mla" : "mha", e->objects, (unsigned long long)e->object_bytes,
	       (unsigned long long)a->page_bytes, (unsigned long long)p->pages,
	       (unsigned long long)a->batch, a->threads, (unsigned long long)a->seed,
	       (unsigned long long)p->bytes, p->seconds, p->gbps, p->pages_per_s, p->p50_ms,
	       p->p99_ms, (unsigned long long)p->batches, (unsigned long long)p->t.hits,
	       (unsigned long long)p->t.misses, (unsigned long long)p->t.corrupt,
	       (unsigned long long)p->t.errors, a->verify ? "true" : "false",
	       (unsigned long long)p->t.verified, (unsigned long long)p->t.mismatched,
	       (unsigned long long)p->failed, (unsigned long long)s->existing, s->cache,
	       s->warmed ? "true" : "false", huge_names[a->huge_mode],
	       (unsigned long long)a->pipeline);
	if (a->op == OP_MIXED) {
		print_part_json("set", &s->set);
		print_part_json("get", &s->get);
	}
	printf("}\n");
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
		return a->backend;
	bool dropped = a->drop_caches && drop_page_cache();
	if (direct)
		return "o_direct";
	return dropped ? "dropped" : "warm";
}

/* ---- the command ---- */

/*
 * Read one page that the timed reads will want (each thread's first get
 * page) into every pool slot, untimed, so that every slot has been written
 * by the device once. Reading one page many times, rather than a batch of
 * them, keeps the warm-up from caching (anywhere below the file system)
 * more than one page per thread of what is then timed, and writes nothing.
 * Returns whether any slot was read into.
 */
static bool warm_pool(struct bench *b)
{
	const struct bench_args *a = b->a;
	bool warmed = false;

	for (unsigned t = 0; t < a->threads; t++) {
		struct worker *w = &b->workers[t];
		/* A mixed run's odd threads start with a set batch. */
		uint64_t page = w->first + (a->op == OP_MIXED ? (t % 2) * a->batch : 0);
		if (page >= w->end || page_key(a->seed, page, &w->keys[0]))
			continue;
		size_t slots = a->pipeline > 1 ? (size_t)(w->end - w->first) : (size_t)a->batch;
		for (size_t j = 1; j < slots; j++)
			w->keys[j] = w->keys[0];
		if (hc_store_get(b->store, w->keys, slots, w->slots, w->results) > 0)
			warmed = true;
	}
	return warmed;
}

static uint64_t pages_existing(const struct bench *b)
{
	struct hc_store_stats st;

	return hc_store_stats(b->store, NULL, &st) ? 0 : st.pages_existing;
}

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
		.mla = a->mla || a->page_bytes % 2,
		.objects = info.objects,
	};
	if (info.objects) {
		/* docs/FORMAT.md: payload rounded up to a block, then the trailer block. */
		uint64_t payload = a->page_bytes / info.objects;
		e.object_bytes = (payload + 4095) / 4096 * 4096 + 4096;
	}
	/* The mem backend starts empty in every process; a mixed run needs the
	 * pages its get batches read. */
	if (a->op == OP_MIXED) {
		if (run_phase(b, PHASE_LAYOUT, OP_SET, "mixed layout"))
			return 1;
	} else if (a->op != OP_SET && !strcmp(a->backend, "mem") &&
		   run_phase(b, PHASE_ALL, OP_SET, "mem fill")) {
		return 1;
	}
	/* Before the drop, so the warm-up's reads leave nothing cached. */
	if (a->pool_warmup && !strcmp(a->backend, "file") && (a->op == OP_GET || a->op == OP_MIXED))
		s.warmed = warm_pool(b);
	if (a->op == OP_GET || a->op == OP_MIXED)
		s.cache = prepare_get(a, e.direct);
	uint64_t existing = pages_existing(b);
	if (run_phase(b, a->op == OP_MIXED ? PHASE_MIXED : PHASE_ALL, a->op, op_names[a->op]) ||
	    summarize(b, &s))
		return 1;
	s.existing = pages_existing(b) - existing;
	if (a->json)
		print_json(a, &e, &s);
	else
		print_human(a, &e, &s);
	if (s.all.t.first_err)
		fprintf(stderr, "hicache: bench: page %llu: %s (first page error)\n",
			(unsigned long long)s.all.t.first_err_page,
			hc_strerror(s.all.t.first_err));
	if (fflush(stdout)) {
		cli_report("bench: writing stdout", -EIO);
		return 1;
	}
	return s.all.failed ? 1 : 0;
}

static int bench_store(int argc, char **argv)
{
	struct bench_args a;
	struct bench b = {.a = &a};
	int rc = parse_args(argc, argv, &a);

	if (rc)
		return rc < 0 ? 0 : rc;
	/* Only a person watching wants the line; a log or a pipe does not. */
	b.show_progress = isatty(STDERR_FILENO);
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
