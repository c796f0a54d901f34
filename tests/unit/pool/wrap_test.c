/*
 * Pools over caller-owned memory (hc_pool_wrap_*), in SGLang's own tensor
 * shapes, computed here independently of the pool code:
 *
 *   MHA kv_buffer  layer_first        (2, L, size, H, D)
 *                  page_first         (2, size, L, H, D)
 *                  page_first_direct  (2, pages, L, ps, H, D)
 *                  page_head          (2, pages, H, ps, L, D)
 *   MLA            the same without the leading 2 (H = 1, D = kv_dim)
 *   Mamba          temporal (size, Lm, 1, *tshape), conv_j (size, Lm, 1, *cshape_j)
 *
 * A wrapped pool must equal a created pool of the same geometry (page
 * bytes, segments, flat pages, alignment) while using the caller's memory;
 * every buffer too short by one byte fails naming the buffer and the bytes
 * it needs; destroying the pool leaves the memory mapped and untouched.
 */
#include "test_util.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static uint8_t elem_byte(uint32_t half, uint64_t token, uint32_t layer, uint32_t head, uint32_t dim,
			 uint32_t byte)
{
	uint64_t k = ((((half * 1000003ull + token) * 1009 + layer) * 1013 + head) * 1019 + dim) *
			     17 +
		     byte;
	return (uint8_t)test_mix(k);
}

/* Element offset in SGLang's kv_buffer (elements, not bytes). */
static uint64_t sglang_index(const struct hc_kv_geometry *g, uint32_t half, uint64_t token,
			     uint32_t l, uint32_t h, uint32_t d)
{
	uint64_t H = g->heads, D = g->head_dim, L = g->layers, ps = g->page_size, P = g->pages;
	uint64_t T = P * ps, page = token / ps, t = token % ps;
	switch (g->layout) {
	case HC_LAYOUT_LAYER_FIRST:
		return (((half * L + l) * T + token) * H + h) * D + d;
	case HC_LAYOUT_PAGE_FIRST:
		return (((half * T + token) * L + l) * H + h) * D + d;
	case HC_LAYOUT_PAGE_FIRST_DIRECT:
		return ((((half * P + page) * L + l) * ps + t) * H + h) * D + d;
	case HC_LAYOUT_PAGE_HEAD:
	default:
		return ((((half * P + page) * H + h) * ps + t) * L + l) * D + d;
	}
}

/* Element offset inside a flat page: K half then V half, each in the
 * layout's order. */
static uint64_t flat_index(const struct hc_kv_geometry *g, uint32_t half, uint32_t t, uint32_t l,
			   uint32_t h, uint32_t d)
{
	uint64_t H = g->heads, D = g->head_dim, L = g->layers, ps = g->page_size;
	uint64_t inner;
	if (g->layout == HC_LAYOUT_PAGE_FIRST)
		inner = ((t * L + l) * H + h) * D + d;
	else if (g->layout == HC_LAYOUT_PAGE_HEAD)
		inner = ((h * ps + t) * L + l) * D + d;
	else
		inner = ((l * ps + t) * H + h) * D + d;
	return half * L * ps * H * D + inner;
}

static uint64_t half_bytes(const struct hc_kv_geometry *g)
{
	return g->pages * g->page_size * g->layers * g->heads * g->head_dim * g->elem_bytes;
}

/* Page-aligned memory as SGLang's host allocator gives (mmap). */
static uint8_t *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	return p;
}

static bool mapped(const void *addr, size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char vec[64];
	uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(pg - 1);
	size_t n = (size_t)((uintptr_t)addr + len - a);
	return n <= 64 * (size_t)pg && mincore((void *)a, n, vec) == 0;
}

/* Fill buf (one kv_buffer, or K at k and V at v) in SGLang's layout. */
static void fill_kv(const struct hc_kv_geometry *g, uint8_t *k, uint8_t *v)
{
	uint32_t halves = g->mla ? 1 : 2;
	uint64_t hb = half_bytes(g);
	for (uint32_t half = 0; half < halves; half++)
		for (uint64_t tok = 0; tok < g->pages * g->page_size; tok++)
			for (uint32_t l = 0; l < g->layers; l++)
				for (uint32_t h = 0; h < g->heads; h++)
					for (uint32_t d = 0; d < g->head_dim; d++)
						for (uint32_t b = 0; b < g->elem_bytes; b++) {
							uint64_t o = sglang_index(g, half, tok, l,
										  h, d) *
									     g->elem_bytes +
								     b;
							uint8_t *at = half && v ? v + (o - hb)
										: k + o;
							*at = elem_byte(half, tok, l, h, d, b);
						}
}

