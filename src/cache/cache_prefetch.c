/*
 * Prefetch: the query thread (hash the tail, ask L3, reserve host slots)
 * and the I/O thread (read from L3, insert into the host tier).
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

static void cache_pf_finish(struct hc_cache *c, struct hc_cache_req *r)
{
	r->pf = PF_DONE;
	c->pf_running--;
	pthread_cond_broadcast(&c->cond);
}

/* Host pages a prefetch of want pages can reserve now (c->lock held):
 * at most half the host pool over all prefetches in flight, evicting
 * host pages to make room; 0 when that is under the threshold. */
static size_t cache_pf_fit(struct hc_cache *c, size_t want)
{
	uint64_t cap = c->host_pages / 2 > c->reserved ? c->host_pages / 2 - c->reserved : 0;
	size_t h = want < cap ? want : (size_t)cap;
	if (h * c->ps < c->o.prefetch_threshold)
		return 0;
	uint64_t avail = cache_host_room(c, h);
	if (avail < h)
		h = (size_t)avail;
	return h * c->ps < c->o.prefetch_threshold ? 0 : h;
}

static void cache_pf_io(struct hc_cache *c, struct hc_cache_req *r);

/* The query step of r's prefetch (c->lock held; dropped while hashing and
 * asking the store): reserve host slots for the L3 prefix and hand r to
 * the I/O step, or finish the prefetch. */
void cache_pf_query(struct hc_cache *c, struct hc_cache_req *r)
{
	bool revoked = r->revoked;
	pthread_mutex_unlock(&c->lock);

	size_t tail = r->npages - r->pf_first;
	int64_t hits = 0;
	r->pf_keys = revoked ? NULL : util_fault_malloc(tail * sizeof(*r->pf_keys));
	if (r->pf_keys &&
	    hc_key_chain(r->has_prior ? &r->prior : NULL, r->tokens + r->pf_first * c->ps,
			 tail * c->ps, c->ps, r->pf_keys, tail) == (int64_t)tail) {
		if (c->hybrid) {
			hits = cache_l3_exists_mamba(c, r->pf_keys, tail);
			if (hits < 0)
				hits = 0;
			tail = 0; /* the loop below is for KV only */
		}
		for (size_t off = 0; off < tail; off += CTL_BATCH) {
			size_t n = tail - off < CTL_BATCH ? tail - off : CTL_BATCH;
			int64_t e = cache_l3_exists(c, r->pf_keys + off, n);
			if (e > 0)
				hits += e;
			if (e < (int64_t)n)
				break;
		}
	}

	pthread_mutex_lock(&c->lock);
	size_t h = r->revoked ? 0 : cache_pf_fit(c, (size_t)hits);
	if (c->hybrid && h && h < (size_t)hits) {
		/* A shorter prefetch must also end at a page with a state:
		 * ask again within what fits. */
		pthread_mutex_unlock(&c->lock);
		hits = cache_l3_exists_mamba(c, r->pf_keys, h);
		pthread_mutex_lock(&c->lock);
		h = r->revoked || hits <= 0 ? 0 : cache_pf_fit(c, (size_t)hits);
		if (h < (size_t)hits)
			h = 0;
	}
	if (h) {
		r->pf_slots = util_fault_malloc(h * sizeof(*r->pf_slots));
		if (!r->pf_slots || hc_slots_alloc(c->host_slots, h, r->pf_slots))
			h = 0;
		if (h && c->hybrid) {
			if (cache_mhost_alloc(c, &r->pf_mslot)) {
				hc_slots_free(c->host_slots, h, r->pf_slots);
				h = 0;
			} else {
				r->pf_mamba = true;
			}
		}
	}
	if (h) {
		r->pf_pages = h;
		c->reserved += h;
		r->info.l3_pending = h * c->ps;
		r->pf = PF_IO;
		if (c->o.no_data) {
			cache_pf_io(c, r);
			return;
		}
		r->qnext = NULL;
		struct hc_cache_req **p = &c->q_io;
		while (*p)
			p = &(*p)->qnext;
		*p = r;
		pthread_cond_signal(&c->wake_io);
	} else {
		cache_pf_finish(c, r);
		if (cache_req_put(r))
			cache_req_free(r);
	}
}

void *cache_query_thread(void *arg)
{
	struct hc_cache *c = arg;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->q_query && !c->stop)
			pthread_cond_wait(&c->wake_query, &c->lock);
		struct hc_cache_req *r = c->q_query;
		if (!r)
			break;
		c->q_query = r->qnext;
		cache_pf_query(c, r);
	}
	c->query_done = true;
	pthread_cond_signal(&c->wake_io);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Insert pages [pf_first + off, + g) as host pages (c->lock held). */
