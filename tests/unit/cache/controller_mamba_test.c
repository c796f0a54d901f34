/* Controller, hybrid (Mamba) mode: the usable match ends at the Mamba
 * boundary, host state eviction leaves tombstones on internal nodes and
 * takes leaves with it, a state round-trips through L3 byte for byte and
 * comes back with its KV on prefetch (trailing_pages picks the last page
 * with a state), and all accounting returns to 0 after aborts. */
#include "controller_helpers.h"

#define MB 48 /* bytes per state */

static void mt_open_sized(struct ct *t, enum hc_cache_write_policy wp, bool store,
			  uint64_t host_states, uint64_t dev_tokens, uint64_t host_tokens)
{
	ct_open_hybrid(t, wp, store, false, dev_tokens, host_tokens, MB, host_states);
}

static void mt_open_wp(struct ct *t, enum hc_cache_write_policy wp, bool store,
		       uint64_t host_states)
{
	mt_open_sized(t, wp, store, host_states, 128, 256);
}

static void mt_open(struct ct *t, bool store, uint64_t host_states)
{
	mt_open_wp(t, HC_WRITE_THROUGH, store, host_states);
}

static void mt_state(uint8_t *s, uint64_t seed)
{
	for (size_t i = 0; i < MB; i++)
		s[i] = (uint8_t)test_mix(seed * 7919u + i);
}

/* Match, wait, load (pages checked), alloc, write, state (seed 0: none),
 * insert, release. */
static struct hc_cache_req_info mt_cycle(struct ct *t, const uint32_t *tok, size_t n, uint64_t seed)
{
	struct hc_cache_req *r;
	struct hc_cache_req_info info;
	uint64_t slots[CT_MAX_PAGES];
	uint8_t *want = malloc(t->page_bytes), *got = malloc(t->page_bytes);
	uint8_t st[MB];

	assert_int_equal(hc_cache_match(t->c, tok, n, &r), 0);
	assert_true(hc_cache_prefetch_wait(r, HC_STOP_WAIT_COMPLETE) >= 0);
	assert_true(hc_cache_load(r) >= 0);
	assert_int_equal(hc_cache_layer_wait(r, CT_LAYERS), 0);
	int64_t have = hc_cache_req_dev_slots(r, slots, CT_MAX_PAGES);
	assert_true(have >= 0);
	for (int64_t i = 0; i < have; i++) {
		ct_page_bytes(tok, (size_t)i, want, t->page_bytes);
		assert_int_equal(hc_cache_dev_read(t->c, slots[i], got, t->page_bytes), 0);
		assert_memory_equal(want, got, t->page_bytes);
	}
	int64_t nnew = hc_cache_alloc(r, n, slots, CT_MAX_PAGES);
	assert_true(nnew >= 0);
	for (int64_t i = 0; i < nnew; i++) {
		ct_page_bytes(tok, (size_t)(have + i), want, t->page_bytes);
		assert_int_equal(hc_cache_dev_write(t->c, slots[i], want, t->page_bytes), 0);
	}
	if (seed) {
		mt_state(st, seed);
		assert_int_equal(hc_cache_mamba_write(r, st, MB), 0);
	}
	assert_true(hc_cache_insert(r, tok, n) >= 0);
	hc_cache_req_info(r, &info);
	hc_cache_release(r);
	free(want);
	free(got);
	return info;
}

/* Match only: the usable tokens; the boundary state must be seed's. */
static size_t mt_usable(struct ct *t, const uint32_t *tok, size_t n, uint64_t seed)
{
	struct hc_cache_req *r;
	struct hc_cache_req_info info;
	uint8_t want[MB], got[MB];
	assert_int_equal(hc_cache_match(t->c, tok, n, &r), 0);
	assert_true(hc_cache_prefetch_wait(r, HC_STOP_WAIT_COMPLETE) >= 0);
	hc_cache_req_info(r, &info);
	int rc = hc_cache_mamba_read(r, got, MB);
	if (seed) {
		assert_int_equal(rc, 0);
		mt_state(want, seed);
		assert_memory_equal(want, got, MB);
	} else {
		assert_int_equal(rc, -ENOENT);
	}
	hc_cache_release(r);
	return info.dev_tokens + info.host_tokens + info.l3_tokens;
}

