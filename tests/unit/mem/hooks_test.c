/* mem.hooks: on_map after the region is ready, on_unmap before it goes;
 * a failing on_map fails the allocation and nothing else is called. */
#include "mem_test.h"
#include "test_util.h"

struct record {
	int maps, unmaps;
	void *map_addr, *unmap_addr;
	size_t map_len, unmap_len;
	void *map_arg, *unmap_arg;
	size_t not_resident; /* at on_map time */
	bool readable;       /* at on_unmap time: the first and last byte */
	int map_result;
};

static int on_map(void *addr, size_t len, void *arg)
{
	struct record *r = arg;
	r->maps++;
	r->map_addr = addr;
	r->map_len = len;
	r->map_arg = arg;
	r->not_resident = mt_not_resident(addr, len);
	/* the hook may write the memory (register it, zero it...) */
	((char *)addr)[len - 1] = 1;
	return r->map_result;
}

static int on_unmap(void *addr, size_t len, void *arg)
{
	struct record *r = arg;
	r->unmaps++;
	r->unmap_addr = addr;
	r->unmap_len = len;
	r->unmap_arg = arg;
	r->readable = mt_mapped(addr, len) && ((char *)addr)[len - 1] == 1;
	return -EIO; /* ignored: the memory goes anyway */
}

static void test_called_once_each(void **state)
{
	(void)state;
	struct record r = {0};
	struct hc_mem_opts o = mt_opts();
	o.on_map = on_map;
	o.on_unmap = on_unmap;
	o.hook_arg = &r;
	struct hc_mem *m = NULL;
	size_t len = 5 * MB + 3;
	assert_int_equal(hc_mem_alloc(len, &o, &m), 0);
	assert_int_equal(r.maps, 1);
	assert_int_equal(r.unmaps, 0);
	assert_ptr_equal(r.map_addr, hc_mem_addr(m));
	assert_int_equal(r.map_len, hc_mem_mapped_len(m));
	assert_true(r.map_len >= len);
	assert_ptr_equal(r.map_arg, &r);
	/* pre-faulted before the hook sees it */
	assert_int_equal(r.not_resident, 0);

	void *addr = hc_mem_addr(m);
	size_t mapped = hc_mem_mapped_len(m);
	hc_mem_free(m);
	assert_int_equal(r.maps, 1);
	assert_int_equal(r.unmaps, 1);
	assert_ptr_equal(r.unmap_addr, addr);
	assert_int_equal(r.unmap_len, mapped);
	assert_ptr_equal(r.unmap_arg, &r);
	/* still mapped, contents intact, while on_unmap runs; gone after */
	assert_true(r.readable);
	assert_false(mt_mapped(addr, mapped));
}

static void test_only_one(void **state)
{
	(void)state;
	struct record r = {0};
	struct hc_mem_opts o = mt_opts();
	struct hc_mem *m = NULL;
	o.on_unmap = on_unmap;
	o.hook_arg = &r;
	assert_int_equal(hc_mem_alloc(4096, &o, &m), 0);
	((char *)hc_mem_addr(m))[4095] = 1;
	hc_mem_free(m);
	assert_int_equal(r.unmaps, 1);

	o = mt_opts();
	o.on_map = on_map;
	o.hook_arg = &r;
	assert_int_equal(hc_mem_alloc(4096, &o, &m), 0);
	hc_mem_free(m);
	assert_int_equal(r.maps, 1);
	assert_int_equal(r.unmaps, 1);
}

static void test_failing_on_map(void **state)
{
	(void)state;
	static const int results[] = {-EIO, -ENODEV, 7};
	for (size_t i = 0; i < sizeof(results) / sizeof(results[0]); i++) {
		struct record r = {.map_result = results[i]};
		struct hc_mem_opts o = mt_opts();
		o.on_map = on_map;
		o.on_unmap = on_unmap;
		o.hook_arg = &r;
		struct hc_mem *m = (struct hc_mem *)(uintptr_t)1;
		assert_int_equal(hc_mem_alloc(3 * MB, &o, &m), results[i]);
		assert_null(m);
		assert_int_equal(r.maps, 1);
		assert_int_equal(r.unmaps, 0);
		assert_last_error_contains("on_map");
		assert_false(mt_mapped(r.map_addr, r.map_len));
	}
}

/* No hook runs when the allocation fails before the region is ready. */
static void test_no_hook_on_earlier_failure(void **state)
{
	(void)state;
	struct record r = {0};
	struct hc_mem_opts o = mt_opts();
	o.on_map = on_map;
	o.on_unmap = on_unmap;
	o.hook_arg = &r;
	struct hc_mem *m = NULL;
	assert_int_equal(hc_mem_alloc(0, &o, &m), -EINVAL);
	assert_int_equal(hc_mem_alloc(SIZE_MAX - 4 * MB + 1, &o, &m), -ENOMEM);
	o.huge_mode = HC_HUGE_REQUIRED;
	uint64_t nfree = 0;
	if (hc_mem_huge_pages_free(HC_HUGE_2MB, &nfree) == 0)
		assert_int_equal(hc_mem_alloc((nfree + 1) * HC_HUGE_2MB, &o, &m), -ENOMEM);
	assert_int_equal(r.maps, 0);
	assert_int_equal(r.unmaps, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_called_once_each),
		cmocka_unit_test(test_only_one),
		cmocka_unit_test(test_failing_on_map),
		cmocka_unit_test(test_no_hook_on_earlier_failure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
