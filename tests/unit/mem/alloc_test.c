/* mem.alloc: mapping, freeing, argument checks and the small helpers. */
#include "mem_test.h"

#include <hicache/log.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>

#include <cmocka.h>

static void check_region(struct hc_mem *m, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *addr = hc_mem_addr(m);
	assert_non_null(addr);
	assert_int_equal((uintptr_t)addr % page, 0);
	assert_int_equal(hc_mem_len(m), len);
	assert_int_equal(hc_mem_mapped_len(m), (len + page - 1) / page * page);
	assert_int_equal(hc_mem_page_size(m), page);
	assert_false(hc_mem_locked(m));
	/* Fresh memory reads as zero, is resident after the default pre-fault,
	 * and every byte asked for can be written and read back. */
	assert_true(mt_all_zero(addr, hc_mem_mapped_len(m)));
	assert_int_equal(mt_not_resident(addr, hc_mem_mapped_len(m)), 0);
	mt_fill(addr, hc_mem_mapped_len(m));
	((unsigned char *)addr)[len - 1] = 0x5a;
	assert_int_equal(((unsigned char *)addr)[len - 1], 0x5a);
	((unsigned char *)addr)[len - 1] = 0;
	mt_fill(addr, hc_mem_mapped_len(m));
	assert_true(mt_check(addr, hc_mem_mapped_len(m)));
}

static void test_small(void **state)
{
	(void)state;
	struct hc_mem *m = NULL;
	assert_int_equal(hc_mem_alloc(1, NULL, &m), 0);
	check_region(m, 1);
	if (strcmp(mt_thp_mode(), "always"))
		assert_int_equal(hc_mem_backing(m), HC_MEM_NORMAL);
	void *addr = hc_mem_addr(m);
	size_t mapped = hc_mem_mapped_len(m);
	assert_true(mt_mapped(addr, mapped));
	hc_mem_free(m);
	assert_false(mt_mapped(addr, mapped));
}

static void test_big(void **state)
{
	(void)state;
	size_t len = 256 * MB + 12345;
	struct hc_mem *m = NULL;
	assert_int_equal(hc_mem_alloc(len, NULL, &m), 0);
	check_region(m, len);
	void *addr = hc_mem_addr(m);
	size_t mapped = hc_mem_mapped_len(m);
	hc_mem_free(m);
	assert_false(mt_mapped(addr, mapped));
}

static void test_many_live(void **state)
{
	(void)state;
	/* Regions alive at once are disjoint and keep their own contents. */
	struct hc_mem *m[8];
	for (int i = 0; i < 8; i++) {
		assert_int_equal(hc_mem_alloc((size_t)(i + 1) * 5000, NULL, &m[i]), 0);
		memset(hc_mem_addr(m[i]), i + 1, hc_mem_len(m[i]));
	}
	for (int i = 0; i < 8; i++) {
		unsigned char *p = hc_mem_addr(m[i]);
		for (size_t j = 0; j < hc_mem_len(m[i]); j++)
			if (p[j] != i + 1)
				fail_msg("region %d byte %zu is %d", i, j, p[j]);
		hc_mem_free(m[i]);
	}
}

static void test_null(void **state)
{
	(void)state;
	hc_mem_free(NULL);
	assert_null(hc_mem_addr(NULL));
	assert_int_equal(hc_mem_len(NULL), 0);
	assert_int_equal(hc_mem_mapped_len(NULL), 0);
	assert_false(hc_mem_locked(NULL));
	assert_int_equal(hc_mem_alloc(4096, NULL, NULL), -EINVAL);
	assert_non_null(strstr(hc_last_error(), "out"));
}

static void expect_einval(size_t len, const struct hc_mem_opts *o, const char *words)
{
	struct hc_mem *m = (struct hc_mem *)(uintptr_t)1;
	assert_int_equal(hc_mem_alloc(len, o, &m), -EINVAL);
	assert_null(m);
	if (!strstr(hc_last_error(), words))
		fail_msg("hc_last_error() is \"%s\", expected it to mention \"%s\"",
			 hc_last_error(), words);
}

