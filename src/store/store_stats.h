/* Counters, latency histograms and the rate-limited log of damaged objects. (store_stats.c) */
#ifndef HC_SRC_STORE_STORE_STATS_H
#define HC_SRC_STORE_STORE_STATS_H

#include "store/store_types.h"

/* n damaged objects found by what ("get", "exists"), name one of them:
 * logged at most once per HC_LOG_INTERVAL_S, with the count since the last
 * line. */
void store_log_bad(struct store_bad_log *l, const char *what, const char *kind, size_t n,
		   const char *name);
void stat_add(struct store_ctx *c, struct hc_store *st, size_t field, uint64_t v);
uint64_t now_us(void);
/* One batch for the store and for each distinct pool of ctxs (NULLs skipped). */
void stat_batch(struct hc_store *st, struct store_ctx *const *ctxs, size_t nctx, size_t count_field,
		size_t hist_field, uint64_t t0);
/* The batch count and latency of a call that touched pools ctxs. */
void stat_call(struct hc_store *st, struct store_ctx *const *ctxs, size_t nctx, enum transfer_op op,
	       uint64_t t0);

#endif
