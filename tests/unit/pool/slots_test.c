/* HC_TEST_CONCURRENCY
 * Slot allocator: all-or-nothing alloc and free, misuse is -EINVAL and
 * changes nothing, and many threads never get the same slot.
 */
#include "test_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

static void test_alloc_all_then_enospc(void **state)
{
	(void)state;
	struct hc_slots *s;
	assert_int_equal(hc_slots_create(10, &s), 0);
	assert_int_equal(hc_slots_count(s), 10);
	uint64_t got[11];
	assert_int_equal(hc_slots_alloc(s, 4, got), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(got[i], (uint64_t)i); /* a fresh pool hands out 0, 1, 2 ... */
		assert_true(hc_slots_is_allocated(s, got[i]));
	}
	assert_int_equal(hc_slots_available(s), 6);
	assert_int_equal(hc_slots_alloc(s, 7, got + 4), -ENOSPC);
	assert_last_error_contains("7 slots asked, 6 free");
	assert_int_equal(hc_slots_available(s), 6); /* nothing taken */
	assert_int_equal(hc_slots_alloc(s, 6, got + 4), 0);
	assert_int_equal(hc_slots_available(s), 0);
	/* Every slot exactly once. */
	bool seen[10] = {false};
	for (int i = 0; i < 10; i++) {
		assert_true(got[i] < 10);
		assert_false(seen[got[i]]);
		seen[got[i]] = true;
	}
	assert_int_equal(hc_slots_free(s, 10, got), 0);
	assert_int_equal(hc_slots_available(s), 10);
	assert_int_equal(hc_slots_alloc(s, 0, NULL), 0);
	hc_slots_destroy(s);
}

static void test_misuse(void **state)
{
	(void)state;
	struct hc_slots *s;
	assert_int_equal(hc_slots_create(8, &s), 0);
	uint64_t got[3];
	assert_int_equal(hc_slots_alloc(s, 3, got), 0);

	/* Double free of a single slot. */
	assert_int_equal(hc_slots_free(s, 1, &got[0]), 0);
	assert_int_equal(hc_slots_free(s, 1, &got[0]), -EINVAL);
	assert_last_error_contains("is not allocated");
	assert_int_equal(hc_slots_available(s), 6);

	/* A slot never handed out, after a good one: nothing is freed. */
	uint64_t mixed[2] = {got[1], 7};
	assert_int_equal(hc_slots_free(s, 2, mixed), -EINVAL);
	assert_true(hc_slots_is_allocated(s, got[1]));
	assert_int_equal(hc_slots_available(s), 6);

	/* Out of range. */
	uint64_t far = 8;
	assert_int_equal(hc_slots_free(s, 1, &far), -EINVAL);
	assert_last_error_contains("out of range");

	/* The same slot twice in one list. */
	uint64_t twice[2] = {got[2], got[2]};
	assert_int_equal(hc_slots_free(s, 2, twice), -EINVAL);
	assert_true(hc_slots_is_allocated(s, got[2]));
	assert_int_equal(hc_slots_available(s), 6);

	/* The stack is intact: everything still allocates exactly once. */
	assert_int_equal(hc_slots_free(s, 2, &got[1]), 0);
	uint64_t all[8];
	assert_int_equal(hc_slots_alloc(s, 8, all), 0);
	uint32_t mask = 0;
	for (int i = 0; i < 8; i++)
		mask |= 1u << all[i];
	assert_int_equal(mask, 0xff);
	hc_slots_destroy(s);

	assert_int_equal(hc_slots_create(0, &s), -EINVAL);
	assert_null(s);
	assert_int_equal(hc_slots_alloc(NULL, 1, got), -EINVAL);
	hc_slots_destroy(NULL);
}

#define THREADS 4
#define ITERS 20000
#define SLOTS 64

struct shared {
	struct hc_slots *slots;
	_Atomic int owner[SLOTS];
	_Atomic int errors;
};

struct worker {
	struct shared *sh;
	int id;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	uint64_t rng = (uint64_t)w->id * 7919;
	uint64_t held[8];
	for (int it = 0; it < ITERS; it++) {
		size_t n = 1 + (size_t)(test_mix(rng++) % 8);
		if (hc_slots_alloc(sh->slots, n, held) != 0)
			continue;
		for (size_t i = 0; i < n; i++) {
			int expected = -1;
			if (!atomic_compare_exchange_strong(&sh->owner[held[i]], &expected, w->id))
				atomic_fetch_add(&sh->errors, 1);
		}
		for (size_t i = 0; i < n; i++)
			atomic_store(&sh->owner[held[i]], -1);
		if (hc_slots_free(sh->slots, n, held) != 0)
			atomic_fetch_add(&sh->errors, 1);
	}
	return NULL;
}

static void test_threads_never_share_a_slot(void **state)
{
	(void)state;
	struct shared sh = {0};
	assert_int_equal(hc_slots_create(SLOTS, &sh.slots), 0);
	for (int i = 0; i < SLOTS; i++)
		atomic_store(&sh.owner[i], -1);
	pthread_t t[THREADS];
	struct worker w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){&sh, i};
		assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&sh.errors), 0);
	assert_int_equal(hc_slots_available(sh.slots), SLOTS);
	hc_slots_destroy(sh.slots);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alloc_all_then_enospc),
		cmocka_unit_test(test_misuse),
		cmocka_unit_test(test_threads_never_share_a_slot),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
