/*
 * Hybrid (Mamba) models: state slots per tier, a node's host state and
 * its L3 backup, the state pools at open, and the request's state calls.
 * See cache.c for the rules.
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

void cache_mhost_free(struct hc_cache *c, uint64_t s)
{
	if (c->mhost_busy[s])
		c->mhost_deferred[s] = true; /* an L3 set still reads it */
	else if (hc_slots_free(c->mhost_slots, 1, &s))
		log_error("cache: host Mamba slot %llu freed twice", (unsigned long long)s);
}

void cache_free_mamba(void *arg, enum radix_tier tier, uint64_t slot)
{
	struct hc_cache *c = arg;
	if (tier == RADIX_DEV) {
		if (hc_slots_free(c->mdev_slots, 1, &slot))
			log_error("cache: device Mamba slot freed twice");
	} else {
		cache_mhost_free(c, slot);
	}
}

/* One host state slot; the host state LRU makes room. */
int cache_mhost_alloc(struct hc_cache *c, uint64_t *out)
{
	/* A state an L3 set still reads frees its slot only when the set
	 * ends: evict the next one rather than lose the new state. */
	while (hc_slots_available(c->mhost_slots) == 0)
		if (radix_evict_mamba_host(c->tree, 1, &c->ops) <= 0)
			break;
	return hc_slots_alloc(c->mhost_slots, 1, out);
}

/* One device state slot: device states leave with their device pages. */
static int cache_mdev_alloc(struct hc_cache *c, uint64_t *out)
{
	while (hc_slots_available(c->mdev_slots) == 0)
		if (radix_evict_device(c->tree, 1, &c->ops) <= 0)
			break;
	return hc_slots_alloc(c->mdev_slots, 1, out);
}

static void cache_mhost_put(struct hc_cache *c, uint64_t slot, const void *src)
{
	if (c->mhost_pool && src)
		hc_pool_scatter(c->mhost_pool, slot, src, c->mbytes);
}

/* A new host state for node from src (NULL: no bytes), backed up to L3.
 * Returns the slot or RADIX_NO_SLOT (no room). */
uint64_t cache_mamba_host_new(struct hc_cache *c, const struct radix_node *node, const void *src)
{
	uint64_t slot;
	if (cache_mhost_alloc(c, &slot))
		return RADIX_NO_SLOT;
	cache_mhost_put(c, slot, src);
	struct radix_node_info ni;
	radix_node_info(node, &ni);
	cache_queue_l3_mamba(c, &ni.keys[ni.pages - 1], slot);
	return slot;
}

/* RADIX_WRITE_BACK, the tree's callback: the tree evicts an unbacked device
 * node. Its pages go to host and L3 (cache_write_back_pages), and then,
 * for a hybrid model, its state: only once the pages made it, since the
 * tree drops the state of a failed write-back without telling us. Here,
 * above cache_backup.c, because it is the one place that needs both. */
int cache_write_back(void *arg, const struct radix_node *node, uint64_t *host_out,
		     uint64_t *mamba_host)
{
	struct hc_cache *c = arg;
	int rc = cache_write_back_pages(c, node, host_out);
	if (rc || !mamba_host || !c->hybrid)
		return rc;
	struct radix_node_info ni;
	radix_node_info(node, &ni);
	const void *src = c->mdev_mem ? c->mdev_mem + ni.mamba[RADIX_DEV] * c->mbytes : NULL;
	*mamba_host = cache_mamba_host_new(c, node, src);
	return 0;
}

/* Host copy of node's device state (write_through at insert, selective once
 * hot): the state's L2 copy is what survives device eviction. */
void cache_mamba_to_host(struct hc_cache *c, struct radix_node *node)
{
	struct radix_node_info ni;
	radix_node_info(node, &ni);
	if (ni.mamba[RADIX_DEV] == RADIX_NO_SLOT || ni.mamba[RADIX_HOST] != RADIX_NO_SLOT)
		return;
	const void *src = c->mdev_mem ? c->mdev_mem + ni.mamba[RADIX_DEV] * c->mbytes : NULL;
	uint64_t slot = cache_mamba_host_new(c, node, src);
	if (slot != RADIX_NO_SLOT && radix_mamba_set(c->tree, node, RADIX_HOST, slot))
		cache_mhost_free(c, slot);
}

