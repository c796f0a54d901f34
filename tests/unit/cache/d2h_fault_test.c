/* Controller: a failed allocation on the device->host backup path gives
 * back only the host slots it took (issue 15 item 8: the error branch once
 * freed n uninitialised slot numbers, so stale numbers of live slots went
 * back on the free list and two owners shared one host page). Every
 * allocation of one backup is failed in turn, with and without data. */
#include "controller_helpers.h"

#include "util/fault.h"

#include <pthread.h>

#define N 16 /* tokens: 4 pages */

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static char seen_error[512];

/* Errors from any thread, the backup thread's included. */
static void on_log(enum hc_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level != HC_LOG_ERROR)
		return;
	pthread_mutex_lock(&seen_lock);
	if (!seen_error[0])
		snprintf(seen_error, sizeof(seen_error), "%s", msg);
	pthread_mutex_unlock(&seen_lock);
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
	hc_fault_arm(HC_FAULT_ALLOC, nth);
	ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, !no_data);
	assert_int_equal(hc_cache_flush(t.c), 0);
	hc_fault_disarm();
	uint64_t count = hc_fault_seen(HC_FAULT_ALLOC);
	if (seen_error[0])
		fail_msg("allocation %llu failed: an error was logged: %s", (unsigned long long)nth,
			 seen_error);
	assert_int_equal(hc_cache_stats(t.c, &s, sizeof(s)), 0);
	/* A backup either happened in full or not at all. */
	assert_true(s.host_pages_used == 0 || s.host_pages_used == N / CT_PS);
	if (nth == 0)
		assert_int_equal(s.host_pages_used, N / CT_PS);

	/* Served right after the failure: device hit, then host hit. */
	struct hc_cache_req_info info = ct_cycle(&t, tok, N, HC_STOP_WAIT_COMPLETE, !no_data);
	assert_int_equal(info.dev_tokens, N);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(backup_alloc_fails_with_data),
		cmocka_unit_test(backup_alloc_fails_no_data),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
