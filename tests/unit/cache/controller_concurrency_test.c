/* Controller under concurrency (HC_TEST_CONCURRENCY): several threads run
 * whole request cycles at once over shared prefixes, with evictions,
 * every stop policy and aborts; loaded pages are checked byte for byte and
 * nothing leaks (slots, reservations, backups). Run under TSan too. */
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
		cmocka_unit_test(concurrent_write_through),
		cmocka_unit_test(concurrent_write_back),
		cmocka_unit_test(concurrent_selective),
		cmocka_unit_test(concurrent_no_data),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
