/* mem.huge: huge page modes. required fails cleanly with the free count
 * when the pool is short; prefer falls back with one warning to a
 * THP-eligible mapping; thp (the default) maps for transparent huge pages
 * silently, without rounding up and without touching the hugetlb pool;
 * and, when this test may grow the 2MB pool (root), real hugetlb regions. One program so that nothing else of ours changes
 * the pool while a case relies on it. */
#include "mem_test.h"
#include "test_util.h"

#define POOL_2MB "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"

static int warnings;
static char last_warning[1024];

static void count_warnings(enum hc_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level == HC_LOG_WARN) {
		warnings++;
		snprintf(last_warning, sizeof(last_warning), "%s", msg);
	}
}

static uint64_t free_pages(size_t huge)
{
	uint64_t n = 0;
	if (hc_mem_huge_pages_free(huge, &n))
		return 0;
	return n;
}

static void expect_required_fails(size_t huge, size_t pages)
{
	uint64_t nfree = free_pages(huge);
	struct hc_mem_opts o = mt_opts();
	o.huge_mode = HC_HUGE_REQUIRED;
	o.huge_page_size = huge;
	struct hc_mem *m = (struct hc_mem *)(uintptr_t)1;
	warnings = 0;
	assert_int_equal(hc_mem_alloc(pages * huge - 1, &o, &m), -ENOMEM);
	assert_null(m);
	assert_int_equal(warnings, 0);
	char text[64];
	snprintf(text, sizeof(text), "%" PRIu64 " free", nfree);
	assert_last_error_contains(text);
	snprintf(text, sizeof(text), "%zu needed", pages);
	assert_last_error_contains(text);
	assert_last_error_contains(huge == HC_HUGE_1GB ? "1GB" : "2MB");
}

static void test_required_short(void **state)
{
	(void)state;
	expect_required_fails(HC_HUGE_2MB, (size_t)free_pages(HC_HUGE_2MB) + 1);
	expect_required_fails(HC_HUGE_2MB, (size_t)free_pages(HC_HUGE_2MB) + 3);
	/* no 1GB pool on most machines: still -ENOMEM, "0 free" */
	expect_required_fails(HC_HUGE_1GB, (size_t)free_pages(HC_HUGE_1GB) + 1);
}

static void expect_fallback(size_t huge, size_t len)
{
	struct hc_mem_opts o = mt_opts();
	o.huge_mode = HC_HUGE_PREFER;
	o.huge_page_size = huge;
	struct hc_mem *m = NULL;
	warnings = 0;
	assert_int_equal(hc_mem_alloc(len, &o, &m), 0);
	assert_int_equal(warnings, 1);
	if (!strstr(last_warning, "prefer"))
		fail_msg("warning \"%s\" does not say prefer", last_warning);

	/* Aligned to and a multiple of the THP size (2 MiB), not rounded up to
	 * 1 GiB for a 1GB request: that would pre-fault memory nobody wants. */
	void *addr = hc_mem_addr(m);
	size_t mapped = hc_mem_mapped_len(m);
	assert_int_equal((uintptr_t)addr % (2 * MB), 0);
	assert_int_equal(mapped, (len + 2 * MB - 1) / (2 * MB) * (2 * MB));
	assert_int_equal(hc_mem_page_size(m), 4096);
	enum hc_mem_backing b = hc_mem_backing(m);
	assert_int_not_equal(b, HC_MEM_HUGETLB);
	/* THP "madvise" or "always" with plenty of free memory: the kernel gives
	 * huge pages to an aligned MADV_HUGEPAGE region at fault time. */
	if (strcmp(mt_thp_mode(), "never"))
		assert_int_equal(b, HC_MEM_THP);
	else
		assert_int_equal(b, HC_MEM_NORMAL);
	assert_int_equal(mt_not_resident(addr, mapped), 0);
	mt_fill(addr, mapped);
	assert_true(mt_check(addr, mapped));
	hc_mem_free(m);
	assert_false(mt_mapped(addr, mapped));
}

