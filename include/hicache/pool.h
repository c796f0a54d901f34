/*
 * hicache — host pools and their page geometry.
 *
 * A pool is host memory divided into pages (page_size tokens each) plus a
 * slot allocator that hands out whole pages. Kinds:
 *
 *   KV (MHA)  two halves, K then V, in one mapping; layouts (SGLang's):
 *               layer_first        (2, layers, tokens, heads, head_dim)
 *               page_first         (2, tokens, layers, heads, head_dim)
 *               page_first_direct  (2, pages, layers, page_size, heads, head_dim)
 *               page_head          (2, pages, heads, page_size, layers, head_dim)
 *   KV (MLA)  the same without the leading K/V axis (one latent buffer)
 *   Mamba     page_size 1; one temporal buffer (slots, layers, temporal
 *             bytes; may be empty) and N conv buffers (slots, layers, conv bytes)
 *   indexer   one buffer of pages x page_bytes (any page_bytes, e.g. not a
 *             multiple of 4096)
 *   anchor    logical: slots only, no data (gates side pools in storage)
 *   segments  generic (SWA, DeepSeek-V4 side pools, asymmetric K/V): N
 *             buffers, page p of buffer i at base_i + p x stride_i, seg_len_i bytes
 *
 * Pools are created (the library maps their memory) or wrapped over memory
 * the caller owns (hc_pool_wrap_*: an engine's host tensors).
 *
 * Flat page: the bytes of one page as stored in a single object: K half then
 * V half, each in the layout's order (page_first: tokens, layers, heads,
 * head_dim; page_head: heads, tokens, layers, head_dim; the others: layers,
 * tokens, heads, head_dim); Mamba: temporal bytes then each conv buffer's
 * bytes; indexer: the page's bytes; segments: each buffer's segment.
 *
 * Zero-copy segments: for layouts that keep a page contiguous within each
 * buffer (page_first, page_first_direct, page_head, Mamba, indexer,
 * segments), a page is one
 * (address, length) per buffer, in order K, V (MLA: one), temporal then
 * conv i (empty buffers are skipped). Their concatenation is the flat page.
 *
 * Thread-safety: geometry queries, segments, gather and scatter are safe
 * from any thread (gather/scatter of the same page race like memcpy does);
 * the slot allocator is thread-safe; create/destroy must not race with
 * anything else on the pool.
 */
#ifndef HICACHE_POOL_H
#define HICACHE_POOL_H

#include <hicache/common.h>
#include <hicache/key.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hc_config;
struct hc_mem_opts;
struct hc_pool;
struct hc_pool_group;
struct hc_slots;

/* Values are stored in object trailers: append only. */
enum hc_pool_kind {
	HC_POOL_KV,
	HC_POOL_MAMBA,
	HC_POOL_INDEXER,
	HC_POOL_ANCHOR,
	HC_POOL_SEGMENTS, /* generic: buffers described one by one (hc_pool_wrap_segments) */
};

/* Values are stored in object trailers: append only. */
enum hc_kv_layout {
	HC_LAYOUT_LAYER_FIRST,
	HC_LAYOUT_PAGE_FIRST,
	HC_LAYOUT_PAGE_FIRST_DIRECT,
	HC_LAYOUT_PAGE_HEAD, /* (2, pages, heads, page_size, layers, head_dim) */
};

#define HC_MAMBA_MAX_CONV 8

struct hc_kv_geometry {
	uint32_t layers;
	uint32_t heads;      /* MLA: usually 1 */
	uint32_t head_dim;   /* MLA: kv_lora_rank + rope dim */
	uint32_t elem_bytes; /* bytes per element (2 for bf16) */
	uint32_t page_size;  /* tokens per page */
	uint64_t pages;
	enum hc_kv_layout layout;
	bool mla;
};

struct hc_mamba_geometry {
	uint64_t slots; /* states (pages of one token) */
	uint32_t layers;
	uint64_t temporal_bytes;                /* per layer and slot; 0 = no temporal buffer */
	uint32_t nconv;                         /* 0..HC_MAMBA_MAX_CONV */
	uint64_t conv_bytes[HC_MAMBA_MAX_CONV]; /* per layer and slot, each > 0 */
};

struct hc_indexer_geometry {
	uint64_t pages;
	uint32_t page_size;  /* tokens per page */
	uint64_t page_bytes; /* bytes per page, any value > 0 */
};

struct hc_anchor_geometry {
	uint64_t pages;
	uint32_t page_size;
};

/* One piece of a page inside pool memory. */
struct hc_segment {
	void *addr;
	size_t len;
	enum hc_component component; /* HC_COMP_K, _V, _MAMBA_TEMPORAL, _MAMBA_CONV, _PLAIN */
	uint32_t index;              /* conv index for HC_COMP_MAMBA_CONV */
};

