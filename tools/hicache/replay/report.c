/* The replay summary and its --json form. */
#define _GNU_SOURCE
#include "replay.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void replay_percentiles(double *v, size_t n, double out[3])
{
	static const double q[3] = {0.50, 0.90, 0.99};

	qsort(v, n, sizeof(*v), cmp_double);
	for (int i = 0; i < 3; i++) {
		size_t k = n ? (size_t)(q[i] * (double)(n - 1) + 0.5) : 0;
		out[i] = n ? v[k] : 0;
	}
}

/* ---- output ---- */

double replay_hit_rate(const struct result *r)
{
	return r->input_tokens
		       ? (double)(r->hit[0] + r->hit[1] + r->hit[2]) / (double)r->input_tokens
		       : 0;
}

double replay_l3_gbps(const struct result *r)
{
	return r->l3_seconds > 0 ? (double)r->bytes_l3_read / r->l3_seconds / 1e9 : 0;
}

static double inst_hit_rate(const struct inst_result *x)
{
	return x->input_tokens
		       ? (double)(x->hit[0] + x->hit[1] + x->hit[2]) / (double)x->input_tokens
		       : 0;
}

static void json_result(cJSON *o, const struct result *r, bool no_data)
{
	cJSON_AddStringToObject(o, "name", r->name);
	cJSON_AddNumberToObject(o, "requests", (double)r->requests);
	cJSON_AddNumberToObject(o, "input_tokens", (double)r->input_tokens);
	cJSON *h = cJSON_AddObjectToObject(o, "hit_tokens");
	cJSON_AddNumberToObject(h, "l1", (double)r->hit[0]);
	cJSON_AddNumberToObject(h, "l2", (double)r->hit[1]);
	cJSON_AddNumberToObject(h, "l3", (double)r->hit[2]);
	cJSON_AddNumberToObject(o, "hit_rate", replay_hit_rate(r));
	cJSON_AddNumberToObject(o, "skipped_requests", (double)r->skipped);
	cJSON_AddNumberToObject(o, "verified_pages", (double)r->verified);
	cJSON_AddNumberToObject(o, "corrupt_pages", (double)r->corrupt);
	cJSON *b = cJSON_AddObjectToObject(o, "bytes");
	cJSON_AddBoolToObject(b, "modelled", no_data);
	cJSON_AddNumberToObject(b, "l2_to_l1", (double)r->bytes_h2d);
	cJSON_AddNumberToObject(b, "l1_to_l2", (double)r->bytes_d2h);
	cJSON_AddNumberToObject(b, "l3_read", (double)r->bytes_l3_read);
	cJSON_AddNumberToObject(b, "l3_write", (double)r->bytes_l3_write);
	cJSON_AddNumberToObject(o, "l3_read_gbps", replay_l3_gbps(r));
	cJSON_AddNumberToObject(o, "seconds", r->seconds);
	cJSON_AddNumberToObject(o, "virtual_seconds", r->virtual_seconds);
	cJSON_AddNumberToObject(o, "l3_pages_read", (double)r->l3_pages_read);
	cJSON_AddNumberToObject(o, "l3_cross_instance_pages", (double)r->l3_cross_pages);
	cJSON *in = cJSON_AddArrayToObject(o, "instances");
	for (size_t k = 0; k < r->ninst; k++) {
		const struct inst_result *x = &r->inst[k];
		cJSON *e = cJSON_CreateObject();
		cJSON_AddNumberToObject(e, "requests", (double)x->requests);
		cJSON_AddNumberToObject(e, "input_tokens", (double)x->input_tokens);
		cJSON *hh = cJSON_AddObjectToObject(e, "hit_tokens");
		cJSON_AddNumberToObject(hh, "l1", (double)x->hit[0]);
		cJSON_AddNumberToObject(hh, "l2", (double)x->hit[1]);
		cJSON_AddNumberToObject(hh, "l3", (double)x->hit[2]);
		cJSON_AddNumberToObject(e, "hit_rate", inst_hit_rate(x));
		cJSON_AddItemToArray(in, e);
	}
	cJSON *t = cJSON_AddObjectToObject(o, "ttft_s");
	cJSON_AddNumberToObject(t, "p50", r->ttft[0]);
	cJSON_AddNumberToObject(t, "p90", r->ttft[1]);
	cJSON_AddNumberToObject(t, "p99", r->ttft[2]);
	t = cJSON_AddObjectToObject(o, "ttft_no_cache_s");
	cJSON_AddNumberToObject(t, "p50", r->ttft_no[0]);
	cJSON_AddNumberToObject(t, "p90", r->ttft_no[1]);
	cJSON_AddNumberToObject(t, "p99", r->ttft_no[2]);
}

