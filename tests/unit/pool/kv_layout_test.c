/*
 * KV pools: every layout's segments and gather/scatter against the
 * reference's array shapes, computed here independently of the pool code:
 *
 *   layer_first        (2, layers, tokens, heads, head_dim)
 *   page_first         (2, tokens, layers, heads, head_dim)
 *   page_first_direct  (2, pages, layers, page_size, heads, head_dim)
 *
 * Each element gets bytes derived from (half, token, layer, head, dim),
 * so any mix-up of page, layer, head or element shows as a mismatch.
 */
#include "test_util.h"

#include <errno.h>
#include <stdlib.h>

struct geo_case {
	struct hc_kv_geometry g;
};

static uint8_t elem_byte(uint32_t half, uint64_t token, uint32_t layer, uint32_t head, uint32_t dim,
			 uint32_t byte)
{
	uint64_t k = ((((half * 1000003ull + token) * 1009 + layer) * 1013 + head) * 1019 + dim) *
			     17 +
		     byte;
	return (uint8_t)test_mix(k);
}

/* Byte offset of an element in the pool's memory per the reference shape. */
static uint64_t ref_offset(const struct hc_kv_geometry *g, uint32_t half, uint64_t token,
			   uint32_t layer, uint32_t head, uint32_t dim)
{
	uint64_t H = g->heads, D = g->head_dim, L = g->layers, P = g->page_size;
	uint64_t T = g->pages * P;
	uint64_t idx;
	switch (g->layout) {
	case HC_LAYOUT_LAYER_FIRST:
		idx = ((half * L + layer) * T + token) * H * D + head * D + dim;
		break;
	case HC_LAYOUT_PAGE_FIRST:
		idx = ((half * T + token) * L + layer) * H * D + head * D + dim;
		break;
	default: {
		uint64_t page = token / P, t = token % P;
		idx = (((((half * g->pages + page) * L + layer) * P + t) * H + head) * D) + dim;
		break;
	}
	}
	return idx * g->elem_bytes;
}

/* Offset of an element inside a flat page: K half then V half, each
 * (tokens, layers, ...) for page_first, else (layers, tokens, ...). */
static uint64_t flat_offset(const struct hc_kv_geometry *g, uint32_t half, uint32_t t,
			    uint32_t layer, uint32_t head, uint32_t dim)
{
	uint64_t H = g->heads, D = g->head_dim, L = g->layers, P = g->page_size;
	uint64_t half_elems = L * P * H * D;
	uint64_t inner = g->layout == HC_LAYOUT_PAGE_FIRST ? (t * L + layer) : (layer * P + t);
	return (half * half_elems + inner * H * D + head * D + dim) * g->elem_bytes;
}

#define FOR_EACH_ELEM(g, halves)                                                                \
	for (uint32_t half = 0; half < (halves); half++)                                        \
		for (uint64_t token = 0; token < (g)->pages * (g)->page_size; token++)          \
			for (uint32_t layer = 0; layer < (g)->layers; layer++)                  \
				for (uint32_t head = 0; head < (g)->heads; head++)              \
					for (uint32_t dim = 0; dim < (g)->head_dim; dim++)      \
						for (uint32_t byte = 0; byte < (g)->elem_bytes; \
						     byte++)

static void fill_pool(struct hc_pool *pool, const struct hc_kv_geometry *g)
{
	struct hc_region r;
	assert_int_equal(hc_pool_regions(pool, &r, 1), 1);
	uint8_t *mem = r.addr;
	uint32_t halves = g->mla ? 1 : 2;
	uint64_t total = g->pages * g->page_size * g->layers * g->heads * g->head_dim *
			 g->elem_bytes * halves;
	assert_true(r.len >= total);
	FOR_EACH_ELEM(g, halves)
	mem[ref_offset(g, half, token, layer, head, dim) + byte] = elem_byte(half, token, layer,
									     head, dim, byte);
}

static void check_flat(const struct hc_kv_geometry *g, uint64_t page, const uint8_t *flat)
{
	uint32_t halves = g->mla ? 1 : 2;
	for (uint32_t half = 0; half < halves; half++)
		for (uint32_t t = 0; t < g->page_size; t++)
			for (uint32_t layer = 0; layer < g->layers; layer++)
				for (uint32_t head = 0; head < g->heads; head++)
					for (uint32_t dim = 0; dim < g->head_dim; dim++)
						for (uint32_t b = 0; b < g->elem_bytes; b++) {
							uint64_t o = flat_offset(g, half, t, layer,
										 head, dim);
							uint8_t want = elem_byte(
								half, page * g->page_size + t,
								layer, head, dim, b);
							if (flat[o + b] != want)
								fail_msg(
									"page %llu half %u t %u layer %u head %u dim %u byte %u",
									(unsigned long long)page,
									half, t, layer, head, dim,
									b);
						}
}