static void test_bad_len(void **state)
{
	(void)state;
	struct hc_mem_opts o = mt_opts();
	expect_einval(0, NULL, "len is 0");
	expect_einval(SIZE_MAX, NULL, "overflows");
	expect_einval(SIZE_MAX - 100, NULL, "overflows");
	for (int mode = HC_HUGE_PREFER; mode <= HC_HUGE_REQUIRED; mode++) {
		o.huge_mode = (enum hc_huge_mode)mode;
		o.huge_page_size = HC_HUGE_2MB;
		expect_einval(0, &o, "len is 0");
		expect_einval(SIZE_MAX, &o, "overflows");
		expect_einval(SIZE_MAX - HC_HUGE_2MB + 2, &o, "overflows");
		o.huge_page_size = HC_HUGE_1GB;
		expect_einval(SIZE_MAX - HC_HUGE_1GB + 2, &o, "overflows");
	}
	/* Rounds fine but no address space is that large. */
	struct hc_mem *m = (struct hc_mem *)(uintptr_t)1;
	assert_int_equal(hc_mem_alloc(SIZE_MAX - 4 * MB + 1, NULL, &m), -ENOMEM);
	assert_null(m);
	assert_non_null(strstr(hc_last_error(), "cannot map"));
}

static void test_bad_opts(void **state)
{
	(void)state;
	static const size_t sizes[] = {0, 4096, 3 * MB, 4 * MB, 512 * MB, 2 * GB, HC_HUGE_2MB + 1};
	struct hc_mem_opts o = mt_opts();
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		o.huge_page_size = sizes[i];
		o.huge_mode = HC_HUGE_PREFER;
		expect_einval(4096, &o, "huge page size");
		o.huge_mode = HC_HUGE_REQUIRED;
		expect_einval(4096, &o, "huge page size");
		/* Off never looks at the size. */
		o.huge_mode = HC_HUGE_OFF;
		struct hc_mem *m = NULL;
		assert_int_equal(hc_mem_alloc(4096, &o, &m), 0);
		hc_mem_free(m);
	}
	o = mt_opts();
	o.huge_mode = (enum hc_huge_mode)7;
	expect_einval(4096, &o, "huge_mode");
	o.huge_mode = (enum hc_huge_mode) - 1;
	expect_einval(4096, &o, "huge_mode");
}

static void test_parse_size(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		size_t size;
	} good[] = {
		{"2MB", HC_HUGE_2MB}, {"2mb", HC_HUGE_2MB},     {"2M", HC_HUGE_2MB},
		{"2m", HC_HUGE_2MB},  {"2097152", HC_HUGE_2MB}, {"1GB", HC_HUGE_1GB},
		{"1gB", HC_HUGE_1GB}, {"1G", HC_HUGE_1GB},      {"1073741824", HC_HUGE_1GB},
	};
	static const char *const bad[] = {
		"",         "3MB",
		"2",        "2 MB",
		" 2MB",     "2MB ",
		"+2097152", "-2097152",
		"2097153",  "4096",
		"1TB",      "2MiB",
		"0x200000", "99999999999999999999999",
		"2MBB",     "1GBx",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		size_t out = 0;
		assert_int_equal(hc_mem_parse_huge_size(good[i].text, &out), 0);
		assert_int_equal(out, good[i].size);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t out = 77;
		if (hc_mem_parse_huge_size(bad[i], &out) != -EINVAL)
			fail_msg("\"%s\" parsed as a huge page size", bad[i]);
		assert_int_equal(out, 77);
		assert_non_null(strstr(hc_last_error(), "huge page size"));
		char quoted[64];
		snprintf(quoted, sizeof(quoted), "\"%s\"", bad[i]);
		assert_non_null(strstr(hc_last_error(), quoted));
	}
	size_t out;
	assert_int_equal(hc_mem_parse_huge_size(NULL, &out), -EINVAL);
	assert_int_equal(hc_mem_parse_huge_size("2MB", NULL), -EINVAL);
}

static void test_parse_mode(void **state)
{
	(void)state;
	enum hc_huge_mode m = HC_HUGE_OFF;
	assert_int_equal(hc_mem_parse_huge_mode("prefer", &m), 0);
	assert_int_equal(m, HC_HUGE_PREFER);
	assert_int_equal(hc_mem_parse_huge_mode("REQUIRED", &m), 0);
	assert_int_equal(m, HC_HUGE_REQUIRED);
	assert_int_equal(hc_mem_parse_huge_mode("Off", &m), 0);
	assert_int_equal(m, HC_HUGE_OFF);
	static const char *const bad[] = {"", "on", "sometimes", "offf", "prefer ", "1", "of"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		m = HC_HUGE_REQUIRED;
		if (hc_mem_parse_huge_mode(bad[i], &m) != -EINVAL)
			fail_msg("\"%s\" parsed as a huge page mode", bad[i]);
		assert_int_equal(m, HC_HUGE_REQUIRED);
		assert_non_null(strstr(hc_last_error(), "huge page mode"));
	}
	assert_int_equal(hc_mem_parse_huge_mode(NULL, &m), -EINVAL);
}

