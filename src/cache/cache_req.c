/*
 * Requests: match, load, alloc, insert, release and abort. The
 * reference count that the owner and a prefetch worker share is in
 * cache_internal.h.
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

/* ---- request lifecycle ---- */

/* Device-lock n instead of the request's current lock node (c->lock held). */
static void cache_req_relock(struct hc_cache *c, struct hc_cache_req *r, struct radix_node *n)
{
	if (n == r->lock_node)
		return;
	if (n && n != radix_root(c->tree))
		radix_lock(c->tree, n);
	else
		n = NULL;
	if (r->lock_node)
		radix_unlock(c->tree, r->lock_node);
	r->lock_node = n;
}

/* write_through_selective: back up device nodes of the match hit twice. */
static void cache_selective(struct hc_cache *c, struct radix_node *n)
{
	struct radix_node_info ni;
	for (; n && n != radix_root(c->tree); n = ni.parent) {
		radix_node_info(n, &ni);
		if (ni.dev && !ni.host && ni.hits >= 2)
			cache_queue_backup(c, n, ni.pages);
		if (c->hybrid && ni.hits >= 2)
			cache_mamba_to_host(c, n);
	}
}

int hc_cache_match(struct hc_cache *c, const uint32_t *tokens, size_t ntokens,
		   struct hc_cache_req **out)
{
	if (!c || !out || (!tokens && ntokens))
		return util_fail(-EINVAL, "hc_cache_match: NULL argument");
	*out = NULL;
	struct hc_cache_req *r = util_fault_calloc(1, sizeof(*r));
	if (!r)
		return util_fail(-ENOMEM, "cache: out of memory");
	r->tokens = util_fault_malloc((ntokens ? ntokens : 1) * sizeof(*tokens));
	if (!r->tokens) {
		free(r);
		return util_fail(-ENOMEM, "cache: out of memory");
	}
	if (ntokens)
		memcpy(r->tokens, tokens, ntokens * sizeof(*tokens));
	r->c = c;
	r->ntokens = ntokens;
	r->npages = ntokens / c->ps;
	r->refs = 1;
	r->start_ns = util_mono_ns();

	struct radix_match m;
	pthread_mutex_lock(&c->lock);
	int rc = radix_match(c->tree, tokens, ntokens, &m);
	if (rc && rc != -ENOMEM) {
		pthread_mutex_unlock(&c->lock);
		cache_req_free(r);
		return rc;
	}
	/* Hybrid: only the prefix up to the Mamba boundary is usable; the
	 * device prefix is cut there too (mamba_node is then on device). */
	size_t usable = c->hybrid ? m.mamba_pages : m.pages;
	struct radix_node *end_node = c->hybrid ? m.mamba_node : m.last_node;
	size_t devp = m.dev_pages < usable ? m.dev_pages : usable;
	cache_req_relock(c, r, m.dev_pages <= usable ? m.dev_node : end_node);
	if (usable) {
		radix_pin_host(c->tree, end_node);
		r->pin_node = end_node;
		if (c->hybrid)
			r->mnode = end_node;
	}
	r->dev_pages = devp;
	r->host_end = usable;
	r->info.dev_tokens = devp * c->ps;
	r->info.host_tokens = (usable - devp) * c->ps;
	c->st.requests++;
	c->st.hit_tokens[0] += r->info.dev_tokens;
	c->st.hit_tokens[1] += r->info.host_tokens;
	if (c->o.write_policy == HC_WRITE_THROUGH_SELECTIVE)
		cache_selective(c, m.dev_node);
	if (c->l3 && (r->npages - usable) * c->ps >= c->o.prefetch_threshold &&
	    r->npages > usable) {
		r->pf = PF_QUERY;
		r->pf_first = usable;
		if (usable) {
			/* Chain from the boundary's last key (m.last_key when not
			 * hybrid): pages past the boundary come again, with a state. */
			struct radix_node_info ni;
			radix_node_info(end_node, &ni);
			r->prior = ni.keys[ni.pages - 1];
			r->has_prior = true;
		}
		r->refs++;
		c->pf_running++;
		c->st.prefetches++;
		if (c->o.no_data) {
			/* Metadata only: the prefetch completes here. */
			cache_pf_query(c, r);
		} else {
			struct hc_cache_req **p = &c->q_query;
			while (*p)
				p = &(*p)->qnext;
			*p = r;
			pthread_cond_signal(&c->wake_query);
		}
	}
	pthread_mutex_unlock(&c->lock);
	*out = r;
	return 0;
}

