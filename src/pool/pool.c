/*
 * Host pools: geometry, zero-copy segments, gather and scatter.
 *
 * Every kind is described by up to POOL_MAX_BUFFERS buffers inside one
 * mapping, so the generic code (segments, alignment, gather/scatter of
 * contiguous pages) never switches on the kind. Only layer_first KV is not
 * contiguous: a page there is one run per layer in each half:
 *
 *   K half: | layer 0: tok 0 .. tok T-1 | layer 1: ... |   (T = pages * page_size)
 *   page p of layer l = K + l * T * tok_bytes + p * page_size * tok_bytes
 *
 * The V half starts right after the K half (one (2, ...) array, as in the
 * reference), so a pool's alignment answer is exactly the reference's.
 */
#define _GNU_SOURCE
#include "pool/pool_internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BASE_ALIGN 4096u

const char *hc_pool_kind_name(enum hc_pool_kind kind)
{
	switch (kind) {
	case HC_POOL_KV: return "kv";
	case HC_POOL_MAMBA: return "mamba";
	case HC_POOL_INDEXER: return "indexer";
	case HC_POOL_ANCHOR: return "anchor";
	}
	return "unknown";
}

static const char *const layout_names[] = {"layer_first", "page_first", "page_first_direct"};

const char *hc_kv_layout_name(enum hc_kv_layout layout)
{
	if ((unsigned)layout > HC_LAYOUT_PAGE_FIRST_DIRECT)
		return "unknown";
	return layout_names[layout];
}

int hc_kv_layout_parse(const char *text, enum hc_kv_layout *out)
{
	if (!text || !out)
		return util_fail(-EINVAL, "layout: NULL argument");
	for (unsigned i = 0; i <= HC_LAYOUT_PAGE_FIRST_DIRECT; i++) {
		if (!strcmp(text, layout_names[i])) {
			*out = (enum hc_kv_layout)i;
			return 0;
		}
	}
	return util_fail(-EINVAL, "layout '%s' is not layer_first, page_first or page_first_direct",
			 text);
}

void hc_pool_destroy(struct hc_pool *pool)
{
	if (!pool)
		return;
	hc_slots_destroy(pool->slots);
	hc_mem_free(pool->mem);
	free(pool);
}

/* Allocate the pool, its slots and `bytes` of memory (none for 0). */
static int pool_new(enum hc_pool_kind kind, uint64_t pages, uint64_t bytes,
		    const struct hc_mem_opts *mem_opts, struct hc_pool **out)
{
	struct hc_pool *pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	pool->kind = kind;
	pool->pages = pages;
	int rc = hc_slots_create(pages, &pool->slots);
	if (!rc && bytes) {
		if (bytes > SIZE_MAX)
			rc = util_fail(-EINVAL, "pool: %llu bytes do not fit in memory",
				       (unsigned long long)bytes);
		else
			rc = hc_mem_alloc((size_t)bytes, mem_opts, &pool->mem);
	}
	if (rc) {
		hc_pool_destroy(pool);
		return rc;
	}
	*out = pool;
	return 0;
}

static int need_nonzero(const char *what, const char *field, uint64_t v)
{
	if (v == 0)
		return util_fail(-EINVAL, "%s geometry: %s must be > 0", what, field);
	return 0;
}

static int overflow(const char *what)
{
	return util_fail(-EINVAL, "%s geometry: sizes overflow 64 bits", what);
}

int hc_pool_create_kv(const struct hc_kv_geometry *g, const struct hc_mem_opts *mem_opts,
		      struct hc_pool **out)
{
	if (!g || !out)
		return util_fail(-EINVAL, "hc_pool_create_kv: NULL argument");
	*out = NULL;
	int rc;
	if ((rc = need_nonzero("kv", "layers", g->layers)) ||
	    (rc = need_nonzero("kv", "heads", g->heads)) ||
	    (rc = need_nonzero("kv", "head_dim", g->head_dim)) ||
	    (rc = need_nonzero("kv", "elem_bytes", g->elem_bytes)) ||
	    (rc = need_nonzero("kv", "page_size", g->page_size)) ||
	    (rc = need_nonzero("kv", "pages", g->pages)))
		return rc;
	if ((unsigned)g->layout > HC_LAYOUT_PAGE_FIRST_DIRECT)
		return util_fail(-EINVAL, "kv geometry: unknown layout %d", (int)g->layout);