static void test_names_and_info(void **state)
{
	(void)state;
	assert_string_equal(hc_mem_backing_name(HC_MEM_NORMAL), "normal");
	assert_string_equal(hc_mem_backing_name(HC_MEM_THP), "thp");
	assert_string_equal(hc_mem_backing_name(HC_MEM_HUGETLB), "hugetlb");
	assert_string_equal(hc_mem_backing_name((enum hc_mem_backing)42), "unknown");

	uint64_t avail = 0;
	assert_int_equal(hc_mem_available(&avail), 0);
	long long total_kb = -1;
	if (mt_read("/proc/meminfo") > 0)
		sscanf(strstr(mt_buf, "MemTotal:") + 9, "%lld", &total_kb);
	assert_true(avail > 0);
	assert_true(avail <= (uint64_t)total_kb * 1024);
	assert_int_equal(hc_mem_available(NULL), -EINVAL);

	/* Any machine with hugetlb has a 2MB pool (x86-64). */
	uint64_t nfree = UINT64_MAX;
	int rc = hc_mem_huge_pages_free(HC_HUGE_2MB, &nfree);
	if (access("/sys/kernel/mm/hugepages/hugepages-2048kB", F_OK) == 0) {
		assert_int_equal(rc, 0);
		assert_true(nfree != UINT64_MAX);
	} else {
		assert_int_equal(rc, -ENOENT);
	}
	rc = hc_mem_huge_pages_free(HC_HUGE_1GB, &nfree);
	if (access("/sys/kernel/mm/hugepages/hugepages-1048576kB", F_OK) == 0) {
		assert_int_equal(rc, 0);
	} else {
		assert_int_equal(rc, -ENOENT);
		assert_non_null(strstr(hc_last_error(), "1GB"));
	}
	assert_int_equal(hc_mem_huge_pages_free(4096, &nfree), -EINVAL);
	assert_int_equal(hc_mem_huge_pages_free(3 * MB, &nfree), -EINVAL);
	assert_int_equal(hc_mem_huge_pages_free(HC_HUGE_2MB, NULL), -EINVAL);
}

struct seen {
	void *addr;
	size_t len;
};

static int fail_hook(void *addr, size_t len, void *arg)
{
	struct seen *seen = arg;
	seen->addr = addr;
	seen->len = len;
	return -EIO;
}

/* Every path, good and bad, gives back its file descriptors and mappings.
 * (VmSize is no measure: glibc caches the stacks of pre-fault threads.) */
static void test_no_leak(void **state)
{
	(void)state;
	int fds = mt_fd_count();
	for (int round = 0; round < 24; round++) {
		struct hc_mem_opts o = mt_opts();
		struct hc_mem *m = NULL;
		o.huge_mode = (enum hc_huge_mode)(round % 3);
		o.huge_page_size = round % 2 ? HC_HUGE_2MB : HC_HUGE_1GB;
		o.prefault_threads = (unsigned)(round % 4);
		o.prefault = round % 5 != 4;
		/* required fails on a machine without huge pages; that is a path too */
		int rc = hc_mem_alloc(3 * MB + 17, &o, &m);
		assert_true(rc == 0 || rc == -ENOMEM);
		if (rc == 0) {
			void *addr = hc_mem_addr(m);
			size_t len = hc_mem_mapped_len(m);
			hc_mem_free(m);
			assert_false(mt_mapped(addr, len));
		}
		struct seen seen = {0};
		o.on_map = fail_hook;
		o.hook_arg = &seen;
		rc = hc_mem_alloc(3 * MB, &o, &m);
		assert_true(rc == -EIO || rc == -ENOMEM);
		assert_null(m);
		if (rc == -EIO)
			assert_false(mt_mapped(seen.addr, seen.len));
		hc_mem_alloc(0, &o, &m);
		uint64_t v;
		hc_mem_huge_pages_free(HC_HUGE_2MB, &v);
		hc_mem_huge_pages_free(HC_HUGE_1GB, &v);
		hc_mem_available(&v);
	}
	assert_int_equal(mt_fd_count(), fds);
}

int main(void)
{
	/* prefer on a machine without huge pages warns; keep test output clean */
	hc_log_set_level(HC_LOG_OFF);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small),          cmocka_unit_test(test_big),
		cmocka_unit_test(test_many_live),      cmocka_unit_test(test_null),
		cmocka_unit_test(test_bad_len),        cmocka_unit_test(test_bad_opts),
		cmocka_unit_test(test_parse_size),     cmocka_unit_test(test_parse_mode),
		cmocka_unit_test(test_names_and_info), cmocka_unit_test(test_no_leak),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