static const struct hc_kv_geometry geometries[] = {
	/* layers heads head_dim elem page_size pages */
	{3, 2, 5, 2, 4, 6, HC_LAYOUT_LAYER_FIRST, false},
	{3, 2, 5, 2, 4, 6, HC_LAYOUT_PAGE_FIRST, false},
	{3, 2, 5, 2, 4, 6, HC_LAYOUT_PAGE_FIRST_DIRECT, false},
	{2, 1, 7, 1, 3, 5, HC_LAYOUT_LAYER_FIRST, true},
	{2, 1, 7, 1, 3, 5, HC_LAYOUT_PAGE_FIRST, true},
	{2, 1, 7, 1, 3, 5, HC_LAYOUT_PAGE_FIRST_DIRECT, true},
	{4, 3, 8, 4, 1, 9, HC_LAYOUT_PAGE_FIRST, false},
	{4, 3, 8, 4, 1, 9, HC_LAYOUT_LAYER_FIRST, false},
};

static void test_gather_matches_reference(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(geometries) / sizeof(geometries[0]); c++) {
		const struct hc_kv_geometry *g = &geometries[c];
		struct hc_pool *pool;
		assert_int_equal(hc_pool_create_kv(g, NULL, &pool), 0);
		uint64_t page_bytes = (uint64_t)(g->mla ? 1 : 2) * g->layers * g->page_size *
				      g->heads * g->head_dim * g->elem_bytes;
		assert_int_equal(hc_pool_page_bytes(pool), page_bytes);
		assert_int_equal(hc_pool_pages(pool), g->pages);
		assert_int_equal(hc_pool_page_tokens(pool), g->page_size);
		assert_int_equal(hc_pool_kind(pool), HC_POOL_KV);
		assert_memory_equal(hc_pool_kv_geometry(pool), g, sizeof(*g));
		fill_pool(pool, g);
		uint8_t *flat = malloc(page_bytes);
		for (uint64_t p = 0; p < g->pages; p++) {
			assert_int_equal(hc_pool_gather(pool, p, flat, page_bytes), 0);
			check_flat(g, p, flat);
		}
		free(flat);
		hc_pool_destroy(pool);
	}
}

static void test_segments(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(geometries) / sizeof(geometries[0]); c++) {
		const struct hc_kv_geometry *g = &geometries[c];
		struct hc_pool *pool;
		assert_int_equal(hc_pool_create_kv(g, NULL, &pool), 0);
		struct hc_segment segs[4];
		if (g->layout == HC_LAYOUT_LAYER_FIRST) {
			assert_false(hc_pool_contiguous(pool));
			assert_int_equal(hc_pool_segment_count(pool), 0);
			assert_int_equal(hc_pool_page_segments(pool, 0, segs, 4), -EOPNOTSUPP);
			assert_last_error_contains("layer_first");
			hc_pool_destroy(pool);
			continue;
		}
		fill_pool(pool, g);
		unsigned want = g->mla ? 1 : 2;
		assert_true(hc_pool_contiguous(pool));
		assert_int_equal(hc_pool_segment_count(pool), want);
		size_t page_bytes = hc_pool_page_bytes(pool);
		uint8_t *flat = malloc(page_bytes);
		struct hc_region r;
		hc_pool_regions(pool, &r, 1);
		for (uint64_t p = 0; p < g->pages; p++) {
			assert_int_equal(hc_pool_page_segments(pool, p, segs, 4), (int)want);
			assert_int_equal(hc_pool_gather(pool, p, flat, page_bytes), 0);
			size_t off = 0;
			for (unsigned s = 0; s < want; s++) {
				assert_int_equal(segs[s].component, s == 0 ? HC_COMP_K : HC_COMP_V);
				assert_int_equal(segs[s].len, page_bytes / want);
				/* K at base + p * seg, V the same offset in the V half. */
				uint64_t expect = ref_offset(g, s, p * g->page_size, 0, 0, 0);
				assert_ptr_equal(segs[s].addr, (uint8_t *)r.addr + expect);
				assert_memory_equal(segs[s].addr, flat + off, segs[s].len);
				off += segs[s].len;
			}
			assert_int_equal(off, page_bytes);
		}
		assert_int_equal(hc_pool_page_segments(pool, g->pages, segs, 4), -EINVAL);
		if (want == 2)
			assert_int_equal(hc_pool_page_segments(pool, 0, segs, 1), -ENOSPC);
		free(flat);
		hc_pool_destroy(pool);
	}
}

