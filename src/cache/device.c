/*
 * cache/device — device slots, the copy thread and the built-in
 * host-memory copy engine.
 *
 *   submitter --dev_copy_submit--> queue --copy thread--> ops->copy_layer(l)
 *        ^                                      |  per layer: layers_done++,
 *        `----- dev_copy_wait(ev, l) <----------'  broadcast
 *
 * The built-in engine keeps "device" memory in a layer_first KV pool in
 * host memory, so a page of one layer is one run per half there; the host
 * pool may use any layout, hence the per-(token, head) addressing of
 * pool_kv_addr (pool/pool_api.h: page_first splits a page of one layer
 * into one run per token, page_head into one run per token and head).
 *
 * A copy that fails at layer l reports the error for l and every later
 * layer; the copy thread still completes it, so waiters never hang.
 */
#define _GNU_SOURCE
#include "cache/device.h"
#include "pool/pool_api.h"
#include "util/thread.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct dev_copy {
	struct dev_copy *next;
	struct dev_tier *tier; /* NULL: completed at submit */
	enum hc_copy_dir dir;
	size_t n;
	uint64_t *dev, *host;
	uint32_t layers_done; /* atomic: read without the lock */
	bool done;            /* under the tier lock */
	int rc;               /* first error, written before layers_done moves past it */
};

struct dev_tier {
	uint64_t pages;
	uint32_t layers;
	bool no_data;
	struct hc_slots *slots;
	const struct hc_copy_ops *ops;
	void *arg;
	bool attached;
	/* built-in engine */
	struct hc_pool *pool, *host;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* queue not empty, stopping, or a layer done */
	struct dev_copy *head, *tail;
	bool stop;
	bool thread_started;
	pthread_t thread;
};

/* ---- built-in host-memory engine ---- */

static int mem_copy_layer(void *arg, enum hc_copy_dir dir, uint32_t layer, const uint64_t *dev,
			  const uint64_t *host, size_t n)
{
	struct dev_tier *d = arg;
	const struct hc_kv_geometry *g = hc_pool_kv_geometry(d->pool);
	uint64_t head_bytes = (uint64_t)g->head_dim * g->elem_bytes;
	uint64_t units = (uint64_t)g->page_size * g->heads;
	unsigned nbuffers = pool_nbuffers(d->pool);

	for (size_t i = 0; i < n; i++) {
		if (dev[i] >= hc_pool_pages(d->pool) || host[i] >= hc_pool_pages(d->host))
			return util_fail(-EINVAL, "copy: page out of range");
		for (unsigned b = 0; b < nbuffers; b++) {
			for (uint64_t u = 0; u < units;) {
				uint32_t t = (uint32_t)(u / g->heads), h = (uint32_t)(u % g->heads);
				uint64_t rd, rh;
				uint8_t *pd = pool_kv_addr(d->pool, b, dev[i], layer, t, h,
							   head_bytes, &rd);
				uint8_t *ph = pool_kv_addr(d->host, b, host[i], layer, t, h,
							   head_bytes, &rh);
				uint64_t len = rd < rh ? rd : rh;
				if (dir == HC_COPY_D2H)
					memcpy(ph, pd, len);
				else
					memcpy(pd, ph, len);
				u += len / head_bytes;
			}
		}
	}
	return 0;
}

static int mem_page_write(void *arg, uint64_t slot, const void *src, size_t len)
{
	struct dev_tier *d = arg;
	return hc_pool_scatter(d->pool, slot, src, len);
}

static int mem_page_read(void *arg, uint64_t slot, void *dst, size_t len)
{
	struct dev_tier *d = arg;
	return hc_pool_gather(d->pool, slot, dst, len);
}

static const struct hc_copy_ops mem_ops = {
	.name = "host-memory",
	.copy_layer = mem_copy_layer,
	.page_write = mem_page_write,
	.page_read = mem_page_read,
};

/* ---- copy thread ---- */

static void copy_run(struct dev_tier *d, struct dev_copy *c)
{
	int rc = 0;
	for (uint32_t l = 0; l < d->layers; l++) {
		if (!rc)
			rc = d->ops->copy_layer(d->arg, c->dir, l, c->dev, c->host, c->n);
		if (rc && !c->rc)
			c->rc = rc;
		/* Release: a waiter that sees the count also sees rc and the bytes. */
		__atomic_store_n(&c->layers_done, l + 1, __ATOMIC_RELEASE);
		pthread_mutex_lock(&d->lock);
		if (l + 1 == d->layers)
			c->done = true;
		pthread_cond_broadcast(&d->cond);
		pthread_mutex_unlock(&d->lock);
	}
}