/* Hybrid: device and host state pools; the host one registered as "mamba". */
int cache_open_mamba(struct hc_cache *c, uint64_t dev_pages, uint64_t host_pages)
{
	const struct hc_cache_opts *o = &c->o;
	uint64_t nd = o->mamba_dev_states ? o->mamba_dev_states : dev_pages;
	uint64_t nh = o->mamba_host_states ? o->mamba_host_states : host_pages;
	int rc;
	c->hybrid = true;
	c->mbytes = o->mamba_bytes;
	c->mhost_n = nh;
	c->mhost_busy = util_fault_calloc(nh, sizeof(*c->mhost_busy));
	c->mhost_deferred = util_fault_calloc(nh, sizeof(*c->mhost_deferred));
	if (!c->mhost_busy || !c->mhost_deferred)
		return util_fail(-ENOMEM, "cache: out of memory");
	if ((rc = hc_slots_create(nd, &c->mdev_slots)))
		return rc;
	if (o->no_data) {
		if ((rc = hc_slots_create(nh, &c->own_mhost_slots)))
			return rc;
		c->mhost_slots = c->own_mhost_slots;
		if (o->store && (rc = cache_keyset_create(&c->mkeyset)))
			return util_fail(rc, "cache: no memory for the Mamba key set");
		return 0;
	}
	if (nd > SIZE_MAX / c->mbytes || !(c->mdev_mem = util_fault_malloc(nd * c->mbytes)))
		return util_fail(-ENOMEM, "cache: %llu device Mamba states: out of memory",
				 (unsigned long long)nd);
	struct hc_mamba_geometry g = {.slots = nh, .layers = 1, .temporal_bytes = c->mbytes};
	if ((rc = hc_pool_create_mamba(&g, NULL, &c->mhost_pool)))
		return rc;
	c->mhost_slots = hc_pool_slots(c->mhost_pool);
	if (o->store && (rc = hc_store_register_pool(o->store, "mamba", c->mhost_pool, false)))
		return util_fail(rc, "cache: cannot register the Mamba pool: %s", hc_last_error());
	c->reg_mamba = o->store != NULL;
	return 0;
}

/* Hybrid: give node (just inserted, on device) the request's state: a
 * device state, and for write_through (or when the device has no room) a
 * host one backed up to L3. The lock keeps node on device meanwhile. */
void cache_mamba_attach(struct hc_cache *c, struct radix_node *node, const uint8_t *src)
{
	struct radix_node_info ni;
	uint64_t slot;
	radix_lock(c->tree, node);
	radix_node_info(node, &ni);
	bool dev = ni.mamba[RADIX_DEV] != RADIX_NO_SLOT;
	if (!dev && !cache_mdev_alloc(c, &slot)) {
		if (c->mdev_mem && src)
			memcpy(c->mdev_mem + slot * c->mbytes, src, c->mbytes);
		if (radix_mamba_set(c->tree, node, RADIX_DEV, slot))
			hc_slots_free(c->mdev_slots, 1, &slot);
		else
			dev = true;
	}
	if (dev && c->o.write_policy == HC_WRITE_THROUGH) {
		cache_mamba_to_host(c, node);
	} else if (!dev) {
		radix_node_info(node, &ni);
		if (ni.mamba[RADIX_HOST] == RADIX_NO_SLOT) {
			slot = cache_mamba_host_new(c, node, src);
			if (slot != RADIX_NO_SLOT &&
			    radix_mamba_set(c->tree, node, RADIX_HOST, slot))
				cache_mhost_free(c, slot);
		}
	}
	radix_unlock(c->tree, node);
}

int hc_cache_mamba_write(struct hc_cache_req *r, const void *state, size_t len)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_mamba_write: NULL request");
	struct hc_cache *c = r->c;
	if (!c->hybrid)
		return util_fail(-EOPNOTSUPP, "hc_cache_mamba_write: not a hybrid cache");
	if (!c->o.no_data && (!state || len != c->mbytes))
		return util_fail(-EINVAL, "hc_cache_mamba_write: %zu bytes, want %zu", len,
				 c->mbytes);
	if (!r->mstate && !(r->mstate = util_fault_malloc(c->mbytes)))
		return util_fail(-ENOMEM, "cache: out of memory");
	if (state && len == c->mbytes)
		memcpy(r->mstate, state, c->mbytes);
	else
		memset(r->mstate, 0, c->mbytes);
	r->has_mstate = true;
	return 0;
}

int hc_cache_mamba_read(struct hc_cache_req *r, void *dst, size_t len)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_mamba_read: NULL request");
	struct hc_cache *c = r->c;
	if (!c->hybrid)
		return util_fail(-EOPNOTSUPP, "hc_cache_mamba_read: not a hybrid cache");
	if (!c->o.no_data && (!dst || len != c->mbytes))
		return util_fail(-EINVAL, "hc_cache_mamba_read: %zu bytes, want %zu", len,
				 c->mbytes);
	int rc = 0;
	unsigned mark = util_fail_mark();
	pthread_mutex_lock(&c->lock);
	struct radix_node_info ni = {.mamba = {RADIX_NO_SLOT, RADIX_NO_SLOT}};
	if (r->mnode)
		radix_node_info(r->mnode, &ni);
	if (!r->mnode)
		rc = -ENOENT;
	else if (c->o.no_data)
		rc = 0;
	else if (ni.mamba[RADIX_DEV] != RADIX_NO_SLOT)
		memcpy(dst, c->mdev_mem + ni.mamba[RADIX_DEV] * c->mbytes, c->mbytes);
	else if (ni.mamba[RADIX_HOST] != RADIX_NO_SLOT)
		rc = hc_pool_gather(c->mhost_pool, ni.mamba[RADIX_HOST], dst, c->mbytes);
	else
		rc = -ENOENT; /* cannot happen: the pin / lock keeps it */
	pthread_mutex_unlock(&c->lock);
	/* -ENOENT is an answer (nothing usable), not a failure: no message. */
	if (rc && rc != -ENOENT)
		return util_fail_ctx(mark, rc, "hc_cache_mamba_read: %s", hc_strerror(rc));
	return rc;
}