static void test_scatter_round_trip(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(geometries) / sizeof(geometries[0]); c++) {
		const struct hc_kv_geometry *g = &geometries[c];
		struct hc_pool *src, *dst;
		assert_int_equal(hc_pool_create_kv(g, NULL, &src), 0);
		assert_int_equal(hc_pool_create_kv(g, NULL, &dst), 0);
		fill_pool(src, g);
		size_t page_bytes = hc_pool_page_bytes(src);
		uint8_t *flat = malloc(page_bytes), *back = malloc(page_bytes);
		/* Move the pages in reverse order into page (pages-1-p) of dst:
		 * a page lands in another slot, as on a cache hit. */
		for (uint64_t p = 0; p < g->pages; p++) {
			assert_int_equal(hc_pool_gather(src, p, flat, page_bytes), 0);
			assert_int_equal(hc_pool_scatter(dst, g->pages - 1 - p, flat, page_bytes),
					 0);
		}
		for (uint64_t p = 0; p < g->pages; p++) {
			assert_int_equal(hc_pool_gather(dst, g->pages - 1 - p, back, page_bytes),
					 0);
			check_flat(g, p, back);
		}
		/* Scatter into one page leaves its neighbours alone. */
		memset(flat, 0xAB, page_bytes);
		assert_int_equal(hc_pool_scatter(dst, 1, flat, page_bytes), 0);
		assert_int_equal(hc_pool_gather(dst, 0, back, page_bytes), 0);
		check_flat(g, g->pages - 1, back);
		assert_int_equal(hc_pool_gather(dst, 2, back, page_bytes), 0);
		check_flat(g, g->pages - 3, back);
		assert_int_equal(hc_pool_gather(dst, 1, back, page_bytes), 0);
		assert_memory_equal(back, flat, page_bytes);
		free(flat);
		free(back);
		hc_pool_destroy(src);
		hc_pool_destroy(dst);
	}
}

static void test_bad_arguments(void **state)
{
	(void)state;
	struct hc_kv_geometry g = {2, 2, 4, 2, 4, 4, HC_LAYOUT_PAGE_FIRST, false};
	struct hc_pool *pool = (struct hc_pool *)1;
	static const char *const fields[] = {"layers",     "heads",     "head_dim",
					     "elem_bytes", "page_size", "pages"};
	for (int f = 0; f < 6; f++) {
		struct hc_kv_geometry b = g;
		uint32_t *u32 = &b.layers;
		if (f < 5)
			u32[f] = 0;
		else
			b.pages = 0;
		assert_int_equal(hc_pool_create_kv(&b, NULL, &pool), -EINVAL);
		assert_null(pool);
		assert_last_error_contains(fields[f]);
	}
	struct hc_kv_geometry b = g;
	b.layout = (enum hc_kv_layout)7;
	assert_int_equal(hc_pool_create_kv(&b, NULL, &pool), -EINVAL);
	assert_last_error_contains("layout");
	b = g;
	b.pages = UINT64_MAX / 2;
	assert_int_equal(hc_pool_create_kv(&b, NULL, &pool), -EINVAL);
	assert_last_error_contains("overflow");
	assert_int_equal(hc_pool_create_kv(NULL, NULL, &pool), -EINVAL);

	assert_int_equal(hc_pool_create_kv(&g, NULL, &pool), 0);
	size_t pb = hc_pool_page_bytes(pool);
	uint8_t *buf = malloc(pb);
	assert_int_equal(hc_pool_gather(pool, 4, buf, pb), -EINVAL);
	assert_last_error_contains("out of range");
	assert_int_equal(hc_pool_gather(pool, 0, buf, pb - 1), -EINVAL);
	assert_last_error_contains("bytes");
	assert_int_equal(hc_pool_scatter(pool, 0, NULL, pb), -EINVAL);
	free(buf);
	hc_pool_destroy(pool);
	hc_pool_destroy(NULL);
}

static void test_layout_names(void **state)
{
	(void)state;
	enum hc_kv_layout l;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(hc_kv_layout_parse(hc_kv_layout_name((enum hc_kv_layout)i), &l),
				 0);
		assert_int_equal(l, i);
	}
	assert_int_equal(hc_kv_layout_parse("page_last", &l), -EINVAL);
	assert_last_error_contains("page_last");
	assert_string_equal(hc_pool_kind_name(HC_POOL_MAMBA), "mamba");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gather_matches_reference),
		cmocka_unit_test(test_segments),
		cmocka_unit_test(test_scatter_round_trip),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_layout_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
