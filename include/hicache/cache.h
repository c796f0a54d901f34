/*
 * hicache — the hierarchical cache controller: L1 (device), L2 (host pool)
 * and L3 (an hc_store) behind one radix tree.
 *
 * Request lifecycle (what an engine, or `hicache replay`, does per request):
 *
 *   hc_cache_match()          device prefix + host prefix; with a store,
 *                             starts a prefetch of the tail from L3
 *   hc_cache_prefetch_wait()  stop policy: best_effort / wait_complete / timeout
 *   hc_cache_load()           host pages -> device, layer by layer;
 *   hc_cache_layer_wait()     a consumer starts on layer i while later
 *                             layers still copy
 *   hc_cache_alloc()          device slots for the pages to compute; the
 *                             caller fills them (hc_cache_dev_write())
 *   hc_cache_mamba_write()    hybrid models only: the recurrent state after
 *                             the last page, attached by the insert below
 *   hc_cache_insert()         add the computed pages to the tree (write
 *                             policy: device -> host -> L3 in the background)
 *   hc_cache_release()        drop the request's locks, pins and slots
 *   hc_cache_abort()          the same at any point, discarding work in flight
 *
 * Tiers: the device tier is a pool of page slots (page_size tokens each)
 * reached through a copy engine (struct hc_copy_ops). The built-in engine
 * keeps "device" memory in host memory (tests, replay). The host tier is an
 * hc_pool of the caller's KV geometry, created by the cache. With a store,
 * the cache registers that host pool with the store as its anchor pool
 * "kv" at hc_cache_open() (hybrid: its state pool as "mamba" too) and
 * unregisters them at hc_cache_close(), so a store outlives any number of
 * caches opened on it one after another; the store must have no anchor
 * when the cache opens, and must outlive the cache.
 *
 * Write policies: write_through backs up every inserted page (device ->
 * host, then host -> L3) in the background; write_through_selective only
 * once a node was matched twice (hit count >= 2); write_back copies a page
 * to host when it is evicted from device, then backs it up to L3 (when
 * fewer than an eighth of the device pages are free, the least recently
 * used ones are copied ahead in the background, so that eviction only has
 * to drop them).
 *
 * Prefetch: when the unmatched tail is at least prefetch_threshold tokens,
 * a query thread hashes it and asks the store which prefix exists; if that
 * is at least the threshold, host slots are reserved (never more than half
 * the host pool over all requests in flight) and an I/O thread reads the
 * pages and inserts them as host pages. Every reservation is released
 * exactly once: on completion, on revoke (stop policy) and on abort.
 *
 * no_data: every policy runs on metadata only (no bytes move, no store
 * I/O; L3 existence is a key set inside the cache), and backups and
 * prefetches complete inline, so the outcome does not depend on thread
 * timing. For trace replay and capacity sweeps.
 *
 * Errors: 0 (or a count) or a negative errno; hc_last_error() has details.
 *
 * Thread-safety: any number of threads may call hc_cache_* on one cache at
 * once, each on its own requests; one request must not be used by two
 * threads at once. hc_cache_close() must not race with anything, and every
 * request must be released or aborted before it.
 */
#ifndef HICACHE_CACHE_H
#define HICACHE_CACHE_H

#include <hicache/common.h>
#include <hicache/pool.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hc_store;
struct hc_cache;
struct hc_cache_req;

enum hc_cache_write_policy {
	HC_WRITE_THROUGH,
	HC_WRITE_THROUGH_SELECTIVE,
	HC_WRITE_BACK,
};

enum hc_cache_stop_policy {
	HC_STOP_BEST_EFFORT,   /* use what has arrived; revoke the rest */
	HC_STOP_WAIT_COMPLETE, /* wait for the whole prefetch */
	HC_STOP_TIMEOUT,       /* wait up to 2.0 s + 0.1 s per 1024 tokens (<= 30 s), then
				* revoke (the figures are options) */
};

enum hc_copy_dir {
	HC_COPY_D2H, /* device -> host */
	HC_COPY_H2D, /* host -> device */
};

/*
 * Copy engine: moves pages between device slots and host pool pages, one
 * layer at a time. The cache calls it from its own copy thread, layers in
 * increasing order, and never for two copies at once, so an engine needs
 * no locking of its own. The engine owns device memory.
 */
struct hc_copy_ops {
	const char *name;
	/* Called once at hc_cache_open(): device slots 0..dev_pages-1 of the
	 * host pool's geometry (kv->pages is the host pool's page count).
	 * Optional (NULL). Returns 0 or -errno (the open fails). */
	int (*attach)(void *arg, const struct hc_kv_geometry *kv, uint64_t dev_pages,
		      struct hc_pool *host);
	/* Copy layer `layer` of n pages: dev[i] <-> host[i]. Required. */
	int (*copy_layer)(void *arg, enum hc_copy_dir dir, uint32_t layer, const uint64_t *dev,
			  const uint64_t *host, size_t n);
	/* Flat page bytes of one device slot (hc_pool_gather format). Optional. */
	int (*page_write)(void *arg, uint64_t slot, const void *src, size_t len);
	int (*page_read)(void *arg, uint64_t slot, void *dst, size_t len);
	/* Called at hc_cache_close(). Optional. */
	void (*detach)(void *arg);
};

