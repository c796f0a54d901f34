/*
 * Exists: v1 (the anchor's leading run), v2 (the min rule over pools with
 * hit policies) and the exists query (v2 plus the restorable prefix end
 * points), all one code path: exists_run().
 *
 *   kv        = leading run of the anchor's pages
 *   per transfer t, over pages [0, kv):
 *     all_pages       boundary_t = leading run of t's pool;
 *                     p is an end point of t iff p <= boundary_t
 *     trailing_pages  N = max(1, t.n); p is an end point of t iff pages
 *                     [max(0, p - N), p) of t's pool exist (consecutive >=
 *                     min(N, p)); hits_t = the greatest such p
 *   result    = min(kv, hits_t ...)  (a pool not registered gives 0; the
 *               transfers after one whose result is 0 are not asked)
 *   endpoints = the p in 1..kv that are end points of every transfer
 *
 * Trailing pools may have holes, so the greatest end point can be below
 * the min rule's result, and two trailing pools can have none in common.
 */
#define _GNU_SOURCE
#include "store/names.h"
#include "store/registry.h"
#include "store/store_stats.h"
#include "store/store_work.h"
#include "util/opts.h"
#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The pages of an exists call: keys, or names in their place. */
struct page_ids {
	const struct hc_key *keys;
	const char *const *names;
};

/* Which of pages [0, n) of ctx exist (all their objects, right size).
 * With stop_at_miss, stops at the first missing page. Returns the leading
 * run of existing pages, or -errno; hit[i] is filled for pages looked at. */
static int64_t exists_pages(struct hc_store *st, struct store_ctx *c, const struct page_ids *ids,
			    size_t n, bool stop_at_miss, bool *hit)
{
	struct work *w = work_get(st);
	if (!w)
		return util_fail(-ENOMEM, "store: no memory for exists");
	size_t per_chunk = CHUNK_OBJS / c->nobj;
	int64_t lead = 0;
	bool in_lead = true;
	for (size_t from = 0; from < n; from += per_chunk) {
		size_t to = from + per_chunk < n ? from + per_chunk : n;
		size_t k = 0;
		for (size_t i = from; i < to; i++) {
			for (unsigned o = 0; o < c->nobj; o++, k++) {
				int rc = store_object_name(c, ids->keys ? &ids->keys[i] : NULL,
							   ids->keys ? NULL : ids->names[i], o,
							   w->item[k].name);
				if (rc) {
					work_put(st, w);
					return rc;
				}
				w->objs[k] = (struct store_obj){
					.name = w->item[k].name,
					.route = hc_key_route_hash(w->item[k].name),
					.len = c->obj[o].len,
					.result = -ENOENT,
				};
			}
		}
		st->ops->exists(st->be, w->objs, k, stop_at_miss);
		size_t wrong = 0;
		const char *first_wrong = NULL;
		for (size_t o = 0; o < k; o++)
			if (w->objs[o].result == -EBADMSG && !wrong++)
				first_wrong = w->objs[o].name;
		if (wrong)
			store_log_bad(&st->bad_exists, "exists",
				      "of the wrong size (corrupt or of another geometry)", wrong,
				      first_wrong);
		bool miss = false;
		for (size_t i = from, o = 0; i < to; i++) {
			bool all = true;
			for (unsigned j = 0; j < c->nobj; j++, o++)
				all = all && w->objs[o].result == 0;
			if (hit)
				hit[i] = all;
			stat_add(c, st, all ? STAT(hits) : STAT(misses), 1);
			if (all && in_lead)
				lead++;
			if (!all) {
				in_lead = false;
				miss = true;
				if (stop_at_miss)
					break;
			}
		}
		if (miss && stop_at_miss)
			break;
	}
	work_put(st, w);
	return lead;
}

/* Transfer c's hits by its policy over pages [0, kv), and (ok, when not
 * NULL) which end points p (ok[p - 1]) it allows: cleared where it does
 * not. hit is scratch of kv entries. */
static int64_t pool_hits(struct hc_store *st, struct store_ctx *c, const struct page_ids *ids,
			 size_t kv, const struct hc_pool_transfer *t, bool *hit, bool *ok)
{
	if (t->policy == HC_HIT_ALL_PAGES) {
		int64_t b = exists_pages(st, c, ids, kv, true, NULL);
		for (size_t p = b > 0 ? (size_t)b + 1 : 1; ok && b >= 0 && p <= kv; p++)
			ok[p - 1] = false;
		return b;
	}
	size_t want = t->n ? t->n : 1;
	int64_t rc = exists_pages(st, c, ids, kv, false, hit);
	if (rc < 0)
		return rc;
	int64_t hits = 0;
	size_t run = 0; /* existing pages ending at p - 1 */
	for (size_t p = 1; p <= kv; p++) {
		run = hit[p - 1] ? run + 1 : 0;
		bool end = run >= (want < p ? want : p);
		if (end)
			hits = (int64_t)p;
		else if (ok)
			ok[p - 1] = false;
	}
	return hits;
}

/* Check every name against the anchor and the transfers' pools. */
static int names_check(struct store_ctx *anchor, struct store_ctx *const *ctxs, size_t nt,
		       const char *const *names, size_t n, const char *what)
{
	for (size_t j = 0; j < n; j++) {
		int rc = store_name_check(anchor, names[j], SIZE_MAX, j, what);
		for (size_t i = 0; !rc && i < nt; i++)
			if (ctxs[i])
				rc = store_name_check(ctxs[i], names[j], i, j, what);
		if (rc)
			return rc;
	}
	return 0;
}