void hc_cache_req_info(const struct hc_cache_req *r, struct hc_cache_req_info *out)
{
	if (!r || !out)
		return;
	pthread_mutex_lock(&r->c->lock);
	*out = r->info;
	pthread_mutex_unlock(&r->c->lock);
}

bool hc_cache_prefetch_done(struct hc_cache_req *r)
{
	pthread_mutex_lock(&r->c->lock);
	bool done = r->pf == PF_NONE || r->pf == PF_DONE;
	pthread_mutex_unlock(&r->c->lock);
	return done;
}

/* c->lock held. */
static void cache_revoke(struct hc_cache *c, struct hc_cache_req *r)
{
	if ((r->pf == PF_QUERY || r->pf == PF_IO) && !r->revoked) {
		r->revoked = true;
		c->st.prefetch_revoked++;
	}
}

int64_t hc_cache_prefetch_wait(struct hc_cache_req *r, enum hc_cache_stop_policy policy)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_prefetch_wait: NULL request");
	struct hc_cache *c = r->c;
	pthread_mutex_lock(&c->lock);
	if (policy == HC_STOP_WAIT_COMPLETE) {
		while (r->pf == PF_QUERY || r->pf == PF_IO)
			pthread_cond_wait(&c->cond, &c->lock);
	} else if (policy == HC_STOP_TIMEOUT) {
		double secs = cache_timeout_s(&c->o, (r->npages - r->pf_first) * c->ps);
		uint64_t deadline = util_deadline_ns(r->start_ns, secs);
		while ((r->pf == PF_QUERY || r->pf == PF_IO) && util_mono_ns() < deadline) {
			/* The condition uses CLOCK_REALTIME: sleep in short slices. */
			struct timespec rt = util_clock_after(CLOCK_REALTIME, 10000000ull);
			pthread_cond_timedwait(&c->cond, &c->lock, &rt);
		}
	}
	cache_revoke(c, r);
	int64_t got = (int64_t)(r->pf_done * c->ps);
	pthread_mutex_unlock(&c->lock);
	return got;
}

int64_t hc_cache_load(struct hc_cache_req *r)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_load: NULL request");
	struct hc_cache *c = r->c;
	unsigned mark = util_fail_mark(); /* what went wrong below says it best */
	pthread_mutex_lock(&c->lock);
	cache_revoke(c, r);
	if (r->load || r->allocated) {
		pthread_mutex_unlock(&c->lock);
		return util_fail(-EBUSY, "hc_cache_load: already loading or allocated");
	}
	size_t n = r->host_end - r->dev_pages;
	if (n == 0) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	uint64_t *host = util_fault_malloc(n * sizeof(*host));
	uint64_t *dev = util_fault_malloc(n * sizeof(*dev));
	int rc = host && dev ? 0 : -ENOMEM;
	if (!rc && radix_path_slots(r->pin_node, r->dev_pages, RADIX_HOST, host) != (int64_t)n) {
		/* Someone put part of the range on device meanwhile: match again
		 * (the pin keeps every page present) and load what is left. */
		struct radix_match m;
		rc = radix_match(c->tree, r->tokens, r->host_end * c->ps, &m);
		if (!rc) {
			cache_req_relock(c, r, m.dev_node);
			r->dev_pages = m.dev_pages;
			n = r->host_end - r->dev_pages;
			if (n && radix_path_slots(m.last_node, r->dev_pages, RADIX_HOST, host) !=
					 (int64_t)n)
				rc = -EIO;
		}
	}
	if (!rc && n)
		rc = cache_dev_alloc(c, n, dev);
	if (!rc && n) {
		rc = dev_copy_submit(c->dev, HC_COPY_H2D, dev, host, n, &r->load);
		if (rc)
			dev_free(c->dev, n, dev);
	}
	if (rc || n == 0) {
		free(dev);
		dev = NULL;
	}
	if (!rc && n) {
		r->load_dev = dev;
		r->load_pages = n;
		r->load_node = r->pin_node;
		r->info.loaded_tokens = n * c->ps;
		c->st.bytes_h2d += n * c->page_bytes;
	}
	pthread_mutex_unlock(&c->lock);
	free(host);
	if (rc)
		return util_fail_ctx(mark, rc, "hc_cache_load: %zu pages: %s", n, hc_strerror(rc));
	return (int64_t)(n * c->ps);
}

