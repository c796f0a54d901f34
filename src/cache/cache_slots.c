/*
 * Host and device KV slots (c->lock held): allocation that makes room by
 * eviction, and frees deferred while an L3 set still reads a slot.
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

void cache_host_free(struct hc_cache *c, size_t n, const uint64_t *slots)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t s = slots[i];
		if (s == RADIX_NO_SLOT)
			continue;
		if (c->host_busy[s]) {
			/* An L3 set still reads it. */
			c->host_deferred_n += !c->host_deferred[s];
			c->host_deferred[s] = true;
		} else if (hc_slots_free(c->host_slots, 1, &s))
			log_error("cache: host slot %llu freed twice", (unsigned long long)s);
	}
}

void cache_free_slots(void *arg, enum radix_tier tier, const uint64_t *slots, size_t n)
{
	struct hc_cache *c = arg;
	if (tier == RADIX_DEV) {
		c->st.evicted_dev_pages += n;
		if (dev_free(c->dev, n, slots))
			log_error("cache: device slots freed twice");
	} else {
		c->st.evicted_host_pages += n;
		cache_host_free(c, n, slots);
	}
}

/* Evict host pages until n slots are free or nothing more can go; pages
 * an L3 set still reads give their slots back only when the set ends, so
 * one round of eviction may not be enough. Returns the free slots. */
uint64_t cache_host_room(struct hc_cache *c, size_t n)
{
	uint64_t avail;
	while ((avail = hc_slots_available(c->host_slots)) < n)
		if (radix_evict_host(c->tree, n - avail, &c->ops) <= 0)
			break;
	return avail;
}

int cache_host_alloc(struct hc_cache *c, size_t n, uint64_t *out)
{
	cache_host_room(c, n);
	return hc_slots_alloc(c->host_slots, n, out);
}

/* Host room for a device->host backup (backup thread, c->lock held). When
 * the only slots to be had are ones an L3 set still reads, wait for the
 * sets: otherwise device copies outrun a slow store and the pages they
 * back up are dropped. */
int cache_host_alloc_backup(struct hc_cache *c, size_t n, uint64_t *out)
{
	int rc;
	while ((rc = cache_host_alloc(c, n, out)) == -ENOSPC && c->host_deferred_n > 0)
		pthread_cond_wait(&c->cond, &c->lock);
	return rc;
}

/* c->lock held; dropped while waiting for backups (callers hold pins and
 * locks on what they need, nothing else). */
int cache_dev_alloc(struct hc_cache *c, size_t n, uint64_t *out)
{
	for (;;) {
		uint64_t avail = dev_available(c->dev);
		if (avail < n)
			radix_evict_device(c->tree, n - avail, &c->ops);
		int rc = dev_alloc(c->dev, n, out);
		/* Pages whose host copy is still in flight are locked until it
		 * is acknowledged: once it is they can go. */
		if (rc == -ENOSPC && (c->npend == 0 || c->stop))
			/* Expected under load (the engine retries): rate-limited,
			 * and what the callers' hc_last_error keeps. */
			return fail_limited(
				HC_LOG_INFO, rc,
				"cache: %zu device pages asked, %llu free after eviction "
				"(the others are held by requests)",
				n, (unsigned long long)dev_available(c->dev));
		if (rc != -ENOSPC || c->npend == 0 || c->stop)
			return rc;
		pthread_cond_wait(&c->cond, &c->lock);
	}
}