/* The exists query with its pools held; q's arguments checked. */
static int64_t exists_held(struct hc_store *st, struct store_ctx *anchor, struct store_ctx **ctxs,
			   struct hc_exists_query *q, const struct page_ids *ids, const char *what)
{
	if (ids->names) {
		int rc = names_check(anchor, ctxs, q->nt, ids->names, q->n, what);
		if (rc)
			return rc;
	}
	int64_t kv = exists_pages(st, anchor, ids, q->n, true, NULL);
	if (kv < 0)
		return kv;
	q->kv_hit_pages = (uint64_t)kv;
	for (size_t i = 0; i < q->nt; i++)
		q->pool_hits[i] = 0;
	bool *hit = NULL, *ok = NULL;
	if (kv && (!(hit = util_fault_malloc((size_t)kv * sizeof(*hit))) ||
		   (q->endpoints && !(ok = util_fault_malloc((size_t)kv * sizeof(*ok)))))) {
		free(hit);
		return util_fail(-ENOMEM, "%s: no memory", what);
	}
	for (size_t p = 0; ok && p < (size_t)kv; p++)
		ok[p] = true;
	int64_t result = kv;
	for (size_t i = 0; i < q->nt && result > 0; i++) {
		if (!ctxs[i]) {
			result = 0; /* an unregistered pool gives 0, and stops the rest */
			break;
		}
		int64_t hits = pool_hits(st, ctxs[i], ids, (size_t)kv, &q->transfers[i], hit, ok);
		if (hits < 0) {
			result = hits;
			break;
		}
		q->pool_hits[i] = (uint64_t)hits;
		if (hits < result)
			result = hits;
	}
	q->nendpoints = 0;
	for (size_t p = 1; result > 0 && ok && p <= (size_t)kv; p++)
		if (ok[p - 1] && q->nendpoints < q->endpoints_max)
			q->endpoints[q->nendpoints++] = p;
	free(hit);
	free(ok);
	return result;
}

static int64_t exists_run(struct hc_store *st, struct hc_exists_query *q, const char *what)
{
	if (!st || !q || (q->n && !q->keys && !q->names) ||
	    (q->nt && (!q->transfers || !q->pool_hits)))
		return util_fail(-EINVAL, "%s: NULL argument", what);
	struct page_ids ids = {q->keys, q->keys ? NULL : q->names};
	struct store_ctx *anchor, *held[STORE_MAX_POOLS], *one[1];
	size_t nheld, nanchor;
	int64_t rc = store_hold(st, NULL, 1, true, false, &anchor, one, &nanchor, what);
	if (rc)
		return rc;
	struct store_ctx **ctxs = util_fault_malloc((q->nt ? q->nt : 1) * sizeof(*ctxs));
	if (!ctxs) {
		store_release(st, one, nanchor);
		return util_fail(-ENOMEM, "%s: no memory", what);
	}
	uint64_t t0 = now_us();
	rc = store_hold(st, q->transfers, q->nt, false, true, ctxs, held, &nheld, what);
	if (!rc) {
		rc = exists_held(st, anchor, ctxs, q, &ids, what);
		struct store_ctx *touched[STORE_MAX_POOLS + 1] = {anchor};
		memcpy(touched + 1, held, nheld * sizeof(*held));
		stat_batch(st, touched, nheld + 1, STAT(exists_batches), STAT(exists_latency_us),
			   t0);
		store_release(st, held, nheld);
	}
	store_release(st, one, nanchor);
	free(ctxs);
	return rc;
}

void hc_exists_query_init(struct hc_exists_query *q, size_t size)
{
	if (!q)
		return;
	static const struct hc_exists_query d = {.struct_size = sizeof(d)};
	util_opts_init(q, size, &d, sizeof(d));
}

int64_t hc_store_exists_query(struct hc_store *st, struct hc_exists_query *q)
{
	if (!q)
		return exists_run(st, q, "hc_store_exists_query");
	/* An older caller's query: its fields over the defaults, the results
	 * written back as far as its struct reaches. */
	struct hc_exists_query mine;
	hc_exists_query_init(&mine, sizeof(mine));
	int rc = util_opts_load(&mine, sizeof(mine), q, "hc_store_exists_query: query");
	if (rc)
		return rc;
	int64_t n = exists_run(st, &mine, "hc_store_exists_query");
	util_opts_store(q, &mine, sizeof(mine));
	return n;
}

int64_t hc_store_exists(struct hc_store *st, const struct hc_key *keys, size_t n)
{
	struct hc_exists_query q = {.struct_size = sizeof(q), .keys = keys, .n = n};
	return exists_run(st, &q, "hc_store_exists");
}

int64_t hc_store_exists_named(struct hc_store *st, const char *const *names, size_t n)
{
	struct hc_exists_query q = {.struct_size = sizeof(q), .names = names, .n = n};
	return exists_run(st, &q, "hc_store_exists_named");
}

int64_t hc_store_exists_v2(struct hc_store *st, const struct hc_key *keys, size_t n,
			   const struct hc_pool_transfer *t, size_t nt, uint64_t *kv_hit_pages,
			   uint64_t *pool_hits)
{
	struct hc_exists_query q = {.struct_size = sizeof(q),
				    .keys = keys,
				    .n = n,
				    .transfers = t,
				    .nt = nt,
				    .pool_hits = pool_hits};
	int64_t r = exists_run(st, &q, "hc_store_exists_v2");
	if (r >= 0 && kv_hit_pages)
		*kv_hit_pages = q.kv_hit_pages;
	return r;
}