/* Create a pool of that geometry over memory the library maps
 * (hc_mem_alloc()). mem_opts may be NULL (hc_mem_opts_init()'s defaults:
 * transparent huge pages where the kernel gives them, pre-faulted). An
 * anchor pool has no memory. They return 0, -EINVAL (a zero or
 * overflowing dimension, bad layout; the message names the field),
 * -ENOMEM, or an hc_mem_alloc() error. */
HC_API int hc_pool_create_kv(const struct hc_kv_geometry *geo, const struct hc_mem_opts *mem_opts,
			     struct hc_pool **out);
HC_API int hc_pool_create_mamba(const struct hc_mamba_geometry *geo,
				const struct hc_mem_opts *mem_opts, struct hc_pool **out);
HC_API int hc_pool_create_indexer(const struct hc_indexer_geometry *geo,
				  const struct hc_mem_opts *mem_opts, struct hc_pool **out);
HC_API int hc_pool_create_anchor(const struct hc_anchor_geometry *geo, struct hc_pool **out);

/*
 * Pools over caller-owned memory (an engine's own host tensors). They never
 * allocate, unmap, mlock or pin that memory; it must stay valid until
 * hc_pool_destroy(), which frees only the pool's own bookkeeping (its slot
 * allocator included). A wrapped pool behaves as a created pool of the
 * same geometry in every way: same segments, flat page, alignment answer
 * and object trailers (geometry tag), so created and wrapped pools read
 * each other's pages. Each checks that every buffer is long enough for
 * every page and returns -EINVAL naming the buffer and the bytes it needs
 * otherwise (also for a NULL base, a zero dimension, a bad layout).
 *
 * hc_pool_wrap_kv: nbufs 1 = one buffer as SGLang's kv_buffer (MHA: the K
 * half then the V half, V at layers x pages x page_size x heads x head_dim
 * x elem_bytes; MLA: the latent buffer); nbufs 2 (MHA only) = separate K
 * and V buffers, each one half. Every layout.
 *
 * hc_pool_wrap_mamba: temporal may be NULL (or of length 0) exactly when
 * geo->temporal_bytes is 0; conv holds geo->nconv buffers, buffer i of
 * slots x layers x conv_bytes[i] bytes.
 *
 * hc_pool_wrap_indexer: one buffer of pages x page_bytes.
 *
 * A buffer may be longer than it needs; hc_pool_regions() reports the
 * regions as given (kv: nbufs of them; mamba: temporal if any, then conv).
 * Returns 0, -EINVAL, -ENOMEM; *out is NULL on failure.
 */
HC_API int hc_pool_wrap_kv(const struct hc_kv_geometry *geo, const struct hc_region *bufs,
			   unsigned nbufs, struct hc_pool **out);
HC_API int hc_pool_wrap_mamba(const struct hc_mamba_geometry *geo, const struct hc_region *temporal,
			      const struct hc_region *conv, struct hc_pool **out);
HC_API int hc_pool_wrap_indexer(const struct hc_indexer_geometry *geo, const struct hc_region *buf,
				struct hc_pool **out);

/* One buffer of a generic pool (SWA, DeepSeek-V4 side pools, asymmetric
 * K/V, ...): page p of it is [base + p * page_stride, + seg_len). */
struct hc_segment_buffer {
	void *base;
	size_t len;           /* bytes of the buffer: >= (pages - 1) * page_stride + seg_len */
	uint64_t page_stride; /* >= seg_len */
	uint64_t seg_len;     /* > 0 */
	enum hc_component component; /* HC_COMP_K, HC_COMP_V or HC_COMP_PLAIN; names its object */
	uint32_t index;
};
/* A pool of kind HC_POOL_SEGMENTS over n (1..HC_MAMBA_MAX_CONV + 1)
 * buffers: contiguous, flat page = the buffers' segments in order. Its
 * geometry tag covers pages' tokens, n and every seg_len, component and
 * index. Never allocates the buffers. hc_pool_regions() gives each
 * buffer's (base, len). As a side pool its zero-copy objects are named as
 * other pools' ("_<pool>" for one buffer, "_<pool>_k"/"_<pool>_v" for a K
 * then V pair, else "_<pool>_<i>" by position); it may also be the store's
 * anchor (asymmetric K/V) when its components name its objects apart
 * (K and V, or one buffer).
 * Returns 0, -EINVAL (n, pages or page_tokens 0, a NULL base, seg_len 0 or
 * above page_stride, another component, a buffer too short: the message
 * names the buffer and the bytes it needs), -ENOMEM. */