static bool cache_pf_insert(struct hc_cache *c, struct hc_cache_req *r, size_t off, size_t g)
{
	size_t end = r->pf_first + off + g;
	uint64_t *arr = util_fault_malloc(end * sizeof(*arr));
	struct radix_insert res;
	if (!arr) {
		cache_host_free(c, g, r->pf_slots + off);
		return false;
	}
	for (size_t i = 0; i < end; i++)
		arr[i] = i < r->pf_first + off ? RADIX_NO_SLOT : r->pf_slots[i - r->pf_first];
	int rc = radix_insert_host(c->tree, r->tokens, end * c->ps, arr, r->pf_keys, r->pf_first,
				   &res);
	/* Hybrid: the pages only become usable with the state at their end,
	 * after the last chunk; until then pf_pin keeps the chunks alive. */
	bool fin = !c->hybrid || off + g == r->pf_pages;
	if (rc) {
		cache_host_free(c, g, r->pf_slots + off);
	} else if (!fin) {
		for (size_t i = r->pf_first + off; i < res.kept && i < end; i++)
			cache_host_free(c, 1, &arr[i]);
		radix_pin_host(c->tree, res.node);
		if (r->pf_pin)
			radix_unpin_host(c->tree, r->pf_pin);
		r->pf_pin = res.node;
		c->st.pages_l3_read += g;
		c->st.bytes_l3_read += g * c->page_bytes;
	} else {
		/* Pages someone else brought in meanwhile stay ours to free. */
		for (size_t i = r->pf_first + off; i < res.kept && i < end; i++)
			cache_host_free(c, 1, &arr[i]);
		if (c->hybrid) {
			int mrc = radix_mamba_set(c->tree, res.node, RADIX_HOST, r->pf_mslot);
			if (!mrc) {
				r->pf_mamba = false;
				c->st.mamba_l3_read++;
			} else if (mrc != -EEXIST) {
				free(arr);
				return false; /* no state: the pages stay, unused */
			}
			r->mnode = res.node;
			g = off + g; /* the whole prefetch became usable now */
		}
		if (res.node != r->pin_node) {
			radix_pin_host(c->tree, res.node);
			if (r->pin_node)
				radix_unpin_host(c->tree, r->pin_node);
			r->pin_node = res.node;
		}
		r->host_end = end;
		r->pf_done = end - r->pf_first;
		r->info.l3_tokens = r->pf_done * c->ps;
		c->st.hit_tokens[2] += g * c->ps;
		size_t rd = c->hybrid ? end - r->pf_first - off : g;
		c->st.pages_l3_read += rd;
		c->st.bytes_l3_read += rd * c->page_bytes;
	}
	free(arr);
	return rc == 0;
}

/* The I/O step of r's prefetch (c->lock held; dropped while reading):
 * read the reserved pages, insert them as host pages, release what was
 * not used, finish. */
static void cache_pf_io(struct hc_cache *c, struct hc_cache_req *r)
{
	size_t off = 0;
	if (r->pf_mamba && !r->revoked) {
		/* The state first: without it the KV pages are of no use. */
		pthread_mutex_unlock(&c->lock);
		int mrc = cache_l3_get_mamba(c, &r->pf_keys[r->pf_pages - 1], r->pf_mslot);
		pthread_mutex_lock(&c->lock);
		if (mrc)
			goto release; /* off = 0: every reserved KV slot goes back */
	}
	while (off < r->pf_pages && !r->revoked) {
		size_t n = r->pf_pages - off < CTL_BATCH ? r->pf_pages - off : CTL_BATCH;
		pthread_mutex_unlock(&c->lock);
		int64_t g = cache_l3_get(c, r->pf_keys + off, n, r->pf_slots + off);
		pthread_mutex_lock(&c->lock);
		if (g <= 0 || r->revoked)
			break;
		bool ok = cache_pf_insert(c, r, off, (size_t)g);
		off += (size_t)g; /* inserted, or freed on failure */
		if (!ok || (size_t)g < n)
			break;
	}
release:
	/* Release the whole reservation, once: unused slots go back. */
	if (r->pf_pin) {
		radix_unpin_host(c->tree, r->pf_pin);
		r->pf_pin = NULL;
	}
	if (r->pf_mamba) {
		cache_mhost_free(c, r->pf_mslot);
		r->pf_mamba = false;
	}
	if (r->pf_pages > off)
		cache_host_free(c, r->pf_pages - off, r->pf_slots + off);
	c->reserved -= r->pf_pages;
	r->info.l3_pending = 0;
	cache_pf_finish(c, r);
	if (cache_req_put(r))
		cache_req_free(r);
}

void *cache_io_thread(void *arg)
{
	struct hc_cache *c = arg;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		/* Stop only once the query thread can feed nothing more. */
		while (!c->q_io && !(c->stop && c->query_done))
			pthread_cond_wait(&c->wake_io, &c->lock);
		struct hc_cache_req *r = c->q_io;
		if (!r)
			break;
		c->q_io = r->qnext;
		cache_pf_io(c, r);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}
