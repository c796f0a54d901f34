/* Addresses inside a KV pool's pages, for the layers above (pool_api.h). */
#include "pool/pool_internal.h"

unsigned pool_nbuffers(const struct hc_pool *pool)
{
	return pool->nbuffers;
}

uint8_t *pool_kv_addr(const struct hc_pool *p, unsigned b, uint64_t page, uint32_t layer,
		      uint32_t tok, uint32_t h, uint64_t head_bytes, uint64_t *run)
{
	const struct pool_buffer *buf = &p->buffers[b];
	const struct hc_kv_geometry *g = &p->geo.kv;
	uint64_t ps = g->page_size, heads = g->heads;
	uint64_t unit = (uint64_t)tok * heads + h; /* (token, head) within the page */

	switch (g->layout) {
	case HC_LAYOUT_LAYER_FIRST:
		*run = (ps * heads - unit) * head_bytes;
		return buf->base + layer * buf->layer_stride + page * buf->page_stride +
		       unit * head_bytes;
	case HC_LAYOUT_PAGE_FIRST_DIRECT:
		*run = (ps * heads - unit) * head_bytes;
		return buf->base + page * buf->page_stride +
		       (layer * ps * heads + unit) * head_bytes;
	case HC_LAYOUT_PAGE_HEAD:
		/* (heads, page_size, layers, head_dim): one head of one token. */
		*run = head_bytes;
		return buf->base + page * buf->page_stride +
		       (((uint64_t)h * ps + tok) * g->layers + layer) * head_bytes;
	case HC_LAYOUT_PAGE_FIRST:
	default:
		*run = (heads - h) * head_bytes;
		return buf->base + page * buf->page_stride +
		       ((uint64_t)tok * g->layers + layer) * heads * head_bytes + h * head_bytes;
	}
}
