/* Lookups and deletes of pages, on the store's second thread. (store_meta.c) */
#ifndef HC_SRC_STORE_STORE_META_H
#define HC_SRC_STORE_STORE_META_H

#include "store/store_types.h"

/* Run a planned lookup or delete on this thread. */
void store_meta_run(struct hc_store *st, struct hc_store_op *o);
/* Queue a planned lookup or delete for the store's lookup thread. */
int store_meta_queue(struct hc_store *st, struct hc_store_op *o, const char *what);
/* Stop the lookup thread (hc_store_close; the queue is empty by then). */
void store_meta_stop(struct hc_store *st);

#endif