static void *copy_thread(void *arg)
{
	struct dev_tier *d = arg;
	pthread_mutex_lock(&d->lock);
	for (;;) {
		while (!d->head && !d->stop)
			pthread_cond_wait(&d->cond, &d->lock);
		struct dev_copy *c = d->head;
		if (!c)
			break; /* stopping, queue drained */
		d->head = c->next;
		if (!d->head)
			d->tail = NULL;
		pthread_mutex_unlock(&d->lock);
		copy_run(d, c); /* c may be freed by its owner once done is set */
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* ---- tier ---- */

int dev_create(const struct dev_opts *o, struct dev_tier **out)
{
	if (!o || !out || o->pages == 0 || o->layers == 0)
		return util_fail(-EINVAL, "dev_create: device pages and layers must be > 0");
	*out = NULL;
	struct dev_tier *d = util_fault_calloc(1, sizeof(*d));
	if (!d)
		return util_fail(-ENOMEM, "dev_create: out of memory");
	d->pages = o->pages;
	d->layers = o->layers;
	d->no_data = o->no_data;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	int rc = hc_slots_create(o->pages, &d->slots);
	if (rc)
		goto err;
	if (!o->no_data) {
		if (o->ops) {
			if (!o->ops->copy_layer) {
				rc = util_fail(-EINVAL, "copy engine: copy_layer is required");
				goto err;
			}
			d->ops = o->ops;
			d->arg = o->arg;
		} else {
			const struct hc_kv_geometry *hg = hc_pool_kv_geometry(o->host);
			if (!hg) {
				rc = util_fail(-EINVAL,
					       "dev_create: the host pool is not a KV pool");
				goto err;
			}
			struct hc_kv_geometry g = *hg;
			g.pages = o->pages;
			g.layout = HC_LAYOUT_LAYER_FIRST;
			rc = hc_pool_create_kv(&g, NULL, &d->pool);
			if (rc)
				goto err;
			d->host = o->host;
			d->ops = &mem_ops;
			d->arg = d;
		}
		if (d->ops->attach) {
			const struct hc_kv_geometry *hg = hc_pool_kv_geometry(o->host);
			rc = d->ops->attach(d->arg, hg, o->pages, o->host);
			if (rc)
				goto err;
		}
		d->attached = true;
		rc = util_thread_start(&d->thread, copy_thread, d);
		if (rc) {
			util_fail(rc, "dev_create: cannot start the copy thread");
			goto err;
		}
		d->thread_started = true;
	}
	*out = d;
	return 0;
err:
	dev_destroy(d);
	return rc;
}

void dev_destroy(struct dev_tier *d)
{
	if (!d)
		return;
	if (d->thread_started) {
		pthread_mutex_lock(&d->lock);
		d->stop = true;
		pthread_cond_broadcast(&d->cond);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->thread, NULL);
	}
	if (d->attached && d->ops->detach)
		d->ops->detach(d->arg);
	hc_pool_destroy(d->pool);
	hc_slots_destroy(d->slots);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

int dev_alloc(struct dev_tier *d, size_t n, uint64_t *out)
{
	return n ? hc_slots_alloc(d->slots, n, out) : 0;
}

int dev_free(struct dev_tier *d, size_t n, const uint64_t *slots)
{
	return n ? hc_slots_free(d->slots, n, slots) : 0;
}

uint64_t dev_available(const struct dev_tier *d)
{
	return hc_slots_available(d->slots);
}

uint64_t dev_pages(const struct dev_tier *d)
{
	return d->pages;
}

int dev_page_write(struct dev_tier *d, uint64_t slot, const void *src, size_t len)
{
	if (d->no_data || !d->ops->page_write)
		return util_fail(-EOPNOTSUPP, "device page write: not supported by this engine");
	if (slot >= d->pages || !hc_slots_is_allocated(d->slots, slot))
		return util_fail(-EINVAL, "device page write: slot %llu not allocated",
				 (unsigned long long)slot);
	return d->ops->page_write(d->arg, slot, src, len);
}

int dev_page_read(struct dev_tier *d, uint64_t slot, void *dst, size_t len)
{
	if (d->no_data || !d->ops->page_read)
		return util_fail(-EOPNOTSUPP, "device page read: not supported by this engine");
	if (slot >= d->pages || !hc_slots_is_allocated(d->slots, slot))
		return util_fail(-EINVAL, "device page read: slot %llu not allocated",
				 (unsigned long long)slot);
	return d->ops->page_read(d->arg, slot, dst, len);
}

int dev_copy_submit(struct dev_tier *d, enum hc_copy_dir dir, const uint64_t *dev,
		    const uint64_t *host, size_t n, struct dev_copy **out)
{
	struct dev_copy *c = util_fault_calloc(1, sizeof(*c));
	if (!c)
		return util_fail(-ENOMEM, "copy: out of memory");
	c->dir = dir;
	c->n = n;
	if (d->no_data || n == 0) {
		/* Nothing moves: complete now, so every policy runs unchanged. */
		c->layers_done = d->layers;
		c->done = true;
		*out = c;
		return 0;
	}
	c->dev = util_fault_malloc(n * sizeof(*c->dev));
	c->host = util_fault_malloc(n * sizeof(*c->host));
	if (!c->dev || !c->host) {
		dev_copy_free(c);
		return util_fail(-ENOMEM, "copy: out of memory");
	}
	c->tier = d;
	memcpy(c->dev, dev, n * sizeof(*dev));
	memcpy(c->host, host, n * sizeof(*host));
	pthread_mutex_lock(&d->lock);
	if (d->tail)
		d->tail->next = c;
	else
		d->head = c;
	d->tail = c;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	*out = c;
	return 0;
}

uint32_t dev_copy_layers_done(const struct dev_copy *ev)
{
	return __atomic_load_n(&ev->layers_done, __ATOMIC_ACQUIRE);
}

int dev_copy_wait(struct dev_copy *ev, uint32_t layer)
{
	if (!ev)
		return 0;
	struct dev_tier *d = ev->tier;
	if (!d) /* completed at submit */
		return 0;
	bool all = layer >= d->layers - 1;
	pthread_mutex_lock(&d->lock);
	/* "done" (not the counter) for the last layer: after it the copy
	 * thread no longer touches ev, so the owner may free it. */
	while (all ? !ev->done : dev_copy_layers_done(ev) <= layer)
		pthread_cond_wait(&d->cond, &d->lock);
	int rc = ev->rc;
	pthread_mutex_unlock(&d->lock);
	return rc;
}

void dev_copy_free(struct dev_copy *ev)
{
	if (!ev)
		return;
	free(ev->dev);
	free(ev->host);
	free(ev);
}