static void check_flat(const struct hc_kv_geometry *g, uint64_t page, const uint8_t *flat)
{
	uint32_t halves = g->mla ? 1 : 2;
	for (uint32_t half = 0; half < halves; half++)
		for (uint32_t t = 0; t < g->page_size; t++)
			for (uint32_t l = 0; l < g->layers; l++)
				for (uint32_t h = 0; h < g->heads; h++)
					for (uint32_t d = 0; d < g->head_dim; d++)
						for (uint32_t b = 0; b < g->elem_bytes; b++) {
							uint64_t o = flat_index(g, half, t, l, h,
										d) *
									     g->elem_bytes +
								     b;
							uint8_t want = elem_byte(
								half, page * g->page_size + t, l, h,
								d, b);
							if (flat[o] != want)
								fail_msg(
									"%s page %llu half %u t %u l %u h %u d %u",
									hc_kv_layout_name(
										g->layout),
									(unsigned long long)page,
									half, t, l, h, d);
						}
}

static const enum hc_kv_layout layouts[] = {HC_LAYOUT_LAYER_FIRST, HC_LAYOUT_PAGE_FIRST,
					    HC_LAYOUT_PAGE_FIRST_DIRECT, HC_LAYOUT_PAGE_HEAD};

/* A wrapped pool answers every geometry query as the created one. */
static void assert_same_shape(struct hc_pool *w, struct hc_pool *c)
{
	assert_int_equal(hc_pool_kind(w), hc_pool_kind(c));
	assert_int_equal(hc_pool_pages(w), hc_pool_pages(c));
	assert_int_equal(hc_pool_page_tokens(w), hc_pool_page_tokens(c));
	assert_int_equal(hc_pool_page_bytes(w), hc_pool_page_bytes(c));
	assert_int_equal(hc_pool_contiguous(w), hc_pool_contiguous(c));
	assert_int_equal(hc_pool_segment_count(w), hc_pool_segment_count(c));
	struct hc_segment sw[9], sc[9];
	int n = hc_pool_page_segments(w, 1, sw, 9);
	if (!hc_pool_contiguous(c))
		return;
	assert_int_equal(n, hc_pool_page_segments(c, 1, sc, 9));
	for (int i = 0; i < n; i++) {
		assert_int_equal(sw[i].len, sc[i].len);
		assert_int_equal(sw[i].component, sc[i].component);
		assert_int_equal(sw[i].index, sc[i].index);
	}
}

