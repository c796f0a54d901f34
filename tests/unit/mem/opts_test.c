/* mem.opts: hc_mem_opts_init() defaults, struct_size handling for older and
 * newer callers, and hc_mem_opts_from_config(). */
#include "mem_test.h"
#include "test_util.h"

#define END(field) (offsetof(struct hc_mem_opts, field) + sizeof(((struct hc_mem_opts *)0)->field))

static void test_defaults(void **state)
{
	(void)state;
	struct hc_mem_opts o;
	memset(&o, 0xAA, sizeof(o));
	hc_mem_opts_init(&o, sizeof(o));
	assert_int_equal(o.struct_size, sizeof(o));
	assert_int_equal(o.huge_page_size, HC_HUGE_2MB);
	assert_int_equal(o.huge_mode, HC_HUGE_THP);
	assert_int_equal(o.prefault_threads, 0);
	assert_true(o.prefault);
	assert_false(o.lock);
	assert_null(o.on_map);
	assert_null(o.on_unmap);
	assert_null(o.hook_arg);

	/* Too small to hold even struct_size, or no struct: nothing happens. */
	memset(&o, 0xAA, sizeof(o));
	hc_mem_opts_init(&o, sizeof(size_t) - 1);
	assert_int_equal(((unsigned char *)&o)[0], 0xAA);
	hc_mem_opts_init(NULL, sizeof(o));
}

/* An older caller knows the struct only up to prefault_threads. */
static void test_older_caller(void **state)
{
	(void)state;
	size_t old = END(prefault_threads);
	struct hc_mem_opts o;
	memset(&o, 0xAA, sizeof(o));
	hc_mem_opts_init(&o, old);
	assert_int_equal(o.struct_size, old);
	assert_int_equal(o.huge_page_size, HC_HUGE_2MB);
	assert_int_equal(o.huge_mode, HC_HUGE_THP);
	assert_int_equal(o.prefault_threads, 0);
	for (size_t i = old; i < sizeof(o); i++)
		assert_int_equal(((unsigned char *)&o)[i], 0xAA);

	/* The bytes past struct_size are garbage (the hook pointers would crash
	 * if called): alloc must use defaults for them, i.e. pre-fault, no lock,
	 * no hooks. */
	struct hc_mem *m = NULL;
	assert_int_equal(hc_mem_alloc(MB, &o, &m), 0);
	assert_int_equal(mt_not_resident(hc_mem_addr(m), MB), 0);
	assert_false(hc_mem_locked(m));
	hc_mem_free(m);

	/* Only struct_size itself: all defaults. */
	memset(&o, 0xAA, sizeof(o));
	o.struct_size = sizeof(size_t);
	assert_int_equal(hc_mem_alloc(MB, &o, &m), 0);
	assert_int_equal(hc_mem_mapped_len(m), MB);
	hc_mem_free(m);
}

/* A newer caller has fields this library does not know. */
static void test_newer_caller(void **state)
{
	(void)state;
	struct {
		struct hc_mem_opts o;
		uint64_t extra[2];
	} big;
	memset(&big, 0xFF, sizeof(big));
	hc_mem_opts_init(&big.o, sizeof(big));
	assert_int_equal(big.o.struct_size, sizeof(big));
	assert_int_equal(big.extra[0], 0);
	assert_int_equal(big.extra[1], 0);
	assert_true(big.o.prefault);

	struct hc_mem *m = NULL;
	assert_int_equal(hc_mem_alloc(4096, &big.o, &m), 0);
	hc_mem_free(m);
	/* A field we would ignore is set: refuse rather than silently drop it. */
	big.extra[1] = 1;
	m = (struct hc_mem *)(uintptr_t)1;
	assert_int_equal(hc_mem_alloc(4096, &big.o, &m), -EINVAL);
	assert_null(m);
	assert_last_error_contains("struct_size");
}

static void test_bad_struct_size(void **state)
{
	(void)state;
	static const size_t bad[] = {0, 1, sizeof(size_t) - 1, 1 << 20, SIZE_MAX};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct hc_mem_opts o = mt_opts();
		o.struct_size = bad[i];
		struct hc_mem *m = (struct hc_mem *)(uintptr_t)1;
		assert_int_equal(hc_mem_alloc(4096, &o, &m), -EINVAL);
		assert_null(m);
		assert_last_error_contains("struct_size");
	}
}

static struct hc_config *config(const char *json)
{
	struct hc_config *cfg = NULL;
	int rc = hc_config_create(json, &cfg);
	if (rc)
		fail_msg("hc_config_create(%s): %s", json ? json : "NULL", hc_last_error());
	return cfg;
}

