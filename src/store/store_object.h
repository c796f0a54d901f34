/* Object images: trailer, iovecs, build before a put, checks after a get. (store_object.c) */
#ifndef HC_SRC_STORE_STORE_OBJECT_H
#define HC_SRC_STORE_STORE_OBJECT_H

#include "store/store_types.h"

/* Zero padding of zero-copy images (never written to). */
extern uint8_t store_zero_block[FORMAT_BLOCK_MAX];
/* Where an entry's page is for this chunk: its zero-copy segments and its
 * bounce slot, right after the previous entry's (*slot_off). */
uint8_t *store_entry_page(const struct entry *e, struct work *w, size_t *slot_off,
			  struct hc_segment *segs);
/* Object k (object o of page e) of a chunk: its job and its iovecs. */
void store_obj_job_init(struct hc_store *st, struct work *w, const struct entry *e, unsigned o,
			size_t k, uint8_t *slot, const struct hc_segment *segs, uint8_t *pad);
/* The object's trailer and, in bounce mode, its gathered page (or
 * segment) and pad. */
void store_build_image(const struct obj_job *j);
/* Check an object read whole (a bounce page that passes goes to the pool). */
void store_get_check(struct obj_job *j);
/* store_obj.arrived of a get. */
void store_get_arrived(void *arg);

#endif
