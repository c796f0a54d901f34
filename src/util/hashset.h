/*
 * An open-addressing set of fixed-size elements (copied in), linear
 * probing, grown to stay at most half full. Not locked: callers that share
 * one hold their own lock. Used by the cache's no_data L3 (cache/keyset.c)
 * and the store's overlapping-set check (store/store_stream.c).
 */
#ifndef HC_SRC_UTIL_HASHSET_H
#define HC_SRC_UTIL_HASHSET_H

#include <stdbool.h>
#include <stddef.h>

struct hashset {
	unsigned char *slots; /* cap elements of elem bytes */
	bool *used;
	size_t cap, n, elem;
	size_t (*hash)(const void *e);
	bool (*eq)(const void *a, const void *b);
};

/* An empty set with room for cap elements (a power of two) of elem bytes.
 * Returns 0 or -ENOMEM (*s then needs no hashset_free). */
int hashset_init(struct hashset *s, size_t elem, size_t cap, size_t (*hash)(const void *e),
		 bool (*eq)(const void *a, const void *b));
void hashset_free(struct hashset *s);
/* Add a copy of *e unless an equal element is there. 0 or -ENOMEM (the
 * set unchanged). */
int hashset_add(struct hashset *s, const void *e);
bool hashset_has(const struct hashset *s, const void *e);

#endif
