/* HC_TEST_CONCURRENCY
 * Logger: level filtering, custom handler, HICACHE_LOG parsing, and
 * hc_last_error() kept per thread whatever the level. */
#include "test_util.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct captured {
	int calls;
	enum hc_log_level last_level;
	char last[256];
};

static void capture(enum hc_log_level level, const char *msg, void *arg)
{
	struct captured *c = arg;
	c->calls++;
	c->last_level = level;
	snprintf(c->last, sizeof(c->last), "%s", msg);
}

static void test_parse_level(void **state)
{
	(void)state;
	enum hc_log_level l;
	assert_int_equal(hc_log_parse_level("debug", &l), 0);
	assert_int_equal(l, HC_LOG_DEBUG);
	assert_int_equal(hc_log_parse_level("WARN", &l), 0);
	assert_int_equal(l, HC_LOG_WARN);
	assert_int_equal(hc_log_parse_level("0", &l), 0);
	assert_int_equal(l, HC_LOG_OFF);
	assert_int_equal(hc_log_parse_level("5", &l), 0);
	assert_int_equal(l, HC_LOG_TRACE);
	assert_int_equal(hc_log_parse_level("6", &l), -EINVAL);
	assert_int_equal(hc_log_parse_level("loud", &l), -EINVAL);
	assert_int_equal(hc_log_parse_level(NULL, &l), -EINVAL);
}

static void test_env_level(void **state)
{
	(void)state;
	/* ctest runs this with HICACHE_LOG=off. */
	const char *env = getenv("HICACHE_LOG");
	if (env && !strcmp(env, "off"))
		assert_int_equal(hc_log_get_level(), HC_LOG_OFF);
}

static void test_handler_and_levels(void **state)
{
	(void)state;
	struct captured c = {0};
	hc_log_set_handler(capture, &c);
	hc_log_set_level(HC_LOG_WARN);
	log_info("hidden %d", 1);
	assert_int_equal(c.calls, 0);
	log_warn("shown %d", 2);
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.last_level, HC_LOG_WARN);
	assert_string_equal(c.last, "shown 2");
	hc_log_set_level(HC_LOG_DEBUG);
	log_debug("now %s", "visible");
	assert_int_equal(c.calls, 2);
	assert_string_equal(c.last, "now visible");
	hc_log_set_level(HC_LOG_OFF);
	log_error("silenced");
	assert_int_equal(c.calls, 2);
	hc_log_set_handler(NULL, NULL);
}

static void test_fail_records_message(void **state)
{
	(void)state;
	struct captured c = {0};
	hc_log_set_handler(capture, &c);
	hc_log_set_level(HC_LOG_OFF);
	assert_int_equal(util_fail(-ENOSPC, "disk %s is full", "/x"), -ENOSPC);
	assert_string_equal(hc_last_error(), "disk /x is full");
	assert_int_equal(c.calls, 0);
	hc_log_set_level(HC_LOG_ERROR);
	util_fail(-EIO, "second");
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.last_level, HC_LOG_ERROR);
	assert_string_equal(c.last, "second");
	hc_log_set_handler(NULL, NULL);
	hc_log_set_level(HC_LOG_OFF);
}

static void *other_thread(void *arg)
{
	(void)arg;
	util_fail(-EINVAL, "from the other thread");
	return NULL;
}

static void test_last_error_is_per_thread(void **state)
{
	(void)state;
	util_fail(-EINVAL, "from main");
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
	pthread_join(t, NULL);
	assert_string_equal(hc_last_error(), "from main");
}

static void test_strerror(void **state)
{
	(void)state;
	assert_string_equal(hc_strerror(0), "Success");
	assert_string_equal(hc_strerror(-ENOENT), hc_strerror(ENOENT));
	assert_non_null(strstr(hc_strerror(-ENOSPC), "space"));
	assert_non_null(hc_strerror(-99999));
	assert_string_equal(hc_version(), "0.1.0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_level),
		cmocka_unit_test(test_env_level),
		cmocka_unit_test(test_handler_and_levels),
		cmocka_unit_test(test_fail_records_message),
		cmocka_unit_test(test_last_error_is_per_thread),
		cmocka_unit_test(test_strerror),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