int replay_print_json(const struct replay_args *a, const struct result *res, size_t n)
{
	cJSON *o = cJSON_CreateObject();
	json_result(o, &res[n - 1], a->no_data);
	cJSON_AddStringToObject(o, "mode", a->no_data ? "no_data" : "data");
	cJSON_AddStringToObject(o, "schedule", a->sequential ? "sequential" : "timed");
	cJSON_AddNumberToObject(o, "concurrency", a->sequential ? 1 : (double)a->concurrency);
	cJSON_AddNumberToObject(o, "speed", a->speed);
	cJSON_AddNumberToObject(o, "page_tokens", a->page_tokens);
	cJSON_AddNumberToObject(o, "kv_bytes_per_token", (double)a->kv_bytes);
	cJSON_AddNumberToObject(o, "mamba_bytes", (double)a->mamba_bytes);
	cJSON_AddNumberToObject(o, "mamba_host_states", (double)a->mamba_host_states);
	cJSON_AddNumberToObject(o, "prefill_tokens_per_s", a->prefill_tps);
	cJSON *fl = cJSON_AddObjectToObject(o, "fleet");
	cJSON_AddNumberToObject(fl, "instances", (double)a->instances);
	cJSON_AddStringToObject(fl, "router", replay_router_name(a->router));
	cJSON_AddNumberToObject(fl, "seed", (double)a->seed);
	cJSON_AddStringToObject(fl, "l3", a->l3 == L3_NONE ? "none" : "shared");
	cJSON_AddNumberToObject(fl, "l3_tokens", (double)a->l3_tokens);
	cJSON_AddBoolToObject(fl, "processes", a->processes);
	cJSON *cf = cJSON_AddArrayToObject(o, "configs");
	for (size_t i = 0; i < n; i++) {
		cJSON *x = cJSON_CreateObject();
		json_result(x, &res[i], a->no_data);
		cJSON_AddItemToArray(cf, x);
	}
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!s)
		return 1;
	printf("%s\n", s);
	free(s);
	return 0;
}

void replay_print_human(const struct replay_args *a, const struct result *res, size_t n)
{
	const struct result *r = &res[n - 1];

	printf("mode %s, page %u tokens, %" PRIu64 " KV bytes/token, prefill %.0f tokens/s\n",
	       a->no_data ? "no-data (bytes and transfer times modelled)" : "data", a->page_tokens,
	       a->kv_bytes, a->prefill_tps);
	if (a->sequential)
		printf("sequential: one request at a time, in trace order\n");
	else
		printf("timed: arrivals at trace time / %g, %" PRIu64 " requests served at once\n",
		       a->speed, a->concurrency);
	printf("requests %" PRIu64 ", input tokens %" PRIu64 "\n", r->requests, r->input_tokens);
	printf("verified pages %" PRIu64 ", corrupt pages %" PRIu64 "\n\n", r->verified,
	       r->corrupt);
	printf("%-10s %8s %12s %12s %12s %9s %9s %9s %8s %8s %8s %8s %7s\n", "config", "hit rate",
	       "L1 hit", "L2 hit", "L3 hit", "L2->L1 MB", "L3 rd MB", "L3 wr MB", "L3 GB/s",
	       "TTFT p50", "p90", "p99", "secs");
	for (size_t i = 0; i < n; i++) {
		const struct result *x = &res[i];
		printf("%-10s %8.4f %12" PRIu64 " %12" PRIu64 " %12" PRIu64
		       " %9.1f %9.1f %9.1f %8.2f %8.3f %8.3f %8.3f %7.2f\n",
		       x->name, replay_hit_rate(x), x->hit[0], x->hit[1], x->hit[2],
		       (double)x->bytes_h2d / 1e6, (double)x->bytes_l3_read / 1e6,
		       (double)x->bytes_l3_write / 1e6, replay_l3_gbps(x), x->ttft[0], x->ttft[1],
		       x->ttft[2], x->seconds);
	}
	printf("%-10s %8.4f %12s %12s %12s %9s %9s %9s %8s %8.3f %8.3f %8.3f\n", "no cache", 0.0,
	       "-", "-", "-", "-", "-", "-", "-", r->ttft_no[0], r->ttft_no[1], r->ttft_no[2]);
	if (a->instances > 1) {
		printf("\nfleet: %" PRIu64 " instances, router %s, L3 %s", a->instances,
		       replay_router_name(a->router),
		       a->l3 == L3_NONE ? "none (each alone)" : "shared");
		if (a->l3 != L3_NONE && a->l3_tokens)
			printf(" of %" PRIu64 " tokens", a->l3_tokens);
		printf("; fleet hit rate %.4f (%s)%s\n", replay_hit_rate(r), r->name,
		       a->processes ? ", one process each" : "");
		if (a->l3 != L3_NONE)
			printf("L3 pages read %" PRIu64 ", written by another instance %" PRIu64
			       "\n",
			       r->l3_pages_read, r->l3_cross_pages);
		printf("%-8s %9s %12s %8s %12s %12s %12s\n", "instance", "requests", "input",
		       "hit rate", "L1 hit", "L2 hit", "L3 hit");
		for (size_t k = 0; k < r->ninst; k++) {
			const struct inst_result *x = &r->inst[k];
			printf("%-8zu %9" PRIu64 " %12" PRIu64 " %8.4f %12" PRIu64 " %12" PRIu64
			       " %12" PRIu64 "\n",
			       k, x->requests, x->input_tokens, inst_hit_rate(x), x->hit[0],
			       x->hit[1], x->hit[2]);
		}
	}
	for (size_t i = 0; i < n; i++)
		if (res[i].skipped)
			printf("%s: %" PRIu64 " requests did not fit on the device (no cache)\n",
			       res[i].name, res[i].skipped);
}