	uint64_t tok_bytes, tokens, run, page_len, half, total;
	if (!util_mul(g->heads, g->head_dim, &tok_bytes) ||
	    !util_mul(tok_bytes, g->elem_bytes, &tok_bytes) ||
	    !util_mul(g->pages, g->page_size, &tokens) ||
	    !util_mul(tok_bytes, g->page_size, &run) || !util_mul(run, g->layers, &page_len) ||
	    !util_mul(page_len, g->pages, &half) || !util_mul(half, g->mla ? 1 : 2, &total))
		return overflow("kv");

	struct hc_pool *pool;
	rc = pool_new(HC_POOL_KV, g->pages, total, mem_opts, &pool);
	if (rc)
		return rc;
	pool->geo.kv = *g;
	pool->page_tokens = g->page_size;
	pool->page_bytes = total / g->pages;
	pool->contiguous = g->layout != HC_LAYOUT_LAYER_FIRST;
	pool->nbuffers = g->mla ? 1 : 2;
	uint8_t *base = hc_mem_addr(pool->mem);
	for (unsigned b = 0; b < pool->nbuffers; b++) {
		struct pool_buffer *buf = &pool->buffers[b];
		buf->base = base + (uint64_t)b * half;
		buf->page_len = page_len;
		buf->component = b == 0 ? HC_COMP_K : HC_COMP_V;
		if (g->layout == HC_LAYOUT_LAYER_FIRST) {
			buf->page_stride = run; /* within one layer */
			buf->layer_stride = tokens * tok_bytes;
		} else {
			buf->page_stride = page_len;
		}
	}
	*out = pool;
	return 0;
}

int hc_pool_create_mamba(const struct hc_mamba_geometry *g, const struct hc_mem_opts *mem_opts,
			 struct hc_pool **out)
{
	if (!g || !out)
		return util_fail(-EINVAL, "hc_pool_create_mamba: NULL argument");
	*out = NULL;
	int rc;
	if ((rc = need_nonzero("mamba", "slots", g->slots)) ||
	    (rc = need_nonzero("mamba", "layers", g->layers)))
		return rc;
	if (g->nconv > HC_MAMBA_MAX_CONV)
		return util_fail(-EINVAL, "mamba geometry: nconv %u exceeds %d", g->nconv,
				 HC_MAMBA_MAX_CONV);
	if (g->temporal_bytes == 0 && g->nconv == 0)
		return util_fail(-EINVAL, "mamba geometry: no temporal and no conv buffer");
	for (unsigned i = 0; i < g->nconv; i++)
		if (g->conv_bytes[i] == 0)
			return util_fail(-EINVAL, "mamba geometry: conv_bytes[%u] must be > 0", i);

	/* Buffers back to back, each starting on a 4 KiB boundary like a
	 * separately allocated array would. */
	struct pool_buffer bufs[POOL_MAX_BUFFERS];
	unsigned n = 0;
	uint64_t offset = 0, flat = 0;
	for (int i = -1; i < (int)g->nconv; i++) {
		uint64_t per_layer = i < 0 ? g->temporal_bytes : g->conv_bytes[i];
		if (per_layer == 0)
			continue;
		uint64_t stride, bytes;
		if (!util_mul(per_layer, g->layers, &stride) || !util_mul(stride, g->slots, &bytes) ||
		    !util_round_up(offset, BASE_ALIGN, &offset) ||
		    __builtin_add_overflow(flat, stride, &flat))
			return overflow("mamba");
		bufs[n] = (struct pool_buffer){
			.base = (uint8_t *)(uintptr_t)offset,
			.page_stride = stride,
			.page_len = stride,
			.component = i < 0 ? HC_COMP_MAMBA_TEMPORAL : HC_COMP_MAMBA_CONV,
			.index = i < 0 ? 0 : (uint32_t)i,
		};
		n++;
		if (__builtin_add_overflow(offset, bytes, &offset))
			return overflow("mamba");
	}
	struct hc_pool *pool;
	rc = pool_new(HC_POOL_MAMBA, g->slots, offset, mem_opts, &pool);
	if (rc)
		return rc;
	pool->geo.mamba = *g;
	pool->page_tokens = 1;
	pool->page_bytes = flat;
	pool->contiguous = true;
	pool->nbuffers = n;
	uint8_t *base = hc_mem_addr(pool->mem);
	for (unsigned i = 0; i < n; i++) {
		pool->buffers[i] = bufs[i];
		pool->buffers[i].base = base + (uintptr_t)bufs[i].base;
	}
	*out = pool;
	return 0;
}

