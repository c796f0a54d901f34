/*
 * Statistics: counters per store and per pool, batch latency histograms.
 */
#define _GNU_SOURCE
#include "store/store_stats.h"
#include "util/util.h"

#include <hicache/store.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

void store_log_bad(struct store_bad_log *l, const char *what, const char *kind, size_t n,
		   const char *name)
{
	atomic_fetch_add_explicit(&l->unreported, n, memory_order_relaxed);
	if (!util_log_enabled(HC_LOG_WARN))
		return;
	uint64_t now = util_mono_ns(), lines;
	if (!util_log_limit_pass(&l->limit, now, &lines))
		return;
	uint64_t total = atomic_exchange_explicit(&l->unreported, 0, memory_order_relaxed);
	log_warn("store: %s: %llu objects %s, treated as misses, since the last such line "
		 "(at most one per %d s); one of them: %s",
		 what, (unsigned long long)total, kind, HC_LOG_INTERVAL_S, name);
}

void stat_add(struct store_ctx *c, struct hc_store *st, size_t field, uint64_t v)
{
	if (!v)
		return;
	atomic_fetch_add_explicit(&c->stats.v[field], v, memory_order_relaxed);
	atomic_fetch_add_explicit(&st->stats.v[field], v, memory_order_relaxed);
}

uint64_t now_us(void)
{
	return util_mono_ns() / 1000u;
}

static unsigned lat_bucket(uint64_t us)
{
	unsigned b = us ? 63u - (unsigned)__builtin_clzll(us) : 0;
	return b < HC_STORE_LAT_BUCKETS ? b : HC_STORE_LAT_BUCKETS - 1;
}

static void stat_batch_acc(struct stats_acc *acc, size_t count_field, size_t hist_field,
			   unsigned bucket)
{
	atomic_fetch_add_explicit(&acc->v[count_field], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&acc->v[hist_field + bucket], 1, memory_order_relaxed);
}

/* One batch for the store and for each pool it touched (a pool's latency
 * is that of the calls that moved its pages). */
void stat_batch(struct hc_store *st, struct store_ctx *const *ctxs, size_t nctx, size_t count_field,
		size_t hist_field, uint64_t t0)
{
	unsigned bucket = lat_bucket(now_us() - t0);
	stat_batch_acc(&st->stats, count_field, hist_field, bucket);
	for (size_t i = 0; i < nctx; i++) {
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = ctxs[j] == ctxs[i];
		if (ctxs[i] && !seen)
			stat_batch_acc(&ctxs[i]->stats, count_field, hist_field, bucket);
	}
}

int hc_store_stats(const struct hc_store *st, const char *pool, struct hc_store_stats *out)
{
	if (!st || !out)
		return util_fail(-EINVAL, "hc_store_stats: NULL argument");
	const struct stats_acc *acc = &st->stats;
	/* A pool's counters live in its context, which the registry lock
	 * keeps alive while they are read. */
	pthread_mutex_t *lock = (pthread_mutex_t *)(uintptr_t)&st->reg_lock;
	if (pool) {
		pthread_mutex_lock(lock);
		acc = NULL;
		for (size_t i = 0; i < st->nctx; i++)
			if (!strcmp(st->ctx[i]->name, pool))
				acc = &st->ctx[i]->stats;
		if (!acc) {
			pthread_mutex_unlock(lock);
			return util_fail(-ENOENT, "store: no pool '%s' is registered", pool);
		}
	}
	uint64_t *dst = (uint64_t *)out;
	for (size_t i = 0; i < NSTATS; i++)
		dst[i] = atomic_load_explicit(&acc->v[i], memory_order_relaxed);
	if (pool)
		pthread_mutex_unlock(lock);
	return 0;
}

double hc_store_latency_quantile(const uint64_t hist[HC_STORE_LAT_BUCKETS], double q)
{
	uint64_t total = 0;
	for (int i = 0; i < HC_STORE_LAT_BUCKETS; i++)
		total += hist[i];
	if (!total)
		return 0;
	double want = q * (double)total, seen = 0;
	for (int i = 0; i < HC_STORE_LAT_BUCKETS; i++) {
		if (seen + (double)hist[i] >= want && hist[i]) {
			/* Interpolate inside [2^i, 2^(i+1)). */
			double lo = (double)(1ull << i), frac = (want - seen) / (double)hist[i];
			return lo + frac * lo;
		}
		seen += (double)hist[i];
	}
	return (double)(1ull << (HC_STORE_LAT_BUCKETS - 1));
}

void stat_call(struct hc_store *st, struct store_ctx *const *ctxs, size_t nctx, enum transfer_op op,
	       uint64_t t0)
{
	if (op == OP_SET)
		stat_batch(st, ctxs, nctx, STAT(set_batches), STAT(set_latency_us), t0);
	else
		stat_batch(st, ctxs, nctx, STAT(get_batches), STAT(get_latency_us), t0);
}
