/*
 * Host pools: geometry, zero-copy segments, gather and scatter.
 *
 * Every kind is described by up to POOL_MAX_BUFFERS buffers (a plan per
 * kind: pool_plan_*), placed in one mapping for a created pool or on the
 * caller's memory for a wrapped one (wrap.c), so the generic code
 * (segments, alignment, gather/scatter of contiguous pages) never switches
 * on the kind. Only layer_first KV is not contiguous: a page there is one
 * run per layer in each half:
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BASE_ALIGN 4096u

const char *hc_pool_kind_name(enum hc_pool_kind kind)
{
	switch (kind) {
	case HC_POOL_KV:
		return "kv";
	case HC_POOL_MAMBA:
		return "mamba";
	case HC_POOL_INDEXER:
		return "indexer";
	case HC_POOL_ANCHOR:
		return "anchor";
	case HC_POOL_SEGMENTS:
		return "segments";
	}
	return "unknown";
}

static const char *const layout_names[] = {"layer_first", "page_first", "page_first_direct",
					   "page_head"};

const char *hc_kv_layout_name(enum hc_kv_layout layout)
{
	if ((unsigned)layout > HC_LAYOUT_PAGE_HEAD)
		return "unknown";
	return layout_names[layout];
}

int hc_kv_layout_parse(const char *text, enum hc_kv_layout *out)
{
	if (!text || !out)
		return util_fail(-EINVAL, "layout: NULL argument");
	for (unsigned i = 0; i <= HC_LAYOUT_PAGE_HEAD; i++) {
		if (!strcmp(text, layout_names[i])) {
			*out = (enum hc_kv_layout)i;
			return 0;
		}
	}
	return util_fail(-EINVAL,
			 "layout '%s' is not layer_first, page_first, page_first_direct "
			 "or page_head",
			 text);
}

void hc_pool_destroy(struct hc_pool *pool)
{
	if (!pool)
		return;
	hc_slots_destroy(pool->slots);
	hc_mem_free(pool->mem); /* NULL for a wrapped pool: the caller's memory stays */
	free(pool);
}

int pool_from_plan(const struct pool_plan *p, const void *geo, size_t geo_len,
		   uint8_t *const *bases, struct hc_mem *mem, struct hc_pool **out)
{
	struct hc_pool *pool = util_fault_calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	int rc = hc_slots_create(p->pages, &pool->slots);
	if (rc) {
		free(pool);
		return rc;
	}
	pool->kind = p->kind;
	pool->pages = p->pages;
	pool->page_tokens = p->page_tokens;
	pool->page_bytes = p->page_bytes;
	pool->contiguous = p->contiguous;
	pool->nbuffers = p->nbuffers;
	for (unsigned i = 0; i < p->nbuffers; i++) {
		pool->buffers[i] = p->buffers[i];
		pool->buffers[i].base = bases[i];
	}
	if (geo)
		memcpy(&pool->geo, geo, geo_len);
	pool->mem = mem;
	*out = pool;
	return 0;
}

/* Create a pool of the plan in one mapping: buffers back to back, each
 * starting on a multiple of base_align (KV: 1, so V follows K as in one
 * (2, ...) array; Mamba: 4 KiB, like separately allocated arrays). */