HC_API int hc_pool_wrap_segments(const struct hc_segment_buffer *bufs, unsigned n, uint64_t pages,
				 uint32_t page_tokens, struct hc_pool **out);

/* Destroy a pool. Accepts NULL. Created pools: frees the memory; wrapped
 * pools: only the pool's own state. */
HC_API void hc_pool_destroy(struct hc_pool *pool);

/* The pool's kind. pool must not be NULL. */
HC_API enum hc_pool_kind hc_pool_kind(const struct hc_pool *pool);
/* "kv", "mamba", "indexer", "anchor" or "segments" ("unknown" for another
 * value). Static. */
HC_API const char *hc_pool_kind_name(enum hc_pool_kind kind);
/* "layer_first", "page_first", "page_first_direct" or "page_head"
 * ("unknown" for another value). Static. */
HC_API const char *hc_kv_layout_name(enum hc_kv_layout layout);
/* Parse a layout name: "layer_first", "page_first", "page_first_direct",
 * "page_head". Returns 0 or -EINVAL. */
HC_API int hc_kv_layout_parse(const char *text, enum hc_kv_layout *out);

/* Number of pages in the pool (0 for a NULL pool). */
HC_API uint64_t hc_pool_pages(const struct hc_pool *pool);
/* Tokens per page (0 for a NULL pool). */
HC_API uint32_t hc_pool_page_tokens(const struct hc_pool *pool);
/* Bytes of one flat page (0 for an anchor pool). */
HC_API size_t hc_pool_page_bytes(const struct hc_pool *pool);
/* The geometry the pool was created with, or NULL if it is another kind. */
HC_API const struct hc_kv_geometry *hc_pool_kv_geometry(const struct hc_pool *pool);
HC_API const struct hc_mamba_geometry *hc_pool_mamba_geometry(const struct hc_pool *pool);

/* Does every buffer keep each page contiguous (so zero-copy segments exist)? */
HC_API bool hc_pool_contiguous(const struct hc_pool *pool);
/* Is every buffer base and every page stride a multiple of alignment (a
 * power of two)? False for a non-contiguous layout or an anchor pool. */
HC_API bool hc_pool_aligned(const struct hc_pool *pool, size_t alignment);

/* Number of zero-copy segments per page (0 when not contiguous). */
HC_API unsigned hc_pool_segment_count(const struct hc_pool *pool);
/* Fill segs with the page's segments. Returns the count, -EINVAL (page out
 * of range, segs NULL), -EOPNOTSUPP (layout not contiguous, or anchor pool),
 * -ENOSPC (max too small). Addresses live as long as the pool. */
HC_API int hc_pool_page_segments(const struct hc_pool *pool, uint64_t page, struct hc_segment *segs,
				 unsigned max);

/* Copy the page into flat bytes / from flat bytes. len must be at least
 * hc_pool_page_bytes(). Returns 0 or -EINVAL (page out of range, NULL,
 * short buffer, anchor pool). */
HC_API int hc_pool_gather(const struct hc_pool *pool, uint64_t page, void *dst, size_t len);
HC_API int hc_pool_scatter(struct hc_pool *pool, uint64_t page, const void *src, size_t len);

/* Memory regions of the pool (to register with an I/O engine): one for a
 * created pool, one per buffer for a wrapped one. Returns the count
 * written (at most max), 0 for an anchor pool. */
HC_API unsigned hc_pool_regions(const struct hc_pool *pool, struct hc_region *out, unsigned max);

/* The pages an engine names by token slots (SGLang's host indices): page
 * i of a call is slots[i*page_tokens .. (i+1)*page_tokens) and must be one
 * whole page p below max_pages, its slots p*page_tokens ..
 * p*page_tokens + page_tokens - 1 in order; pages[i] = p. One pass, no
 * allocation: the check an adapter makes on every call. Returns 0, or
 * -EINVAL naming the first page whose slots are not a whole page (not
 * starting at a page boundary, not consecutive, negative, or past
 * max_pages); pages is then partly written. */
HC_API int hc_pages_of_slots(const int64_t *slots, size_t npages, uint32_t page_tokens,
			     uint64_t max_pages, uint64_t *pages);

/* The pool's slot allocator (owned by the pool). */
HC_API struct hc_slots *hc_pool_slots(struct hc_pool *pool);

/*
 * Slot allocator: pages 0..n-1, O(1) alloc and free, thread-safe.
 * Freeing a slot that is not allocated (twice, or never given out, or out
 * of range) is -EINVAL and changes nothing.
 *
 * hc_slots_create() makes one of count slots, all free. Returns 0, -EINVAL
 * (count 0 or too large, out NULL), -ENOMEM.
 */
