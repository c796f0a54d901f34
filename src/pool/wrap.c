/*
 * Pools over caller-owned memory (an engine's own host tensors).
 *
 * A wrapped pool is planned exactly as a created one (pool_plan_* in
 * pool.c: the same buffers, page strides, lengths and components); only
 * the buffers' bases differ: the caller's regions instead of one mapping.
 * So its segments, flat pages, alignment answer and the store's geometry
 * tag are those of a created pool of the same geometry, and the two read
 * each other's pages.
 *
 *   SGLang kv_buffer (one tensor, nbufs 1):  | K half | V half |
 *                                            V at K + layers x tokens x heads x head_dim x elem
 *   separate K and V (nbufs 2):              | K half |   ...   | V half |
 *
 * Nothing here allocates, maps, locks, pins or frees the caller's memory:
 * the pool holds its own bookkeeping only (hc_pool_destroy frees that).
 * Every buffer is checked to cover every page before the pool exists.
 */
#define _GNU_SOURCE
#include "pool/pool_internal.h"
#include "util/util.h"

#include <errno.h>
#include <string.h>

/* Does region r (buffer `index`, `what`) hold `need` bytes from its base? */
static int cover(const char *fn, unsigned index, const char *what, const struct hc_region *r,
		 uint64_t need)
{
	if (!r || !r->addr)
		return util_fail(-EINVAL, "%s: buffer %u (%s) has a NULL base", fn, index, what);
	if ((uint64_t)r->len < need)
		return util_fail(-EINVAL, "%s: buffer %u (%s) is %zu bytes; its pages need %llu",
				 fn, index, what, r->len, (unsigned long long)need);
	return 0;
}

/* The pool of plan p over bases, reporting regions[0..nregions) as its
 * memory. */
static int wrap_finish(const struct pool_plan *p, const void *geo, size_t geo_len,
		       uint8_t *const *bases, const struct hc_region *regions, unsigned nregions,
		       struct hc_pool **out)
{
	int rc = pool_from_plan(p, geo, geo_len, bases, NULL, out);
	if (rc)
		return rc;
	(*out)->wrapped = true;
	(*out)->nregions = nregions;
	memcpy((*out)->regions, regions, nregions * sizeof(*regions));
	return 0;
}

