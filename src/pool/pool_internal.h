/* Host pools: the private structure shared by the pool layer's files.
 * Only src/pool/ includes it; the layers above use pool/pool_api.h. */
#ifndef HC_SRC_POOL_INTERNAL_H
#define HC_SRC_POOL_INTERNAL_H

#include "pool/pool_api.h"

#include <hicache/mem.h>
#include <hicache/pool.h>

/* KV halves (K, V) or Mamba buffers (temporal, conv 0..7). */
#define POOL_MAX_BUFFERS (1 + HC_MAMBA_MAX_CONV)

/*
 * One buffer of a pool. For contiguous kinds, page p of this buffer is
 * [base + p * page_stride, + page_len). For layer_first KV the page is
 * `layers` runs of page_len / layers bytes, one per layer, layer_stride
 * apart (see kv_page_runs()).
 */
struct pool_buffer {
	uint8_t *base;
	uint64_t page_stride;
	uint64_t page_len;
	uint64_t layer_stride; /* layer_first only */
	enum hc_component component;
	uint32_t index;
};

struct hc_pool {
	enum hc_pool_kind kind;
	bool wrapped; /* over caller-owned memory (hc_pool_wrap_*) */
	uint64_t pages;
	uint32_t page_tokens;
	uint64_t page_bytes; /* flat */
	bool contiguous;
	unsigned nbuffers;
	struct pool_buffer buffers[POOL_MAX_BUFFERS];
	/* What hc_pool_regions() reports: the mapping of a created pool, the
	 * caller's buffers (as given) of a wrapped one. */
	unsigned nregions;
	struct hc_region regions[POOL_MAX_BUFFERS];
	struct hc_mem *mem; /* NULL when wrapped */
	struct hc_slots *slots;
	union {
		struct hc_kv_geometry kv;
		struct hc_mamba_geometry mamba;
		struct hc_indexer_geometry indexer;
		struct hc_anchor_geometry anchor;
	} geo;
};

/*
 * A pool's buffers before they have addresses: what a geometry needs, the
 * same for a created pool (pool.c places the buffers in one mapping) and a
 * wrapped one (wrap.c puts them on the caller's memory), so both describe
 * pages identically. buffers[i].base is unset; bytes[i] is what buffer i
 * needs from its base; what[i] names it in error messages.
 */
struct pool_plan {
	enum hc_pool_kind kind;
	uint64_t pages;
	uint32_t page_tokens;
	uint64_t page_bytes;
	bool contiguous;
	unsigned nbuffers;
	struct pool_buffer buffers[POOL_MAX_BUFFERS];
	uint64_t bytes[POOL_MAX_BUFFERS];
	char what[POOL_MAX_BUFFERS][24];
};

/* Check a geometry and plan its buffers: KV (K then V; MLA: one), Mamba
 * (temporal if any, then conv 0..n-1), indexer (one). Return 0 or -EINVAL
 * naming the field. */
int pool_plan_kv(const struct hc_kv_geometry *g, struct pool_plan *p);
int pool_plan_mamba(const struct hc_mamba_geometry *g, struct pool_plan *p);
int pool_plan_indexer(const struct hc_indexer_geometry *g, struct pool_plan *p);
/* A pool of the plan's geometry (geo: the caller's geometry struct, copied
 * into the pool's union; NULL for none) whose buffer i starts at bases[i],
 * and its slot allocator. mem (may be NULL) becomes the pool's. Returns 0
 * or -ENOMEM (mem is not freed then). */
int pool_from_plan(const struct pool_plan *p, const void *geo, size_t geo_len,
		   uint8_t *const *bases, struct hc_mem *mem, struct hc_pool **out);

#endif