uint32_t hc_cache_layer_ready(const struct hc_cache_req *r)
{
	if (!r)
		return 0;
	if (!r->load)
		return r->c->o.kv.layers;
	return dev_copy_layers_done(r->load);
}

/* Wait for the load and put its pages in the tree (keep) or drop them. */
static int cache_load_finish(struct hc_cache_req *r, bool keep)
{
	struct hc_cache *c = r->c;
	if (!r->load)
		return 0;
	int rc = dev_copy_wait(r->load, UINT32_MAX);
	bool *taken = util_fault_calloc(r->load_pages, sizeof(*taken));
	pthread_mutex_lock(&c->lock);
	/* Without the taken array nothing can be kept: the load fails as
	 * out of memory, not as whatever -1 reads as. */
	int64_t got = taken ? -1 : -ENOMEM;
	if (keep && !rc && taken)
		got = radix_set_slots(c->tree, r->load_node, r->load_pages, RADIX_DEV, r->load_dev,
				      taken);
	for (size_t i = 0; i < r->load_pages; i++)
		if (got < 0 || !taken[i])
			dev_free(c->dev, 1, &r->load_dev[i]);
	if (got >= 0) {
		cache_req_relock(c, r, r->load_node);
		r->dev_pages += r->load_pages;
	}
	pthread_mutex_unlock(&c->lock);
	free(taken);
	dev_copy_free(r->load);
	r->load = NULL;
	free(r->load_dev);
	r->load_dev = NULL;
	if (!rc && keep && got < 0)
		rc = (int)got;
	return rc;
}

int hc_cache_layer_wait(struct hc_cache_req *r, uint32_t layer)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_layer_wait: NULL request");
	if (!r->load)
		return 0;
	if (layer >= r->c->o.kv.layers - 1)
		return cache_load_finish(r, true);
	return dev_copy_wait(r->load, layer);
}

int64_t hc_cache_req_dev_slots(struct hc_cache_req *r, uint64_t *slots, size_t max)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_req_dev_slots: NULL request");
	struct hc_cache *c = r->c;
	int64_t n = (int64_t)r->dev_pages;
	if (n == 0)
		return 0;
	uint64_t *tmp = util_fault_malloc((size_t)n * sizeof(*tmp));
	if (!tmp)
		return util_fail(-ENOMEM, "cache: out of memory");
	pthread_mutex_lock(&c->lock);
	int64_t got = radix_path_slots(r->lock_node, 0, RADIX_DEV, tmp);
	pthread_mutex_unlock(&c->lock);
	if (got > 0 && slots)
		memcpy(slots, tmp, ((size_t)got < max ? (size_t)got : max) * sizeof(*tmp));
	free(tmp);
	return got;
}

