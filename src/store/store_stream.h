/* Streams over the backend and the store's thread. (store_stream.c) */
#ifndef HC_SRC_STORE_STORE_STREAM_H
#define HC_SRC_STORE_STORE_STREAM_H

#include "store/store_types.h"

/* Op o's entries are all over: counted, its pools released, its waiter
 * woken. */
void store_op_over(struct stream *s, struct hc_store_op *o);
/* Moves the stream's ops (one direction) until it has none left. */
void store_stream_run(struct stream *s);
/* The store's thread: runs the queued ops. */
void *store_async_main(void *arg);

#endif
