/*
 * The pool layer's internal API for the layers above it (store, cache):
 * what they need beyond include/hicache/pool.h, without struct hc_pool's
 * insides (those stay in pool_internal.h, private to src/pool/).
 */
#ifndef HC_SRC_POOL_API_H
#define HC_SRC_POOL_API_H

#include <hicache/pool.h>

#include <stdint.h>

/* hc_pool_gather / hc_pool_scatter of a whole flat page (page in range,
 * not an anchor pool), hashing its bytes as they are copied: returns
 * util_checksum() of the flat page. */
uint64_t pool_gather_summed(const struct hc_pool *pool, uint64_t page, uint8_t *flat);
uint64_t pool_scatter_summed(struct hc_pool *pool, uint64_t page, const uint8_t *flat);

/* Buffers of a pool (KV: K and V, or one for MLA). */
unsigned pool_nbuffers(const struct hc_pool *pool);
/* In buffer b of a KV pool, the address of head h of token tok of (page,
 * layer); *run: bytes contiguous from there that stay inside (page,
 * layer), in head order within a token and token order within the page
 * (the layout decides: layer_first and page_first_direct keep a page of
 * one layer whole, page_first splits it by token, page_head by token and
 * head). */
uint8_t *pool_kv_addr(const struct hc_pool *pool, unsigned b, uint64_t page, uint32_t layer,
		      uint32_t tok, uint32_t h, uint64_t head_bytes, uint64_t *run);

#endif
