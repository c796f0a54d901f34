/* hc_store_opts is size-tagged (issue 15 item 16), as hc_cache_opts:
 * hc_store_opts_init with an older, smaller size sets struct_size to that
 * size, defaults the fields it holds and leaves the caller's bytes past it
 * alone; with a newer, bigger size it zeroes the fields it does not know.
 * hc_store_open takes any older struct (the missing fields keep their
 * defaults) and a newer one whose unknown fields are zero, and refuses an
 * uninitialised struct or a newer one that sets unknown fields, with a
 * message naming opts. Before, init clamped a bigger size to its own and
 * open refused every smaller struct. */
#include "store_test.h"

#include <stddef.h>

/* What a caller compiled before force_bounce existed passes. */
#define OLD_SIZE offsetof(struct hc_store_opts, force_bounce)

struct newer_opts {
	struct hc_store_opts o;
	uint64_t later; /* a field of a newer header */
};

static char dir[PATH_MAX];
static char json[PATH_MAX + 64];

static struct hc_config *config(void)
{
	struct hc_config *cfg = NULL;
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s\"]}", dir);
	assert_int_equal(hc_config_create(json, &cfg), 0);
	return cfg;
}

static void test_init_older_size(void **state)
{
	(void)state;
	struct hc_store_opts o;
	memset(&o, 0xab, sizeof(o));
	hc_store_opts_init(&o, OLD_SIZE);
	assert_int_equal(o.struct_size, OLD_SIZE);
	assert_string_equal(o.backend, "file");
	assert_null(o.config);
	assert_null(o.model);
	assert_int_equal(o.tp_rank, 0);
	assert_int_equal(o.tp_size, 1);
	/* Bytes past the caller's size are the caller's: left alone. */
	unsigned char tail[sizeof(o) - OLD_SIZE];
	memset(tail, 0xab, sizeof(tail));
	assert_memory_equal((unsigned char *)&o + OLD_SIZE, tail, sizeof(tail));
	/* Too small to hold struct_size: nothing is written. */
	size_t tiny = 0xabababababababab;
	hc_store_opts_init((struct hc_store_opts *)&tiny, 4);
	assert_true(tiny == 0xabababababababab);
}

static void test_init_newer_size(void **state)
{
	(void)state;
	struct newer_opts n;
	memset(&n, 0xab, sizeof(n));
	hc_store_opts_init(&n.o, sizeof(n));
	assert_int_equal(n.o.struct_size, sizeof(n));
	assert_int_equal(n.o.tp_size, 1);
	assert_false(n.o.force_bounce);
	assert_true(n.later == 0);
}

static void test_open_older_struct(void **state)
{
	(void)state;
	struct hc_store_opts o;
	memset(&o, 0xab, sizeof(o)); /* force_bounce is not the caller's */
	hc_store_opts_init(&o, OLD_SIZE);
	struct hc_config *cfg = config();
	o.config = cfg;
	o.model = ST_MODEL;
	struct hc_store *st = NULL;
	assert_int_equal(hc_store_open(&o, &st), 0);
	assert_non_null(st);
	/* force_bounce defaulted to false: a page-aligned pool is zero-copy. */
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 4);
	struct hc_pool *kv = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(st, "kv", &info), 0);
	assert_true(info.zero_copy);
	struct hc_key keys[2];
	st_keys(3, 2, 8, keys);
	st_fill(kv, 0, 1, 0);
	st_fill(kv, 1, 1, 1);
	uint64_t pages[2] = {0, 1}, back[2] = {2, 3};
	int res[2] = {1, 1};
	assert_int_equal(hc_store_set(st, keys, 2, pages, res), 0);
	assert_int_equal(hc_store_get(st, keys, 2, back, res), 2);
	st_assert_page(kv, 2, 1, 0);
	st_assert_page(kv, 3, 1, 1);
	hc_store_close(st);
	hc_pool_destroy(kv);
	hc_config_destroy(cfg);
	st_empty_dir(dir);

	/* The smallest struct: struct_size alone; every field defaulted. */
	size_t bare = sizeof(size_t);
	assert_int_equal(hc_store_open((const struct hc_store_opts *)&bare, &st), 0);
	assert_non_null(st);
	assert_true(hc_store_alignment(st) > 0); /* the file backend, opened */
	hc_store_close(st);
}

static void test_newer_struct(void **state)
{
	(void)state;
	struct newer_opts n;
	hc_store_opts_init(&n.o, sizeof(n));
	struct hc_config *cfg = config();
	n.o.config = cfg;
	struct hc_store *st = NULL;
	assert_int_equal(hc_store_open(&n.o, &st), 0);
	hc_store_close(st);
	n.later = 1;
	st = (struct hc_store *)&n;
	assert_int_equal(hc_store_open(&n.o, &st), -EINVAL);
	assert_null(st);
	assert_non_null(strstr(hc_last_error(), "hc_store_open: opts"));
	assert_non_null(strstr(hc_last_error(), "does not know"));
	hc_config_destroy(cfg);
}

static void test_uninitialised_refused(void **state)
{
	(void)state;
	struct hc_store_opts o;
	memset(&o, 0, sizeof(o));
	o.backend = "mem";
	o.tp_size = 1;
	struct hc_store *st = (struct hc_store *)&o;
	assert_int_equal(hc_store_open(&o, &st), -EINVAL);
	assert_null(st);
	assert_non_null(strstr(hc_last_error(), "hc_store_open: opts"));
	assert_non_null(strstr(hc_last_error(), "_init(&opts, sizeof(opts))"));
	o.struct_size = (size_t)-1; /* garbage */
	assert_int_equal(hc_store_open(&o, &st), -EINVAL);
	assert_non_null(strstr(hc_last_error(), "struct_size"));
	assert_int_equal(hc_store_open(NULL, &st), -EINVAL);
	assert_non_null(strstr(hc_last_error(), "hc_store_open: opts"));
	hc_store_opts_init(&o, sizeof(o));
	assert_int_equal(hc_store_open(&o, NULL), -EINVAL);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	st_mkdtemp(dir);
	/* The bare struct opens the default file store: a dir of its own. */
	setenv("HICACHE_STORAGE_DIR", dir, 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_older_size),
		cmocka_unit_test(test_init_newer_size),
		cmocka_unit_test(test_open_older_struct),
		cmocka_unit_test(test_newer_struct),
		cmocka_unit_test(test_uninitialised_refused),
	};
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	st_rmrf(dir);
	return rc;
}
