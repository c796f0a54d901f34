/*
 * hicache bench store: the run's summary (per direction: pages, bytes,
 * the busiest thread's seconds, batch latency quantiles, outcomes) and
 * how it is printed, as text or as one JSON object; why a run failed, on
 * stderr.
 */
#define _GNU_SOURCE
#include "bench.h"

#include "../commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int bench_summarize(const struct bench *b, struct summary *s)
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

/* --huge-pages values, for --json. */
static const char *const huge_names[] = {
	[HC_HUGE_OFF] = "off",
	[HC_HUGE_PREFER] = "prefer",
	[HC_HUGE_REQUIRED] = "required",
	[HC_HUGE_THP] = "thp",
};

static void print_part_human(const char *name, const struct part *p)
{
	printf("  %-10s %llu pages, %llu bytes in %.6f s: %.3f GB/s, %.0f pages/s\n", name,
	       (unsigned long long)p->pages, (unsigned long long)p->bytes, p->seconds, p->gbps,
	       p->pages_per_s);
	printf("  %-10s p50 %.3f ms, p99 %.3f ms (%llu batches)\n", "", p->p50_ms, p->p99_ms,
	       (unsigned long long)p->batches);
}

void bench_print_human(const struct bench_args *a, const struct env_info *e,
		       const struct summary *s)
{
	const struct part *p = &s->all;
	const struct tally *t = &p->t;

	printf("bench store: op %s, backend %s, engine %s, direct %s, zero-copy %s, layout %s\n",
	       bench_op_names[a->op], a->backend, e->engine, on_off(e->direct),
	       on_off(e->zero_copy), hc_kv_layout_name(a->layout));
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
				     "a fresh --dir or --seed)"
				   : "");
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
							"read into all its slots, untimed)"
						      : "not warmed up");
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

void bench_print_json(const struct bench_args *a, const struct env_info *e, const struct summary *s)
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
	       "\"pipeline\": %llu, \"slots\": \"%s\"",
	       bench_op_names[a->op], a->backend, e->engine, e->direct ? "true" : "false",
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
	       (unsigned long long)a->pipeline, a->distinct_slots ? "distinct" : "reuse");
	if (a->op == OP_MIXED) {
		print_part_json("set", &s->set);
		print_part_json("get", &s->get);
	}
	printf("}\n");
}

/* ---- why a run failed ---- */

static void say_count(uint64_t n, const char *one, const char *many, const char **sep)
{
	if (!n)
		return;
	fprintf(stderr, "%s%llu %s", *sep, (unsigned long long)n, n == 1 ? one : many);
	*sep = ", ";
}

/* Where a get looked, for the hint when it found nothing. */
static void say_where(const struct bench_args *a)
{
	if (strcmp(a->backend, "file")) {
		fprintf(stderr, "in the %s store", a->backend);
		return;
	}
	fprintf(stderr, "under %s", a->dirs[0]);
	for (size_t i = 1; i < a->ndirs; i++)
		fprintf(stderr, ", %s", a->dirs[i]);
}

/* One direction's failed pages by cause; a get that found none of its
 * pages most likely read a store that no set with these options filled. */
static void say_part_failed(const struct bench_args *a, enum bench_op dir, const struct part *p)
{
	const struct tally *t = &p->t;
	const char *sep = " ";

	if (!p->failed)
		return;
	fprintf(stderr, "hicache bench: %llu of %llu %ss failed:", (unsigned long long)p->failed,
		(unsigned long long)p->pages, bench_op_names[dir]);
	say_count(t->misses, "miss", "misses", &sep);
	say_count(t->corrupt, "corrupt", "corrupt", &sep);
	say_count(t->errors, "error", "errors", &sep);
	say_count(t->mismatched, "mismatched (not the bytes a set of that page writes)",
		  "mismatched (not the bytes a set of those pages writes)", &sep);
	if (dir == OP_GET && t->misses == p->pages) {
		fprintf(stderr, " (nothing stored ");
		say_where(a);
		fprintf(stderr, " for --seed %llu? run --op set first, with the same options)",
			(unsigned long long)a->seed);
	}
	fputc('\n', stderr);
}

void bench_say_failed(const struct bench_args *a, const struct summary *s)
{
	if (a->op == OP_MIXED) {
		say_part_failed(a, OP_SET, &s->set);
		say_part_failed(a, OP_GET, &s->get);
	} else if (a->op == OP_SET || a->op == OP_GET) {
		say_part_failed(a, a->op, &s->all);
	}
}
