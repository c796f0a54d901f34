/* Host pools: the private structure shared by the pool layer's files. */
#ifndef HC_SRC_POOL_INTERNAL_H
#define HC_SRC_POOL_INTERNAL_H

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
	uint64_t pages;
	uint32_t page_tokens;
	uint64_t page_bytes; /* flat */
	bool contiguous;
	unsigned nbuffers;
	struct pool_buffer buffers[POOL_MAX_BUFFERS];
	struct hc_mem *mem;
	struct hc_slots *slots;
	union {
		struct hc_kv_geometry kv;
		struct hc_mamba_geometry mamba;
		struct hc_indexer_geometry indexer;
		struct hc_anchor_geometry anchor;
	} geo;
};

/* hc_pool_gather / hc_pool_scatter of a whole flat page (page in range,
 * not an anchor pool), hashing its bytes as they are copied: returns
 * util_checksum() of the flat page. */
uint64_t pool_gather_summed(const struct hc_pool *pool, uint64_t page, uint8_t *flat);
uint64_t pool_scatter_summed(struct hc_pool *pool, uint64_t page, const uint8_t *flat);

#endif
