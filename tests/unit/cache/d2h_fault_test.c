/* Controller: failed allocations on the copy paths between device and host
 * (issue 15).
 * - Backup (device->host): a failure gives back only the host slots it took
 *   (item 8: the error branch once freed n uninitialised slot numbers, so
 *   stale numbers of live slots went back on the free list and two owners
 *   shared one host page). Every allocation of one write_through cycle (the
 *   request's own, the radix tree's and the backup's) is failed in turn,
 *   with and without data.
 * - Load (host->device): a load that cannot allocate the array it finishes
 *   with fails -ENOMEM (it once returned -1, read as -EPERM), and the pages
 *   stay on host. */
#include "controller_helpers.h"

#include "util/fault.h"

#include <pthread.h>
#include <unistd.h>

#define N 16 /* tokens: 4 pages */

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static char seen_error[512];

/* Errors from any thread, the backup thread's included. An injected
 * allocation failure is reported like any other, so only errors that do
 * not say memory ran out count (a slot freed twice, a page not allocated). */
static void on_log(enum hc_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level != HC_LOG_ERROR || (util_fault_fired() && strstr(msg, "memory")))
		return;
	pthread_mutex_lock(&seen_lock);
	if (!seen_error[0])
		snprintf(seen_error, sizeof(seen_error), "%s", msg);
	pthread_mutex_unlock(&seen_lock);
}

/* Only allocations fail here: any failure is the injected one, as -ENOMEM. */
static void check_failure(int64_t rc, const char *what, uint64_t nth)
{
	if (rc >= 0)
		return;
	if (!nth || !util_fault_fired())
		fail_msg("%s failed with no fault injected: %s (%s)", what, hc_strerror((int)rc),
			 hc_last_error());
	if (rc != -ENOMEM)
		fail_msg("%s with allocation %llu failed: %s, not ENOMEM (%s)", what,
			 (unsigned long long)nth, hc_strerror((int)rc), hc_last_error());
}

/* ct_cycle where every call may fail: the request is given back whatever
 * happens, and every page it holds on device is checked. */
static void try_cycle(struct ct *t, const uint32_t *tok, bool check, uint64_t nth)
{
	struct hc_cache_req *r;
	uint64_t slots[CT_MAX_PAGES];
	uint8_t want[4096], got[4096];
	assert_true(t->page_bytes <= sizeof(want));

	int64_t rc = hc_cache_match(t->c, tok, N, &r);
	check_failure(rc, "match", nth);
	if (rc)
		return;
	rc = hc_cache_load(r);
	check_failure(rc, "load", nth);
	if (rc >= 0) {
		rc = hc_cache_layer_wait(r, CT_LAYERS - 1);
		check_failure(rc, "layer_wait", nth);
	}
	int64_t have = rc >= 0 ? hc_cache_req_dev_slots(r, slots, CT_MAX_PAGES) : rc;
	check_failure(have, "dev_slots", nth);
	for (int64_t i = 0; check && i < have; i++) {
		ct_page_bytes(tok, (size_t)i, want, t->page_bytes);
		assert_int_equal(hc_cache_dev_read(t->c, slots[i], got, t->page_bytes), 0);
		if (memcmp(want, got, t->page_bytes))
			fail_msg("allocation %llu failed: page %lld served wrong",
				 (unsigned long long)nth, (long long)i);
	}
	int64_t nnew = have >= 0 ? hc_cache_alloc(r, N, slots, CT_MAX_PAGES) : have;
	check_failure(nnew, "alloc", nth);
	if (nnew < 0) {
		hc_cache_abort(r);
		return;
	}
	assert_int_equal(have + nnew, N / CT_PS);
	for (int64_t i = 0; check && i < nnew; i++) {
		ct_page_bytes(tok, (size_t)(have + i), want, t->page_bytes);
		assert_int_equal(hc_cache_dev_write(t->c, slots[i], want, t->page_bytes), 0);
	}
	check_failure(hc_cache_insert(r, tok, N), "insert", nth);
	hc_cache_release(r);
}

