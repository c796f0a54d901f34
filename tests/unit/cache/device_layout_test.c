/* The built-in copy engine moves every (layer, token, head) of a page to
 * its place in the host pool's layout, for each of the four KV layouts,
 * MHA and MLA: after a device-to-host backup each host element is found
 * where that layout puts it, and a host-to-device load gives the device
 * page back byte for byte. A round trip alone would not catch a wrong
 * mapping (any bijection within a page survives it), hence the element
 * check. */
#include "controller_helpers.h"

#include <hicache/pool.h>

#define L 3
#define H 2
#define D 8
#define NPAGES 4

/* Element e of a page, in the device pool's flat (layer_first) order. */
static uint16_t value(unsigned tag, uint32_t b, uint32_t l, uint32_t t, uint32_t h, uint32_t d)
{
	return (uint16_t)(tag * 1000 + (((b * L + l) * CT_PS + t) * H + h) * D + d);
}

/* Offset in elements of (b, l, t, h, d) in a host page's flat image. */
static size_t host_offset(enum hc_kv_layout layout, uint32_t b, uint32_t l, uint32_t t, uint32_t h,
			  uint32_t d)
{
	size_t half = (size_t)CT_PS * L * H * D;
	switch (layout) {
	case HC_LAYOUT_PAGE_FIRST:
		return b * half + (((size_t)t * L + l) * H + h) * D + d;
	case HC_LAYOUT_PAGE_HEAD:
		return b * half + (((size_t)h * CT_PS + t) * L + l) * D + d;
	case HC_LAYOUT_LAYER_FIRST:
	case HC_LAYOUT_PAGE_FIRST_DIRECT:
	default:
		return b * half + (((size_t)l * CT_PS + t) * H + h) * D + d;
	}
}

static void fill(uint16_t *page, unsigned tag, uint32_t nbuf)
{
	size_t i = 0;
	for (uint32_t b = 0; b < nbuf; b++)
		for (uint32_t l = 0; l < L; l++)
			for (uint32_t t = 0; t < CT_PS; t++)
				for (uint32_t h = 0; h < H; h++)
					for (uint32_t d = 0; d < D; d++)
						page[i++] = value(tag, b, l, t, h, d);
}

static void check_layout(enum hc_kv_layout layout, bool mla)
{
	uint32_t nbuf = mla ? 1 : 2;
	struct hc_cache_opts o;
	struct ct t;
	ct_opts(&o, HC_WRITE_THROUGH, 2 * NPAGES * CT_PS, 2 * NPAGES * CT_PS);
	o.kv = (struct hc_kv_geometry){.layers = L,
				       .heads = H,
				       .head_dim = D,
				       .elem_bytes = 2,
				       .mla = mla,
				       .layout = layout};
	ct_open_opts(&t, &o, false);
	assert_int_equal(t.page_bytes, (size_t)nbuf * CT_PS * L * H * D * 2);

	uint32_t tok[NPAGES * CT_PS];
	uint64_t slots[NPAGES];
	uint16_t *page = malloc(t.page_bytes), *got = malloc(t.page_bytes);
	for (size_t i = 0; i < NPAGES * CT_PS; i++)
		tok[i] = (uint32_t)(7000 + i);
	struct hc_cache_req *r;
	assert_int_equal(hc_cache_match(t.c, tok, NPAGES * CT_PS, &r), 0);
	assert_int_equal(hc_cache_alloc(r, NPAGES * CT_PS, slots, NPAGES), NPAGES);
	for (unsigned p = 0; p < NPAGES; p++) {
		fill(page, p + 1, nbuf);
		assert_int_equal(hc_cache_dev_write(t.c, slots[p], page, t.page_bytes), 0);
	}
	assert_int_equal(hc_cache_insert(r, tok, NPAGES * CT_PS), NPAGES);
	hc_cache_release(r);
	assert_int_equal(hc_cache_flush(t.c), 0);

	/* Every page is on host, each element where the layout puts it. */
	struct hc_pool *host = hc_cache_host_pool(t.c);
	unsigned found = 0;
	for (uint64_t s = 0; s < hc_pool_pages(host); s++) {
		assert_int_equal(hc_pool_gather(host, s, got, t.page_bytes), 0);
		unsigned tag = got[0] / 1000;
		if (tag < 1 || tag > NPAGES || got[0] % 1000)
			continue;
		found++;
		for (uint32_t b = 0; b < nbuf; b++)
			for (uint32_t l = 0; l < L; l++)
				for (uint32_t k = 0; k < CT_PS; k++)
					for (uint32_t h = 0; h < H; h++)
						for (uint32_t d = 0; d < D; d++) {
							size_t at = host_offset(layout, b, l, k, h,
										d);
							if (got[at] != value(tag, b, l, k, h, d))
								fail_msg(
									"%s%s: page %u (b%u l%u t%u h%u d%u) "
									"holds %u, expected %u",
									hc_kv_layout_name(layout),
									mla ? " mla" : "", tag, b,
									l, k, h, d, got[at],
									value(tag, b, l, k, h, d));
						}
	}
	assert_int_equal(found, NPAGES);

	/* Back to device from host only. */
	assert_int_equal(hc_cache_evict_device(t.c, 1u << 30), NPAGES * CT_PS);
	assert_int_equal(hc_cache_match(t.c, tok, NPAGES * CT_PS, &r), 0);
	struct hc_cache_req_info info;
	hc_cache_req_info(r, &info);
	assert_int_equal(info.host_tokens, NPAGES * CT_PS);
	assert_int_equal(hc_cache_load(r), NPAGES * CT_PS);
	assert_int_equal(hc_cache_layer_wait(r, UINT32_MAX), 0);
	assert_int_equal(hc_cache_req_dev_slots(r, slots, NPAGES), NPAGES);
	for (unsigned p = 0; p < NPAGES; p++) {
		fill(page, p + 1, nbuf);
		assert_int_equal(hc_cache_dev_read(t.c, slots[p], got, t.page_bytes), 0);
		assert_memory_equal(got, page, t.page_bytes);
	}
	hc_cache_release(r);
	free(page);
	free(got);
	ct_close(&t);
}

static void layouts_mha(void **state)
{
	(void)state;
	check_layout(HC_LAYOUT_LAYER_FIRST, false);
	check_layout(HC_LAYOUT_PAGE_FIRST, false);
	check_layout(HC_LAYOUT_PAGE_FIRST_DIRECT, false);
	check_layout(HC_LAYOUT_PAGE_HEAD, false);
}

static void layouts_mla(void **state)
{
	(void)state;
	check_layout(HC_LAYOUT_LAYER_FIRST, true);
	check_layout(HC_LAYOUT_PAGE_FIRST, true);
	check_layout(HC_LAYOUT_PAGE_FIRST_DIRECT, true);
	check_layout(HC_LAYOUT_PAGE_HEAD, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(layouts_mha),
		cmocka_unit_test(layouts_mla),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
