/* Shared helpers for the controller tests: a small cache over a mem store,
 * page contents derived from page keys (so any copy of a page, in any
 * tier, can be checked byte for byte), and "no leak" checks. */
#ifndef HC_TEST_CONTROLLER_HELPERS_H
#define HC_TEST_CONTROLLER_HELPERS_H

#include "test_util.h"

#include <hicache/cache.h>

#include <errno.h>
#include <stdlib.h>

#define CT_PS 4 /* tokens per page */
#define CT_LAYERS 3
#define CT_MAX_PAGES 64

struct ct {
	struct hc_store *st;
	struct hc_cache *c;
	size_t page_bytes;
};

/* The tests' usual options: CT_PS-token pages of a small MHA geometry. */
static inline void ct_opts(struct hc_cache_opts *o, enum hc_cache_write_policy wp,
			   uint64_t dev_tokens, uint64_t host_tokens)
{
	hc_cache_opts_init(o, sizeof(*o));
	o->page_size = CT_PS;
	o->kv = (struct hc_kv_geometry){.layers = CT_LAYERS,
					.heads = 2,
					.head_dim = 8,
					.elem_bytes = 2,
					.layout = HC_LAYOUT_PAGE_FIRST};
	o->device_tokens = dev_tokens;
	o->host_tokens = host_tokens;
	o->write_policy = wp;
	o->prefetch_threshold = 2 * CT_PS;
}

/* Open a cache with o over a fresh mem store (store) or none. */
static inline void ct_open_opts(struct ct *t, struct hc_cache_opts *o, bool store)
{
	memset(t, 0, sizeof(*t));
	if (store) {
		struct hc_store_opts so;
		hc_store_opts_init(&so, sizeof(so));
		so.backend = "mem";
		so.model = "ct";
		so.tp_size = 1;
		assert_int_equal(hc_store_open(&so, &t->st), 0);
	}
	o->store = t->st;
	int rc = hc_cache_open(o, &t->c);
	if (rc)
		fail_msg("hc_cache_open: %s (%s)", hc_strerror(rc), hc_last_error());
	t->page_bytes = hc_cache_page_bytes(t->c);
}

/* mamba_bytes > 0: hybrid, with host_states host state slots (0: default). */
static inline void ct_open_hybrid(struct ct *t, enum hc_cache_write_policy wp, bool store,
				  bool no_data, uint64_t dev_tokens, uint64_t host_tokens,
				  size_t mamba_bytes, uint64_t host_states)
{
	struct hc_cache_opts o;
	ct_opts(&o, wp, dev_tokens, host_tokens);
	o.no_data = no_data;
	o.mamba_bytes = mamba_bytes;
	o.mamba_host_states = host_states;
	ct_open_opts(t, &o, store);
}

static inline void ct_open(struct ct *t, enum hc_cache_write_policy wp, bool store, bool no_data,
			   uint64_t dev_tokens, uint64_t host_tokens)
{
	ct_open_hybrid(t, wp, store, no_data, dev_tokens, host_tokens, 0, 0);
}

/* Everything is given back once the cache is flushed and emptied. */
static inline void ct_assert_empty(struct ct *t)
{
	struct hc_cache_stats s;
	assert_int_equal(hc_cache_flush(t->c), 0);
	assert_true(hc_cache_evict_device(t->c, 1u << 20) >= 0);
	/* write_back: eviction itself queues L3 backups. */
	assert_int_equal(hc_cache_flush(t->c), 0);
	assert_true(hc_cache_evict_host(t->c, 1u << 20) >= 0);
	/* Slots an L3 set was reading are freed when it ends. */
	assert_int_equal(hc_cache_flush(t->c), 0);
	assert_int_equal(hc_cache_stats(t->c, &s, sizeof(s)), 0);
	assert_int_equal(s.reserved_pages, 0);
	assert_int_equal(s.dev_pages_used, 0);
	assert_int_equal(s.host_pages_used, 0);
	assert_int_equal(s.backups_pending, 0);
}

static inline void ct_close(struct ct *t)
{
	hc_cache_close(t->c);
	hc_store_close(t->st);
}

/* Tokens of sequence `seq`: distinct per seq, shared prefixes where wanted. */
static inline void ct_tokens(uint32_t *tok, size_t n, uint64_t seq)
{
	for (size_t i = 0; i < n; i++)
		tok[i] = (uint32_t)test_mix(seq * 1000003u + i);
}

/* Flat bytes of page i of tokens: a function of the page key (the prefix). */
static inline void ct_page_bytes(const uint32_t *tok, size_t i, uint8_t *out, size_t len)
{
	struct hc_key keys[CT_MAX_PAGES];
	assert_true(i < CT_MAX_PAGES);
	assert_int_equal(hc_key_chain(NULL, tok, (i + 1) * CT_PS, CT_PS, keys, CT_MAX_PAGES),
			 (int64_t)(i + 1));
	for (size_t b = 0; b < len; b++)
		out[b] = (uint8_t)(keys[i].bytes[b % HC_KEY_BYTES] ^ (b * 131u) ^ (b >> 8));
}

/* The whole request cycle: match, (wait), load, check loaded bytes, alloc,
 * write, insert, release. Returns the request's info. */
static inline struct hc_cache_req_info ct_cycle(struct ct *t, const uint32_t *tok, size_t n,
						enum hc_cache_stop_policy pol, bool check)
{
	struct hc_cache_req *r;
	struct hc_cache_req_info info;
	uint64_t slots[CT_MAX_PAGES];
	uint8_t *want = malloc(t->page_bytes + 1), *got = malloc(t->page_bytes + 1);

	assert_int_equal(hc_cache_match(t->c, tok, n, &r), 0);
	assert_true(hc_cache_prefetch_wait(r, pol) >= 0);
	int64_t loaded = hc_cache_load(r);
	assert_true(loaded >= 0);
	uint32_t prev = 0;
	for (uint32_t l = 0; l < CT_LAYERS; l++) {
		assert_int_equal(hc_cache_layer_wait(r, l), 0);
		uint32_t ready = hc_cache_layer_ready(r);
		assert_true(ready >= l + 1 && ready >= prev);
		prev = ready;
	}
	int64_t have = hc_cache_req_dev_slots(r, slots, CT_MAX_PAGES);
	assert_true(have >= 0);
	if (check && t->page_bytes) {
		for (int64_t i = 0; i < have; i++) {
			ct_page_bytes(tok, (size_t)i, want, t->page_bytes);
			assert_int_equal(hc_cache_dev_read(t->c, slots[i], got, t->page_bytes), 0);
			assert_memory_equal(want, got, t->page_bytes);
		}
	}
	int64_t nnew = hc_cache_alloc(r, n, slots, CT_MAX_PAGES);
	assert_true(nnew >= 0);
	assert_int_equal((size_t)have + (size_t)nnew, n / CT_PS);
	for (int64_t i = 0; i < nnew && t->page_bytes; i++) {
		ct_page_bytes(tok, (size_t)(have + i), want, t->page_bytes);
		assert_int_equal(hc_cache_dev_write(t->c, slots[i], want, t->page_bytes), 0);
	}
	assert_true(hc_cache_insert(r, tok, n) >= 0);
	hc_cache_req_info(r, &info);
	hc_cache_release(r);
	free(want);
	free(got);
	return info;
}

#endif
