/* HC_TEST_CONCURRENCY
 * Rate-limited logging (issue 15 item 14): one line per interval per call
 * site with the count of lines left out, expected failures recorded in
 * hc_last_error() without an error-level line, and a deeper, precise
 * hc_last_error() kept over a vaguer one (util_fail_ctx). */
#include "test_util.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#define SEC 1000000000ull

struct captured {
	int calls;
	int errors;
	enum hc_log_level last_level;
	char last[512];
};

static void capture(enum hc_log_level level, const char *msg, void *arg)
{
	struct captured *c = arg;
	c->calls++;
	if (level == HC_LOG_ERROR)
		c->errors++;
	c->last_level = level;
	snprintf(c->last, sizeof(c->last), "%s", msg);
}

static void pass_once_per_interval(void **state)
{
	(void)state;
	struct util_log_limit l = HC_LOG_LIMIT_INIT(10);
	uint64_t dropped = 99;
	uint64_t t = 100 * SEC;
	assert_true(util_log_limit_pass(&l, t, &dropped));
	assert_int_equal(dropped, 0);
	for (int i = 0; i < 1000; i++)
		assert_false(util_log_limit_pass(&l, t + (uint64_t)i * SEC / 100, &dropped));
	/* Still inside the interval: left out. */
	assert_false(util_log_limit_pass(&l, t + 10 * SEC - 1, &dropped));
	assert_true(util_log_limit_pass(&l, t + 10 * SEC, &dropped));
	assert_int_equal(dropped, 1001);
	/* The count restarts with each line that goes out. */
	assert_false(util_log_limit_pass(&l, t + 11 * SEC, &dropped));
	assert_true(util_log_limit_pass(&l, t + 25 * SEC, &dropped));
	assert_int_equal(dropped, 1);
}

static void limited_line_says_how_many(void **state)
{
	(void)state;
	struct captured c = {0};
	hc_log_set_handler(capture, &c);
	hc_log_set_level(HC_LOG_INFO);
	/* One call site: the first line goes out, the rest are counted. */
	for (int i = 0; i < 500; i++)
		log_limited(HC_LOG_WARN, "object %d is corrupt", i);
	assert_int_equal(c.calls, 1);
	assert_string_equal(c.last, "object 0 is corrupt");
	assert_int_equal(c.last_level, HC_LOG_WARN);

	/* A limit whose interval has passed says what it left out. */
	struct util_log_limit l = HC_LOG_LIMIT_INIT(0);
	atomic_store(&l.suppressed, 41);
	util_log_limited(&l, HC_LOG_WARN, "slots exhausted");
	assert_int_equal(c.calls, 2);
	assert_non_null(strstr(c.last, "slots exhausted (41 similar lines suppressed"));

	/* A disabled level costs nothing and counts nothing. */
	hc_log_set_level(HC_LOG_ERROR);
	struct util_log_limit q = HC_LOG_LIMIT_INIT(10);
	util_log_limited(&q, HC_LOG_WARN, "hidden");
	assert_int_equal(atomic_load(&q.suppressed), 0);
	assert_int_equal(atomic_load(&q.next_ns), 0);
	assert_int_equal(c.calls, 2);
	hc_log_set_handler(NULL, NULL);
	hc_log_set_level(HC_LOG_OFF);
}

static void expected_failure_is_not_an_error(void **state)
{
	(void)state;
	struct captured c = {0};
	hc_log_set_handler(capture, &c);
	hc_log_set_level(HC_LOG_TRACE);
	struct util_log_limit l = HC_LOG_LIMIT_INIT(10);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(util_fail_limited(&l, HC_LOG_INFO, -ENOSPC, "%d slots free", i),
				 -ENOSPC);
		/* Every failure is still this thread's last error. */
		char want[32];
		snprintf(want, sizeof(want), "%d slots free", i);
		assert_string_equal(hc_last_error(), want);
	}
	assert_int_equal(c.errors, 0);
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.last_level, HC_LOG_INFO);
	hc_log_set_handler(NULL, NULL);
	hc_log_set_level(HC_LOG_OFF);
}

static int deep(bool fail_precisely)
{
	if (fail_precisely)
		return util_fail(-EIO, "pwrite of /d/ab/cd_k: Input/output error");
	return -EIO; /* a callee that records nothing */
}

static void precise_error_kept(void **state)
{
	(void)state;
	struct captured c = {0};
	hc_log_set_handler(capture, &c);
	hc_log_set_level(HC_LOG_DEBUG);
	unsigned mark = util_fail_mark();
	int rc = deep(true);
	assert_int_equal(util_fail_ctx(mark, rc, "hc_store_set: failed"), -EIO);
	assert_string_equal(hc_last_error(), "pwrite of /d/ab/cd_k: Input/output error");
	assert_int_equal(c.errors, 1); /* the deep one only; the context went to debug */
	assert_int_equal(c.last_level, HC_LOG_DEBUG);

	/* Nothing deeper recorded since the mark: the context is the error,
	 * even though an earlier call's failure is still there. */
	mark = util_fail_mark();
	rc = deep(false);
	assert_int_equal(util_fail_ctx(mark, rc, "hc_store_set: %s", hc_strerror(rc)), -EIO);
	assert_string_equal(hc_last_error(), "hc_store_set: Input/output error");
	assert_int_equal(c.errors, 2);
	hc_log_set_handler(NULL, NULL);
	hc_log_set_level(HC_LOG_OFF);
}

/* Many threads on one limit: exactly one line per interval, every other
 * call counted. */
#define THREADS 8
#define CALLS 2000
static struct util_log_limit shared = HC_LOG_LIMIT_INIT(3600);
static _Atomic int passed;

static void *hammer(void *arg)
{
	(void)arg;
	uint64_t d;
	for (int i = 0; i < CALLS; i++)
		if (util_log_limit_pass(&shared, 5 * SEC, &d))
			atomic_fetch_add(&passed, 1);
	return NULL;
}

static void one_line_across_threads(void **state)
{
	(void)state;
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, hammer, NULL), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&passed), 1);
	assert_int_equal(atomic_load(&shared.suppressed), THREADS * CALLS - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pass_once_per_interval),
		cmocka_unit_test(limited_line_says_how_many),
		cmocka_unit_test(expected_failure_is_not_an_error),
		cmocka_unit_test(precise_error_kept),
		cmocka_unit_test(one_line_across_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