static void mt_assert_empty(struct ct *t)
{
	struct hc_cache_stats s;
	ct_assert_empty(t);
	assert_int_equal(hc_cache_stats(t->c, &s, sizeof(s)), 0);
	assert_int_equal(s.mamba_dev_used, 0);
	assert_int_equal(s.mamba_host_used, 0);
}

static void boundary(void **state)
{
	(void)state;
	struct ct t;
	uint32_t tok[60];
	mt_open(&t, false, 0);
	ct_tokens(tok, 60, 1);

	mt_cycle(&t, tok, 40, 11); /* state after page 10 */
	mt_cycle(&t, tok, 60, 0);  /* pages 11..15 without a state */
	assert_int_equal(mt_usable(&t, tok, 60, 11), 40);
	assert_int_equal(mt_usable(&t, tok, 48, 11), 40);
	assert_int_equal(mt_usable(&t, tok, 40, 11), 40);
	assert_int_equal(mt_usable(&t, tok, 36, 0), 0); /* before the first state */
	/* A request past the boundary computes from it: only 40 tokens hit. */
	struct hc_cache_req_info info = mt_cycle(&t, tok, 60, 12);
	assert_int_equal(info.dev_tokens + info.host_tokens, 40);
	assert_int_equal(mt_usable(&t, tok, 60, 12), 60);

	/* Not hybrid: the calls say so. */
	struct ct p;
	struct hc_cache_req *r;
	uint8_t st[MB] = {0};
	ct_open(&p, HC_WRITE_THROUGH, false, false, 64, 128);
	assert_int_equal(hc_cache_match(p.c, tok, 40, &r), 0);
	assert_int_equal(hc_cache_mamba_write(r, st, MB), -EOPNOTSUPP);
	assert_int_equal(hc_cache_mamba_read(r, st, MB), -EOPNOTSUPP);
	hc_cache_abort(r);
	ct_close(&p);
	/* Wrong size. */
	assert_int_equal(hc_cache_match(t.c, tok, 40, &r), 0);
	assert_int_equal(hc_cache_mamba_write(r, st, MB - 1), -EINVAL);
	hc_cache_abort(r);
	mt_assert_empty(&t);
	ct_close(&t);
}

/* One host state slot: a second state evicts the first from an internal
 * node, which keeps its pages (tombstone); once the device copy is gone
 * too, nothing below the next state is usable. */
static void tombstone(void **state)
{
	(void)state;
	struct ct t;
	struct hc_cache_stats s;
	uint32_t a[48], d[20];
	mt_open(&t, false, 1);
	ct_tokens(a, 48, 2);
	ct_tokens(d, 20, 3);

	mt_cycle(&t, a, 40, 21);
	mt_cycle(&t, a, 48, 0);  /* A's node is internal now */
	mt_cycle(&t, d, 20, 31); /* takes the one host state slot from A */
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.mamba_host_used, 1);
	assert_int_equal(s.mamba_dev_used, 2);
	assert_int_equal(mt_usable(&t, a, 48, 21), 40); /* device state still there */

	assert_true(hc_cache_evict_device(t.c, 1u << 20) > 0);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.mamba_dev_used, 0);
	assert_int_equal(s.host_pages_used, 12 + 5); /* A's KV stays on host */
	assert_int_equal(mt_usable(&t, a, 48, 0), 0);
	assert_int_equal(mt_usable(&t, d, 20, 31), 20);
	mt_assert_empty(&t);
	ct_close(&t);
}

/* Host states have their own LRU; a host-only leaf goes with its state. */
static void host_lru(void **state)
{
	(void)state;
	struct ct t;
	struct hc_cache_stats s;
	uint32_t a[20], b[20], c[20];
	mt_open(&t, false, 2);
	ct_tokens(a, 20, 4);
	ct_tokens(b, 20, 5);
	ct_tokens(c, 20, 6);

	mt_cycle(&t, a, 20, 41);
	mt_cycle(&t, b, 20, 51);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_true(hc_cache_evict_device(t.c, 1u << 20) > 0);
	assert_int_equal(mt_usable(&t, a, 20, 41), 20); /* touches A: B is LRU */
	mt_cycle(&t, c, 20, 61);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.mamba_host_used, 2);
	assert_int_equal(mt_usable(&t, b, 20, 0), 0);
	assert_int_equal(mt_usable(&t, a, 20, 41), 20);
	assert_int_equal(mt_usable(&t, c, 20, 61), 20);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.host_pages_used, 10); /* B's pages went with its state */
	mt_assert_empty(&t);
	ct_close(&t);
}

