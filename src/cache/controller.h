/*
 * cache/controller — private pieces of the hierarchy controller shared
 * with its tests: the no_data L3 key set and the timeout stop policy's wait.
 */
#ifndef HC_SRC_CACHE_CONTROLLER_H
#define HC_SRC_CACHE_CONTROLLER_H

#include <hicache/cache.h>
#include <hicache/key.h>

/* Chunk of one store call (the reference's STORAGE_BATCH_SIZE). */
#define CTL_BATCH 128

/* Keys "stored" in no_data mode: an open-addressing set, thread-safe. */
struct cache_keyset;
int cache_keyset_create(struct cache_keyset **out);
void cache_keyset_destroy(struct cache_keyset *s);
int cache_keyset_add(struct cache_keyset *s, const struct hc_key *k);
bool cache_keyset_has(struct cache_keyset *s, const struct hc_key *k);

/* HC_STOP_TIMEOUT: seconds from the match for a prefetch of `tokens`. */
double cache_timeout_s(const struct hc_cache_opts *o, size_t tokens);

#endif