/* Every layout, MHA and MLA, one buffer and (MHA) separate K and V. */
static void test_kv_shapes(void **state)
{
	(void)state;
	for (size_t li = 0; li < 4; li++)
		for (int mla = 0; mla < 2; mla++)
			for (unsigned nbufs = 1; nbufs <= (mla ? 1u : 2u); nbufs++) {
				struct hc_kv_geometry g = {.layers = 3,
							   .heads = mla ? 1 : 2,
							   .head_dim = mla ? 6 : 5,
							   .elem_bytes = 2,
							   .page_size = 4,
							   .pages = 5,
							   .layout = layouts[li],
							   .mla = mla};
				uint64_t hb = half_bytes(&g);
				size_t total = (size_t)hb * (mla ? 1 : 2);
				uint8_t *mem = map(total), *vmem = nbufs == 2 ? map(hb) : NULL;
				fill_kv(&g, mem, vmem);
				struct hc_region bufs[2] = {{mem, nbufs == 2 ? hb : total},
							    {vmem, hb}};
				struct hc_pool *w, *c;
				assert_int_equal(hc_pool_wrap_kv(&g, bufs, nbufs, &w), 0);
				assert_int_equal(hc_pool_create_kv(&g, NULL, &c), 0);
				assert_same_shape(w, c);
				assert_memory_equal(hc_pool_kv_geometry(w), &g, sizeof(g));

				size_t pb = hc_pool_page_bytes(w);
				uint8_t *flat = malloc(pb), *back = malloc(pb);
				for (uint64_t p = 0; p < g.pages; p++) {
					assert_int_equal(hc_pool_gather(w, p, flat, pb), 0);
					check_flat(&g, p, flat);
					/* The created pool takes the page and gives it back
					 * identically. */
					assert_int_equal(hc_pool_scatter(c, g.pages - 1 - p, flat,
									 pb),
							 0);
					assert_int_equal(hc_pool_gather(c, g.pages - 1 - p, back,
									pb),
							 0);
					assert_memory_equal(back, flat, pb);
					if (g.layout == HC_LAYOUT_LAYER_FIRST)
						continue;
					/* Zero-copy segments point into the caller's tensor. */
					struct hc_segment s[2];
					unsigned want = mla ? 1 : 2;
					assert_int_equal(hc_pool_page_segments(w, p, s, 2),
							 (int)want);
					size_t off = 0;
					for (unsigned h = 0; h < want; h++) {
						uint64_t first = sglang_index(&g, h,
									      p * g.page_size, 0, 0,
									      0) *
								 g.elem_bytes;
						uint8_t *at = h && vmem ? vmem + (first - hb)
									: mem + first;
						assert_ptr_equal(s[h].addr, at);
						assert_memory_equal(s[h].addr, flat + off,
								    s[h].len);
						off += s[h].len;
					}
					assert_int_equal(off, pb);
				}
				/* A scatter writes SGLang's bytes back where they were. */
				assert_int_equal(hc_pool_gather(w, 2, flat, pb), 0);
				memset(back, 0, pb);
				assert_int_equal(hc_pool_scatter(w, 2, back, pb), 0);
				assert_int_equal(hc_pool_gather(w, 2, back, pb), 0);
				for (size_t i = 0; i < pb; i++)
					assert_int_equal(back[i], 0);
				assert_int_equal(hc_pool_scatter(w, 2, flat, pb), 0);
				uint8_t *again = map(total);
				fill_kv(&g, again, NULL);
				assert_memory_equal(mem, again, vmem ? hb : total);
				if (vmem)
					assert_memory_equal(vmem, again + hb, hb);
				free(flat);
				free(back);
				hc_pool_destroy(w);
				hc_pool_destroy(c);
				munmap(again, total);
				munmap(mem, total);
				if (vmem)
					munmap(vmem, hb);
			}
}

/* MambaPoolHost: temporal (size, Lm, 1, *tshape) and conv_j of their own
 * sizes, each its own tensor; also conv only (temporal empty or NULL). */
static void test_mamba_shapes(void **state)
{
	(void)state;
	for (int variant = 0; variant < 3; variant++) {
		struct hc_mamba_geometry g = {.slots = 6,
					      .layers = 2,
					      .nconv = 2,
					      .temporal_bytes = variant ? 0 : 48,
					      .conv_bytes = {20, 12}};
		size_t tlen = (size_t)(g.slots * g.layers * g.temporal_bytes);
		size_t clen[2] = {(size_t)(g.slots * g.layers * 20),
				  (size_t)(g.slots * g.layers * 12)};
		uint8_t *t = tlen ? map(tlen) : NULL, *cv[2] = {map(clen[0]), map(clen[1])};
		for (size_t i = 0; i < tlen; i++)
			t[i] = (uint8_t)test_mix(i);
		for (int j = 0; j < 2; j++)
			for (size_t i = 0; i < clen[j]; i++)
				cv[j][i] = (uint8_t)test_mix(1000000 * (j + 1) + i);
		struct hc_region tr = {t, tlen}, conv[2] = {{cv[0], clen[0]}, {cv[1], clen[1]}};
		/* variant 1: an empty temporal tensor; variant 2: none at all. */
		struct hc_region empty = {cv[0], 0};
		const struct hc_region *temporal = variant == 0   ? &tr
						   : variant == 1 ? &empty
								  : NULL;
		struct hc_pool *w, *c;
		assert_int_equal(hc_pool_wrap_mamba(&g, temporal, conv, &w), 0);
		assert_int_equal(hc_pool_create_mamba(&g, NULL, &c), 0);
		assert_same_shape(w, c);
		assert_int_equal(hc_pool_kind(w), HC_POOL_MAMBA);
		assert_memory_equal(hc_pool_mamba_geometry(w), &g, sizeof(g));
		struct hc_region regions[4];
		assert_int_equal(hc_pool_regions(w, regions, 4), variant ? 2 : 3);
		assert_ptr_equal(regions[variant ? 0 : 1].addr, cv[0]);
		size_t pb = hc_pool_page_bytes(w);
		assert_int_equal(pb, 2 * (g.temporal_bytes + 20 + 12));
		uint8_t *flat = malloc(pb);
		for (uint64_t s = 0; s < g.slots; s++) {
			assert_int_equal(hc_pool_gather(w, s, flat, pb), 0);
			/* Temporal bytes of the slot, then each conv's. */
			size_t off = 0, per[3] = {2 * g.temporal_bytes, 40, 24};
			const uint8_t *src[3] = {t, cv[0], cv[1]};
			for (int b = 0; b < 3; b++) {
				if (!per[b])
					continue;
				assert_memory_equal(flat + off, src[b] + s * per[b], per[b]);
				off += per[b];
			}
		}
		free(flat);
		hc_pool_destroy(w);
		hc_pool_destroy(c);
		if (t)
			munmap(t, tlen);
		munmap(cv[0], clen[0]);
		munmap(cv[1], clen[1]);
	}
}

