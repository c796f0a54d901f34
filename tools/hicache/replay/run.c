/* hicache replay: the stores and caches of each configuration, cmd_replay. */
#define _GNU_SOURCE
#include "replay.h"

#include "commands.h"

#include <hicache/config.h>
#include <hicache/hicache.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* One store handle on a->l3_dir (file), the bucket (s3) or in memory.
 * --l3-tokens caps it: the mem backend's LRU, or the file cleaner's
 * capacity (the cleaner runs then, each handle's own: hicache's cleaners
 * on one dir share it). s3 takes what the flag does not say from the
 * config sources of every hicache command (HICACHE_S3_*, AWS_*). */
int replay_open_store(const struct replay_args *a, struct hc_store **out)
{
	const char *dir = a->l3_dir;
	struct hc_config *cfg = NULL;
	struct hc_store_opts opts;
	char json[4096];
	int rc;
	/* Bytes the cap allows: a page's KV bytes per token. */
	double cap_bytes = (double)a->l3_tokens * (double)a->kv_bytes;

	*out = NULL;
	cJSON *o = cJSON_CreateObject();
	if (a->l3 == L3_FILE && !a->no_data) {
		cJSON *dirs = cJSON_AddArrayToObject(o, "dirs");
		cJSON_AddItemToArray(dirs, cJSON_CreateString(dir));
		/* No cleaner unless capped: nothing may disappear under a replay. */
		cJSON_AddNumberToObject(o, "l3_cleaner_interval_s", a->l3_tokens ? 1 : 0);
		if (a->l3_tokens)
			cJSON_AddNumberToObject(o, "capacity_gb", cap_bytes / 1e9);
	} else if (a->l3 == L3_S3 && !a->no_data) {
		if (a->s3_bucket)
			cJSON_AddStringToObject(o, "bucket", a->s3_bucket);
		if (a->s3_prefix)
			cJSON_AddStringToObject(o, "prefix", a->s3_prefix);
	} else if (a->l3 == L3_MEM && !a->no_data && a->l3_tokens) {
		cJSON_AddNumberToObject(o, "mem_capacity_bytes", cap_bytes);
	}
	if (!cJSON_PrintPreallocated(o, json, sizeof(json), false)) {
		cJSON_Delete(o);
		fprintf(stderr, "hicache replay: --l3 dir too long\n");
		return -EINVAL;
	}
	cJSON_Delete(o);
	if ((rc = hc_config_create(json, &cfg))) {
		cli_report("replay: store config", rc);
		return rc;
	}
	hc_store_opts_init(&opts, sizeof(opts));
	/* In --no-data mode the cache keeps L3 as a key set and never calls the
	 * store; a mem store only says that there is an L3. */
	opts.backend = a->no_data         ? "mem"
		       : a->l3 == L3_FILE ? "file"
		       : a->l3 == L3_S3   ? "s3"
					  : "mem";
	opts.config = cfg;
	opts.model = "replay";
	rc = hc_store_open(&opts, out);
	hc_config_destroy(cfg);
	if (rc)
		cli_report("replay: opening the store", rc);
	return rc;
}

int replay_open_cache(const struct replay_args *a, uint64_t l1, uint64_t l2, struct hc_store *store,
		      struct hc_cache **out)
{
	struct hc_cache_opts o;
	uint32_t ps = a->page_tokens;
	int rc;

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
	if ((rc = hc_cache_open(&o, out)))
		cli_report("replay: opening the cache", rc);
	return rc;
}

/* One configuration on a.instances caches. stores: one per instance (the
 * L3 through the cache, data mode or one no-data instance), or NULL;
 * with_l3: the configuration has an L3 (emulated in a no-data fleet). */