static void test_prefer_fallback(void **state)
{
	(void)state;
	size_t pages = (size_t)free_pages(HC_HUGE_2MB) + 3;
	expect_fallback(HC_HUGE_2MB, pages * HC_HUGE_2MB - 12345);
	expect_fallback(HC_HUGE_1GB, 5 * MB + 1);
}

/* A thp-mode region of len bytes: aligned for THP, not rounded up beyond
 * base pages, hugetlb untouched, no warning; THP-backed when it holds a
 * whole huge page and the kernel gives THP at all. */
static void expect_thp(size_t len)
{
	uint64_t hugetlb_free = free_pages(HC_HUGE_2MB);
	struct hc_mem_opts o = mt_opts();
	assert_int_equal(o.huge_mode, HC_HUGE_THP); /* the default */
	struct hc_mem *m = NULL;
	warnings = 0;
	assert_int_equal(hc_mem_alloc(len, &o, &m), 0);
	assert_int_equal(warnings, 0);
	void *addr = hc_mem_addr(m);
	size_t mapped = hc_mem_mapped_len(m);
	assert_int_equal(mapped, (len + 4095) / 4096 * 4096);
	assert_int_equal(hc_mem_page_size(m), 4096);
	assert_int_equal(free_pages(HC_HUGE_2MB), hugetlb_free);
	bool thp = strcmp(mt_thp_mode(), "never") != 0;
	if (thp)
		assert_int_equal((uintptr_t)addr % (2 * MB), 0);
	if (thp && len >= 2 * MB)
		assert_int_equal(hc_mem_backing(m), HC_MEM_THP);
	else if (strcmp(mt_thp_mode(), "always"))
		assert_int_equal(hc_mem_backing(m), HC_MEM_NORMAL);
	assert_int_equal(mt_not_resident(addr, mapped), 0);
	mt_fill(addr, mapped);
	assert_true(mt_check(addr, mapped));
	hc_mem_free(m);
	assert_false(mt_mapped(addr, mapped));
}

static void test_thp(void **state)
{
	(void)state;
	expect_thp(6 * MB + 12345);
	expect_thp(2 * MB);
	expect_thp(MB); /* no whole huge page: base pages, and no 2 MiB for 1 */
}

static void test_off(void **state)
{
	(void)state;
	struct hc_mem_opts o = mt_opts();
	o.huge_mode = HC_HUGE_OFF;
	struct hc_mem *m = NULL;
	warnings = 0;
	assert_int_equal(hc_mem_alloc(8 * MB, &o, &m), 0);
	assert_int_equal(warnings, 0);
	if (strcmp(mt_thp_mode(), "always"))
		assert_int_equal(hc_mem_backing(m), HC_MEM_NORMAL);
	assert_int_equal(hc_mem_page_size(m), 4096);
	hc_mem_free(m);
}

/* ---- real hugetlb: grow the 2MB pool for the case, then restore it ---- */

static long long pool_before = -1;

static long long read_pool(void)
{
	long long v = -1;
	if (mt_read(POOL_2MB) > 0)
		sscanf(mt_buf, "%lld", &v);
	return v;
}