struct hc_cache_opts {
	size_t struct_size;
	uint32_t page_size; /* tokens per page (default 16) */
	/* Per-token KV geometry: layers, heads, head_dim, elem_bytes, layout,
	 * mla. page_size and pages are ignored (taken from above and below). */
	struct hc_kv_geometry kv;
	uint64_t device_tokens;                  /* device capacity, rounded down to pages */
	uint64_t host_tokens;                    /* host pool capacity, rounded down to pages */
	enum hc_cache_write_policy write_policy; /* default write_through */
	uint32_t prefetch_threshold;             /* tokens (default 256) */
	/* L3, or NULL. Not owned; the cache registers its host pool with it. */
	struct hc_store *store;
	/* NULL: the built-in host-memory engine. Not owned; must outlive the cache. */
	const struct hc_copy_ops *copy_ops;
	void *copy_arg;
	bool no_data; /* metadata only: no bytes, no store I/O */
	/* Hybrid (Mamba) models: bytes of one request's recurrent state; 0 =
	 * not hybrid. Device states live in a pool of mamba_dev_states slots
	 * (host memory, like the built-in device engine), host states in an
	 * hc_pool of mamba_host_states slots (HC_POOL_MAMBA), registered with
	 * the store as "mamba". In hybrid mode a match only uses the prefix
	 * up to the deepest node holding a state (the Mamba boundary). */
	size_t mamba_bytes;
	uint64_t mamba_dev_states;  /* default (0): device pages */
	uint64_t mamba_host_states; /* default (0): host pages */
	/* HC_STOP_TIMEOUT waits base + per_ki_token x (tail tokens / 1024)
	 * seconds from the match, at most max (defaults 2.0, 0.1, 30). */
	double prefetch_timeout_base_s;
	double prefetch_timeout_per_ki_token_s;
	double prefetch_timeout_max_s;
};

/* Defaults for a caller's struct of size bytes (pass sizeof(*opts)): the
 * defaults named above, a one-layer page_first KV geometry, no store, the
 * built-in copy engine; the capacities are the caller's to set. */
HC_API void hc_cache_opts_init(struct hc_cache_opts *opts, size_t size);
/* Open a cache as opts describe. Returns 0, -EINVAL (the message names
 * the option), -EEXIST (the store already has an anchor pool), -ENOMEM.
 * *out is NULL on failure. Starts the background threads. */
HC_API int hc_cache_open(const struct hc_cache_opts *opts, struct hc_cache **out);
/* Close a cache: waits for background work (backups, prefetches) to
 * finish, then frees everything. Accepts NULL. Every request must be released first. */
HC_API void hc_cache_close(struct hc_cache *cache);

/* The host pool (owned by the cache; valid until hc_cache_close()). NULL in
 * no_data mode. */
HC_API struct hc_pool *hc_cache_host_pool(struct hc_cache *cache);
/* Bytes of one flat page (0 in no_data mode). */
HC_API size_t hc_cache_page_bytes(const struct hc_cache *cache);

/* Write / read the flat page bytes of a device slot (a slot from
 * hc_cache_alloc() or hc_cache_req_dev_slots()). Returns 0, -EINVAL, -EOPNOTSUPP (no_data, or
 * an engine without page access). */
HC_API int hc_cache_dev_write(struct hc_cache *cache, uint64_t slot, const void *src, size_t len);
HC_API int hc_cache_dev_read(struct hc_cache *cache, uint64_t slot, void *dst, size_t len);

/* ---- requests ---- */

struct hc_cache_req_info {
	size_t dev_tokens;    /* matched on device at hc_cache_match() */
	size_t host_tokens;   /* matched on host at hc_cache_match() */
	size_t l3_tokens;     /* prefetched from L3 (final after hc_cache_prefetch_wait()) */
	size_t l3_pending;    /* tokens the prefetch is fetching (0 when none) */
	size_t loaded_tokens; /* host -> device by hc_cache_load() */
};

/* Match tokens[0..ntokens) (page-aligned prefix). Creates a request that
 * holds a device lock on its device prefix and a host pin on its host
 * prefix, and copies tokens. Returns 0, -EINVAL, -ENOMEM. */
HC_API int hc_cache_match(struct hc_cache *cache, const uint32_t *tokens, size_t ntokens,
			  struct hc_cache_req **out);
/* What the request matched, prefetched and loaded so far. */
HC_API void hc_cache_req_info(const struct hc_cache_req *req, struct hc_cache_req_info *out);

/* Is the prefetch finished (or was there none)? */
HC_API bool hc_cache_prefetch_done(struct hc_cache_req *req);
/* Apply a stop policy. Returns the tokens prefetched into the host tier
 * (now part of the request's host prefix). */
HC_API int64_t hc_cache_prefetch_wait(struct hc_cache_req *req, enum hc_cache_stop_policy policy);