int64_t hc_cache_alloc(struct hc_cache_req *r, size_t ntokens, uint64_t *slots, size_t max)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_alloc: NULL request");
	struct hc_cache *c = r->c;
	if (r->allocated)
		return util_fail(-EBUSY, "hc_cache_alloc: called twice");
	unsigned mark = util_fail_mark();
	int rc = cache_load_finish(r, true);
	if (rc)
		return util_fail_ctx(mark, rc, "hc_cache_alloc: load failed: %s", hc_strerror(rc));
	size_t pages = ntokens / c->ps;
	size_t n = pages > r->dev_pages ? pages - r->dev_pages : 0;
	uint64_t *s = util_fault_malloc((n ? n : 1) * sizeof(*s));
	if (!s)
		return util_fail(-ENOMEM, "cache: out of memory");
	mark = util_fail_mark();
	pthread_mutex_lock(&c->lock);
	rc = n ? cache_dev_alloc(c, n, s) : 0;
	if (!rc) {
		r->new_slots = s;
		r->new_first = r->dev_pages;
		r->new_n = n;
		r->allocated = true;
	}
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		free(s);
		return util_fail_ctx(mark, rc, "hc_cache_alloc: %zu device pages: %s", n,
				     hc_strerror(rc));
	}
	if (slots)
		memcpy(slots, s, (n < max ? n : max) * sizeof(*s));
	return (int64_t)n;
}

int64_t hc_cache_insert(struct hc_cache_req *r, const uint32_t *tokens, size_t ntokens)
{
	if (!r || (!tokens && ntokens))
		return util_fail(-EINVAL, "hc_cache_insert: NULL argument");
	struct hc_cache *c = r->c;
	size_t pages = ntokens / c->ps;
	if (!r->allocated || pages != r->new_first + r->new_n)
		return util_fail(-EINVAL, "hc_cache_insert: %zu pages, not as allocated", pages);
	if (r->dev_pages && memcmp(tokens, r->tokens, r->dev_pages * c->ps * sizeof(*tokens)) != 0)
		return util_fail(-EINVAL, "hc_cache_insert: tokens do not extend the match");
	uint64_t *arr = util_fault_malloc((pages ? pages : 1) * sizeof(*arr));
	if (!arr)
		return util_fail(-ENOMEM, "cache: out of memory");
	unsigned mark = util_fail_mark();
	pthread_mutex_lock(&c->lock);
	int64_t rc = 0;
	if (r->new_first)
		rc = radix_path_slots(r->lock_node, 0, RADIX_DEV, arr);
	struct radix_insert res = {0};
	if (rc >= 0) {
		memcpy(arr + r->new_first, r->new_slots, r->new_n * sizeof(*arr));
		rc = radix_insert(c->tree, tokens, ntokens, arr, &res);
	}
	if (rc >= 0) {
		/* Ours among the pages the tree already had on device: free. */
		for (size_t i = r->new_first; i < res.kept; i++)
			dev_free(c->dev, 1, &arr[i]);
		free(r->new_slots);
		r->new_slots = NULL;
		r->new_n = 0;
		if (c->o.write_policy == HC_WRITE_THROUGH && res.new_pages)
			cache_queue_backup(c, res.node, res.new_pages);
		if (c->o.write_policy == HC_WRITE_BACK)
			cache_write_back_ahead(c);
		if (r->has_mstate && res.pages)
			cache_mamba_attach(c, res.node, r->mstate);
		r->has_mstate = false;
		rc = (int64_t)res.new_pages;
	}
	pthread_mutex_unlock(&c->lock);
	free(arr);
	if (rc < 0)
		return util_fail_ctx(mark, (int)rc, "hc_cache_insert: %s", hc_strerror((int)rc));
	return rc;
}

static void cache_req_end(struct hc_cache_req *r, bool keep)
{
	if (!r)
		return;
	struct hc_cache *c = r->c;
	cache_load_finish(r, keep);
	pthread_mutex_lock(&c->lock);
	cache_revoke(c, r);
	if (r->new_n)
		dev_free(c->dev, r->new_n, r->new_slots);
	r->new_n = 0;
	cache_req_relock(c, r, NULL);
	if (r->pin_node)
		radix_unpin_host(c->tree, r->pin_node);
	r->pin_node = NULL;
	bool last = cache_req_put(r);
	pthread_mutex_unlock(&c->lock);
	if (last)
		cache_req_free(r);
}

void hc_cache_release(struct hc_cache_req *r)
{
	cache_req_end(r, true);
}

void hc_cache_abort(struct hc_cache_req *r)
{
	cache_req_end(r, false);
}