static bool write_pool(long long v)
{
	int fd = open(POOL_2MB, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	char text[32];
	int n = snprintf(text, sizeof(text), "%lld\n", v);
	bool ok = write(fd, text, (size_t)n) == n;
	close(fd);
	return ok;
}

static int grow_pool(void **state)
{
	(void)state;
	pool_before = read_pool();
	if (geteuid() != 0 || pool_before < 0 || !write_pool(pool_before + 6))
		pool_before = -1;
	return 0;
}

static int restore_pool(void **state)
{
	(void)state;
	if (pool_before >= 0 && !write_pool(pool_before))
		return -1;
	return 0;
}

static struct hc_mem *alloc_huge(size_t len, enum hc_huge_mode mode, unsigned threads, bool lock)
{
	struct hc_mem_opts o = mt_opts();
	o.huge_mode = mode;
	o.huge_page_size = HC_HUGE_2MB;
	o.prefault_threads = threads;
	o.lock = lock;
	struct hc_mem *m = NULL;
	int rc = hc_mem_alloc(len, &o, &m);
	if (rc)
		fail_msg("hc_mem_alloc(%zu, hugetlb): %s", len, hc_last_error());
	assert_int_equal(hc_mem_backing(m), HC_MEM_HUGETLB);
	assert_int_equal(hc_mem_page_size(m), HC_HUGE_2MB);
	assert_int_equal((uintptr_t)hc_mem_addr(m) % HC_HUGE_2MB, 0);
	assert_int_equal(hc_mem_mapped_len(m), (len + HC_HUGE_2MB - 1) / HC_HUGE_2MB * HC_HUGE_2MB);
	assert_int_equal(hc_mem_len(m), len);
	assert_int_equal(mt_not_resident(hc_mem_addr(m), hc_mem_mapped_len(m)), 0);
	assert_true(mt_all_zero(hc_mem_addr(m), hc_mem_mapped_len(m)));
	mt_fill(hc_mem_addr(m), hc_mem_mapped_len(m));
	assert_true(mt_check(hc_mem_addr(m), hc_mem_mapped_len(m)));
	return m;
}

static void test_real_hugetlb(void **state)
{
	(void)state;
	uint64_t nfree = free_pages(HC_HUGE_2MB);
	if (pool_before < 0 || nfree < 4) {
		print_message("cannot grow the 2MB huge page pool here (root: %d, free: %" PRIu64
			      "); skipping\n",
			      geteuid() == 0, nfree);
		skip();
	}
	warnings = 0;
	struct hc_mem *m = alloc_huge(3 * MB, HC_HUGE_REQUIRED, 0, false);
	assert_false(hc_mem_locked(m));
	/* pre-faulted: the pages are taken from the pool now */
	assert_int_equal(free_pages(HC_HUGE_2MB), nfree - 2);
	void *addr = hc_mem_addr(m);
	hc_mem_free(m);
	assert_false(mt_mapped(addr, 4 * MB));
	assert_int_equal(free_pages(HC_HUGE_2MB), nfree);

	/* two threads, one huge page each; locked (hugetlb never swaps) */
	m = alloc_huge(4 * MB, HC_HUGE_PREFER, 2, true);
	assert_true(hc_mem_locked(m));
	assert_int_equal(free_pages(HC_HUGE_2MB), nfree - 2);

	/* thp leaves the reservation to hugetlb users */
	expect_thp(4 * MB);

	/* more than what is left: required fails with the count, prefer falls
	 * back */
	expect_required_fails(HC_HUGE_2MB, (size_t)nfree - 1);
	hc_mem_free(m);
	assert_int_equal(warnings, 0);
	expect_required_fails(HC_HUGE_2MB, (size_t)nfree + 1);
	expect_fallback(HC_HUGE_2MB, (nfree + 1) * HC_HUGE_2MB);

	/* exactly what is free: fits */
	m = alloc_huge(nfree * HC_HUGE_2MB, HC_HUGE_REQUIRED, 3, false);
	assert_int_equal(free_pages(HC_HUGE_2MB), 0);
	hc_mem_free(m);
	assert_int_equal(free_pages(HC_HUGE_2MB), nfree);
}

int main(void)
{
	if (sysconf(_SC_PAGESIZE) != 4096 || access(POOL_2MB, F_OK) != 0)
		return TEST_SKIP_CODE;
	hc_log_set_handler(count_warnings, NULL);
	hc_log_set_level(HC_LOG_WARN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_required_short),
		cmocka_unit_test(test_prefer_fallback),
		cmocka_unit_test(test_thp),
		cmocka_unit_test(test_off),
		cmocka_unit_test_setup_teardown(test_real_hugetlb, grow_pool, restore_pool),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
