/* Work areas (a chunk's scratch) and the bounce slots reserved at registration. (store_work.c) */
#ifndef HC_SRC_STORE_STORE_WORK_H
#define HC_SRC_STORE_STORE_WORK_H

#include "store/store_types.h"

struct work *work_get(struct hc_store *st);
void work_put(struct hc_store *st, struct work *w);
void work_free(struct work *w);
/* Room for bytes of bounce slots in w; 0 or -errno (named). */
int work_bounce(struct hc_store *st, struct work *w, size_t bytes);
/* Bounce slots of three chunks of c's pages in the store's first works. */
int bounce_reserve(struct hc_store *st, struct store_ctx *c);
/* How many entries from `from` fit one chunk (objects and bounce bytes). */
size_t store_chunk_end(const struct entry *e, size_t from, size_t n, size_t *bounce_bytes);

#endif
