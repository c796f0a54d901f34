/* Controller: pages round-trip through every tier byte for byte (device ->
 * host -> L3, evicted, prefetched back, loaded layer by layer), hit
 * accounting per tier, the prefetch threshold and the half-pool cap,
 * reservation accounting after completion, revoke and abort at each stage,
 * the write policies, and no_data mode. */
#include "controller_helpers.h"

#define N 40 /* tokens: 10 pages */

static void roundtrip_all_tiers(void **state)
{
	(void)state;
	struct ct t;
	uint32_t tok[N];
	struct hc_cache_stats s;
	struct hc_cache_req_info info;

	ct_open(&t, HC_WRITE_THROUGH, true, false, 64, 128);
	ct_tokens(tok, N, 1);

	info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(info.dev_tokens + info.host_tokens + info.l3_tokens, 0);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.pages_l3_write, N / CT_PS);
	assert_int_equal(s.host_pages_used, N / CT_PS);

	/* L1 hit. */
	info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(info.dev_tokens, N);

	/* L2 hit: demoted from device, loaded back. */
	assert_int_equal(hc_cache_evict_device(t.c, N), N);
	info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(info.dev_tokens, 0);
	assert_int_equal(info.host_tokens, N);
	assert_int_equal(info.loaded_tokens, N);

	/* L3 hit: gone from device and host, prefetched, loaded, checked. */
	assert_int_equal(hc_cache_evict_device(t.c, N), N);
	assert_int_equal(hc_cache_evict_host(t.c, N), N);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.host_pages_used + s.dev_pages_used, 0);
	info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(info.dev_tokens + info.host_tokens, 0);
	assert_int_equal(info.l3_tokens, N);
	assert_int_equal(info.loaded_tokens, N);

	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.hit_tokens[0], N);
	assert_int_equal(s.hit_tokens[1], N);
	assert_int_equal(s.hit_tokens[2], N);
	assert_int_equal(s.pages_l3_read, N / CT_PS);
	assert_int_equal(s.bytes_l3_read, N / CT_PS * t.page_bytes);
	assert_int_equal(s.bytes_h2d, 2 * N / CT_PS * t.page_bytes);
	ct_assert_empty(&t);
	ct_close(&t);
}

/* A shared prefix on device, the tail from L3: the prefetch chains keys
 * from the match's last key. */
static void partial_prefix(void **state)
{
	(void)state;
	struct ct t;
	uint32_t tok[N];
	struct hc_cache_req_info info;

	ct_open(&t, HC_WRITE_THROUGH, true, false, 64, 128);
	ct_tokens(tok, N, 2);
	ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_evict_device(t.c, N), N);
	assert_int_equal(hc_cache_evict_host(t.c, N), N);
	ct_cycle(&t, tok, 8, HC_STOP_WAIT_COMPLETE, true); /* 2 pages back via L3... */
	info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(info.dev_tokens, 8);
	assert_int_equal(info.l3_tokens, N - 8);
	ct_assert_empty(&t);
	ct_close(&t);
}

static void threshold_and_cap(void **state)
{
	(void)state;
	struct ct t;
	uint32_t tok[80];
	struct hc_cache_stats s;
	struct hc_cache_req *r;
	struct hc_cache_req_info info;

	/* Host pool of 24 pages: prefetch reservations capped at 12. */
	ct_open(&t, HC_WRITE_THROUGH, true, false, 80, 96);
	ct_tokens(tok, 80, 3);
	ct_cycle(&t, tok, 80, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_evict_device(t.c, 80), 80);
	assert_true(hc_cache_evict_host(t.c, 80) >= 80);

	/* Below the threshold (8 tokens): no prefetch at all. */
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	uint64_t before = s.prefetches;
	assert_int_equal(hc_cache_match(t.c, tok, 7, &r), 0);
	assert_true(hc_cache_prefetch_done(r));
	assert_int_equal(hc_cache_prefetch_wait(r, HC_STOP_WAIT_COMPLETE), 0);
	hc_cache_release(r);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.prefetches, before);

	/* 20 pages in L3, at most 12 reserved. */
	assert_int_equal(hc_cache_match(t.c, tok, 80, &r), 0);
	assert_int_equal(hc_cache_prefetch_wait(r, HC_STOP_WAIT_COMPLETE), 48);
	hc_cache_req_info(r, &info);
	assert_int_equal(info.l3_tokens, 48);
	assert_int_equal(info.l3_pending, 0);
	hc_cache_release(r);
	ct_assert_empty(&t);
	ct_close(&t);
}

/* Abort at every stage, and revoke; every reservation, pin, lock and slot
 * comes back. */
static void abort_each_stage(void **state)
{
	(void)state;
	struct ct t;
	uint32_t tok[N];
	struct hc_cache_req *r;
	uint64_t slots[CT_MAX_PAGES];

	ct_open(&t, HC_WRITE_THROUGH, true, false, 64, 128);
	ct_tokens(tok, N, 4);
	ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, false);
	for (int stage = 0; stage < 6; stage++) {
		assert_int_equal(hc_cache_flush(t.c), 0);
		hc_cache_evict_device(t.c, 1u << 20);
		hc_cache_evict_host(t.c, 1u << 20);
		assert_int_equal(hc_cache_match(t.c, tok, N, &r), 0);
		if (stage >= 1)
			assert_true(hc_cache_prefetch_wait(r, stage == 1 ? HC_STOP_BEST_EFFORT
									 : HC_STOP_WAIT_COMPLETE) >=
				    0);
		if (stage >= 3)
			assert_true(hc_cache_load(r) >= 0);
		if (stage >= 4)
			assert_int_equal(hc_cache_layer_wait(r, 0), 0);
		if (stage >= 5)
			assert_true(hc_cache_alloc(r, N + 8, slots, CT_MAX_PAGES) >= 2);
		hc_cache_abort(r);
		ct_assert_empty(&t);
	}
	/* Timeout policy on a prefetch that completes well within 2 s. */
	assert_int_equal(hc_cache_match(t.c, tok, N, &r), 0);
	assert_true(hc_cache_prefetch_wait(r, HC_STOP_TIMEOUT) >= 0);
	hc_cache_release(r);
	ct_assert_empty(&t);
	ct_close(&t);
}