/* Indexer and segments (SWA-like K/V over strided buffers). */
static void test_indexer_and_segments(void **state)
{
	(void)state;
	struct hc_indexer_geometry ig = {.pages = 4, .page_size = 8, .page_bytes = 100};
	uint8_t *im = map(400);
	struct hc_region ir = {im, 400};
	struct hc_pool *w, *c;
	assert_int_equal(hc_pool_wrap_indexer(&ig, &ir, &w), 0);
	assert_int_equal(hc_pool_create_indexer(&ig, NULL, &c), 0);
	assert_same_shape(w, c);
	struct hc_segment s[3];
	assert_int_equal(hc_pool_page_segments(w, 3, s, 3), 1);
	assert_ptr_equal(s[0].addr, im + 300);
	hc_pool_destroy(w);
	hc_pool_destroy(c);

	/* Two buffers with strides larger than their segments (a view of
	 * every other row), and a third plain one. */
	uint8_t *k = map(8192), *v = map(8192), *x = map(4096);
	for (int i = 0; i < 8192; i++) {
		k[i] = (uint8_t)i;
		v[i] = (uint8_t)(i * 7);
	}
	struct hc_segment_buffer sb[3] = {
		{k, 8192, 2048, 1000, HC_COMP_K, 0},
		{v, 8192, 2048, 2048, HC_COMP_V, 0},
		{x, 4096, 1024, 16, HC_COMP_PLAIN, 7},
	};
	assert_int_equal(hc_pool_wrap_segments(sb, 3, 4, 16, &w), 0);
	assert_int_equal(hc_pool_kind(w), HC_POOL_SEGMENTS);
	assert_string_equal(hc_pool_kind_name(HC_POOL_SEGMENTS), "segments");
	assert_null(hc_pool_kv_geometry(w));
	assert_null(hc_pool_mamba_geometry(w));
	assert_int_equal(hc_pool_pages(w), 4);
	assert_int_equal(hc_pool_page_tokens(w), 16);
	assert_int_equal(hc_pool_page_bytes(w), 1000 + 2048 + 16);
	assert_true(hc_pool_contiguous(w));
	assert_int_equal(hc_pool_segment_count(w), 3);
	assert_int_equal(hc_pool_page_segments(w, 2, s, 3), 3);
	assert_ptr_equal(s[0].addr, k + 4096);
	assert_int_equal(s[0].len, 1000);
	assert_int_equal(s[0].component, HC_COMP_K);
	assert_ptr_equal(s[1].addr, v + 4096);
	assert_int_equal(s[2].index, 7);
	uint8_t flat[1000 + 2048 + 16];
	assert_int_equal(hc_pool_gather(w, 2, flat, sizeof(flat)), 0);
	assert_memory_equal(flat, k + 4096, 1000);
	assert_memory_equal(flat + 1000, v + 4096, 2048);
	/* The bytes between segments are not the pool's: a scatter leaves
	 * them alone. */
	memset(flat, 0xEE, sizeof(flat));
	assert_int_equal(hc_pool_scatter(w, 1, flat, sizeof(flat)), 0);
	assert_int_equal(k[2048 + 1000], (uint8_t)(2048 + 1000));
	assert_int_equal(k[2048 + 999], 0xEE);
	struct hc_region r[4];
	assert_int_equal(hc_pool_regions(w, r, 4), 3);
	assert_ptr_equal(r[1].addr, v);
	assert_int_equal(r[1].len, 8192);
	/* Not aligned: the first buffer's segments are 1000 bytes. */
	assert_false(hc_pool_aligned(w, 4096));
	hc_pool_destroy(w);

	/* One aligned buffer: aligned. */
	struct hc_segment_buffer one = {k, 8192, 4096, 4096, HC_COMP_PLAIN, 0};
	assert_int_equal(hc_pool_wrap_segments(&one, 1, 2, 1, &w), 0);
	assert_true(hc_pool_aligned(w, 4096));
	assert_false(hc_pool_aligned(w, 8192));
	hc_pool_destroy(w);
	munmap(im, 400);
	munmap(k, 8192);
	munmap(v, 8192);
	munmap(x, 4096);
}