int hc_pool_create_indexer(const struct hc_indexer_geometry *g,
			   const struct hc_mem_opts *mem_opts, struct hc_pool **out)
{
	if (!g || !out)
		return util_fail(-EINVAL, "hc_pool_create_indexer: NULL argument");
	*out = NULL;
	int rc;
	if ((rc = need_nonzero("indexer", "pages", g->pages)) ||
	    (rc = need_nonzero("indexer", "page_size", g->page_size)) ||
	    (rc = need_nonzero("indexer", "page_bytes", g->page_bytes)))
		return rc;
	uint64_t total;
	if (!util_mul(g->pages, g->page_bytes, &total))
		return overflow("indexer");
	struct hc_pool *pool;
	rc = pool_new(HC_POOL_INDEXER, g->pages, total, mem_opts, &pool);
	if (rc)
		return rc;
	pool->geo.indexer = *g;
	pool->page_tokens = g->page_size;
	pool->page_bytes = g->page_bytes;
	pool->contiguous = true;
	pool->nbuffers = 1;
	pool->buffers[0] = (struct pool_buffer){
		.base = hc_mem_addr(pool->mem),
		.page_stride = g->page_bytes,
		.page_len = g->page_bytes,
		.component = HC_COMP_PLAIN,
	};
	*out = pool;
	return 0;
}

int hc_pool_create_anchor(const struct hc_anchor_geometry *g, struct hc_pool **out)
{
	if (!g || !out)
		return util_fail(-EINVAL, "hc_pool_create_anchor: NULL argument");
	*out = NULL;
	int rc;
	if ((rc = need_nonzero("anchor", "pages", g->pages)) ||
	    (rc = need_nonzero("anchor", "page_size", g->page_size)))
		return rc;
	struct hc_pool *pool;
	rc = pool_new(HC_POOL_ANCHOR, g->pages, 0, NULL, &pool);
	if (rc)
		return rc;
	pool->geo.anchor = *g;
	pool->page_tokens = g->page_size;
	*out = pool;
	return 0;
}

enum hc_pool_kind hc_pool_kind(const struct hc_pool *pool)
{
	return pool->kind;
}

uint64_t hc_pool_pages(const struct hc_pool *pool)
{
	return pool ? pool->pages : 0;
}

uint32_t hc_pool_page_tokens(const struct hc_pool *pool)
{
	return pool ? pool->page_tokens : 0;
}

size_t hc_pool_page_bytes(const struct hc_pool *pool)
{
	return pool ? (size_t)pool->page_bytes : 0;
}

const struct hc_kv_geometry *hc_pool_kv_geometry(const struct hc_pool *pool)
{
	return pool && pool->kind == HC_POOL_KV ? &pool->geo.kv : NULL;
}

const struct hc_mamba_geometry *hc_pool_mamba_geometry(const struct hc_pool *pool)
{
	return pool && pool->kind == HC_POOL_MAMBA ? &pool->geo.mamba : NULL;
}

bool hc_pool_contiguous(const struct hc_pool *pool)
{
	return pool && pool->contiguous && pool->nbuffers > 0;
}

bool hc_pool_aligned(const struct hc_pool *pool, size_t alignment)
{
	if (!hc_pool_contiguous(pool) || !util_is_pow2(alignment))
		return false;
	for (unsigned i = 0; i < pool->nbuffers; i++) {
		const struct pool_buffer *b = &pool->buffers[i];
		if ((uintptr_t)b->base % alignment || b->page_stride % alignment ||
		    b->page_len % alignment)
			return false;
	}
	return true;
}

unsigned hc_pool_segment_count(const struct hc_pool *pool)
{
	return hc_pool_contiguous(pool) ? pool->nbuffers : 0;
}

