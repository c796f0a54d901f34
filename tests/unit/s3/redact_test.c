/* An endpoint with user-info ("http://user:password@host") never shows its
 * password: not in an error message, not in a log line (captured at debug
 * level), not in hc_config_foreach (what `hicache config` prints). */
#include "fake_s3.h"
#include "store/backend/s3/s3_conf.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define PW "s3cr3tPW"
#define LOG_MAX 65536

static char log_text[LOG_MAX];
static size_t log_len;

static void capture(enum hc_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)arg;
	int n = snprintf(log_text + log_len, LOG_MAX - log_len, "%s\n", msg);
	if (n > 0 && (size_t)n < LOG_MAX - log_len)
		log_len += (size_t)n;
}

static void test_redact(void **state)
{
	(void)state;
	char out[128];
	assert_string_equal(s3_redact("http://u:" PW "@h:80/x", out, sizeof(out)),
			    "http://***@h:80/x");
	assert_string_equal(s3_redact("u:" PW "@h", out, sizeof(out)), "***@h");
	assert_string_equal(s3_redact("https://a@b:" PW "@h", out, sizeof(out)), "https://***@h");
	assert_string_equal(s3_redact("http://h/p@q", out, sizeof(out)), "http://h/p@q");
	assert_string_equal(s3_redact("http://h\n", out, sizeof(out)), "http://h?");
	assert_string_equal(s3_redact("http://u:" PW "@h", out, 10), "http://**");
}

static void check_open(const char *endpoint)
{
	char json[512];
	snprintf(json, sizeof(json),
		 "{\"endpoint\": \"%s\", \"bucket\": \"fake\", \"access_key\": \"AK\", "
		 "\"secret_key\": \"SK\"}",
		 endpoint);
	struct hc_config *cfg;
	assert_int_equal(hc_config_create(json, &cfg), 0);
	void *be = NULL;
	int rc = store_s3_ops.open(cfg, &be);
	hc_config_destroy(cfg);
	print_message("%s -> %s\n", endpoint, hc_last_error());
	assert_int_equal(rc, -EINVAL);
	assert_null(strstr(hc_last_error(), PW));
	assert_non_null(strstr(hc_last_error(), "***@"));
}

static void foreach_cb(const char *name, enum hc_config_type type, const char *env,
		       const char *value, enum hc_config_source source, const char *doc, void *arg)
{
	(void)type;
	(void)env;
	(void)source;
	(void)doc;
	if (!strcmp(name, "endpoint"))
		snprintf(arg, 256, "%s", value);
}

static void test_no_password_anywhere(void **state)
{
	(void)state;
	hc_log_set_handler(capture, NULL);
	hc_log_set_level(HC_LOG_DEBUG);
	check_open("http://user:" PW "@127.0.0.1:1");
	check_open("https://user:" PW "@127.0.0.1:1/");
	check_open("ftp://user:" PW "@127.0.0.1:1");
	check_open("user:" PW "@127.0.0.1:1");
	check_open("http://user:" PW "@127.0.0.1:1/bucket/path");
	hc_log_set_handler(NULL, NULL);
	hc_log_set_level(HC_LOG_OFF);
	assert_null(strstr(log_text, PW));

	struct hc_config *cfg;
	assert_int_equal(hc_config_create("{\"endpoint\": \"http://user:" PW "@127.0.0.1:1\"}",
					  &cfg),
			 0);
	char shown[256] = "";
	hc_config_foreach(cfg, foreach_cb, shown);
	hc_config_destroy(cfg);
	assert_string_equal(shown, "http://***@127.0.0.1:1");
}

int main(void)
{
	hc_log_set_level(HC_LOG_OFF);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redact),
		cmocka_unit_test(test_no_password_anywhere),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
