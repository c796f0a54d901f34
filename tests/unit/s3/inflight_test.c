/* Many pages in flight: batches far longer than one backend chunk (128
 * objects), with max_inflight 1, 8 and 32, in zero-copy and bounce mode,
 * several threads sharing one store; every byte read back is checked, and
 * a page stored once is never uploaded again (If-None-Match and exists). */
#include "s3_test.h"

#include <pthread.h>

enum { KV_ID = 1 };

#define PAGES 300
#define THREADS 4
#define TPAGES 64

static void many(unsigned inflight, bool bounce)
{
	char sub[64], extra[64];
	snprintf(sub, sizeof(sub), "many-%u-%d/", inflight, bounce);
	snprintf(extra, sizeof(extra), "\"max_inflight\": %u", inflight);
	struct hc_store *st = s3t_open(sub, bounce, extra);
	/* 64 KiB pages: 2 objects each in zero-copy mode, 600 requests a batch. */
	struct hc_kv_geometry g = {.layers = 4,
				   .heads = 4,
				   .head_dim = 128,
				   .elem_bytes = 2,
				   .page_size = 8,
				   .pages = PAGES,
				   .layout = HC_LAYOUT_PAGE_FIRST};
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_pool_page_bytes(pool), 65536);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_key *keys = malloc(PAGES * sizeof(*keys));
	uint64_t *slots = malloc(PAGES * sizeof(*slots)), *back = malloc(PAGES * sizeof(*back));
	int *res = malloc(PAGES * sizeof(*res));
	assert_non_null(keys);
	st_keys(500 + inflight * 2 + bounce, PAGES, 8, keys);
	for (uint64_t p = 0; p < PAGES; p++) {
		slots[p] = p;
		back[p] = PAGES - 1 - p;
		st_fill(pool, p, KV_ID, p);
	}
	assert_int_equal(hc_store_set(st, keys, PAGES, slots, res), 0);
	for (int p = 0; p < PAGES; p++)
		assert_int_equal(res[p], 0);
	for (uint64_t p = 0; p < PAGES; p++)
		st_clear(pool, p);
	assert_int_equal(hc_store_get(st, keys, PAGES, back, res), PAGES);
	for (uint64_t p = 0; p < PAGES; p++)
		st_assert_page(pool, back[p], KV_ID, p);
	/* A second set finds every page stored and leaves it as it is. */
	assert_int_equal(hc_store_set(st, keys, PAGES, slots, res), 0);
	struct hc_store_stats s = st_stats(st, NULL);
	assert_int_equal(s.pages_written, PAGES);
	assert_int_equal(s.pages_existing, PAGES);
	assert_int_equal(s.failures, 0);
	hc_store_close(st);
	hc_pool_destroy(pool);
	free(keys);
	free(slots);
	free(back);
	free(res);
}

static void test_inflight_32(void **state)
{
	(void)state;
	many(32, false);
	many(32, true);
}

static void test_inflight_1_and_8(void **state)
{
	(void)state;
	many(1, false);
	many(8, true);
}

struct worker {
	struct hc_store *st;
	struct hc_pool *pool;
	unsigned t;
	int failures;
};

/* Thread t: pages [t*TPAGES, (t+1)*TPAGES) through its own slots. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct hc_key keys[TPAGES];
	uint64_t slots[TPAGES];
	int res[TPAGES];
	st_keys(600 + w->t, TPAGES, 8, keys);
	for (uint64_t p = 0; p < TPAGES; p++)
		slots[p] = w->t * TPAGES + p;
	if (hc_store_set(w->st, keys, TPAGES, slots, res))
		w->failures++;
	for (uint64_t p = 0; p < TPAGES; p++)
		st_clear(w->pool, slots[p]);
	if (hc_store_get(w->st, keys, TPAGES, slots, res) != TPAGES)
		w->failures++;
	for (uint64_t p = 0; p < TPAGES; p++)
		if (st_diff(w->pool, slots[p], KV_ID, w->t * 1000 + p) >= 0)
			w->failures++;
	return NULL;
}

static void test_threads(void **state)
{
	(void)state;
	struct hc_store *st = s3t_open("threads/", false, "\"max_inflight\": 8");
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, THREADS * TPAGES);
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct worker w[THREADS];
	pthread_t tid[THREADS];
	for (unsigned t = 0; t < THREADS; t++) {
		for (uint64_t p = 0; p < TPAGES; p++)
			st_fill(pool, t * TPAGES + p, KV_ID, t * 1000 + p);
		w[t] = (struct worker){st, pool, t, 0};
		assert_int_equal(pthread_create(&tid[t], NULL, worker_main, &w[t]), 0);
	}
	for (unsigned t = 0; t < THREADS; t++) {
		pthread_join(tid[t], NULL);
		assert_int_equal(w[t].failures, 0);
	}
	struct hc_store_stats s = st_stats(st, NULL);
	assert_int_equal(s.pages_written, THREADS * TPAGES);
	assert_int_equal(s.pages_read, THREADS * TPAGES);
	hc_store_close(st);
	hc_pool_destroy(pool);
}

int main(void)
{
	int rc = s3t_setup("inflight");
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inflight_32),
		cmocka_unit_test(test_inflight_1_and_8),
		cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