/* Start copying the request's host prefix to device (all layers, in
 * order). Allocates device slots (evicting if needed; pages whose host
 * backup is in flight are waited for, not counted as full). Returns the
 * tokens being loaded (0: nothing to load), or -ENOSPC (the device cannot
 * hold them: the rest is locked by requests), -EBUSY (a load already
 * started). A prefetch still running is stopped best-effort first. */
HC_API int64_t hc_cache_load(struct hc_cache_req *req);
/* Layers of the load that are complete (0..layers). Lock-free. */
HC_API uint32_t hc_cache_layer_ready(const struct hc_cache_req *req);
/* Wait until layer `layer` is on device. Returns 0 or the copy's -errno.
 * layer >= layers waits for the whole load. No load: returns 0. */
HC_API int hc_cache_layer_wait(struct hc_cache_req *req, uint32_t layer);

/* Device slots of the request's device prefix (after a completed load),
 * in page order. Writes at most max; returns the page count. */
HC_API int64_t hc_cache_req_dev_slots(struct hc_cache_req *req, uint64_t *slots, size_t max);

/* Allocate device slots for the pages to compute: pages [device prefix,
 * ntokens / page_size) of the sequence the request will insert (its
 * tokens, possibly extended). Writes them to slots (max entries); the
 * request owns them until hc_cache_insert(). Waits for backups in flight as hc_cache_load() does.
 * Returns the page count, -ENOSPC, -EBUSY (called twice). */
HC_API int64_t hc_cache_alloc(struct hc_cache_req *req, size_t ntokens, uint64_t *slots,
			      size_t max);
/* Add the computed pages to the tree: tokens[0..ntokens) (starting with
 * the request's matched prefix, ntokens as given to hc_cache_alloc()) with
 * the slots' contents. Waits for a load in flight. Returns the pages new to the tree, or -errno. */
HC_API int64_t hc_cache_insert(struct hc_cache_req *req, const uint32_t *tokens, size_t ntokens);

/* Attach a recurrent state (hybrid mode): the state after the request's
 * last full page, attached by the next hc_cache_insert() to the node
 * ending there (device state; write_through also keeps a host copy and
 * backs it up to L3 under that page's key in pool "mamba"). len must be
 * mamba_bytes; state may be NULL in no_data mode. Call before hc_cache_insert(). Returns 0,
 * -EINVAL, -EOPNOTSUPP (not hybrid), -ENOMEM. */
HC_API int hc_cache_mamba_write(struct hc_cache_req *req, const void *state, size_t len);
/* Read the recurrent state (hybrid mode) at the request's Mamba boundary:
 * the end of its usable prefix (including what a prefetch brought in),
 * from the tier that holds it (hc_cache_load() moves KV pages only).
 * Returns 0, -ENOENT (no state: the usable prefix is empty), -EINVAL,
 * -EOPNOTSUPP. */
HC_API int hc_cache_mamba_read(struct hc_cache_req *req, void *dst, size_t len);

/* Finish the request: completes a load (its pages stay on device), drops
 * the locks, pins and unused slots, stops a prefetch. Frees req. */
HC_API void hc_cache_release(struct hc_cache_req *req);
/* Abort at any stage: the same, but a finished load is discarded too. */
HC_API void hc_cache_abort(struct hc_cache_req *req);

/* ---- background work and statistics ---- */

/* Wait until no backup is queued or running. Returns 0. */
HC_API int hc_cache_flush(struct hc_cache *cache);
/* Evict up to ntokens from device / host (tests, memory pressure).
 * Returns the tokens freed. */
HC_API int64_t hc_cache_evict_device(struct hc_cache *cache, size_t ntokens);
HC_API int64_t hc_cache_evict_host(struct hc_cache *cache, size_t ntokens);

struct hc_cache_stats {
	uint64_t requests;
	uint64_t hit_tokens[3]; /* L1, L2, L3 */
	uint64_t bytes_d2h, bytes_h2d, bytes_l3_write, bytes_l3_read;
	uint64_t pages_l3_write, pages_l3_read;
	uint64_t evicted_dev_pages, evicted_host_pages;
	uint64_t prefetches, prefetch_revoked;
	uint64_t reserved_pages; /* host pages reserved by prefetches in flight */
	uint64_t dev_pages_used, host_pages_used;
	uint64_t backups_pending;
	/* Hybrid mode: states in use per tier, states written to / read from L3. */
	uint64_t mamba_dev_used, mamba_host_used;
	uint64_t mamba_l3_write, mamba_l3_read;
	/* write_back: device pages copied to host at eviction, under the
	 * cache's lock (the copies made ahead, in the background, keep this
	 * low), and those copied ahead. */
	uint64_t write_back_sync_pages, write_back_ahead_pages;
};
/* The cache's counters. size = sizeof(*out) as the caller was built: a
 * struct from an older header gets the fields it has; fields the library
 * does not know are 0. Returns 0 or -EINVAL (NULL). */
HC_API int hc_cache_stats(struct hc_cache *cache, struct hc_cache_stats *out, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* HICACHE_CACHE_H */
