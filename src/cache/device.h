/*
 * cache/device — the device tier (internal): a pool of page slots reached
 * through a copy engine, and asynchronous per-layer copies.
 *
 * One copy thread runs copies in submission order, layer by layer; each
 * copy carries a completion counter (layers done) that consumers read
 * without a lock, and a condition to sleep on.
 *
 * Thread-safety: every function may be called from any thread. A copy
 * event is owned by its submitter: it must wait for the whole copy
 * (dev_copy_wait(ev, layers)) before dev_copy_free().
 */
#ifndef HC_SRC_CACHE_DEVICE_H
#define HC_SRC_CACHE_DEVICE_H

#include <hicache/cache.h>

struct dev_tier;
struct dev_copy;

struct dev_opts {
	uint64_t pages; /* device slots */
	uint32_t layers;
	struct hc_pool *host;          /* NULL in no_data mode */
	const struct hc_copy_ops *ops; /* NULL: built-in host-memory engine */
	void *arg;
	bool no_data; /* copies complete at once, move nothing */
};

int dev_create(const struct dev_opts *o, struct dev_tier **out);
/* Waits for queued copies. Accepts NULL. */
void dev_destroy(struct dev_tier *d);

/* Slot allocator (all or none). */
int dev_alloc(struct dev_tier *d, size_t n, uint64_t *out);
int dev_free(struct dev_tier *d, size_t n, const uint64_t *slots);
uint64_t dev_available(const struct dev_tier *d);
uint64_t dev_pages(const struct dev_tier *d);

int dev_page_write(struct dev_tier *d, uint64_t slot, const void *src, size_t len);
int dev_page_read(struct dev_tier *d, uint64_t slot, void *dst, size_t len);

/* Queue a copy of n pages (arrays copied). Returns 0 or -ENOMEM. */
int dev_copy_submit(struct dev_tier *d, enum hc_copy_dir dir, const uint64_t *dev,
		    const uint64_t *host, size_t n, struct dev_copy **out);
/* Layers complete so far (lock-free). */
uint32_t dev_copy_layers_done(const struct dev_copy *ev);
/* Wait until layers [0, layer] are done (layer >= layers: all). Returns 0
 * or the copy's -errno (once it failed, every later layer reports it). */
int dev_copy_wait(struct dev_copy *ev, uint32_t layer);
/* Free a copy that is complete. Accepts NULL. */
void dev_copy_free(struct dev_copy *ev);

#endif