/* A buffer one byte short fails, naming it and the bytes its pages need;
 * the exact length works. */
static void test_bad_lengths(void **state)
{
	(void)state;
	struct hc_pool *p = (struct hc_pool *)1;
	struct hc_kv_geometry g = {.layers = 2,
				   .heads = 2,
				   .head_dim = 64,
				   .elem_bytes = 2,
				   .page_size = 8,
				   .pages = 4,
				   .layout = HC_LAYOUT_PAGE_FIRST};
	uint64_t hb = half_bytes(&g); /* 16384 */
	uint8_t *mem = map(2 * hb);
	struct hc_region one = {mem, 2 * hb - 1};
	assert_int_equal(hc_pool_wrap_kv(&g, &one, 1, &p), -EINVAL);
	assert_null(p);
	assert_last_error_contains("buffer 0");
	assert_last_error_contains("32767 bytes");
	assert_last_error_contains("need 32768");
	one.len = 2 * hb;
	assert_int_equal(hc_pool_wrap_kv(&g, &one, 1, &p), 0);
	hc_pool_destroy(p);
	struct hc_region two[2] = {{mem, hb}, {mem + hb, hb - 1}};
	assert_int_equal(hc_pool_wrap_kv(&g, two, 2, &p), -EINVAL);
	assert_last_error_contains("buffer 1 (the V half)");
	assert_last_error_contains("need 16384");
	two[1].len = hb;
	two[1].addr = NULL;
	assert_int_equal(hc_pool_wrap_kv(&g, two, 2, &p), -EINVAL);
	assert_last_error_contains("NULL base");
	assert_int_equal(hc_pool_wrap_kv(&g, two, 3, &p), -EINVAL);
	assert_last_error_contains("3 buffers");
	assert_int_equal(hc_pool_wrap_kv(&g, two, 0, &p), -EINVAL);
	g.mla = true;
	two[1].addr = mem + hb;
	assert_int_equal(hc_pool_wrap_kv(&g, two, 2, &p), -EINVAL);
	assert_last_error_contains("MLA: 1");
	struct hc_region mla = {mem, hb - 1};
	assert_int_equal(hc_pool_wrap_kv(&g, &mla, 1, &p), -EINVAL);
	assert_last_error_contains("latent");
	g.mla = false;
	g.layers = 0;
	assert_int_equal(hc_pool_wrap_kv(&g, &one, 1, &p), -EINVAL);
	assert_last_error_contains("layers");
	g.layers = 2;
	g.layout = (enum hc_kv_layout)9;
	assert_int_equal(hc_pool_wrap_kv(&g, &one, 1, &p), -EINVAL);
	assert_last_error_contains("layout");
	assert_int_equal(hc_pool_wrap_kv(NULL, &one, 1, &p), -EINVAL);

	struct hc_mamba_geometry mg = {.slots = 4,
				       .layers = 2,
				       .temporal_bytes = 16,
				       .nconv = 2,
				       .conv_bytes = {8, 4}};
	struct hc_region t = {mem, 128}, conv[2] = {{mem + 1024, 64}, {mem + 2048, 31}};
	assert_int_equal(hc_pool_wrap_mamba(&mg, &t, conv, &p), -EINVAL);
	assert_last_error_contains("conv buffer 1");
	assert_last_error_contains("31 bytes");
	assert_last_error_contains("need 32");
	conv[1].len = 32;
	t.len = 127;
	assert_int_equal(hc_pool_wrap_mamba(&mg, &t, conv, &p), -EINVAL);
	assert_last_error_contains("temporal");
	assert_int_equal(hc_pool_wrap_mamba(&mg, NULL, conv, &p), -EINVAL);
	assert_last_error_contains("temporal");
	t.len = 128;
	assert_int_equal(hc_pool_wrap_mamba(&mg, &t, NULL, &p), -EINVAL);
	assert_int_equal(hc_pool_wrap_mamba(&mg, &t, conv, &p), 0);
	hc_pool_destroy(p);
	mg.temporal_bytes = 0;
	assert_int_equal(hc_pool_wrap_mamba(&mg, &t, conv, &p), -EINVAL);
	assert_last_error_contains("temporal_bytes is 0");

	struct hc_indexer_geometry ig = {.pages = 3, .page_size = 8, .page_bytes = 10};
	struct hc_region ir = {mem, 29};
	assert_int_equal(hc_pool_wrap_indexer(&ig, &ir, &p), -EINVAL);
	assert_last_error_contains("need 30");
	assert_int_equal(hc_pool_wrap_indexer(&ig, NULL, &p), -EINVAL);

	/* Segments: the last page ends at (pages - 1) * stride + seg_len. */
	struct hc_segment_buffer sb[2] = {{mem, 4096, 1024, 512, HC_COMP_K, 0},
					  {mem + 8192, 3 * 1024 + 511, 1024, 512, HC_COMP_V, 0}};
	assert_int_equal(hc_pool_wrap_segments(sb, 2, 4, 8, &p), -EINVAL);
	assert_last_error_contains("buffer 1");
	assert_last_error_contains("need 3584");
	sb[1].len++;
	assert_int_equal(hc_pool_wrap_segments(sb, 2, 4, 8, &p), 0);
	hc_pool_destroy(p);
	sb[0].page_stride = 511;
	assert_int_equal(hc_pool_wrap_segments(sb, 2, 4, 8, &p), -EINVAL);
	assert_last_error_contains("page_stride");
	sb[0].page_stride = 1024;
	sb[0].component = HC_COMP_MAMBA_CONV;
	assert_int_equal(hc_pool_wrap_segments(sb, 2, 4, 8, &p), -EINVAL);
	assert_last_error_contains("component");
	sb[0].component = HC_COMP_K;
	assert_int_equal(hc_pool_wrap_segments(sb, 0, 4, 8, &p), -EINVAL);
	assert_int_equal(hc_pool_wrap_segments(sb, 10, 4, 8, &p), -EINVAL);
	assert_int_equal(hc_pool_wrap_segments(sb, 2, 0, 8, &p), -EINVAL);
	assert_last_error_contains("pages");
	sb[1].base = NULL;
	assert_int_equal(hc_pool_wrap_segments(sb, 2, 4, 8, &p), -EINVAL);
	assert_last_error_contains("NULL base");
	munmap(mem, 2 * hb);
}