int hc_pool_page_segments(const struct hc_pool *pool, uint64_t page, struct hc_segment *segs,
			  unsigned max)
{
	if (!pool || !segs)
		return util_fail(-EINVAL, "hc_pool_page_segments: NULL argument");
	if (!hc_pool_contiguous(pool))
		return util_fail(-EOPNOTSUPP, "pool (%s%s%s) keeps no page contiguous",
				 hc_pool_kind_name(pool->kind), pool->kind == HC_POOL_KV ? ", " : "",
				 pool->kind == HC_POOL_KV ? hc_kv_layout_name(pool->geo.kv.layout)
							  : "");
	if (page >= pool->pages)
		return util_fail(-EINVAL, "page %llu out of range (pool has %llu)",
				 (unsigned long long)page, (unsigned long long)pool->pages);
	if (max < pool->nbuffers)
		return util_fail(-ENOSPC, "page has %u segments, room for %u", pool->nbuffers, max);
	for (unsigned i = 0; i < pool->nbuffers; i++) {
		const struct pool_buffer *b = &pool->buffers[i];
		segs[i] = (struct hc_segment){
			.addr = b->base + page * b->page_stride,
			.len = (size_t)b->page_len,
			.component = b->component,
			.index = b->index,
		};
	}
	return (int)pool->nbuffers;
}

/* Copy one page between pool memory and flat bytes, either direction.
 * With sum, the flat bytes are also added to it, in flat order. */
static int page_copy(const struct hc_pool *pool, uint64_t page, uint8_t *flat, size_t len,
		     bool to_flat, struct util_checksum_copy *sum, const char *what)
{
	if (!pool || !flat)
		return util_fail(-EINVAL, "%s: NULL argument", what);
	if (pool->kind == HC_POOL_ANCHOR)
		return util_fail(-EINVAL, "%s: an anchor pool holds no data", what);
	if (page >= pool->pages)
		return util_fail(-EINVAL, "%s: page %llu out of range (pool has %llu)", what,
				 (unsigned long long)page, (unsigned long long)pool->pages);
	if (len < pool->page_bytes)
		return util_fail(-EINVAL, "%s: buffer of %zu bytes, page needs %llu", what, len,
				 (unsigned long long)pool->page_bytes);
	for (unsigned i = 0; i < pool->nbuffers; i++) {
		const struct pool_buffer *b = &pool->buffers[i];
		unsigned runs = pool->contiguous ? 1 : pool->geo.kv.layers;
		uint64_t run_len = b->page_len / runs;
		uint8_t *src = b->base + page * b->page_stride;
		for (unsigned r = 0; r < runs; r++) {
			uint8_t *mem = src + (uint64_t)r * b->layer_stride;
			if (sum)
				util_checksum_copy_add(sum, to_flat ? flat : mem, to_flat ? mem : flat,
						       run_len);
			else if (to_flat)
				memcpy(flat, mem, run_len);
			else
				memcpy(mem, flat, run_len);
			flat += run_len;
		}
	}
	return 0;
}

int hc_pool_gather(const struct hc_pool *pool, uint64_t page, void *dst, size_t len)
{
	return page_copy(pool, page, dst, len, true, NULL, "hc_pool_gather");
}

int hc_pool_scatter(struct hc_pool *pool, uint64_t page, const void *src, size_t len)
{
	/* page_copy writes only pool memory when !to_flat. */
	return page_copy(pool, page, (uint8_t *)(uintptr_t)src, len, false, NULL,
			 "hc_pool_scatter");
}

uint64_t pool_gather_summed(const struct hc_pool *pool, uint64_t page, uint8_t *flat)
{
	struct util_checksum_copy sum;
	util_checksum_copy_init(&sum);
	page_copy(pool, page, flat, pool->page_bytes, true, &sum, "pool_gather_summed");
	return util_checksum_copy_end(&sum);
}

uint64_t pool_scatter_summed(struct hc_pool *pool, uint64_t page, const uint8_t *flat)
{
	struct util_checksum_copy sum;
	util_checksum_copy_init(&sum);
	page_copy(pool, page, (uint8_t *)(uintptr_t)flat, pool->page_bytes, false, &sum,
		  "pool_scatter_summed");
	return util_checksum_copy_end(&sum);
}

unsigned hc_pool_regions(const struct hc_pool *pool, struct hc_region *out, unsigned max)
{
	if (!pool || !pool->mem || !out || max == 0)
		return 0;
	out[0] = (struct hc_region){.addr = hc_mem_addr(pool->mem), .len = hc_mem_len(pool->mem)};
	return 1;
}

struct hc_slots *hc_pool_slots(struct hc_pool *pool)
{
	return pool ? pool->slots : NULL;
}