/* Evict everything to L3, prefetch back: KV and state, byte for byte. KV
 * pages past the last state do not count (trailing_pages with N = 1). */
static void l3_roundtrip(void **state)
{
	(void)state;
	struct ct t;
	struct hc_cache_stats s;
	uint32_t a[48];
	mt_open(&t, true, 0);
	ct_tokens(a, 48, 7);

	mt_cycle(&t, a, 40, 71);
	mt_cycle(&t, a, 48, 0);
	mt_assert_empty(&t); /* all of it now lives in L3 only */
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.mamba_l3_write, 1);
	assert_int_equal(s.pages_l3_write, 12);

	assert_int_equal(mt_usable(&t, a, 48, 71), 40);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.mamba_l3_read, 1);
	assert_int_equal(s.hit_tokens[2], 40);
	/* The prefetched state is in the tree now: a full cycle loads the
	 * KV (checked) and sees the state on host. */
	struct hc_cache_req_info info = mt_cycle(&t, a, 48, 72);
	assert_int_equal(info.dev_tokens + info.host_tokens, 40);
	assert_int_equal(mt_usable(&t, a, 48, 72), 48);
	mt_assert_empty(&t);

	/* Again from L3 alone: the deeper state wins now. */
	struct hc_cache_req *r;
	uint8_t want[MB], got[MB];
	assert_int_equal(hc_cache_match(t.c, a, 48, &r), 0);
	assert_int_equal(hc_cache_prefetch_wait(r, HC_STOP_WAIT_COMPLETE), 48);
	assert_int_equal(hc_cache_load(r), 48);
	assert_int_equal(hc_cache_layer_wait(r, CT_LAYERS), 0);
	assert_int_equal(hc_cache_mamba_read(r, got, MB), 0);
	mt_state(want, 72);
	assert_memory_equal(want, got, MB);
	hc_cache_release(r);
	mt_assert_empty(&t);
	ct_close(&t);
}

/* The L3 prefix (16 pages, states after pages 8 and 16) is more than a
 * prefetch may reserve (half of 24 host pages): the prefetch is shortened
 * to the deepest state that fits, not skipped. */
static void shortened_prefetch(void **state)
{
	(void)state;
	struct ct t;
	struct hc_cache_stats s;
	uint32_t a[64];
	mt_open_sized(&t, HC_WRITE_THROUGH, true, 0, 128, 24 * CT_PS);
	ct_tokens(a, 64, 9);
	mt_cycle(&t, a, 32, 91);
	mt_cycle(&t, a, 64, 92);
	mt_assert_empty(&t);

	struct hc_cache_req *r;
	uint8_t want[MB], got[MB];
	assert_int_equal(hc_cache_match(t.c, a, 64, &r), 0);
	assert_int_equal(hc_cache_prefetch_wait(r, HC_STOP_WAIT_COMPLETE), 32);
	assert_int_equal(hc_cache_mamba_read(r, got, MB), 0);
	mt_state(want, 91);
	assert_memory_equal(want, got, MB);
	assert_int_equal(hc_cache_load(r), 32);
	assert_int_equal(hc_cache_layer_wait(r, CT_LAYERS), 0);
	hc_cache_release(r);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.hit_tokens[2], 32);
	assert_int_equal(s.mamba_l3_read, 1);
	mt_assert_empty(&t);
	ct_close(&t);
}