static void write_back_policy(void **state)
{
	(void)state;
	struct ct t;
	uint32_t tok[N];
	struct hc_cache_stats s;
	struct hc_cache_req_info info;

	ct_open(&t, HC_WRITE_BACK, true, false, 64, 128);
	ct_tokens(tok, N, 5);
	ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.host_pages_used, 0);
	assert_int_equal(s.pages_l3_write, 0);
	/* Evicted from device: copied to host, then to L3. */
	assert_int_equal(hc_cache_evict_device(t.c, N), N);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.host_pages_used, N / CT_PS);
	assert_int_equal(s.pages_l3_write, N / CT_PS);
	info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(info.host_tokens, N);
	assert_int_equal(hc_cache_evict_device(t.c, N), N);
	assert_int_equal(hc_cache_evict_host(t.c, N), N);
	info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(info.l3_tokens, N);
	ct_assert_empty(&t);
	ct_close(&t);
}

/* A full device under write_back: the least recently used pages are copied
 * to host ahead, in the background, and eviction then only drops them. */
static void write_back_ahead(void **state)
{
	(void)state;
	struct ct t;
	uint32_t tok[N];
	struct hc_cache_stats s;
	struct hc_cache_req_info info;

	ct_open(&t, HC_WRITE_BACK, true, false, 4 * N, 16 * N);
	for (uint64_t seq = 0; seq < 4; seq++) {
		ct_tokens(tok, N, 40 + seq);
		ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	}
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.evicted_dev_pages, 0);
	assert_int_equal(s.write_back_ahead_pages, N / CT_PS);
	assert_int_equal(s.host_pages_used, N / CT_PS);
	/* A fifth sequence needs room: the oldest is dropped, not copied. */
	ct_tokens(tok, N, 44);
	ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.evicted_dev_pages, N / CT_PS);
	assert_int_equal(s.write_back_sync_pages, 0);
	/* The oldest comes back from host, checked byte for byte. */
	ct_tokens(tok, N, 40);
	info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(info.host_tokens, N);
	ct_assert_empty(&t);
	ct_close(&t);
}

static void selective_policy(void **state)
{
	(void)state;
	struct ct t;
	uint32_t tok[N];
	struct hc_cache_stats s;

	ct_open(&t, HC_WRITE_THROUGH_SELECTIVE, true, false, 64, 128);
	ct_tokens(tok, N, 6);
	ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true); /* hit 1 */
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.host_pages_used, 0);
	ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true); /* hit 2: backed up */
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.host_pages_used, N / CT_PS);
	assert_int_equal(s.pages_l3_write, N / CT_PS);
	ct_assert_empty(&t);
	ct_close(&t);
}

static void no_data_mode(void **state)
{
	(void)state;
	struct ct t;
	uint32_t tok[N];
	struct hc_cache_req_info info;

	ct_open(&t, HC_WRITE_THROUGH, true, true, 64, 128);
	assert_null(hc_cache_host_pool(t.c));
	ct_tokens(tok, N, 7);
	ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, false);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_evict_device(t.c, N), N);
	assert_int_equal(hc_cache_evict_host(t.c, N), N);
	info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, false);
	assert_int_equal(info.l3_tokens, N);
	assert_int_equal(info.loaded_tokens, N);
	ct_assert_empty(&t);
	ct_close(&t);
}

static void no_store(void **state)
{
	(void)state;
	struct ct t;
	uint32_t tok[N];
	struct hc_cache_req_info info;

	ct_open(&t, HC_WRITE_THROUGH, false, false, 64, 128);
	ct_tokens(tok, N, 8);
	ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_evict_device(t.c, N), N);
	info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(info.host_tokens, N);
	ct_assert_empty(&t);
	ct_close(&t);
}

static void bad_opts(void **state)
{
	(void)state;
	struct hc_cache_opts o;
	struct hc_cache *c = (struct hc_cache *)&o;
	hc_cache_opts_init(&o, sizeof(o));
	assert_int_equal(hc_cache_open(&o, &c), -EINVAL); /* no capacities */
	assert_null(c);
	o.device_tokens = 64;
	o.host_tokens = 64;
	o.page_size = 0;
	assert_int_equal(hc_cache_open(&o, &c), -EINVAL);
	hc_cache_close(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(roundtrip_all_tiers),
		cmocka_unit_test(partial_prefix),
		cmocka_unit_test(threshold_and_cap),
		cmocka_unit_test(abort_each_stage),
		cmocka_unit_test(write_back_policy),
		cmocka_unit_test(write_back_ahead),
		cmocka_unit_test(selective_policy),
		cmocka_unit_test(no_data_mode),
		cmocka_unit_test(no_store),
		cmocka_unit_test(bad_opts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
