/* Pool groups: unique names, one anchor of the right kind, ownership. */
#include "test_util.h"

#include <errno.h>

static struct hc_pool *kv_pool(void)
{
	struct hc_kv_geometry g = {2, 2, 8, 2, 4, 4, HC_LAYOUT_PAGE_FIRST, false};
	struct hc_pool *p;
	assert_int_equal(hc_pool_create_kv(&g, NULL, &p), 0);
	return p;
}

static struct hc_pool *mamba_pool(void)
{
	struct hc_mamba_geometry g = {.slots = 4, .layers = 2, .temporal_bytes = 16};
	struct hc_pool *p;
	assert_int_equal(hc_pool_create_mamba(&g, NULL, &p), 0);
	return p;
}

static void test_group(void **state)
{
	(void)state;
	struct hc_pool_group *g;
	assert_int_equal(hc_pool_group_create(&g), 0);
	assert_null(hc_pool_group_anchor(g));
	struct hc_pool *kv = kv_pool(), *mamba = mamba_pool(), *swa = kv_pool();

	assert_int_equal(hc_pool_group_add(g, "mamba", mamba, true), -EINVAL);
	assert_last_error_contains("must be a kv or anchor pool");
	assert_int_equal(hc_pool_group_add(g, "kv", kv, true), 0);
	assert_int_equal(hc_pool_group_add(g, "mamba", mamba, false), 0);
	assert_int_equal(hc_pool_group_add(g, "mamba", swa, false), -EEXIST);
	assert_last_error_contains("'mamba' is taken");
	assert_int_equal(hc_pool_group_add(g, "swa2", kv, false), -EEXIST);
	assert_last_error_contains("already in the group");
	assert_int_equal(hc_pool_group_add(g, "swa", swa, true), -EEXIST);
	assert_last_error_contains("'kv' is already the anchor");
	assert_int_equal(hc_pool_group_add(g, "SWA", swa, false), -EINVAL);
	assert_int_equal(hc_pool_group_add(g, "../x", swa, false), -EINVAL);
	assert_int_equal(hc_pool_group_add(g, "", swa, false), -EINVAL);
	assert_int_equal(hc_pool_group_add(g, "swa", swa, false), 0);

	assert_ptr_equal(hc_pool_group_anchor(g), kv);
	assert_string_equal(hc_pool_group_anchor_name(g), "kv");
	assert_ptr_equal(hc_pool_group_find(g, "mamba"), mamba);
	assert_ptr_equal(hc_pool_group_find(g, "swa"), swa);
	assert_null(hc_pool_group_find(g, "indexer"));
	assert_int_equal(hc_pool_group_count(g), 3);
	const char *name;
	assert_ptr_equal(hc_pool_group_at(g, 1, &name), mamba);
	assert_string_equal(name, "mamba");
	assert_null(hc_pool_group_at(g, 3, &name));
	hc_pool_group_destroy(g); /* frees the three pools (ASan checks) */
	hc_pool_group_destroy(NULL);
}

static void test_logical_anchor(void **state)
{
	(void)state;
	struct hc_pool_group *g;
	assert_int_equal(hc_pool_group_create(&g), 0);
	struct hc_anchor_geometry ag = {.pages = 8, .page_size = 16};
	struct hc_pool *anchor;
	assert_int_equal(hc_pool_create_anchor(&ag, &anchor), 0);
	assert_int_equal(hc_pool_group_add(g, "anchor", anchor, true), 0);
	assert_int_equal(hc_pool_group_add(g, "mamba", mamba_pool(), false), 0);
	assert_ptr_equal(hc_pool_group_anchor(g), anchor);
	hc_pool_group_destroy(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_group),
		cmocka_unit_test(test_logical_anchor),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
