/* Configuration: JSON > environment > default; strict keys and types with
 * the key named in every error. */
#include "test_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void clear_env(void)
{
	unsetenv("HICACHE_HUGEPAGE_MODE");
	unsetenv("HICACHE_PREFAULT_THREADS");
	unsetenv("HICACHE_MLOCK");
	unsetenv("HICACHE_RATIO");
	unsetenv("HICACHE_HUGEPAGE_SIZE");
}

static int setup(void **state)
{
	(void)state;
	clear_env();
	return 0;
}

static void test_defaults(void **state)
{
	(void)state;
	struct hc_config *cfg;
	assert_int_equal(hc_config_create(NULL, &cfg), 0);
	const char *s;
	int64_t i;
	double d;
	bool b;
	assert_int_equal(hc_config_get_string(cfg, "hugepage_mode", &s), 0);
	assert_string_equal(s, "thp");
	assert_int_equal(hc_config_get_string(cfg, "hugepage_size", &s), 0);
	assert_string_equal(s, "2MB");
	assert_int_equal(hc_config_get_int(cfg, "prefault_threads", &i), 0);
	assert_int_equal(i, 0);
	assert_int_equal(hc_config_get_bool(cfg, "mlock", &b), 0);
	assert_false(b);
	assert_int_equal(hc_config_get_number(cfg, "hicache_ratio", &d), 0);
	assert_true(d == 2.0);
	hc_config_destroy(cfg);
	assert_int_equal(hc_config_create("", &cfg), 0);
	hc_config_destroy(cfg);
}

static void test_json_overrides_env_overrides_default(void **state)
{
	(void)state;
	setenv("HICACHE_HUGEPAGE_MODE", "prefer", 1);
	setenv("HICACHE_PREFAULT_THREADS", "3", 1);
	struct hc_config *cfg;
	assert_int_equal(hc_config_create("{\"prefault_threads\": 7, \"mlock\": true}", &cfg), 0);
	const char *s;
	int64_t i;
	bool b;
	assert_int_equal(hc_config_get_string(cfg, "hugepage_mode", &s), 0);
	assert_string_equal(s, "prefer"); /* env */
	assert_int_equal(hc_config_get_int(cfg, "prefault_threads", &i), 0);
	assert_int_equal(i, 7); /* JSON beats env */
	assert_int_equal(hc_config_get_bool(cfg, "mlock", &b), 0);
	assert_true(b);
	hc_config_destroy(cfg);
	clear_env();
}

static void test_unknown_key_named(void **state)
{
	(void)state;
	struct hc_config *cfg = (struct hc_config *)1;
	assert_int_equal(hc_config_create("{\"prefault_thread\": 2}", &cfg), -EINVAL);
	assert_null(cfg);
	assert_last_error_contains("unknown key 'prefault_thread'");
}

