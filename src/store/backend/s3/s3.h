/* The S3 backend's object calls (s3.c): open and close a backend, and move
 * batches of objects. Above s3_http.h; s3_list.c and s3_ops.c build on
 * these. */
#ifndef HC_SRC_STORE_BACKEND_S3_H
#define HC_SRC_STORE_BACKEND_S3_H

#include "store/backend/s3/s3_http.h"

int s3_open(const struct hc_config *cfg, void **out);
void s3_close(void *p);
int s3_put(void *p, struct store_obj *objs, size_t n);
int s3_get(void *p, struct store_obj *objs, size_t n);
int64_t s3_exists(void *p, struct store_obj *objs, size_t n, bool stop_at_miss);
/* Healing (the store's ops->remove): deletes only an invalid copy. */
int s3_remove(void *p, struct store_obj *objs, size_t n);
/* Plain DELETE of every object (gc, clear). */
int s3_delete(void *p, struct store_obj *objs, size_t n);

#endif