static int replay_one(const struct replay_args *a, const struct workload *w, uint64_t l1,
		      uint64_t l2, struct hc_store **stores, bool with_l3, double *ttft,
		      bool progress, struct result *res)
{
	struct sim s;
	struct replay_buf b;
	struct progress prog = {.on = progress && isatty(STDERR_FILENO)};
	uint32_t ps = a->page_tokens;
	size_t n = (size_t)a->instances;
	uint64_t t_start = replay_now_ns();
	bool emulated = with_l3 && fleet_l3_emulated(a);
	int rc;

	if ((rc = sim_init(&s, a, w, &b, ttft, res, true, n)))
		return rc;
	/* A router's view holds what the instance can: write-through keeps
	 * device pages on host, so the larger tier. */
	uint64_t view_cap = (l1 > l2 ? l1 : l2) / ps;
	bool views = n > 1 && (a->router == ROUTER_PREFIX || a->router == ROUTER_TTFT);
	rc = sim_fleet_sets(&s, with_l3 && (emulated || n > 1), emulated ? a->l3_tokens / ps : 0,
			    emulated, views, view_cap ? view_cap : 1);
	for (size_t k = 0; !rc && k < n; k++) {
		if (!a->processes)
			rc = replay_open_cache(a, l1, l2, with_l3 && !emulated ? stores[k] : NULL,
					       &s.in[k].c);
		s.in[k].res = &res->inst[k];
		s.in[k].host_pages = l2 / ps;
	}
	if (!rc && a->processes)
		rc = procs_spawn(&s, l1, l2, with_l3);
	if (rc)
		goto out;
	if (!a->processes)
		s.pbytes = hc_cache_page_bytes(s.in[0].c);
	rc = sim_run(&s, &prog);
	if (prog.printed)
		fputc('\n', stderr);
	if (!rc) {
		struct hc_cache_stats st, sum = {0};
		if (a->processes && (rc = procs_collect(&s, &sum)))
			goto out;
		for (size_t k = 0; !a->processes && k < n; k++) {
			/* Backups still queued are part of the run's work (and its bytes). */
			hc_cache_flush(s.in[k].c);
			hc_cache_stats(s.in[k].c, &st, sizeof(st));
			sum.pages_l3_write += st.pages_l3_write;
			sum.bytes_h2d += st.bytes_h2d;
			sum.bytes_d2h += st.bytes_d2h;
			sum.bytes_l3_read += st.bytes_l3_read;
			sum.bytes_l3_write += st.bytes_l3_write;
		}
		res->seconds = (double)(replay_now_ns() - t_start) / 1e9;
		res->virtual_seconds = s.now;
		if (a->no_data) {
			/* No bytes move: model them from the tokens each tier served. */
			uint64_t wr = emulated ? res->l3_pages_written : sum.pages_l3_write;
			res->bytes_h2d = (res->hit[1] + res->hit[2]) * a->kv_bytes;
			res->bytes_l3_read = res->hit[2] * a->kv_bytes;
			res->bytes_l3_write = wr * ps * a->kv_bytes;
			res->bytes_d2h = 0;
		} else {
			res->bytes_h2d = sum.bytes_h2d;
			res->bytes_d2h = sum.bytes_d2h;
			res->bytes_l3_read = sum.bytes_l3_read;
			res->bytes_l3_write = sum.bytes_l3_write;
		}
	}
out:
	procs_free(&s);
	for (size_t k = 0; k < n; k++)
		hc_cache_close(s.in[k].c);
	sim_free(&s);
	return rc;
}

struct config_run {
	const struct replay_args *a;
	const struct workload *w;
	uint64_t l1, l2;
	struct hc_store **stores;
	bool with_l3;
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
	r->rc = replay_one(r->a, r->w, r->l1, r->l2, r->stores, r->with_l3, r->ttft, r->progress,
			   r->res);
	return NULL;
}

volatile sig_atomic_t replay_stop;

static void on_stop(int sig)
{
	replay_stop = sig;
}

/* SIGINT and SIGTERM stop the replay at the next request, so that the
 * temporary L3 dir is removed on the way out (a handler cannot remove a
 * tree safely); the process then dies of the signal as its caller expects. */
static void catch_stop(struct sigaction old[2])
{
	struct sigaction sa = {.sa_handler = on_stop};

	sigemptyset(&sa.sa_mask);
	replay_stop = 0;
	sigaction(SIGINT, &sa, &old[0]);
	sigaction(SIGTERM, &sa, &old[1]);
}

static void end_stop(const struct sigaction old[2])
{
	int sig = replay_stop;

	sigaction(SIGINT, &old[0], NULL);
	sigaction(SIGTERM, &old[1], NULL);
	if (sig) {
		signal(sig, SIG_DFL);
		raise(sig);
	}
}

/* One `hicache replay`: its workload, up to three configurations, their
 * results, and the stores and L3 directory they share. */
struct replay_cmd {
	struct replay_args a;
	struct workload w;
	struct result res[3];
	struct config_run run[3];
	double *ttft[4]; /* per configuration, then the no-cache baseline */
	struct hc_store *stores[REPLAY_MAX_INSTANCES];
	size_t nstores;
	size_t nconf;
	uint64_t l1, l2;
	char tmpdir[4096];
	bool own_dir;
};

/* The workload, the tiers' sizes and the result arrays. */
static int replay_prepare(struct replay_cmd *r)
{
	struct replay_args *a = &r->a;
	if (a->multiturn ? replay_gen_multiturn(a, &r->w) : replay_load_trace(a->trace, &r->w)) {
		if (a->multiturn)
			fprintf(stderr, "hicache replay: out of memory\n");
		return 1;
	}
	uint64_t ps = a->page_tokens;
	/* unlimited: everything the workload could insert, plus a page. */
	uint64_t unl = (r->w.total_input / ps + 1) * ps;
	r->l1 = a->l1_tokens == UINT64_MAX ? unl : a->l1_tokens;
	r->l2 = a->l2_tokens == UINT64_MAX ? unl : a->l2_tokens;
	r->nconf = a->l3 == L3_NONE ? 2 : 3;
	for (size_t i = 0; i < 4; i++) {
		if (!(r->ttft[i] = calloc(r->w.n, sizeof(double))) ||
		    (i < 3 && !(r->res[i].inst = calloc(a->instances, sizeof(*r->res[i].inst))))) {
			fprintf(stderr, "hicache replay: out of memory\n");
			return 1;
		}
		if (i < 3)
			r->res[i].ninst = a->instances;
	}
	return 0;
}