HC_API int hc_slots_create(uint64_t count, struct hc_slots **out);
/* Free an allocator made by hc_slots_create(). Accepts NULL. */
HC_API void hc_slots_destroy(struct hc_slots *slots);
/* Allocate n free slots into out, all n or none. Returns 0, -ENOSPC
 * (fewer than n free), -EINVAL. */
HC_API int hc_slots_alloc(struct hc_slots *slots, size_t n, uint64_t *out);
/* Free n slots, all n or none. Returns 0, or -EINVAL when any slot is
 * invalid, not allocated or repeated in the list (then none is freed). */
HC_API int hc_slots_free(struct hc_slots *slots, size_t n, const uint64_t *pages);
/* Number of free slots now (0 for NULL). */
HC_API uint64_t hc_slots_available(const struct hc_slots *slots);
/* Number of slots, free or not (0 for NULL). */
HC_API uint64_t hc_slots_count(const struct hc_slots *slots);
/* Is slot page allocated? False for NULL or a page out of range. */
HC_API bool hc_slots_is_allocated(const struct hc_slots *slots, uint64_t page);

/*
 * Pool group: named pools (kv, mamba, swa, indexer, ...) with exactly one
 * anchor (a KV, anchor or segments pool). The group owns the pools it holds.
 *
 * hc_pool_group_create() makes an empty one. Returns 0, -EINVAL (out NULL),
 * -ENOMEM.
 */
HC_API int hc_pool_group_create(struct hc_pool_group **out);
/* Destroys the group and every pool in it. Accepts NULL. */
HC_API void hc_pool_group_destroy(struct hc_pool_group *group);
/* Add pool to the group under name. Takes ownership of pool on success
 * only. name: [a-z0-9_]{1,32}.
 * Returns 0, -EINVAL (bad name, NULL, anchor of the wrong kind), -EEXIST
 * (name taken, pool already in the group, or a second anchor). */
HC_API int hc_pool_group_add(struct hc_pool_group *group, const char *name, struct hc_pool *pool,
			     bool anchor);
/* The pool added under name, or NULL. */
HC_API struct hc_pool *hc_pool_group_find(const struct hc_pool_group *group, const char *name);
/* The anchor pool / its name; NULL when no anchor was added. */
HC_API struct hc_pool *hc_pool_group_anchor(const struct hc_pool_group *group);
HC_API const char *hc_pool_group_anchor_name(const struct hc_pool_group *group);
/* Number of pools in the group (0 for NULL). */
HC_API size_t hc_pool_group_count(const struct hc_pool_group *group);
/* i-th pool in insertion order; *name (if not NULL) gets its name. NULL past the end. */
HC_API struct hc_pool *hc_pool_group_at(const struct hc_pool_group *group, size_t i,
					const char **name);

/*
 * Sizing a host pool: from bytes, or from a ratio of the device pool.
 */
struct hc_pool_sizing {
	size_t struct_size;
	uint64_t bytes;        /* > 0: pool of this many bytes (config hicache_size, GB) */
	double ratio;          /* else ratio x device_pages (config hicache_ratio, default 2.0) */
	uint64_t device_pages; /* pages in the device pool, for the ratio */
	/* Memory to leave free (config host_memory_reserve_gb, default 10). */
	uint64_t reserve_bytes;
};
/* Defaults for a caller's struct of size bytes (pass sizeof(*s)): bytes 0,
 * ratio 2.0, reserve 10 GiB. */
HC_API void hc_pool_sizing_init(struct hc_pool_sizing *s, size_t size);
/* Set bytes, ratio and reserve_bytes from the config keys hicache_size
 * (GB: 1e9 bytes), hicache_ratio and host_memory_reserve_gb (GiB). s must
 * come from hc_pool_sizing_init(). Returns 0 or -EINVAL (NULL, s not
 * initialised). */
HC_API int hc_pool_sizing_from_config(struct hc_pool_sizing *s, const struct hc_config *cfg);
/* The pool's size in pages of page_bytes each. Returns 0, -EINVAL (nothing to size from, a
 * result of 0 pages, overflow), -ENOMEM (more than MemAvailable minus the
 * reserve; the message gives both figures). */
HC_API int hc_pool_size_pages(const struct hc_pool_sizing *s, size_t page_bytes, uint64_t *pages);
/* hc_pool_size_pages against a given amount of available memory
 * (testable). */
HC_API int hc_pool_size_pages_avail(const struct hc_pool_sizing *s, size_t page_bytes,
				    uint64_t available, uint64_t *pages);

#ifdef __cplusplus
}
#endif

#endif /* HICACHE_POOL_H */