/* Abort at each stage of a hybrid prefetch: every slot and state returns. */
static void abort_accounting(void **state)
{
	(void)state;
	struct ct t;
	uint32_t a[40];
	struct hc_cache_req *r;
	mt_open(&t, true, 0);
	ct_tokens(a, 40, 8);
	mt_cycle(&t, a, 40, 81);
	mt_assert_empty(&t);

	assert_int_equal(hc_cache_match(t.c, a, 40, &r), 0);
	hc_cache_abort(r); /* prefetch in flight */
	mt_assert_empty(&t);

	assert_int_equal(hc_cache_match(t.c, a, 40, &r), 0);
	assert_true(hc_cache_prefetch_wait(r, HC_STOP_WAIT_COMPLETE) >= 0);
	assert_true(hc_cache_load(r) >= 0);
	hc_cache_abort(r); /* load in flight */
	mt_assert_empty(&t);

	uint64_t slots[CT_MAX_PAGES];
	uint8_t st[MB] = {1};
	assert_int_equal(hc_cache_match(t.c, a, 40, &r), 0);
	assert_true(hc_cache_prefetch_wait(r, HC_STOP_WAIT_COMPLETE) >= 0);
	assert_true(hc_cache_alloc(r, 40, slots, CT_MAX_PAGES) >= 0);
	assert_int_equal(hc_cache_mamba_write(r, st, MB), 0);
	hc_cache_abort(r); /* state written, never inserted */
	mt_assert_empty(&t);
	ct_close(&t);
}

/* write_back: the state gets its host copy (and L3 backup) when its node
 * leaves the device; write_through_selective once the node is hot. */
static void write_back_and_selective(void **state)
{
	(void)state;
	struct ct t;
	struct hc_cache_stats s;
	uint32_t a[40];
	ct_tokens(a, 40, 10);
	mt_open_wp(&t, HC_WRITE_BACK, true, 0);
	mt_cycle(&t, a, 40, 101);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.mamba_host_used, 0);
	assert_true(hc_cache_evict_device(t.c, 1u << 20) > 0);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.mamba_host_used, 1);
	assert_int_equal(s.mamba_l3_write, 1);
	assert_int_equal(mt_usable(&t, a, 40, 101), 40);
	mt_assert_empty(&t);
	assert_int_equal(mt_usable(&t, a, 40, 101), 40); /* from L3 */
	mt_assert_empty(&t);
	ct_close(&t);

	mt_open_wp(&t, HC_WRITE_THROUGH_SELECTIVE, false, 0);
	mt_cycle(&t, a, 40, 102);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.mamba_host_used, 0);
	assert_int_equal(mt_usable(&t, a, 40, 102), 40); /* hits: 1 */
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.mamba_host_used, 0);
	assert_int_equal(mt_usable(&t, a, 40, 102), 40); /* hits: 2, hot */
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.mamba_host_used, 1);
	mt_assert_empty(&t);
	ct_close(&t);
}

/* no_data: the same policies on metadata only. */
static void no_data_mode(void **state)
{
	(void)state;
	struct ct t = {0};
	struct hc_store_opts so;
	hc_store_opts_init(&so, sizeof(so));
	so.backend = "mem";
	so.model = "mt";
	so.tp_size = 1;
	assert_int_equal(hc_store_open(&so, &t.st), 0);
	struct hc_cache_opts o;
	hc_cache_opts_init(&o, sizeof(o));
	o.page_size = CT_PS;
	o.device_tokens = 64;
	o.host_tokens = 128;
	o.prefetch_threshold = CT_PS;
	o.store = t.st;
	o.no_data = true;
	o.mamba_bytes = MB;
	assert_int_equal(hc_cache_open(&o, &t.c), 0);

	uint32_t a[40];
	struct hc_cache_req *r;
	ct_tokens(a, 40, 9);
	assert_int_equal(hc_cache_match(t.c, a, 40, &r), 0);
	assert_int_equal(hc_cache_alloc(r, 40, NULL, 0), 10);
	assert_int_equal(hc_cache_mamba_write(r, NULL, 0), 0);
	assert_true(hc_cache_insert(r, a, 40) >= 0);
	hc_cache_release(r);
	mt_assert_empty(&t);
	assert_int_equal(hc_cache_match(t.c, a, 40, &r), 0);
	assert_int_equal(hc_cache_prefetch_wait(r, HC_STOP_WAIT_COMPLETE), 40);
	assert_int_equal(hc_cache_mamba_read(r, NULL, 0), 0);
	hc_cache_release(r);
	mt_assert_empty(&t);
	ct_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(boundary),         cmocka_unit_test(tombstone),
		cmocka_unit_test(host_lru),         cmocka_unit_test(l3_roundtrip),
		cmocka_unit_test(abort_accounting), cmocka_unit_test(write_back_and_selective),
		cmocka_unit_test(no_data_mode),     cmocka_unit_test(shortened_prefetch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
