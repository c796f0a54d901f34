/* Controller under concurrency (HC_TEST_CONCURRENCY): several threads run
 * whole request cycles at once over shared prefixes, with evictions,
 * every stop policy and aborts; loaded pages are checked byte for byte and
 * nothing leaks (slots, reservations, backups). The hybrid run also checks
 * every Mamba state a request sees against its prefix, with a host state
 * pool too small for all of them. Run under TSan too. */
#include "controller_helpers.h"

#include <pthread.h>

#define THREADS 4
#define ITERS 25

static struct ct g_t;

static void *worker(void *arg)
{
	uint64_t id = (uint64_t)(uintptr_t)arg;
	uint32_t tok[48];
	for (int i = 0; i < ITERS; i++) {
		uint64_t x = test_mix(id * 7919 + (uint64_t)i);
		/* Four families of prefixes shared between threads. */
		ct_tokens(tok, 48, x % 4);
		size_t n = 16 + (size_t)(x >> 8) % 33;
		for (size_t j = 24; j < n; j++) /* a private tail */
			tok[j] = (uint32_t)(x + j);
		enum hc_cache_stop_policy pol = (enum hc_cache_stop_policy)((x >> 16) % 3);
		if ((x >> 20) % 5 == 0) {
			struct hc_cache_req *r;
			assert_int_equal(hc_cache_match(g_t.c, tok, n, &r), 0);
			if ((x >> 24) % 2)
				assert_true(hc_cache_load(r) >= 0);
			hc_cache_abort(r);
		} else {
			ct_cycle(&g_t, tok, n, pol, true);
		}
		if ((x >> 28) % 4 == 0)
			hc_cache_evict_device(g_t.c, 16);
		if ((x >> 32) % 4 == 0)
			hc_cache_evict_host(g_t.c, 16);
	}
	return NULL;
}

static void run(enum hc_cache_write_policy wp, bool no_data)
{
	pthread_t th[THREADS];
	ct_open(&g_t, wp, true, no_data, 4 * 48 * THREADS, 8 * 48 * THREADS);
	for (uintptr_t i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, worker, (void *)i), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	ct_assert_empty(&g_t);
	ct_close(&g_t);
}

#define STATE_BYTES 40

/* A state is a function of the prefix it ends: bytes of its last page. */
static void state_of(const uint32_t *tok, size_t pages, uint8_t *out)
{
	ct_page_bytes(tok, pages - 1, out, STATE_BYTES);
}

static void hybrid_cycle(const uint32_t *tok, size_t n, enum hc_cache_stop_policy pol,
			 bool abort_early)
{
	struct hc_cache_req *r;
	struct hc_cache_req_info info;
	uint64_t slots[CT_MAX_PAGES];
	uint8_t want[STATE_BYTES], got[STATE_BYTES];
	uint8_t *pw = malloc(g_t.page_bytes), *pg = malloc(g_t.page_bytes);

	assert_int_equal(hc_cache_match(g_t.c, tok, n, &r), 0);
	assert_true(hc_cache_prefetch_wait(r, pol) >= 0);
	assert_true(hc_cache_load(r) >= 0);
	assert_int_equal(hc_cache_layer_wait(r, UINT32_MAX), 0);
	hc_cache_req_info(r, &info);
	size_t usable = (info.dev_tokens + info.host_tokens + info.l3_tokens) / CT_PS;
	int64_t have = hc_cache_req_dev_slots(r, slots, CT_MAX_PAGES);
	assert_int_equal(have, (int64_t)usable);
	for (int64_t i = 0; i < have; i++) {
		ct_page_bytes(tok, (size_t)i, pw, g_t.page_bytes);
		assert_int_equal(hc_cache_dev_read(g_t.c, slots[i], pg, g_t.page_bytes), 0);
		assert_memory_equal(pw, pg, g_t.page_bytes);
	}
	if (usable) {
		state_of(tok, usable, want);
		assert_int_equal(hc_cache_mamba_read(r, got, STATE_BYTES), 0);
		assert_memory_equal(want, got, STATE_BYTES);
	} else {
		assert_int_equal(hc_cache_mamba_read(r, got, STATE_BYTES), -ENOENT);
	}
	if (abort_early) {
		hc_cache_abort(r);
	} else {
		int64_t nnew = hc_cache_alloc(r, n, slots, CT_MAX_PAGES);
		assert_int_equal((size_t)nnew, n / CT_PS - usable);
		for (int64_t i = 0; i < nnew; i++) {
			ct_page_bytes(tok, usable + (size_t)i, pw, g_t.page_bytes);
			assert_int_equal(hc_cache_dev_write(g_t.c, slots[i], pw, g_t.page_bytes),
					 0);
		}
		state_of(tok, n / CT_PS, want);
		assert_int_equal(hc_cache_mamba_write(r, want, STATE_BYTES), 0);
		assert_true(hc_cache_insert(r, tok, n) >= 0);
		hc_cache_release(r);
	}
	free(pw);
	free(pg);
}

static void *hybrid_worker(void *arg)
{
	uint64_t id = (uint64_t)(uintptr_t)arg;
	uint32_t tok[48];
	for (int i = 0; i < ITERS; i++) {
		uint64_t x = test_mix(id * 104729 + (uint64_t)i);
		ct_tokens(tok, 48, x % 4);
		size_t n = CT_PS * (4 + (size_t)(x >> 8) % 9);
		for (size_t j = 24; j < n; j++)
			tok[j] = (uint32_t)(x + j);
		hybrid_cycle(tok, n, (enum hc_cache_stop_policy)((x >> 16) % 3),
			     (x >> 20) % 6 == 0);
		if ((x >> 28) % 4 == 0)
			hc_cache_evict_device(g_t.c, 16);
		if ((x >> 32) % 4 == 0)
			hc_cache_evict_host(g_t.c, 16);
	}
	return NULL;
}

static void concurrent_hybrid(void **state)
{
	(void)state;
	pthread_t th[THREADS];
	/* 8 host states for up to 4 x 12 pages in flight: the state LRU and
	 * L3 offload do the work. */
	ct_open_hybrid(&g_t, HC_WRITE_THROUGH, true, false, 4 * 48 * THREADS, 8 * 48 * THREADS,
		       STATE_BYTES, 8);
	for (uintptr_t i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, hybrid_worker, (void *)i), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	ct_assert_empty(&g_t);
	struct hc_cache_stats s;
	assert_int_equal(hc_cache_stats(g_t.c, &s, sizeof(s)), 0);
	assert_int_equal(s.mamba_dev_used, 0);
	assert_int_equal(s.mamba_host_used, 0);
	assert_true(s.mamba_l3_write > 0);
	ct_close(&g_t);
}

static void concurrent_write_through(void **state)
{
	(void)state;
	run(HC_WRITE_THROUGH, false);
}

static void concurrent_write_back(void **state)
{
	(void)state;
	run(HC_WRITE_BACK, false);
}

static void concurrent_selective(void **state)
{
	(void)state;
	run(HC_WRITE_THROUGH_SELECTIVE, false);
}

static void concurrent_no_data(void **state)
{
	(void)state;
	run(HC_WRITE_THROUGH, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(concurrent_write_through), cmocka_unit_test(concurrent_write_back),
		cmocka_unit_test(concurrent_selective),     cmocka_unit_test(concurrent_no_data),
		cmocka_unit_test(concurrent_hybrid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
