/* Mamba, indexer and anchor pools, and the alignment answers that decide
 * zero-copy for every kind. */
#include "test_util.h"

#include <errno.h>
#include <stdlib.h>

static void fill_page(uint8_t *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)test_mix(seed * 1000003 + i);
}

static void test_mamba(void **state)
{
	(void)state;
	struct hc_mamba_geometry g = {.slots = 7,
				      .layers = 3,
				      .temporal_bytes = 40,
				      .nconv = 2,
				      .conv_bytes = {24, 8}};
	struct hc_pool *pool;
	assert_int_equal(hc_pool_create_mamba(&g, NULL, &pool), 0);
	assert_int_equal(hc_pool_kind(pool), HC_POOL_MAMBA);
	assert_int_equal(hc_pool_page_tokens(pool), 1);
	assert_int_equal(hc_pool_pages(pool), 7);
	size_t flat_len = 3 * (40 + 24 + 8);
	assert_int_equal(hc_pool_page_bytes(pool), flat_len);
	assert_int_equal(hc_pool_segment_count(pool), 3);
	assert_non_null(hc_pool_mamba_geometry(pool));
	assert_null(hc_pool_kv_geometry(pool));

	/* Segments: temporal then conv 0, conv 1; each slot's state is one
	 * run of layers x bytes, slots one stride apart; no overlap. */
	struct hc_segment s0[4], s1[4];
	assert_int_equal(hc_pool_page_segments(pool, 0, s0, 4), 3);
	assert_int_equal(hc_pool_page_segments(pool, 1, s1, 4), 3);
	static const size_t lens[] = {120, 72, 24};
	static const enum hc_component comps[] = {HC_COMP_MAMBA_TEMPORAL, HC_COMP_MAMBA_CONV,
						  HC_COMP_MAMBA_CONV};
	for (int i = 0; i < 3; i++) {
		assert_int_equal(s0[i].len, lens[i]);
		assert_int_equal(s0[i].component, comps[i]);
		assert_int_equal((uint8_t *)s1[i].addr - (uint8_t *)s0[i].addr, lens[i]);
		assert_int_equal((uintptr_t)s0[i].addr % 4096, 0);
		if (i > 0) {
			assert_int_equal(s0[i].index, (uint32_t)(i - 1));
			uint8_t *prev_end = (uint8_t *)s0[i - 1].addr + lens[i - 1] * 7;
			assert_true((uint8_t *)s0[i].addr >= prev_end);
		}
	}

	/* Flat page = temporal bytes then each conv's bytes; round trip into
	 * another slot; neighbours untouched. */
	uint8_t *flat = malloc(flat_len), *back = malloc(flat_len);
	for (uint64_t p = 0; p < 7; p++) {
		fill_page(flat, flat_len, p);
		assert_int_equal(hc_pool_scatter(pool, p, flat, flat_len), 0);
	}
	for (uint64_t p = 0; p < 7; p++) {
		fill_page(flat, flat_len, p);
		assert_int_equal(hc_pool_gather(pool, p, back, flat_len), 0);
		assert_memory_equal(back, flat, flat_len);
		struct hc_segment s[3];
		assert_int_equal(hc_pool_page_segments(pool, p, s, 3), 3);
		size_t off = 0;
		for (int i = 0; i < 3; i++) {
			assert_memory_equal(s[i].addr, flat + off, s[i].len);
			off += s[i].len;
		}
	}
	free(flat);
	free(back);
	hc_pool_destroy(pool);

	/* An empty temporal buffer is skipped: conv buffers only. */
	struct hc_mamba_geometry conv_only = {.slots = 2,
					      .layers = 1,
					      .nconv = 1,
					      .conv_bytes = {4096}};
	assert_int_equal(hc_pool_create_mamba(&conv_only, NULL, &pool), 0);
	assert_int_equal(hc_pool_segment_count(pool), 1);
	assert_int_equal(hc_pool_page_segments(pool, 1, s0, 4), 1);
	assert_int_equal(s0[0].component, HC_COMP_MAMBA_CONV);
	assert_true(hc_pool_aligned(pool, 4096));
	hc_pool_destroy(pool);
}

static void test_mamba_bad(void **state)
{
	(void)state;
	struct hc_pool *pool;
	struct hc_mamba_geometry g = {.slots = 2, .layers = 1};
	assert_int_equal(hc_pool_create_mamba(&g, NULL, &pool), -EINVAL);
	assert_last_error_contains("no temporal and no conv");
	g.nconv = 9;
	assert_int_equal(hc_pool_create_mamba(&g, NULL, &pool), -EINVAL);
	assert_last_error_contains("nconv");
	g.nconv = 2;
	g.conv_bytes[0] = 8;
	assert_int_equal(hc_pool_create_mamba(&g, NULL, &pool), -EINVAL);
	assert_last_error_contains("conv_bytes[1]");
	g.conv_bytes[1] = 8;
	g.slots = 0;
	assert_int_equal(hc_pool_create_mamba(&g, NULL, &pool), -EINVAL);
	assert_last_error_contains("slots");
}

