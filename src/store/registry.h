/* Pool registration and the pools a call holds. (registry.c) */
#ifndef HC_SRC_STORE_REGISTRY_H
#define HC_SRC_STORE_REGISTRY_H

#include "store/store_types.h"

/* The pools of transfers t[0..nt) (anchor: t[i].pool is ignored and every
 * transfer means the anchor, as v1 calls), looked up under one lock:
 * ctxs[i] gets transfer i's, held[0..*nheld) the distinct ones, each
 * holding a reference. A pool that is not registered fails the call with
 * -EINVAL naming it (nothing held), unless missing_ok: then ctxs[i] is
 * NULL. */
int store_hold(struct hc_store *st, const struct hc_pool_transfer *t, size_t nt, bool anchor,
	       bool missing_ok, struct store_ctx **ctxs, struct store_ctx **held, size_t *nheld,
	       const char *what);
/* Give back references taken by store_hold (n may be 0). */
void store_release(struct hc_store *st, struct store_ctx *const *held, size_t n);
/* Free every context (hc_store_close). */
void store_registry_free(struct hc_store *st);

#endif
