/* Started ops that finish on their own: the end of an op, completion queues. (store_cq.c) */
#ifndef HC_SRC_STORE_STORE_CQ_H
#define HC_SRC_STORE_STORE_CQ_H

#include "store/store_types.h"

/* A started op is over: marked done, its waiter woken, or its completion
 * queue told. Takes async_lock. */
void store_op_done(struct hc_store *st, struct hc_store_op *o);

#endif