static void test_indexer(void **state)
{
	(void)state;
	/* A DSA indexer page is not a multiple of 4096 bytes. */
	struct hc_indexer_geometry g = {.pages = 5, .page_size = 64, .page_bytes = 64 * 132};
	struct hc_pool *pool;
	assert_int_equal(hc_pool_create_indexer(&g, NULL, &pool), 0);
	assert_int_equal(hc_pool_page_bytes(pool), 64 * 132);
	assert_int_equal(hc_pool_page_tokens(pool), 64);
	struct hc_segment s[2];
	assert_int_equal(hc_pool_page_segments(pool, 3, s, 2), 1);
	assert_int_equal(s[0].len, 64 * 132);
	struct hc_region r;
	assert_int_equal(hc_pool_regions(pool, &r, 1), 1);
	assert_ptr_equal(s[0].addr, (uint8_t *)r.addr + 3 * 64 * 132);
	uint8_t flat[64 * 132], back[64 * 132];
	fill_page(flat, sizeof(flat), 3);
	assert_int_equal(hc_pool_scatter(pool, 3, flat, sizeof(flat)), 0);
	assert_memory_equal(s[0].addr, flat, sizeof(flat));
	assert_int_equal(hc_pool_gather(pool, 3, back, sizeof(back)), 0);
	assert_memory_equal(back, flat, sizeof(flat));
	assert_false(hc_pool_aligned(pool, 4096));
	assert_false(hc_pool_aligned(pool, 512));
	assert_true(hc_pool_aligned(pool, 256)); /* 8448 = 33 * 256 */
	hc_pool_destroy(pool);
	g.page_bytes = 0;
	assert_int_equal(hc_pool_create_indexer(&g, NULL, &pool), -EINVAL);
	assert_last_error_contains("page_bytes");
}

static void test_anchor(void **state)
{
	(void)state;
	struct hc_anchor_geometry g = {.pages = 16, .page_size = 32};
	struct hc_pool *pool;
	assert_int_equal(hc_pool_create_anchor(&g, &pool), 0);
	assert_int_equal(hc_pool_kind(pool), HC_POOL_ANCHOR);
	assert_int_equal(hc_pool_page_bytes(pool), 0);
	assert_int_equal(hc_pool_pages(pool), 16);
	assert_int_equal(hc_pool_segment_count(pool), 0);
	assert_false(hc_pool_contiguous(pool));
	assert_false(hc_pool_aligned(pool, 512));
	struct hc_region r;
	assert_int_equal(hc_pool_regions(pool, &r, 1), 0);
	uint8_t b[4];
	assert_int_equal(hc_pool_gather(pool, 0, b, sizeof(b)), -EINVAL);
	assert_last_error_contains("anchor");
	struct hc_segment s[1];
	assert_int_equal(hc_pool_page_segments(pool, 0, s, 1), -EOPNOTSUPP);
	/* Slots still work. */
	uint64_t pages[16];
	assert_int_equal(hc_slots_alloc(hc_pool_slots(pool), 16, pages), 0);
	assert_int_equal(hc_slots_available(hc_pool_slots(pool)), 0);
	hc_pool_destroy(pool);
}

static void test_kv_alignment(void **state)
{
	(void)state;
	static const struct {
		struct hc_kv_geometry g;
		size_t align;
		bool want;
	} cases[] = {
		/* page segment = layers*page_size*heads*head_dim*elem */
		{{4, 8, 128, 2, 16, 8, HC_LAYOUT_PAGE_FIRST, false}, 4096, true}, /* 128 KiB */
		{{4, 8, 128, 2, 16, 8, HC_LAYOUT_PAGE_FIRST_DIRECT, false}, 4096, true},
		{{4, 8, 128, 2, 16, 8, HC_LAYOUT_LAYER_FIRST, false},
		 4096,
		 false}, /* not contiguous */
		{{3, 1, 100, 2, 4, 8, HC_LAYOUT_PAGE_FIRST, false}, 4096, false}, /* 2400 B */
		{{3, 1, 100, 2, 4, 8, HC_LAYOUT_PAGE_FIRST, false}, 32, true},    /* 2400 = 75*32 */
		{{3, 1, 100, 2, 4, 8, HC_LAYOUT_PAGE_FIRST, false}, 64, false},
		{{61, 1, 576, 2, 64, 4, HC_LAYOUT_PAGE_FIRST, true}, 4096, true}, /* MLA: 4.3 MiB */
		{{61, 1, 576, 2, 1, 4, HC_LAYOUT_PAGE_FIRST, true}, 4096, false}, /* 70272 B */
		{{61, 1, 576, 2, 1, 4, HC_LAYOUT_PAGE_FIRST, true}, 512, false},
		{{61, 1, 576, 2, 1, 4, HC_LAYOUT_PAGE_FIRST, true}, 128, true},
		{{4, 8, 128, 2, 16, 8, HC_LAYOUT_PAGE_FIRST, false},
		 3000,
		 false}, /* not a power of 2 */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hc_pool *pool;
		assert_int_equal(hc_pool_create_kv(&cases[i].g, NULL, &pool), 0);
		if (hc_pool_aligned(pool, cases[i].align) != cases[i].want)
			fail_msg("case %zu: aligned(%zu) should be %d", i, cases[i].align,
				 cases[i].want);
		hc_pool_destroy(pool);
	}
}

static void test_mamba_alignment(void **state)
{
	(void)state;
	struct hc_mamba_geometry g = {.slots = 3,
				      .layers = 2,
				      .temporal_bytes = 2048,
				      .nconv = 1,
				      .conv_bytes = {1024}};
	struct hc_pool *pool;
	assert_int_equal(hc_pool_create_mamba(&g, NULL, &pool), 0);
	assert_false(hc_pool_aligned(pool, 4096)); /* conv stride 2048 */
	assert_true(hc_pool_aligned(pool, 2048));
	hc_pool_destroy(pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mamba),        cmocka_unit_test(test_mamba_bad),
		cmocka_unit_test(test_indexer),      cmocka_unit_test(test_anchor),
		cmocka_unit_test(test_kv_alignment), cmocka_unit_test(test_mamba_alignment),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
