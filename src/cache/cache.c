/*
 * cache/controller — the hierarchy controller: one radix tree over L1/L2,
 * one mutex for it, and three background threads.
 *
 *   match --(tail >= threshold)--> query thread: hash tail, exists (chunks)
 *                                      | hits >= threshold: reserve host slots
 *                                      v
 *                                  I/O thread: get (chunks) -> insert_host
 *   insert --(write policy)------> backup thread: device -> host copy
 *                                      |
 *                                      v
 *                                  L3 thread: host -> L3 set
 *   load ------------------------> copy thread (device.c): host -> device,
 *                                      per-layer counters
 *
 * Ownership rules that keep the accounting exact:
 *   - a prefetch's reservation (host slots + ctl->reserved) belongs to the
 *     worker holding the request; only the I/O thread (or the query thread
 *     when it never reached I/O) releases it, once, whatever stopped it:
 *     completion, a stop policy's revoke, or an abort;
 *   - a device->host backup holds a device lock on its node until the
 *     copy is acknowledged (radix_set_slots), so the node cannot go away;
 *     device copies have their own thread so that they never queue behind
 *     slow L3 writes, and a device allocation that finds only such locked
 *     pages waits for the backups instead of failing;
 *   - a host->L3 set holds no tree reference: it keeps the page keys and
 *     marks its host slots busy; if the tree frees a busy slot meanwhile,
 *     freeing is deferred until the set ends (never a reused slot's bytes
 *     under an old key);
 *   - a request is reference-counted (owner + prefetch worker) and freed
 *     by whoever drops the last reference.
 *
 * Hybrid (Mamba) models (opts.mamba_bytes > 0): each node may hold a
 * recurrent state per tier. A match is cut at the deepest node holding a
 * state (the Mamba boundary): KV past it is useless without the state.
 * Device states are slots of c->mdev_mem; host states are slots of an
 * HC_POOL_MAMBA pool with their own LRU (radix_evict_mamba_host). A host
 * state is backed up to L3 (pool "mamba") under the key of its node's last
 * page; a prefetch asks exists_v2 with trailing_pages N = 1, so the usable
 * L3 prefix ends at a page that has a state, and reads that one state
 * before the KV pages. Host state slots an L3 set still reads are freed
 * late, as KV host slots are.
 *
 * Caveats: backed-up state is not recorded in the tree (host eviction may
 * drop pages whether or not they reached L3; they are found again through
 * exists). In hybrid mode a prefetch that cannot reserve the whole L3
 * prefix asks the store again within what fits, so that the shorter one
 * still ends at a page with a state.
 */
#define _GNU_SOURCE
#include "cache/cache_internal.h"
#include "cache/device.h"
#include "cache/radix.h"
#include "util/opts.h"
#include "util/thread.h"
#include "util/util.h"

#include <hicache/store.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- open / close ---- */

void hc_cache_opts_init(struct hc_cache_opts *o, size_t size)
{
	static const struct hc_cache_opts d = {
		.struct_size = sizeof(struct hc_cache_opts),
		.page_size = 16,
		.kv = {.layers = 1,
		       .heads = 1,
		       .head_dim = 64,
		       .elem_bytes = 2,
		       .layout = HC_LAYOUT_PAGE_FIRST},
		.write_policy = HC_WRITE_THROUGH,
		.prefetch_threshold = 256,
		.prefetch_timeout_base_s = 2.0,
		.prefetch_timeout_per_ki_token_s = 0.1,
		.prefetch_timeout_max_s = 30.0,
	};
	util_opts_init(o, size, &d, sizeof(d));
}

double cache_timeout_s(const struct hc_cache_opts *o, size_t tokens)
{
	double s = o->prefetch_timeout_base_s +
		   o->prefetch_timeout_per_ki_token_s * (double)tokens / 1024.0;
	return s < o->prefetch_timeout_max_s ? s : o->prefetch_timeout_max_s;
}

