/*
 * L3 access: the store, or the key sets in no_data mode. Called with no
 * lock held.
 */
#define _GNU_SOURCE
#include "cache/cache_internal.h"
#include "cache/device.h"
#include "cache/radix.h"
#include "util/util.h"

#include <hicache/store.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t cache_l3_exists(struct hc_cache *c, const struct hc_key *keys, size_t n)
{
	if (c->keyset) {
		size_t i = 0;
		while (i < n && cache_keyset_has(c->keyset, &keys[i]))
			i++;
		return (int64_t)i;
	}
	return hc_store_exists(c->store, keys, n);
}

/* Hybrid: the usable L3 prefix of keys[0..n): KV pages that exist, cut at
 * the last page with a state (exists_v2, trailing_pages with N = 1). */
int64_t cache_l3_exists_mamba(struct hc_cache *c, const struct hc_key *keys, size_t n)
{
	if (c->mkeyset) {
		int64_t kv = cache_l3_exists(c, keys, n);
		while (kv > 0 && !cache_keyset_has(c->mkeyset, &keys[kv - 1]))
			kv--;
		return kv;
	}
	struct hc_pool_transfer t = {.pool = "mamba",
				     .keys = keys,
				     .n = 1,
				     .policy = HC_HIT_TRAILING_PAGES};
	uint64_t kv, hits;
	return hc_store_exists_v2(c->store, keys, n, &t, 1, &kv, &hits);
}

/* Hybrid: read the state stored under key into host state slot. */
int cache_l3_get_mamba(struct hc_cache *c, const struct hc_key *key, uint64_t slot)
{
	if (c->mkeyset)
		return cache_keyset_has(c->mkeyset, key) ? 0 : -ENOENT;
	struct hc_pool_transfer t = {.pool = "mamba", .keys = key, .n = 1, .pages = &slot};
	int rc = hc_store_get_v2(c->store, &t, 1);
	return rc < 0 ? rc : rc == 1 ? 0 : -ENOENT;
}

int64_t cache_l3_get(struct hc_cache *c, const struct hc_key *keys, size_t n, const uint64_t *host)
{
	if (c->keyset)
		return cache_l3_exists(c, keys, n);
	return hc_store_get(c->store, keys, n, host, NULL);
}

int cache_l3_set(struct hc_cache *c, const struct hc_key *keys, size_t n, const uint64_t *host)
{
	if (c->keyset) {
		for (size_t i = 0; i < n; i++) {
			int rc = cache_keyset_add(c->keyset, &keys[i]);
			if (rc)
				return rc;
		}
		return 0;
	}
	return hc_store_set(c->store, keys, n, host, NULL);
}
