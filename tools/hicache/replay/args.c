/* hicache replay options. */
#define _GNU_SOURCE
#include "replay.h"

#include "cli_opts.h"
#include "commands.h"

#include <stdlib.h>
#include <string.h>

void replay_usage(FILE *out)
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
		"      --l3 none|mem|file:DIR|s3[://BUCKET[/PREFIX]]\n"
		"                           L3 store (default file:<temporary dir>, removed\n"
		"                           at exit); s3 takes what is not given from the\n"
		"                           config (HICACHE_S3_ENDPOINT, AWS_DEFAULT_BUCKET,\n"
		"                           HICACHE_S3_PREFIX, AWS_ACCESS_KEY_ID, ...)\n"
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
		"      --instances N        N engine instances (1..1024, default 1), each its\n"
		"                           own cache of --l1-tokens/--l2-tokens, all sharing\n"
		"                           one L3 (--l3 none: each alone)\n"
		"      --router R           round-robin (default), random, prefix or ttft\n"
		"                           (timed schedule only)\n"
		"      --seed S             --router random's seed (default 1)\n"
		"      --l3-tokens N|unlimited   the (shared) L3's capacity (default unlimited)\n"
		"      --processes          each instance its own OS process, sharing the L3\n"
		"                           (file:DIR or s3) for real; a request's L3 writes\n"
		"                           are published before the next request starts\n"
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

_Static_assert(sizeof(enum router) == sizeof(int), "--router is parsed as an int");
_Static_assert(sizeof(uint32_t) == sizeof(unsigned), "--page-tokens is parsed as unsigned");

/* --l1-tokens, --l2-tokens: a count or "unlimited" (UINT64_MAX). */
static int parse_tier_tokens(const char *arg, void *dst)
{
	if (!strcmp(arg, "unlimited")) {
		*(uint64_t *)dst = UINT64_MAX;
		return 0;
	}
	return cli_parse_u64(arg, 1, UINT64_MAX / 2, dst) ? 0 : 1;
}

/* --l3-tokens: a count or "unlimited" (0). */
static int parse_l3_tokens(const char *arg, void *dst)
{
	if (!strcmp(arg, "unlimited")) {
		*(uint64_t *)dst = 0;
		return 0;
	}
	return cli_parse_u64(arg, 1, UINT64_MAX / 2, dst) ? 0 : 1;
}

static int parse_kv_bytes(const char *arg, void *dst)
{
	uint64_t v;
	if (!cli_parse_u64(arg, 2, 1u << 24, &v) || v % 2)
		return 1;
	*(uint64_t *)dst = v;
	return 0;
}

static int parse_l3(const char *arg, void *dst)
{
	struct replay_args *a = dst;
	if (!strcmp(arg, "none")) {
		a->l3 = L3_NONE;
	} else if (!strcmp(arg, "mem")) {
		a->l3 = L3_MEM;
	} else if (!strncmp(arg, "file:", 5) && arg[5]) {
		a->l3 = L3_FILE;
		a->l3_dir = arg + 5;
	} else if (!strcmp(arg, "s3")) {
		a->l3 = L3_S3;
	} else if (!strncmp(arg, "s3://", 5) && arg[5] && arg[5] != '/') {
		/* s3://BUCKET[/PREFIX]: the bucket's name ends at '/'. */
		static char bucket[256];
		const char *slash = strchr(arg + 5, '/');
		size_t len = slash ? (size_t)(slash - arg - 5) : strlen(arg + 5);
		if (len >= sizeof(bucket))
			return cli_opts_bad_value(
				"replay", "l3", arg,
				"an s3:// URL with a bucket name under 256 bytes");
		memcpy(bucket, arg + 5, len);
		bucket[len] = 0;
		a->l3 = L3_S3;
		a->s3_bucket = bucket;
		a->s3_prefix = slash && slash[1] ? slash + 1 : NULL;
	} else {
		return 1;
	}
	return 0;
}