static void cache_stop_threads(struct hc_cache *c)
{
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_broadcast(&c->cond);
	pthread_cond_signal(&c->wake_d2h);
	pthread_cond_signal(&c->wake_l3);
	pthread_cond_signal(&c->wake_query);
	pthread_cond_signal(&c->wake_io);
	pthread_mutex_unlock(&c->lock);
	/* Each thread drains its queue before it exits; queries feed I/O,
	 * and both may queue nothing for the backup thread, so join in order. */
	if (c->nthreads > 1) {
		pthread_join(c->th_query, NULL);
	} else {
		pthread_mutex_lock(&c->lock);
		c->query_done = true;
		pthread_mutex_unlock(&c->lock);
	}
	if (c->nthreads > 2)
		pthread_join(c->th_io, NULL);
	if (c->nthreads > 0)
		pthread_join(c->th_backup, NULL);
	pthread_mutex_lock(&c->lock);
	c->d2h_done = true;
	pthread_cond_signal(&c->wake_l3);
	pthread_mutex_unlock(&c->lock);
	if (c->nthreads > 3)
		pthread_join(c->th_l3, NULL);
	c->nthreads = 0;
}

void hc_cache_close(struct hc_cache *c)
{
	if (!c)
		return;
	cache_stop_threads(c);
	/* No thread transfers any more: the store forgets the pools before
	 * they are destroyed, and may get another cache. */
	if (c->reg_kv)
		hc_store_unregister_pool(c->o.store, "kv");
	if (c->reg_mamba)
		hc_store_unregister_pool(c->o.store, "mamba");
	radix_destroy(c->tree);
	dev_destroy(c->dev);
	hc_slots_destroy(c->own_slots);
	hc_pool_destroy(c->host_pool);
	cache_keyset_destroy(c->keyset);
	hc_slots_destroy(c->mdev_slots);
	free(c->mdev_mem);
	hc_slots_destroy(c->own_mhost_slots);
	hc_pool_destroy(c->mhost_pool);
	free(c->mhost_busy);
	free(c->mhost_deferred);
	cache_keyset_destroy(c->mkeyset);
	free(c->host_busy);
	free(c->host_deferred);
	free(c->pend);
	pthread_cond_destroy(&c->cond);
	pthread_cond_destroy(&c->wake_d2h);
	pthread_cond_destroy(&c->wake_l3);
	pthread_cond_destroy(&c->wake_query);
	pthread_cond_destroy(&c->wake_io);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* What hc_cache_open checks of the loaded options, each with a message. */
static int cache_opts_check(const struct hc_cache_opts *o)
{
	if (o->page_size == 0)
		return util_fail(-EINVAL, "cache: page_size must be > 0");
	if ((unsigned)o->write_policy > HC_WRITE_BACK)
		return util_fail(-EINVAL, "cache: unknown write_policy %d", (int)o->write_policy);
	if (o->device_tokens / o->page_size == 0 || o->host_tokens / o->page_size == 0)
		return util_fail(-EINVAL, "cache: device_tokens and host_tokens must hold a page");
	if (o->kv.layers == 0)
		return util_fail(-EINVAL, "cache: kv.layers must be > 0");
	/* Written so that NaN fails too. */
	if (!(o->prefetch_timeout_base_s >= 0 && o->prefetch_timeout_per_ki_token_s >= 0 &&
	      o->prefetch_timeout_max_s >= 0 && o->prefetch_timeout_max_s <= 86400))
		return util_fail(-EINVAL, "cache: prefetch_timeout_* must be in 0..86400 seconds");
	return 0;
}

/* The cache struct with its lock, conditions and tree callbacks; NULL when
 * out of memory. hc_cache_close() takes it from here on. */
static struct hc_cache *cache_new(const struct hc_cache_opts *o, uint64_t host_pages)
{
	struct hc_cache *c = util_fault_calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	pthread_cond_init(&c->wake_d2h, NULL);
	pthread_cond_init(&c->wake_l3, NULL);
	pthread_cond_init(&c->wake_query, NULL);
	pthread_cond_init(&c->wake_io, NULL);
	c->o = *o;
	c->ps = o->page_size;
	c->host_pages = host_pages;
	c->ops = (struct radix_evict_ops){.arg = c,
					  .free_slots = cache_free_slots,
					  .free_mamba = cache_free_mamba,
					  .write_back = cache_write_back};
	return c;
}

/* The host tier: its slots (own ones in no_data mode, else a KV pool's),
 * their busy marks, and L3 (a key set, or the store the pool registers
 * with). */
static int cache_open_host(struct hc_cache *c)
{
	const struct hc_cache_opts *o = &c->o;
	uint64_t host_pages = c->host_pages;
	int rc;
	c->host_busy = util_fault_calloc(host_pages, sizeof(*c->host_busy));
	c->host_deferred = util_fault_calloc(host_pages, sizeof(*c->host_deferred));
	if (!c->host_busy || !c->host_deferred)
		return util_fail(-ENOMEM, "cache: out of memory");
	if (o->no_data) {
		if ((rc = hc_slots_create(host_pages, &c->own_slots)))
			return rc;
		c->host_slots = c->own_slots;
		if (o->store) {
			if ((rc = cache_keyset_create(&c->keyset)))
				return util_fail(rc, "cache: no memory for the key set");
			c->l3 = true;
		}
		return 0;
	}
	struct hc_kv_geometry g = o->kv;
	g.page_size = o->page_size;
	g.pages = host_pages;
	if ((rc = hc_pool_create_kv(&g, NULL, &c->host_pool)))
		return rc;
	c->host_slots = hc_pool_slots(c->host_pool);
	c->page_bytes = hc_pool_page_bytes(c->host_pool);
	if (o->store) {
		rc = hc_store_register_pool(o->store, "kv", c->host_pool, true);
		if (rc)
			return rc;
		c->reg_kv = true;
		c->store = o->store;
		c->l3 = true;
	}
	return 0;
}

/* The device tier and the radix tree that indexes both tiers. */
static int cache_open_index(struct hc_cache *c, uint64_t dev_pages)
{
	const struct hc_cache_opts *o = &c->o;
	struct dev_opts dopts = {.pages = dev_pages,
				 .layers = o->kv.layers,
				 .host = c->host_pool,
				 .ops = o->copy_ops,
				 .arg = o->copy_arg,
				 .no_data = o->no_data};
	int rc = dev_create(&dopts, &c->dev);
	if (rc)
		return rc;
	static const enum radix_write_policy wp[] = {RADIX_WRITE_THROUGH,
						     RADIX_WRITE_THROUGH_SELECTIVE,
						     RADIX_WRITE_BACK};
	struct radix_opts ro = {.page_size = o->page_size, .write_policy = wp[o->write_policy]};
	return radix_create(&ro, &c->tree);
}

/* The four background threads, in the order cache_stop_threads() counts
 * on; c->nthreads counts those started. */
static int cache_start_threads(struct hc_cache *c)
{
	void *(*const mains[])(void *) = {cache_backup_thread, cache_query_thread, cache_io_thread,
					  cache_l3_thread};
	pthread_t *const ths[] = {&c->th_backup, &c->th_query, &c->th_io, &c->th_l3};
	for (unsigned i = 0; i < 4; i++) {
		int rc = util_thread_start(ths[i], mains[i], c);
		if (rc)
			return rc;
		c->nthreads = i + 1;
	}
	return 0;
}

int hc_cache_open(const struct hc_cache_opts *opts, struct hc_cache **out)
{
	if (!out)
		return util_fail(-EINVAL, "hc_cache_open: out is NULL");
	*out = NULL;
	if (!opts)
		return util_fail(-EINVAL, "hc_cache_open: opts is NULL");
	/* A caller built against an older header passes a shorter struct:
	 * its missing fields keep their defaults. */
	struct hc_cache_opts loaded;
	hc_cache_opts_init(&loaded, sizeof(loaded));
	int rc = util_opts_load(&loaded, sizeof(loaded), opts, "hc_cache_open: opts");
	if (!rc)
		rc = cache_opts_check(&loaded);
	if (rc)
		return rc;
	uint64_t dev_pages = loaded.device_tokens / loaded.page_size;
	uint64_t host_pages = loaded.host_tokens / loaded.page_size;
	struct hc_cache *c = cache_new(&loaded, host_pages);
	if (!c)
		return util_fail(-ENOMEM, "cache: out of memory");
	unsigned mark = util_fail_mark();
	rc = cache_open_host(c);
	if (!rc && loaded.mamba_bytes)
		rc = cache_open_mamba(c, dev_pages, host_pages);
	if (!rc)
		rc = cache_open_index(c, dev_pages);
	if (rc)
		goto err;
	rc = cache_start_threads(c);
	if (rc) {
		util_fail_ctx(mark, rc, "cache: cannot start a background thread: %s",
			      hc_strerror(rc));
		goto err;
	}
	*out = c;
	return 0;
err:
	hc_cache_close(c);
	return rc;
}

struct hc_pool *hc_cache_host_pool(struct hc_cache *c)
{
	return c ? c->host_pool : NULL;
}

size_t hc_cache_page_bytes(const struct hc_cache *c)
{
	return c ? c->page_bytes : 0;
}

int hc_cache_dev_write(struct hc_cache *c, uint64_t slot, const void *src, size_t len)
{
	if (!c || !src)
		return util_fail(-EINVAL, "hc_cache_dev_write: NULL argument");
	return dev_page_write(c->dev, slot, src, len);
}

int hc_cache_dev_read(struct hc_cache *c, uint64_t slot, void *dst, size_t len)
{
	if (!c || !dst)
		return util_fail(-EINVAL, "hc_cache_dev_read: NULL argument");
	return dev_page_read(c->dev, slot, dst, len);
}

/* ---- background work, eviction, statistics ---- */

int hc_cache_flush(struct hc_cache *c)
{
	if (!c)
		return util_fail(-EINVAL, "hc_cache_flush: NULL cache");
	pthread_mutex_lock(&c->lock);
	while (c->q_d2h.head || c->q_l3.head || c->backups_running || c->pf_running)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int64_t hc_cache_evict_device(struct hc_cache *c, size_t ntokens)
{
	if (!c)
		return util_fail(-EINVAL, "hc_cache_evict_device: NULL cache");
	pthread_mutex_lock(&c->lock);
	int64_t n = radix_evict_device(c->tree, (ntokens + c->ps - 1) / c->ps, &c->ops);
	pthread_mutex_unlock(&c->lock);
	return n < 0 ? n : n * c->ps;
}

int64_t hc_cache_evict_host(struct hc_cache *c, size_t ntokens)
{
	if (!c)
		return util_fail(-EINVAL, "hc_cache_evict_host: NULL cache");
	pthread_mutex_lock(&c->lock);
	int64_t n = radix_evict_host(c->tree, (ntokens + c->ps - 1) / c->ps, &c->ops);
	pthread_mutex_unlock(&c->lock);
	return n < 0 ? n : n * c->ps;
}

int hc_cache_stats(struct hc_cache *c, struct hc_cache_stats *out, size_t size)
{
	if (!c || !out)
		return util_fail(-EINVAL, "hc_cache_stats: NULL argument");
	struct hc_cache_stats st;
	pthread_mutex_lock(&c->lock);
	st = c->st;
	st.reserved_pages = c->reserved;
	st.dev_pages_used = dev_pages(c->dev) - dev_available(c->dev);
	st.host_pages_used = c->host_pages - hc_slots_available(c->host_slots);
	if (c->hybrid) {
		st.mamba_dev_used = hc_slots_count(c->mdev_slots) -
				    hc_slots_available(c->mdev_slots);
		st.mamba_host_used = c->mhost_n - hc_slots_available(c->mhost_slots);
	}
	pthread_mutex_unlock(&c->lock);
	memset(out, 0, size);
	memcpy(out, &st, size < sizeof(st) ? size : sizeof(st));
	return 0;
}