static void test_from_config(void **state)
{
	(void)state;
	struct hc_mem_opts o = mt_opts();
	o.huge_page_size = HC_HUGE_1GB;
	o.huge_mode = HC_HUGE_REQUIRED;
	o.prefault_threads = 9;
	o.lock = true;
	o.prefault = false;
	o.hook_arg = &o;

	/* Defaults of the keys. */
	struct hc_config *cfg = config(NULL);
	assert_int_equal(hc_mem_opts_from_config(&o, cfg), 0);
	hc_config_destroy(cfg);
	assert_int_equal(o.huge_page_size, HC_HUGE_2MB);
	assert_int_equal(o.huge_mode, HC_HUGE_THP);
	assert_int_equal(o.prefault_threads, 0);
	assert_false(o.lock);
	/* Fields without a key are left alone. */
	assert_false(o.prefault);
	assert_ptr_equal(o.hook_arg, &o);

	cfg = config("{\"hugepage_size\": \"1G\", \"hugepage_mode\": \"prefer\", "
		     "\"prefault_threads\": 3, \"mlock\": true}");
	assert_int_equal(hc_mem_opts_from_config(&o, cfg), 0);
	assert_int_equal(o.huge_page_size, HC_HUGE_1GB);
	assert_int_equal(o.huge_mode, HC_HUGE_PREFER);
	assert_int_equal(o.prefault_threads, 3);
	assert_true(o.lock);

	/* A struct that ends before prefault_threads gets only what fits. */
	struct hc_mem_opts small = mt_opts();
	small.struct_size = END(huge_mode);
	small.prefault_threads = 42;
	small.lock = false;
	assert_int_equal(hc_mem_opts_from_config(&small, cfg), 0);
	assert_int_equal(small.huge_page_size, HC_HUGE_1GB);
	assert_int_equal(small.huge_mode, HC_HUGE_PREFER);
	assert_int_equal(small.prefault_threads, 42);
	assert_false(small.lock);

	/* The environment is read when the JSON does not set a key. */
	hc_config_destroy(cfg);
	setenv("HICACHE_HUGEPAGE_MODE", "required", 1);
	cfg = config("{\"hugepage_size\": \"2MB\"}");
	unsetenv("HICACHE_HUGEPAGE_MODE");
	assert_int_equal(hc_mem_opts_from_config(&o, cfg), 0);
	assert_int_equal(o.huge_mode, HC_HUGE_REQUIRED);
	assert_int_equal(o.huge_page_size, HC_HUGE_2MB);

	assert_int_equal(hc_mem_opts_from_config(NULL, cfg), -EINVAL);
	assert_int_equal(hc_mem_opts_from_config(&o, NULL), -EINVAL);
	o.struct_size = 0;
	assert_int_equal(hc_mem_opts_from_config(&o, cfg), -EINVAL);
	assert_last_error_contains("struct_size");
	hc_config_destroy(cfg);
}

/* A bad value is refused with the key named, whether the config catches it
 * or hc_mem_opts_from_config() does. */
static void expect_bad_value(const char *key, const char *value)
{
	struct hc_config *cfg = config(NULL);
	int rc = hc_config_set(cfg, key, value);
	if (rc == 0) {
		struct hc_mem_opts o = mt_opts();
		o.huge_page_size = HC_HUGE_1GB;
		o.huge_mode = HC_HUGE_PREFER;
		o.prefault_threads = 5;
		o.lock = true;
		rc = hc_mem_opts_from_config(&o, cfg);
		/* nothing written on failure */
		assert_int_equal(o.huge_page_size, HC_HUGE_1GB);
		assert_int_equal(o.huge_mode, HC_HUGE_PREFER);
		assert_int_equal(o.prefault_threads, 5);
		assert_true(o.lock);
	}
	assert_int_equal(rc, -EINVAL);
	assert_last_error_contains(key);
	hc_config_destroy(cfg);
}

static void test_from_config_bad(void **state)
{
	(void)state;
	expect_bad_value("hugepage_size", "3MB");
	expect_bad_value("hugepage_size", "2 MB");
	expect_bad_value("hugepage_mode", "sometimes");
	expect_bad_value("hugepage_mode", "");
	expect_bad_value("prefault_threads", "-1");
	expect_bad_value("prefault_threads", "many");
	expect_bad_value("mlock", "perhaps");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),     cmocka_unit_test(test_older_caller),
		cmocka_unit_test(test_newer_caller), cmocka_unit_test(test_bad_struct_size),
		cmocka_unit_test(test_from_config),  cmocka_unit_test(test_from_config_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