static void bad_option(const char *cmd, const char *word, int letter, bool missing_value)
{
	(void)missing_value;
	if (letter)
		fprintf(stderr, "hicache %s: bad or incomplete option '-%c'\n", cmd, letter);
	else
		fprintf(stderr, "hicache %s: bad option '%s'\n", cmd, word);
	replay_usage(stderr);
}

int replay_parse_args(int argc, char **argv, struct replay_args *a)
{
	static const char *const routers[] = {"round-robin", "random", "prefix", "ttft", NULL};
	int router = (int)a->router, first;
	const struct cli_opt opts[] = {
		CLI_OPT_FLAG("sequential", 0, &a->sequential),
		CLI_OPT_FLAG("no-data", 0, &a->no_data),
		CLI_OPT_UINT("page-tokens", 0, &a->page_tokens, 1, 1u << 20,
			     "a number in 1..1048576"),
		CLI_OPT_CUSTOM("l1-tokens", 0, &a->l1_tokens, parse_tier_tokens,
			       "a number >= 1 or 'unlimited'"),
		CLI_OPT_CUSTOM("l2-tokens", 0, &a->l2_tokens, parse_tier_tokens,
			       "a number >= 1 or 'unlimited'"),
		CLI_OPT_CUSTOM("l3", 0, a, parse_l3,
			       "none, mem, file:DIR or s3[://BUCKET[/PREFIX]]"),
		CLI_OPT_CUSTOM("kv-bytes-per-token", 0, &a->kv_bytes, parse_kv_bytes,
			       "an even number in 2..16777216"),
		CLI_OPT_DOUBLE("prefill-tokens-per-s", 0, &a->prefill_tps, 0, 1e12, "a number > 0"),
		CLI_OPT_FLAG("json", 0, &a->json),
		CLI_OPT_FLAG("multiturn", 0, &a->multiturn),
		CLI_OPT_U64("clients", 0, &a->clients, 1, 1u << 24, "a number in range"),
		CLI_OPT_U64("rounds", 0, &a->rounds, 1, 1u << 24, "a number in range"),
		CLI_OPT_U64("request-tokens", 0, &a->request_tokens, 1, 1u << 24,
			    "a number in range"),
		CLI_OPT_U64("output-tokens", 0, &a->output_tokens, 0, 1u << 24,
			    "a number in range"),
		CLI_OPT_U64("mamba-bytes", 0, &a->mamba_bytes, 0, 1u << 30,
			    "a number in 0..1073741824"),
		CLI_OPT_U64("mamba-host-states", 0, &a->mamba_host_states, 1, 1u << 30,
			    "a number in 1..1073741824"),
		CLI_OPT_U64("concurrency", 0, &a->concurrency, 1, 4096, "a number in 1..4096"),
		CLI_OPT_DOUBLE("speed", 0, &a->speed, 0, 1e12, "a number > 0"),
		CLI_OPT_U64("instances", 0, &a->instances, 1, REPLAY_MAX_INSTANCES,
			    "a number in 1..1024"),
		CLI_OPT_ENUM("router", 0, &router, routers),
		CLI_OPT_U64("seed", 0, &a->seed, 0, UINT64_MAX, "a number in 0..2^64-1"),
		CLI_OPT_CUSTOM("l3-tokens", 0, &a->l3_tokens, parse_l3_tokens,
			       "a number >= 1 or 'unlimited'"),
		CLI_OPT_FLAG("processes", 0, &a->processes),
		CLI_OPT_HELP("help", 'h'),
	};

	int rc = cli_opts_parse("replay", opts, CLI_OPTS_COUNT(opts), bad_option, argc, argv,
				&first);
	a->router = (enum router)router;
	if (rc == CLI_OPTS_HELP) {
		replay_usage(stdout);
		return -1;
	}
	if (rc)
		return rc;
	if (a->multiturn ? first != argc : first != argc - 1) {
		fprintf(stderr, "hicache replay: %s\n",
			a->multiturn ? "--multiturn takes no TRACE" : "exactly one TRACE expected");
		replay_usage(stderr);
		return 2;
	}
	if (!a->multiturn)
		a->trace = argv[first];
	return 0;
}
