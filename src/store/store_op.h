/* A call's op: planned, freed, and what it returns once over. (store_op.c) */
#ifndef HC_SRC_STORE_STORE_OP_H
#define HC_SRC_STORE_STORE_OP_H

#include "store/store_types.h"

/* Plan transfers t[0..nt) into a new op (its pools held until it is
 * over); 0 or a whole-call error (named). Lookups and deletes may have
 * NULL pages. */
int store_op_plan(struct hc_store *st, struct hc_pool_transfer *t, size_t nt, enum transfer_op dir,
		  bool v1, const struct iovec *bufs, struct hc_store_op **out, const char *what);
void store_op_free(struct hc_store_op *o);
/* What a finished op returns (as its synchronous call would). */
int64_t store_op_outcome(const struct hc_store_op *o);

#endif
