/* The gateway stopped in the middle of a batch: the batch ends with
 * failures (no hang, no crash), every later set/get/exists fails while it
 * is down (misses, not hangs; the ctest timeout catches a hang), and once
 * the gateway runs again the same store works again by itself: new pages
 * are stored and read back byte for byte, and every page the store said
 * it stored before the outage reads back too. */
#include "s3_test.h"

#include <pthread.h>
#include <stdatomic.h>

enum { KV_ID = 1 };

#define BATCH 64
#define MAX_ROUNDS 400

struct writer {
	struct hc_store *st;
	struct hc_pool *pool;
	_Atomic int rounds; /* batches finished */
	_Atomic bool stop;
	int failed_rounds;      /* batches with a failed page */
	int stored[MAX_ROUNDS]; /* per round: pages stored (leading, all or none tracked) */
	int res[MAX_ROUNDS][BATCH];
};

static void round_keys(int round, struct hc_key *keys)
{
	st_keys(7000 + (uint32_t)round, BATCH, 8, keys);
}

/* Sets fresh batches until told to stop, and one more after that. */
static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint64_t slots[BATCH];
	struct hc_key keys[BATCH];
	for (uint64_t i = 0; i < BATCH; i++)
		slots[i] = i;
	bool last = false;
	for (int r = 0; r < MAX_ROUNDS && !last; r++) {
		last = atomic_load(&w->stop);
		round_keys(r, keys);
		if (hc_store_set(w->st, keys, BATCH, slots, w->res[r]))
			w->failed_rounds++;
		atomic_store(&w->rounds, r + 1);
	}
	return NULL;
}

static void test_gateway_stops_mid_batch(void **state)
{
	(void)state;
	/* 256 KiB pages, two objects each: a batch is 128 PUTs of 128 KiB. */
	struct hc_store *st = s3t_open("outage/", false, "\"retries\": 2, \"timeout_ms\": 10000");
	struct hc_kv_geometry g = {.layers = 4,
				   .heads = 8,
				   .head_dim = 256,
				   .elem_bytes = 2,
				   .page_size = 8,
				   .pages = 2 * BATCH,
				   .layout = HC_LAYOUT_PAGE_FIRST};
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_pool_page_bytes(pool), 262144);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	for (uint64_t i = 0; i < BATCH; i++)
		st_fill(pool, i, KV_ID, i);

	static struct writer w;
	w.st = st;
	w.pool = pool;
	pthread_t tid;
	assert_int_equal(pthread_create(&tid, NULL, writer_main, &w), 0);
	/* Let a batch or two through, then stop the gateway under the writer. */
	while (atomic_load(&w.rounds) < 2)
		usleep(1000);
	assert_int_equal(s3t_server("stop-gateway"), 0);
	atomic_store(&w.stop, true);
	pthread_join(tid, NULL);
	int rounds = atomic_load(&w.rounds);
	assert_true(rounds >= 3);
	/* The batch after the stop failed whole; no crash, no hang. */
	assert_true(w.failed_rounds >= 1);
	for (int i = 0; i < BATCH; i++)
		assert_int_not_equal(w.res[rounds - 1][i], 0);

	/* While it is down: failures, and exists / get find nothing. */
	struct hc_key keys[BATCH];
	uint64_t slots[BATCH], back[BATCH];
	int res[BATCH];
	for (uint64_t i = 0; i < BATCH; i++) {
		slots[i] = i;
		back[i] = BATCH + i;
	}
	round_keys(0, keys);
	assert_int_equal(hc_store_exists(st, keys, BATCH), 0);
	assert_int_equal(hc_store_get(st, keys, BATCH, back, res), 0);
	for (int i = 0; i < BATCH; i++)
		assert_true(res[i] != 0 && res[i] != -ENOENT);
	round_keys(MAX_ROUNDS, keys);
	assert_int_not_equal(hc_store_set(st, keys, BATCH, slots, NULL), 0);

	/* Back up: the same store recovers by itself. */
	assert_int_equal(s3t_server("start-gateway"), 0);
	int rc = -1;
	for (int tries = 0; tries < 120 && rc; tries++) {
		rc = hc_store_set(st, keys, BATCH, slots, NULL);
		if (rc)
			usleep(500000);
	}
	assert_int_equal(rc, 0);
	for (uint64_t i = 0; i < BATCH; i++)
		st_clear(pool, BATCH + i);
	assert_int_equal(hc_store_get(st, keys, BATCH, back, res), BATCH);
	for (uint64_t i = 0; i < BATCH; i++)
		st_assert_page(pool, BATCH + i, KV_ID, i);
	/* Every page stored before the outage is whole. */
	for (int r = 0; r < rounds; r++) {
		round_keys(r, keys);
		for (uint64_t i = 0; i < BATCH; i++)
			st_clear(pool, BATCH + i);
		hc_store_get(st, keys, BATCH, back, res);
		for (int i = 0; i < BATCH; i++) {
			if (w.res[r][i])
				continue;
			assert_int_equal(res[i], 0);
			st_assert_page(pool, BATCH + (uint64_t)i, KV_ID, (uint64_t)i);
		}
	}
	hc_store_close(st);
	hc_pool_destroy(pool);
}

int main(void)
{
	int rc = s3t_setup("outage");
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gateway_stops_mid_batch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