static int pool_create(const struct pool_plan *p, uint64_t base_align, const void *geo,
		       size_t geo_len, const struct hc_mem_opts *mem_opts, struct hc_pool **out)
{
	uint64_t offset[POOL_MAX_BUFFERS], total = 0;
	for (unsigned i = 0; i < p->nbuffers; i++) {
		if (!util_round_up(total, base_align, &offset[i]) ||
		    __builtin_add_overflow(offset[i], p->bytes[i], &total))
			return util_fail(-EINVAL, "%s geometry: sizes overflow 64 bits",
					 hc_pool_kind_name(p->kind));
	}
	if (total > SIZE_MAX)
		return util_fail(-EINVAL, "pool: %llu bytes do not fit in memory",
				 (unsigned long long)total);
	struct hc_mem *mem = NULL;
	int rc = total ? hc_mem_alloc((size_t)total, mem_opts, &mem) : 0;
	if (rc)
		return rc;
	uint8_t *bases[POOL_MAX_BUFFERS];
	for (unsigned i = 0; i < p->nbuffers; i++)
		bases[i] = (uint8_t *)hc_mem_addr(mem) + offset[i];
	rc = pool_from_plan(p, geo, geo_len, bases, mem, out);
	if (rc) {
		hc_mem_free(mem);
		return rc;
	}
	if (mem) {
		(*out)->nregions = 1;
		(*out)->regions[0] = (struct hc_region){hc_mem_addr(mem), hc_mem_len(mem)};
	}
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

int pool_plan_kv(const struct hc_kv_geometry *g, struct pool_plan *p)
{
	int rc;
	if ((rc = need_nonzero("kv", "layers", g->layers)) ||
	    (rc = need_nonzero("kv", "heads", g->heads)) ||
	    (rc = need_nonzero("kv", "head_dim", g->head_dim)) ||
	    (rc = need_nonzero("kv", "elem_bytes", g->elem_bytes)) ||
	    (rc = need_nonzero("kv", "page_size", g->page_size)) ||
	    (rc = need_nonzero("kv", "pages", g->pages)))
		return rc;
	if ((unsigned)g->layout > HC_LAYOUT_PAGE_HEAD)
		return util_fail(-EINVAL, "kv geometry: unknown layout %d", (int)g->layout);

	uint64_t tok_bytes, tokens, run, page_len, half, total;
	if (!util_mul(g->heads, g->head_dim, &tok_bytes) ||
	    !util_mul(tok_bytes, g->elem_bytes, &tok_bytes) ||
	    !util_mul(g->pages, g->page_size, &tokens) ||
	    !util_mul(tok_bytes, g->page_size, &run) || !util_mul(run, g->layers, &page_len) ||
	    !util_mul(page_len, g->pages, &half) || !util_mul(half, g->mla ? 1 : 2, &total))
		return overflow("kv");
	*p = (struct pool_plan){
		.kind = HC_POOL_KV,
		.pages = g->pages,
		.page_tokens = g->page_size,
		.page_bytes = total / g->pages,
		/* page_head keeps a page contiguous too: (heads, page_size,
		 * layers, head_dim) within each half. */
		.contiguous = g->layout != HC_LAYOUT_LAYER_FIRST,
		.nbuffers = g->mla ? 1 : 2,
	};
	for (unsigned b = 0; b < p->nbuffers; b++) {
		struct pool_buffer *buf = &p->buffers[b];
		buf->page_len = page_len;
		buf->component = b == 0 ? HC_COMP_K : HC_COMP_V;
		if (g->layout == HC_LAYOUT_LAYER_FIRST) {
			buf->page_stride = run; /* within one layer */
			buf->layer_stride = tokens * tok_bytes;
		} else {
			buf->page_stride = page_len;
		}
		p->bytes[b] = half;
		snprintf(p->what[b], sizeof(p->what[b]), "%s",
			 g->mla ? "the latent buffer"
			 : b    ? "the V half"
				: "the K half");
	}
	return 0;
}

int hc_pool_create_kv(const struct hc_kv_geometry *g, const struct hc_mem_opts *mem_opts,
		      struct hc_pool **out)
{
	if (!g || !out)
		return util_fail(-EINVAL, "hc_pool_create_kv: NULL argument");
	*out = NULL;
	struct pool_plan p;
	int rc = pool_plan_kv(g, &p);
	return rc ? rc : pool_create(&p, 1, g, sizeof(*g), mem_opts, out);
}

int pool_plan_mamba(const struct hc_mamba_geometry *g, struct pool_plan *p)
{
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

	*p = (struct pool_plan){.kind = HC_POOL_MAMBA,
				.pages = g->slots,
				.page_tokens = 1,
				.contiguous = true};
	for (int i = -1; i < (int)g->nconv; i++) {
		uint64_t per_layer = i < 0 ? g->temporal_bytes : g->conv_bytes[i];
		if (per_layer == 0)
			continue;
		uint64_t stride, bytes;
		if (!util_mul(per_layer, g->layers, &stride) ||
		    !util_mul(stride, g->slots, &bytes) ||
		    __builtin_add_overflow(p->page_bytes, stride, &p->page_bytes))
			return overflow("mamba");
		unsigned n = p->nbuffers++;
		p->buffers[n] = (struct pool_buffer){
			.page_stride = stride,
			.page_len = stride,
			.component = i < 0 ? HC_COMP_MAMBA_TEMPORAL : HC_COMP_MAMBA_CONV,
			.index = i < 0 ? 0 : (uint32_t)i,
		};
		p->bytes[n] = bytes;
		if (i < 0)
			snprintf(p->what[n], sizeof(p->what[n]), "the temporal buffer");
		else
			snprintf(p->what[n], sizeof(p->what[n]), "conv buffer %d", i);
	}
	return 0;
}

int hc_pool_create_mamba(const struct hc_mamba_geometry *g, const struct hc_mem_opts *mem_opts,
			 struct hc_pool **out)
{
	if (!g || !out)
		return util_fail(-EINVAL, "hc_pool_create_mamba: NULL argument");
	*out = NULL;
	struct pool_plan p;
	int rc = pool_plan_mamba(g, &p);
	return rc ? rc : pool_create(&p, BASE_ALIGN, g, sizeof(*g), mem_opts, out);
}

int pool_plan_indexer(const struct hc_indexer_geometry *g, struct pool_plan *p)
{
	int rc;
	if ((rc = need_nonzero("indexer", "pages", g->pages)) ||
	    (rc = need_nonzero("indexer", "page_size", g->page_size)) ||
	    (rc = need_nonzero("indexer", "page_bytes", g->page_bytes)))
		return rc;
	uint64_t total;
	if (!util_mul(g->pages, g->page_bytes, &total))
		return overflow("indexer");
	*p = (struct pool_plan){
		.kind = HC_POOL_INDEXER,
		.pages = g->pages,
		.page_tokens = g->page_size,
		.page_bytes = g->page_bytes,
		.contiguous = true,
		.nbuffers = 1,
		.buffers = {{.page_stride = g->page_bytes,
			     .page_len = g->page_bytes,
			     .component = HC_COMP_PLAIN}},
		.bytes = {total},
		.what = {"the buffer"},
	};
	return 0;
}

int hc_pool_create_indexer(const struct hc_indexer_geometry *g, const struct hc_mem_opts *mem_opts,
			   struct hc_pool **out)
{
	if (!g || !out)
		return util_fail(-EINVAL, "hc_pool_create_indexer: NULL argument");
	*out = NULL;
	struct pool_plan p;
	int rc = pool_plan_indexer(g, &p);
	return rc ? rc : pool_create(&p, 1, g, sizeof(*g), mem_opts, out);
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
	struct pool_plan p = {.kind = HC_POOL_ANCHOR,
			      .pages = g->pages,
			      .page_tokens = g->page_size};
	return pool_from_plan(&p, g, sizeof(*g), NULL, NULL, out);
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
				 hc_pool_kind_name(pool->kind),
				 pool->kind == HC_POOL_KV ? ", " : "",
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
				util_checksum_copy_add(sum, to_flat ? flat : mem,
						       to_flat ? mem : flat, run_len);
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
	if (!pool || !out)
		return 0;
	unsigned n = pool->nregions < max ? pool->nregions : max;
	memcpy(out, pool->regions, n * sizeof(*out));
	return n;
}

struct hc_slots *hc_pool_slots(struct hc_pool *pool)
{
	return pool ? pool->slots : NULL;
}
