/*
 * The no_data L3 stand-in: keys "stored" when the cache runs without a
 * store, an open-addressing set (util/hashset.h) behind one mutex.
 */
#define _GNU_SOURCE
#include "cache/cache_internal.h"
#include "cache/device.h"
#include "cache/radix.h"
#include "util/hashset.h"
#include "util/util.h"

#include <hicache/store.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct cache_keyset {
	pthread_mutex_t lock;
	struct hashset keys;
};

static size_t key_hash(const void *e)
{
	uint64_t h;
	memcpy(&h, ((const struct hc_key *)e)->bytes,
	       sizeof(h)); /* SHA-256 bytes: already uniform */
	return (size_t)h;
}

static bool key_eq(const void *a, const void *b)
{
	return !memcmp(a, b, sizeof(struct hc_key));
}

int cache_keyset_create(struct cache_keyset **out)
{
	struct cache_keyset *s = util_fault_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (hashset_init(&s->keys, sizeof(struct hc_key), 1024, key_hash, key_eq)) {
		free(s);
		return -ENOMEM;
	}
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

void cache_keyset_destroy(struct cache_keyset *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	hashset_free(&s->keys);
	free(s);
}

int cache_keyset_add(struct cache_keyset *s, const struct hc_key *k)
{
	pthread_mutex_lock(&s->lock);
	int rc = hashset_add(&s->keys, k);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

bool cache_keyset_has(struct cache_keyset *s, const struct hc_key *k)
{
	pthread_mutex_lock(&s->lock);
	bool has = hashset_has(&s->keys, k);
	pthread_mutex_unlock(&s->lock);
	return has;
}
