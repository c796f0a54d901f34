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
	int op = 0, backend = 0, engine = 0, first, rc;
	const struct cli_opt opts[] = {
		{"op", 'o', CLI_ENUM, &op, .choices = op_choices, .seen = &a->have_op},
		{"pages", 'n', CLI_U64, &a->pages, 1, UINT64_MAX / 2,
		 .want = "a number of at least 1"},
		{"page-bytes", 'p', CLI_SIZE, &a->page_bytes, 1, BENCH_PAGE_BYTES_MAX,
		 .want = "a size in 1..2^30 (K/M/G allowed)"},
		{"backend", 'b', CLI_ENUM, &backend, .choices = backend_names,
		 .as_name = &a->backend},
		{"dir", 'd', CLI_CUSTOM, a, .parse = parse_dir, .want = "a directory"},
		{"batch", 'B', CLI_U64, &a->batch, 1, 1u << 20, .want = "a number in 1..1048576"},
		{"layout", 'l', CLI_CUSTOM, &a->layout, .parse = parse_layout,
		 .want = "layer_first, page_first, page_first_direct or page_head"},
		{"threads", 't', CLI_UINT, &a->threads, 1, BENCH_THREADS_MAX,
		 .want = "a number in 1..1024"},
		{"engine", 'e', CLI_ENUM, &engine, .choices = engine_names, .as_name = &a->engine},
		{"seed", 's', CLI_U64, &a->seed, 0, UINT64_MAX, .want = "a number in 0..2^64-1"},
		{"direct", 0, CLI_CUSTOM, &a->direct, .parse = parse_direct, .want = "on or off"},
		{"zero-copy", 0, CLI_ON_OFF, .dst = &a->zero_copy},
		{"verify", 0, CLI_FLAG, .dst = &a->verify},
		{"json", 0, CLI_FLAG, .dst = &a->json},
		{"drop-caches", 0, CLI_FLAG, .dst = &a->drop_caches},
		{"total-bytes", 0, CLI_SIZE, &a->total_bytes, 1, UINT64_MAX,
		 .want = "a size of at least 1 (K/M/G/T allowed)"},
		{"mla", 0, CLI_FLAG, .dst = &a->mla},
		{"pool-warmup", 0, CLI_ON_OFF, .dst = &a->pool_warmup},
		{"huge-pages", 0, CLI_CUSTOM, &a->huge_mode, .parse = parse_huge,
		 .want = "off, thp, prefer or required"},
		{"pipeline", 0, CLI_U64, &a->pipeline, 1, 64, .want = "a number in 1..64"},
		{"endpoint", 0, CLI_STRING, &a->endpoint, 1, .want = "[http[s]://]host[:port]"},
		{"bucket", 0, CLI_STRING, &a->bucket, 1, .want = "a bucket name"},
		{"prefix", 0, CLI_STRING, .dst = &a->prefix},
		{"max-inflight", 0, CLI_U64, &a->max_inflight, 1, 1024,
		 .want = "a number in 1..1024"},
		{"help", 'h', CLI_HELP, .dst = NULL},
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
	rc = cli_opts_parse("bench", opts, sizeof(opts) / sizeof(opts[0]), NULL, argc, argv, &first);
	if (rc == CLI_OPTS_HELP)
		return cli_help(stdout, "bench") ? 1 : -1;
	if (rc)
		return rc;
	a->op = (enum bench_op)op;
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