int hc_pool_wrap_kv(const struct hc_kv_geometry *g, const struct hc_region *bufs, unsigned nbufs,
		    struct hc_pool **out)
{
	static const char fn[] = "hc_pool_wrap_kv";
	if (!g || !bufs || !out)
		return util_fail(-EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	struct pool_plan p;
	int rc = pool_plan_kv(g, &p);
	if (rc)
		return rc;
	if (nbufs < 1 || nbufs > 2 || (g->mla && nbufs != 1))
		return util_fail(-EINVAL,
				 "%s: %u buffers (MHA: 1, K half then V half, or 2, K and "
				 "V; MLA: 1)",
				 fn, nbufs);
	uint8_t *bases[2];
	uint64_t half = p.bytes[0];
	if (nbufs == 1) {
		/* The plan checked that both halves fit 64 bits. */
		rc = cover(fn, 0, g->mla ? "the latent buffer" : "K half then V half", &bufs[0],
			   half * p.nbuffers);
		bases[0] = bufs[0].addr;
		bases[1] = bases[0] + half;
	} else {
		if (!(rc = cover(fn, 0, "the K half", &bufs[0], half)))
			rc = cover(fn, 1, "the V half", &bufs[1], half);
		bases[0] = bufs[0].addr;
		bases[1] = bufs[1].addr;
	}
	return rc ? rc : wrap_finish(&p, g, sizeof(*g), bases, bufs, nbufs, out);
}

int hc_pool_wrap_mamba(const struct hc_mamba_geometry *g, const struct hc_region *temporal,
		       const struct hc_region *conv, struct hc_pool **out)
{
	static const char fn[] = "hc_pool_wrap_mamba";
	if (!g || !out)
		return util_fail(-EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	struct pool_plan p;
	int rc = pool_plan_mamba(g, &p);
	if (rc)
		return rc;
	if (g->nconv && !conv)
		return util_fail(-EINVAL, "%s: conv is NULL for %u conv buffers", fn, g->nconv);
	bool has_temporal = temporal && temporal->len > 0;
	if (!g->temporal_bytes && has_temporal)
		return util_fail(-EINVAL,
				 "%s: a temporal buffer of %zu bytes, but temporal_bytes "
				 "is 0",
				 fn, temporal->len);
	/* The plan's buffers: temporal (when temporal_bytes > 0), conv 0..n-1. */
	struct hc_region regions[POOL_MAX_BUFFERS];
	uint8_t *bases[POOL_MAX_BUFFERS];
	unsigned skip = g->temporal_bytes ? 0 : 1; /* plan index = argument index - skip */
	for (unsigned i = skip; i <= g->nconv; i++) {
		const struct hc_region *r = i == 0 ? temporal : &conv[i - 1];
		unsigned b = i - skip;
		if ((rc = cover(fn, i, p.what[b], r, p.bytes[b])))
			return rc;
		regions[b] = *r;
		bases[b] = r->addr;
	}
	return wrap_finish(&p, g, sizeof(*g), bases, regions, p.nbuffers, out);
}

int hc_pool_wrap_indexer(const struct hc_indexer_geometry *g, const struct hc_region *buf,
			 struct hc_pool **out)
{
	static const char fn[] = "hc_pool_wrap_indexer";
	if (!g || !out)
		return util_fail(-EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	struct pool_plan p;
	int rc = pool_plan_indexer(g, &p);
	if (!rc)
		rc = cover(fn, 0, p.what[0], buf, p.bytes[0]);
	if (rc)
		return rc;
	uint8_t *base = buf->addr;
	return wrap_finish(&p, g, sizeof(*g), &base, buf, 1, out);
}

int hc_pool_wrap_segments(const struct hc_segment_buffer *bufs, unsigned n, uint64_t pages,
			  uint32_t page_tokens, struct hc_pool **out)
{
	static const char fn[] = "hc_pool_wrap_segments";
	if (!bufs || !out)
		return util_fail(-EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	if (n < 1 || n > POOL_MAX_BUFFERS)
		return util_fail(-EINVAL, "%s: %u buffers (1 to %d)", fn, n, POOL_MAX_BUFFERS);
	if (!pages || !page_tokens)
		return util_fail(-EINVAL, "%s: %s must be > 0", fn,
				 pages ? "page_tokens" : "pages");
	struct pool_plan p = {.kind = HC_POOL_SEGMENTS,
			      .pages = pages,
			      .page_tokens = page_tokens,
			      .contiguous = true,
			      .nbuffers = n};
	struct hc_region regions[POOL_MAX_BUFFERS];
	uint8_t *bases[POOL_MAX_BUFFERS];
	for (unsigned i = 0; i < n; i++) {
		const struct hc_segment_buffer *b = &bufs[i];
		if (!b->seg_len || b->page_stride < b->seg_len)
			return util_fail(-EINVAL,
					 "%s: buffer %u: seg_len %llu must be > 0 and at most "
					 "page_stride %llu",
					 fn, i, (unsigned long long)b->seg_len,
					 (unsigned long long)b->page_stride);
		if (b->component != HC_COMP_K && b->component != HC_COMP_V &&
		    b->component != HC_COMP_PLAIN)
			return util_fail(-EINVAL,
					 "%s: buffer %u: component %d is not HC_COMP_K, "
					 "HC_COMP_V or HC_COMP_PLAIN",
					 fn, i, (int)b->component);
		uint64_t need;
		if (!util_mul(pages - 1, b->page_stride, &need) ||
		    __builtin_add_overflow(need, b->seg_len, &need) ||
		    __builtin_add_overflow(p.page_bytes, b->seg_len, &p.page_bytes))
			return util_fail(-EINVAL, "%s: buffer %u: sizes overflow 64 bits", fn, i);
		regions[i] = (struct hc_region){b->base, b->len};
		int rc = cover(fn, i, "segments", &regions[i], need);
		if (rc)
			return rc;
		p.buffers[i] = (struct pool_buffer){.page_stride = b->page_stride,
						    .page_len = b->seg_len,
						    .component = b->component,
						    .index = b->index};
		bases[i] = b->base;
	}
	return wrap_finish(&p, NULL, 0, bases, regions, n, out);
}
