/*
 * hicache bench store: the command line, into struct bench_args with every
 * value checked and every default filled in. The help text is
 * docs/man/hicache-bench.1 (cli_help()): an option added here is
 * documented there.
 */
#define _GNU_SOURCE
#include "bench.h"

#include "../commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const bench_op_names[OP_COUNT] = {"set", "get", "exists", "mixed"};

/* ---- arguments ---- */

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
		if (!strcmp(s, bench_op_names[i])) {
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

/* Returns 0, 1 (printing --help failed), 2 (bad usage, said) or -1
 * (--help printed). */
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
					 "layer_first, page_first, page_first_direct or page_head");
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
		return cli_help(stdout, "bench") ? 1 : -1;
	default:
		return 2;
	}
}

int bench_parse_args(int argc, char **argv, struct bench_args *a)
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
