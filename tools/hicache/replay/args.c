/* hicache replay options. */
#define _GNU_SOURCE
#include "replay.h"

#include "commands.h"

#include <errno.h>
#include <getopt.h>
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
	OPT_INSTANCES,
	OPT_ROUTER,
	OPT_SEED,
	OPT_L3_TOKENS,
	OPT_PROCESSES,
};

int replay_parse_args(int argc, char **argv, struct replay_args *a)
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
		{"instances", required_argument, NULL, OPT_INSTANCES},
		{"router", required_argument, NULL, OPT_ROUTER},
		{"seed", required_argument, NULL, OPT_SEED},
		{"l3-tokens", required_argument, NULL, OPT_L3_TOKENS},
		{"processes", no_argument, NULL, OPT_PROCESSES},
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
		case OPT_PROCESSES:
			a->processes = true;
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
			} else if (!strcmp(arg, "s3")) {
				a->l3 = L3_S3;
			} else if (!strncmp(arg, "s3://", 5) && arg[5] && arg[5] != '/') {
				/* s3://BUCKET[/PREFIX]: the bucket's name ends at '/'. */
				static char bucket[256];
				const char *slash = strchr(arg + 5, '/');
				size_t len = slash ? (size_t)(slash - arg - 5) : strlen(arg + 5);
				if (len >= sizeof(bucket))
					return bad_value("l3", arg,
							 "an s3:// URL with a bucket name "
							 "under 256 bytes");
				memcpy(bucket, arg + 5, len);
				bucket[len] = 0;
				a->l3 = L3_S3;
				a->s3_bucket = bucket;
				a->s3_prefix = slash && slash[1] ? slash + 1 : NULL;
			} else {
				return bad_value("l3", arg,
						 "none, mem, file:DIR or s3[://BUCKET[/PREFIX]]");
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
		case OPT_INSTANCES:
			if (!cli_parse_u64(arg, 1, REPLAY_MAX_INSTANCES, &v))
				return bad_value("instances", arg, "a number in 1..1024");
			a->instances = v;
			break;
		case OPT_ROUTER: {
			enum router r = ROUTER_RR;
			while (r <= ROUTER_TTFT && strcmp(arg, replay_router_name(r)))
				r++;
			if (r > ROUTER_TTFT)
				return bad_value("router", arg, "round-robin, random, prefix or ttft");
			a->router = r;
			break;
		}
		case OPT_SEED:
			if (!cli_parse_u64(arg, 0, UINT64_MAX, &v))
				return bad_value("seed", arg, "a number in 0..2^64-1");
			a->seed = v;
			break;
		case OPT_L3_TOKENS:
			if (!strcmp(arg, "unlimited"))
				v = 0;
			else if (!cli_parse_u64(arg, 1, UINT64_MAX / 2, &v))
				return bad_value("l3-tokens", arg, "a number >= 1 or 'unlimited'");
			a->l3_tokens = v;
			break;
		case 'h':
			replay_usage(stdout);
			return -1;
		default:
			/* A long option's optopt is its code: name the word. */
			if (optopt && optopt < OPT_SEQUENTIAL)
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
