/*
 * hicache bench store: the command line, into struct bench_args with every
 * value checked and every default filled in. The help text is
 * docs/man/hicache-bench.1 (cli_help()): an option added here is
 * documented there.
 */
#define _GNU_SOURCE
#include "bench.h"

#include "../cli_opts.h"
#include "../commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const bench_op_names[OP_COUNT] = {"set", "get", "exists", "mixed"};

static const char *const op_choices[] = {"set", "get", "exists", "mixed", NULL};
static const char *const backend_names[] = {"file", "mem", "s3", NULL};
static const char *const engine_names[] = {"uring", "threads", "auto", NULL};
static const char *const slots_names[] = {"reuse", "distinct", NULL};

_Static_assert(sizeof(enum bench_op) == sizeof(int), "--op is parsed as an int");

static int parse_dir(const char *arg, void *dst)
{
	struct bench_args *a = dst;
	if (!arg[0])
		return 1;
	if (a->ndirs == BENCH_DIRS_MAX) {
		fprintf(stderr, "hicache bench: at most %d --dir\n", BENCH_DIRS_MAX);
		return 2;
	}
	a->dirs[a->ndirs++] = arg;
	return 0;
}

static int parse_layout(const char *arg, void *dst)
{
	return hc_kv_layout_parse(arg, dst) ? 1 : 0;
}

static int parse_huge(const char *arg, void *dst)
{
	return hc_mem_parse_huge_mode(arg, dst) ? 1 : 0;
}

static int parse_direct(const char *arg, void *dst)
{
	int *direct = dst;
	if (strcmp(arg, "on") && strcmp(arg, "off"))
		return 1;
	*direct = !strcmp(arg, "on");
	return 0;
}

int bench_parse_args(int argc, char **argv, struct bench_args *a)
{
	int op = 0, backend = 0, engine = 0, slots = 0, first, rc;
	const struct cli_opt opts[] = {
		CLI_OPT_ENUM("op", 'o', &op, op_choices, .seen = &a->have_op),
		CLI_OPT_U64("pages", 'n', &a->pages, 1, UINT64_MAX / 2, "a number of at least 1"),
		CLI_OPT_SIZE("page-bytes", 'p', &a->page_bytes, 1, BENCH_PAGE_BYTES_MAX,
			     "a size in 1..2^30 (K/M/G allowed)"),
		CLI_OPT_ENUM("backend", 'b', &backend, backend_names, .as_name = &a->backend),
		CLI_OPT_CUSTOM("dir", 'd', a, parse_dir, "a directory"),
		CLI_OPT_U64("batch", 'B', &a->batch, 1, 1u << 20, "a number in 1..1048576"),
		CLI_OPT_CUSTOM("layout", 'l', &a->layout, parse_layout,
			       "layer_first, page_first, page_first_direct or page_head"),
		CLI_OPT_UINT("threads", 't', &a->threads, 1, BENCH_THREADS_MAX,
			     "a number in 1..1024"),
		CLI_OPT_ENUM("engine", 'e', &engine, engine_names, .as_name = &a->engine),
		CLI_OPT_U64("seed", 's', &a->seed, 0, UINT64_MAX, "a number in 0..2^64-1"),
		CLI_OPT_CUSTOM("direct", 0, &a->direct, parse_direct, "on or off"),
		CLI_OPT_ON_OFF("zero-copy", 0, &a->zero_copy),
		CLI_OPT_FLAG("verify", 0, &a->verify),
		CLI_OPT_FLAG("json", 0, &a->json),
		CLI_OPT_FLAG("drop-caches", 0, &a->drop_caches),
		CLI_OPT_SIZE("total-bytes", 0, &a->total_bytes, 1, UINT64_MAX,
			     "a size of at least 1 (K/M/G/T allowed)"),
		CLI_OPT_FLAG("mla", 0, &a->mla),
		CLI_OPT_ON_OFF("pool-warmup", 0, &a->pool_warmup),
		CLI_OPT_CUSTOM("huge-pages", 0, &a->huge_mode, parse_huge,
			       "off, thp, prefer or required"),
		CLI_OPT_U64("pipeline", 0, &a->pipeline, 1, 64, "a number in 1..64"),
		CLI_OPT_ENUM("slots", 0, &slots, slots_names),
		CLI_OPT_STRING("endpoint", 0, &a->endpoint, 1, "[http[s]://]host[:port]"),
		CLI_OPT_STRING("bucket", 0, &a->bucket, 1, "a bucket name"),
		CLI_OPT_STRING("prefix", 0, &a->prefix, 0, NULL),
		CLI_OPT_U64("max-inflight", 0, &a->max_inflight, 1, 1024, "a number in 1..1024"),
		CLI_OPT_HELP("help", 'h'),
	};

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
	rc = cli_opts_parse("bench", opts, CLI_OPTS_COUNT(opts), NULL, argc, argv, &first);
	if (rc == CLI_OPTS_HELP)
		return cli_help(stdout, "bench") ? 1 : -1;
	if (rc)
		return rc;
	a->op = (enum bench_op)op;
	a->distinct_slots = slots == 1;
	if (first < argc) {
		fprintf(stderr, "hicache bench: unexpected argument '%s'\n", argv[first]);
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
			fprintf(stderr,
				"hicache bench: --total-bytes %llu is less than one page "
				"of %llu bytes\n",
				(unsigned long long)a->total_bytes,
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
	if ((a->endpoint || a->bucket || a->prefix || a->max_inflight) &&
	    strcmp(a->backend, "s3")) {
		fprintf(stderr, "hicache bench: --endpoint, --bucket, --prefix and --max-inflight "
				"need --backend s3\n");
		return 2;
	}
	if (a->pipeline > 1 && a->op != OP_SET && a->op != OP_GET) {
		fprintf(stderr, "hicache bench: --pipeline applies to --op set and get only\n");
		return 2;
	}
	if (a->batch * a->threads > UINT64_MAX / a->page_bytes ||
	    (bench_slot_per_page(a) && a->pages > SIZE_MAX / a->page_bytes)) {
		fprintf(stderr, "hicache bench: the pool (--batch x --threads, or with --pipeline "
				"or --slots distinct --pages, x --page-bytes) is too large\n");
		return 2;
	}
	return 0;
}