/* One write_through cycle (a host backup of every page) with allocation
 * number nth failed (0: none). Returns the allocations it made. */
static uint64_t one_round(bool no_data, uint64_t nth)
{
	struct ct t;
	uint32_t tok[N];
	struct hc_cache_stats s;

	ct_open(&t, HC_WRITE_THROUGH, false, no_data, 64, 64);
	ct_tokens(tok, N, 7);
	seen_error[0] = '\0';
	util_fault_arm(HC_FAULT_ALLOC, nth);
	try_cycle(&t, tok, !no_data, nth);
	assert_int_equal(hc_cache_flush(t.c), 0);
	util_fault_disarm();
	uint64_t count = util_fault_seen(HC_FAULT_ALLOC);
	if (seen_error[0])
		fail_msg("allocation %llu failed: an error was logged: %s", (unsigned long long)nth,
			 seen_error);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	/* A backup either happened in full or not at all. */
	assert_true(s.host_pages_used == 0 || s.host_pages_used == N / CT_PS);
	if (nth == 0)
		assert_int_equal(s.host_pages_used, N / CT_PS);

	/* Served right after the failure: the request works (writing what the
	 * failed one did not insert), then hits on device and, once backed up,
	 * on host. */
	ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, !no_data);
	struct hc_cache_req_info info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, !no_data);
	assert_int_equal(info.dev_tokens, N);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	if (s.host_pages_used) {
		assert_int_equal(hc_cache_evict_device(t.c, N), N);
		info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, !no_data);
		assert_int_equal(info.host_tokens, N);
	}
	ct_assert_empty(&t);
	assert_true(seen_error[0] == '\0');
	ct_close(&t);
	return count;
}

static void sweep(bool no_data)
{
	hc_log_set_handler(on_log, NULL);
	hc_log_set_level(HC_LOG_ERROR);
	uint64_t total = one_round(no_data, 0);
	assert_true(total >= 2); /* at least the backup's two arrays */
	for (uint64_t n = 1; n <= total; n++)
		one_round(no_data, n);
	print_message("%s: %llu allocations swept\n", no_data ? "no data" : "data",
		      (unsigned long long)total);
	hc_log_set_handler(NULL, NULL);
	hc_log_set_level(HC_LOG_OFF);
}

static void backup_alloc_fails_with_data(void **state)
{
	(void)state;
	sweep(false);
}

static void backup_alloc_fails_no_data(void **state)
{
	(void)state;
	sweep(true);
}

static void load_finish_alloc_fails(void **state)
{
	(void)state;
	struct ct t;
	uint32_t tok[N];
	uint64_t slots[CT_MAX_PAGES];
	struct hc_cache_req *r;

	ct_open(&t, HC_WRITE_THROUGH, false, false, 64, 64);
	ct_tokens(tok, N, 9);
	ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_int_equal(hc_cache_evict_device(t.c, N), N);

	assert_int_equal(hc_cache_match(t.c, tok, N, &r), 0);
	assert_int_equal(hc_cache_load(r), N);
	/* The copy thread is done with the load: the next allocation is the
	 * one that finishes it, inside hc_cache_alloc. */
	while (hc_cache_layer_ready(r) < CT_LAYERS)
		usleep(1000);
	util_fault_arm(HC_FAULT_ALLOC, 1);
	int64_t rc = hc_cache_alloc(r, N, slots, CT_MAX_PAGES);
	util_fault_disarm();
	assert_true(util_fault_fired());
	if (rc != -ENOMEM)
		fail_msg("hc_cache_alloc after a load without memory: %lld (%s), not -ENOMEM",
			 (long long)rc, hc_last_error());
	hc_cache_abort(r);

	/* The pages are still on host and come back whole. */
	struct hc_cache_req_info info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(info.host_tokens, N);
	ct_assert_empty(&t);
	ct_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(backup_alloc_fails_with_data),
		cmocka_unit_test(backup_alloc_fails_no_data),
		cmocka_unit_test(load_finish_alloc_fails),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