/* A file L3 in data mode with no --l3-dir: a directory of our own under
 * $TMPDIR (as mktemp(1) has it, else /tmp), removed at the end. */
static int replay_own_dir(struct replay_cmd *r)
{
	const char *base = getenv("TMPDIR");
	if (!base || !*base)
		base = "/tmp";
	if ((size_t)snprintf(r->tmpdir, sizeof(r->tmpdir), "%s/hicache-replay-XXXXXX", base) >=
	    sizeof(r->tmpdir)) {
		fprintf(stderr, "hicache replay: $TMPDIR too long\n");
		return 1;
	}
	if (!mkdtemp(r->tmpdir)) {
		fprintf(stderr, "hicache replay: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	r->own_dir = true;
	r->a.l3_dir = r->tmpdir;
	return 0;
}

/* The L3's directory and the store handles the configurations share. */
static int replay_open_l3(struct replay_cmd *r)
{
	struct replay_args *a = &r->a;
	if (a->l3 == L3_NONE)
		return 0;
	if (a->l3 == L3_FILE && !a->no_data && !a->l3_dir && replay_own_dir(r))
		return 1;
	/* Data mode: each instance its own handle on the one dir (a fleet
	 * shares it as engines on many hosts would). No-data: the cache's key
	 * set, or the replay's (fleet_l3_emulated()). */
	size_t want = a->no_data ? (fleet_l3_emulated(a) ? 0 : 1) : a->instances;
	if (a->processes)
		want = 0; /* each child opens its own */
	for (; r->nstores < want; r->nstores++)
		if (replay_open_store(a, &r->stores[r->nstores]))
			return 1;
	return 0;
}

/* Every configuration, and the no-cache baseline; 0 or the first failure's
 * code. */
static int replay_configs(struct replay_cmd *r)
{
	const struct replay_args *a = &r->a;
	for (size_t i = 0; i < r->nconf; i++) {
		/* L1 only: the controller needs a host page; one is the least. */
		r->run[i] = (struct config_run){.a = a,
						.w = &r->w,
						.l1 = r->l1,
						.l2 = i == 0 ? a->page_tokens : r->l2,
						.stores = r->stores,
						.with_l3 = i == 2,
						.ttft = r->ttft[i],
						.progress = !a->no_data,
						.res = &r->res[i]};
		/* Data mode measures transfer times: one configuration at a time. */
		/* --processes: fork from a process with no other threads. */
		if (a->no_data && !a->processes &&
		    pthread_create(&r->run[i].th, NULL, config_thread, &r->run[i]) == 0)
			r->run[i].started = true;
		else
			config_thread(&r->run[i]);
	}
	int rc = replay_baseline(a, &r->w, r->l1, r->ttft[3]);
	for (size_t i = 0; i < r->nconf; i++) {
		if (r->run[i].started)
			pthread_join(r->run[i].th, NULL);
		if (r->run[i].rc)
			rc = r->run[i].rc;
	}
	return rc;
}

/* Percentiles and the report; 1 when a configuration read corrupt pages. */
static int replay_report(struct replay_cmd *r)
{
	size_t n = r->w.n, nconf = r->nconf;
	double no_cache[3];
	replay_percentiles(r->ttft[3], n, no_cache);
	for (size_t i = 0; i < nconf; i++) {
		replay_percentiles(r->ttft[i], n, r->res[i].ttft);
		memcpy(r->res[i].ttft_no, no_cache, sizeof(no_cache));
	}
	int ret = r->a.json ? replay_print_json(&r->a, r->res, nconf)
			    : (replay_print_human(&r->a, r->res, nconf), 0);
	for (size_t i = 0; i < nconf; i++)
		if (r->res[i].corrupt) {
			fprintf(stderr, "hicache replay: %s: %" PRIu64 " corrupt pages\n",
				r->res[i].name, r->res[i].corrupt);
			ret = 1;
		}
	return ret;
}

static void replay_cmd_free(struct replay_cmd *r)
{
	for (size_t k = 0; k < r->nstores; k++)
		hc_store_close(r->stores[k]);
	if (r->own_dir)
		nftw(r->tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	for (size_t i = 0; i < 4; i++)
		free(r->ttft[i]);
	for (size_t i = 0; i < 3; i++)
		free(r->res[i].inst);
	replay_wl_free(&r->w);
}

int cmd_replay(int argc, char **argv)
{
	struct replay_cmd r = {
		.a = {.concurrency = 16,
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
		      .instances = 1,
		      .router = ROUTER_RR,
		      .seed = 1},
		.res = {{.name = "L1"}, {.name = "L1+L2"}, {.name = "L1+L2+L3"}},
	};
	struct sigaction old_sa[2];
	int ret = 1, rc;

	if ((rc = replay_parse_args(argc, argv, &r.a)))
		return rc < 0 ? 0 : rc;
	if ((rc = fleet_check_args(&r.a)))
		return rc;
	catch_stop(old_sa);
	if (!replay_prepare(&r) && !replay_open_l3(&r) && !replay_configs(&r))
		ret = replay_report(&r);
	replay_cmd_free(&r);
	end_stop(old_sa);
	return ret;
}