static void test_wrong_types_named(void **state)
{
	(void)state;
	static const struct {
		const char *json;
		const char *needle;
	} cases[] = {
		{"{\"mlock\": 1}", "'mlock' (JSON): expected a boolean"},
		{"{\"prefault_threads\": \"4\"}", "'prefault_threads' (JSON): expected an integer"},
		{"{\"prefault_threads\": 1.5}", "'prefault_threads' (JSON): expected an integer"},
		{"{\"prefault_threads\": 5000}", "'prefault_threads' (JSON): 5000 is out of range"},
		{"{\"hicache_ratio\": -1}", "'hicache_ratio' (JSON): -1 is out of range"},
		{"{\"hicache_ratio\": true}", "'hicache_ratio' (JSON): expected a number"},
		{"{\"hugepage_mode\": \"sometimes\"}",
		 "'hugepage_mode' (JSON): 'sometimes' is not one of off|thp|prefer|required"},
		{"{\"hugepage_size\": 2}", "'hugepage_size' (JSON): expected a string"},
		{"{\"mlock\": true, \"mlock\": false}", "key 'mlock' given twice"},
		{"[1, 2]", "must be one JSON object"},
		{"{\"mlock\": tru}", "not valid JSON"},
		{"{} trailing", "not valid JSON"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hc_config *cfg = NULL;
		assert_int_equal(hc_config_create(cases[i].json, &cfg), -EINVAL);
		assert_null(cfg);
		assert_last_error_contains(cases[i].needle);
	}
}

static void test_bad_env_named(void **state)
{
	(void)state;
	struct hc_config *cfg;
	setenv("HICACHE_MLOCK", "maybe", 1);
	assert_int_equal(hc_config_create(NULL, &cfg), -EINVAL);
	assert_last_error_contains("'mlock' (environment HICACHE_MLOCK): 'maybe' is not a boolean");
	clear_env();
	setenv("HICACHE_PREFAULT_THREADS", "4x", 1);
	assert_int_equal(hc_config_create(NULL, &cfg), -EINVAL);
	assert_last_error_contains("HICACHE_PREFAULT_THREADS");
	clear_env();
	setenv("HICACHE_RATIO", "nan", 1);
	assert_int_equal(hc_config_create(NULL, &cfg), -EINVAL);
	assert_last_error_contains("'hicache_ratio'");
	clear_env();
	setenv("HICACHE_HUGEPAGE_SIZE", "1gb", 1); /* case-insensitive choice */
	assert_int_equal(hc_config_create(NULL, &cfg), 0);
	hc_config_destroy(cfg);
	clear_env();
}

static void test_file(void **state)
{
	(void)state;
	char path[] = "/tmp/hc_config_test_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char *text = "{\n  \"hugepage_mode\": \"required\",\n  \"hicache_size\": 1.5\n}\n";
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	char arg[64];
	snprintf(arg, sizeof(arg), "@%s", path);
	struct hc_config *cfg;
	assert_int_equal(hc_config_create(arg, &cfg), 0);
	const char *s;
	double d;
	assert_int_equal(hc_config_get_string(cfg, "hugepage_mode", &s), 0);
	assert_string_equal(s, "required");
	assert_int_equal(hc_config_get_number(cfg, "hicache_size", &d), 0);
	assert_true(d == 1.5);
	hc_config_destroy(cfg);
	unlink(path);
	assert_int_equal(hc_config_create(arg, &cfg), -ENOENT);
	assert_last_error_contains(path);
	assert_int_equal(hc_config_create("@/", &cfg), -EINVAL);
}

static void test_getters_and_set(void **state)
{
	(void)state;
	struct hc_config *cfg;
	assert_int_equal(hc_config_create(NULL, &cfg), 0);
	int64_t i;
	assert_int_equal(hc_config_get_int(cfg, "no_such_key", &i), -ENOENT);
	assert_int_equal(hc_config_get_int(cfg, "mlock", &i), -EINVAL);
	assert_last_error_contains("'mlock' is a boolean");
	assert_int_equal(hc_config_set(cfg, "prefault_threads", "12"), 0);
	assert_int_equal(hc_config_get_int(cfg, "prefault_threads", &i), 0);
	assert_int_equal(i, 12);
	assert_int_equal(hc_config_set(cfg, "prefault_threads", "-1"), -EINVAL);
	assert_int_equal(hc_config_get_int(cfg, "prefault_threads", &i), 0);
	assert_int_equal(i, 12); /* a rejected value changes nothing */
	assert_int_equal(hc_config_set(cfg, "nope", "1"), -ENOENT);
	hc_config_destroy(cfg);
	hc_config_destroy(NULL);
}

struct visit {
	int keys;
	bool saw_json;
};

static void visitor(const char *key, enum hc_config_type type, const char *env, const char *value,
		    enum hc_config_source source, const char *doc, void *arg)
{
	struct visit *v = arg;
	v->keys++;
	assert_non_null(env);
	/* AWS_*: the S3 credentials and bucket, as every S3 client names them. */
	assert_true(!strncmp(env, "HICACHE_", 8) || !strncmp(env, "AWS_", 4));
	assert_true(doc && *doc);
	if (!strcmp(key, "mlock")) {
		assert_int_equal(type, HC_CONFIG_BOOL);
		assert_string_equal(value, "true");
		assert_int_equal(source, HC_CONFIG_FROM_JSON);
		v->saw_json = true;
	}
}

static void test_foreach(void **state)
{
	(void)state;
	struct hc_config *cfg;
	assert_int_equal(hc_config_create("{\"mlock\": true}", &cfg), 0);
	struct visit v = {0};
	hc_config_foreach(cfg, visitor, &v);
	assert_true(v.keys >= 7);
	assert_true(v.saw_json);
	hc_config_destroy(cfg);
}

/* capacity_gb's bound keeps GB * 1e9 inside a 64-bit byte count (issue 15
 * item 10: the key allowed 1e12, the conversion overflowed above ~1.8e10). */
static void test_capacity_bound(void **state)
{
	(void)state;
	struct hc_config *cfg;
	double gb;
	assert_int_equal(hc_config_create(NULL, &cfg), 0);
	assert_int_not_equal(hc_config_set(cfg, "capacity_gb", "1e12"), 0);
	assert_int_not_equal(hc_config_set(cfg, "capacity_gb", "2e10"), 0);
	assert_int_equal(hc_config_set(cfg, "capacity_gb", "1.8e10"), 0);
	assert_int_equal(hc_config_get_number(cfg, "capacity_gb", &gb), 0);
	assert_true(gb * 1e9 < 18446744073709551616.0);
	hc_config_destroy(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_defaults, setup),
		cmocka_unit_test_setup(test_json_overrides_env_overrides_default, setup),
		cmocka_unit_test_setup(test_unknown_key_named, setup),
		cmocka_unit_test_setup(test_wrong_types_named, setup),
		cmocka_unit_test_setup(test_bad_env_named, setup),
		cmocka_unit_test_setup(test_file, setup),
		cmocka_unit_test_setup(test_getters_and_set, setup),
		cmocka_unit_test_setup(test_foreach, setup),
		cmocka_unit_test_setup(test_capacity_bound, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
