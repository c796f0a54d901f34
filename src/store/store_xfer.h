/* Plans and chunks: set/get chunk build and finish, the set-lookup policy. (store_xfer.c) */
#ifndef HC_SRC_STORE_STORE_XFER_H
#define HC_SRC_STORE_STORE_XFER_H

#include "store/store_types.h"

/* Flatten transfers t[0..nt) into entries, checking every page and name
 * first; 0 or -errno (named). */
int store_plan(struct hc_pool_transfer *t, size_t nt, struct store_ctx *const *ctxs, bool v1,
	       const struct iovec *bufs, struct entry **out, size_t *nout, struct hc_key **hexkeys,
	       const char *what);
/* A get's entries e[0..n) (planned from t[0..nt)) must name each
 * destination page once; 0 or -EINVAL naming the page (nothing read). */
int store_plan_check_dests(const struct hc_pool_transfer *t, size_t nt, bool v1,
			   const struct entry *e, size_t n, const char *what);
int store_set_chunk_build(struct hc_store *st, struct work *w, struct entry *e, size_t from,
			  size_t to, size_t bounce_bytes);
void store_set_chunk_finish(struct hc_store *st, struct work *w, struct entry *e);
int store_get_chunk_build(struct hc_store *st, struct work *w, struct entry *e, size_t from,
			  size_t to, size_t bounce_bytes);
void store_get_chunk_finish(struct hc_store *st, struct work *w, struct entry *e);
/* MLA: entries of ranks that skip writes report success and go; returns
 * how many are left. */
size_t store_drop_skipped_writes(struct entry *e, size_t n);

#endif