/* Aligned iff every buffer base and page stride is: page-aligned mmap
 * memory is, the same geometry 64 bytes in is not, as for created pools. */
static void test_alignment(void **state)
{
	(void)state;
	for (size_t li = 0; li < 4; li++) {
		struct hc_kv_geometry g = {.layers = 2,
					   .heads = 2,
					   .head_dim = 64,
					   .elem_bytes = 2,
					   .page_size = 8,
					   .pages = 4,
					   .layout = layouts[li]};
		uint64_t hb = half_bytes(&g);
		uint8_t *mem = map(2 * hb + 4096);
		struct hc_region at = {mem, 2 * hb}, off = {mem + 64, 2 * hb};
		struct hc_pool *a, *b, *c;
		assert_int_equal(hc_pool_wrap_kv(&g, &at, 1, &a), 0);
		assert_int_equal(hc_pool_wrap_kv(&g, &off, 1, &b), 0);
		assert_int_equal(hc_pool_create_kv(&g, NULL, &c), 0);
		bool want = layouts[li] != HC_LAYOUT_LAYER_FIRST;
		assert_int_equal(hc_pool_aligned(c, 4096), want);
		assert_int_equal(hc_pool_aligned(a, 4096), want);
		assert_false(hc_pool_aligned(b, 4096));
		assert_int_equal(hc_pool_aligned(b, 64), want);
		hc_pool_destroy(a);
		hc_pool_destroy(b);
		hc_pool_destroy(c);
		munmap(mem, 2 * hb + 4096);
	}
	/* Mamba: every buffer must be aligned. */
	struct hc_mamba_geometry mg = {.slots = 2,
				       .layers = 1,
				       .temporal_bytes = 4096,
				       .nconv = 1,
				       .conv_bytes = {4096}};
	uint8_t *mem = map(5 * 8192);
	struct hc_region t = {mem, 8192}, conv = {mem + 8192 + 512, 8192};
	struct hc_pool *p;
	assert_int_equal(hc_pool_wrap_mamba(&mg, &t, &conv, &p), 0);
	assert_false(hc_pool_aligned(p, 4096));
	hc_pool_destroy(p);
	conv.addr = mem + 16384;
	assert_int_equal(hc_pool_wrap_mamba(&mg, &t, &conv, &p), 0);
	assert_true(hc_pool_aligned(p, 4096));
	hc_pool_destroy(p);
	munmap(mem, 5 * 8192);
}

