/*
 * hicache bench store: the KV pool the pages move through, the
 * configuration JSON built from the flags, and the store it opens.
 */
#define _GNU_SOURCE
#include "bench.h"

#include "../commands.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the pool and the store ---- */

int bench_create_pool(const struct bench_args *a, struct hc_pool **out)
{
	/* An odd page cannot be split into K and V halves. */
	bool mla = a->mla || a->page_bytes % 2;
	struct hc_kv_geometry geo = {
		.layers = 1,
		.heads = 1,
		.head_dim = (uint32_t)(mla ? a->page_bytes : a->page_bytes / 2),
		.elem_bytes = 1,
		.page_size = 1,
		.pages = bench_slot_per_page(a) ? a->pages : a->batch * a->threads,
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

int bench_open_store(const struct bench_args *a, struct hc_pool *pool, struct hc_store **out)
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