/* Destroying a wrapped pool frees only the pool: the caller's memory is
 * still mapped, holds what it held, and is reported as given. */
static void test_destroy_keeps_memory(void **state)
{
	(void)state;
	size_t len = 8 * 4096;
	uint8_t *mem = map(len), *copy = malloc(len);
	for (size_t i = 0; i < len; i++)
		mem[i] = (uint8_t)test_mix(i);
	memcpy(copy, mem, len);
	struct hc_pool *p[4];
	struct hc_kv_geometry g = {.layers = 1,
				   .heads = 1,
				   .head_dim = 2048,
				   .elem_bytes = 2,
				   .page_size = 1,
				   .pages = 4,
				   .layout = HC_LAYOUT_PAGE_HEAD};
	struct hc_region kv = {mem, len};
	assert_int_equal(hc_pool_wrap_kv(&g, &kv, 1, &p[0]), 0);
	struct hc_mamba_geometry mg = {.slots = 4, .layers = 1, .nconv = 1, .conv_bytes = {4096}};
	struct hc_region conv = {mem + 4096, 4 * 4096};
	assert_int_equal(hc_pool_wrap_mamba(&mg, NULL, &conv, &p[1]), 0);
	struct hc_indexer_geometry ig = {.pages = 8, .page_size = 1, .page_bytes = 4096};
	assert_int_equal(hc_pool_wrap_indexer(&ig, &kv, &p[2]), 0);
	struct hc_segment_buffer sb = {mem, len, 4096, 4096, HC_COMP_PLAIN, 0};
	assert_int_equal(hc_pool_wrap_segments(&sb, 1, 8, 1, &p[3]), 0);
	struct hc_region r;
	assert_int_equal(hc_pool_regions(p[0], &r, 1), 1);
	assert_ptr_equal(r.addr, mem);
	assert_int_equal(r.len, len);
	uint8_t flat[8192];
	for (int i = 0; i < 4; i++) {
		/* The slot allocator is the pool's own. */
		uint64_t slot;
		assert_int_equal(hc_slots_alloc(hc_pool_slots(p[i]), 1, &slot), 0);
		assert_int_equal(hc_pool_gather(p[i], slot, flat, sizeof(flat)), 0);
		hc_pool_destroy(p[i]);
		assert_true(mapped(mem, len));
		assert_memory_equal(mem, copy, len);
	}
	assert_int_equal(munmap(mem, len), 0);
	free(copy);
}

static void test_layout_names(void **state)
{
	(void)state;
	enum hc_kv_layout l;
	assert_string_equal(hc_kv_layout_name(HC_LAYOUT_PAGE_HEAD), "page_head");
	assert_int_equal(hc_kv_layout_parse("page_head", &l), 0);
	assert_int_equal(l, HC_LAYOUT_PAGE_HEAD);
	assert_string_equal(hc_kv_layout_name((enum hc_kv_layout)4), "unknown");
	assert_int_equal(hc_kv_layout_parse("page_tail", &l), -EINVAL);
	assert_last_error_contains("page_head");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kv_shapes),
		cmocka_unit_test(test_mamba_shapes),
		cmocka_unit_test(test_indexer_and_segments),
		cmocka_unit_test(test_bad_lengths),
		cmocka_unit_test(test_alignment),
		cmocka_unit_test(test_destroy_keeps_memory),
		cmocka_unit_test(test_layout_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
