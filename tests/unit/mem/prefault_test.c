/* mem.prefault: pre-faulting by one or several threads leaves the same
 * result (every page resident and zero), each thread on its own contiguous
 * range; the fallback for kernels without MADV_POPULATE_WRITE; and a failed
 * pre-fault unmaps and reports. HC_TEST_CONCURRENCY
 *
 * This program defines madvise() itself: the library's calls land here, are
 * recorded, and go on to the kernel unless a case injects an error. */
#include "mem_test.h"
#include "test_util.h"

#include "mem/mem_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define MAX_CALLS 512

struct call {
	uintptr_t addr;
	size_t len;
	pthread_t thread;
};

static struct call calls[MAX_CALLS];
static atomic_int ncalls;
static atomic_int inject_errno; /* 0: pass MADV_POPULATE_WRITE through */
static atomic_int inject_call;  /* 1-based call to fail; 0: all of them */

int madvise(void *addr, size_t len, int advice)
{
	if (advice == MADV_POPULATE_WRITE) {
		int i = atomic_fetch_add(&ncalls, 1);
		if (i < MAX_CALLS)
			calls[i] = (struct call){(uintptr_t)addr, len, pthread_self()};
		int e = atomic_load(&inject_errno);
		int which = atomic_load(&inject_call);
		if (e && (!which || which == i + 1)) {
			errno = e;
			return -1;
		}
	}
	return (int)syscall(SYS_madvise, addr, len, advice);
}

static void reset(int err, int which)
{
	atomic_store(&ncalls, 0);
	atomic_store(&inject_errno, err);
	atomic_store(&inject_call, which);
}

static int by_addr(const void *a, const void *b)
{
	const struct call *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The recorded calls tile [addr, addr + len) exactly, from n distinct
 * threads. */
static void check_tiling(void *addr, size_t len, int n)
{
	assert_int_equal(atomic_load(&ncalls), n);
	qsort(calls, (size_t)n, sizeof(calls[0]), by_addr);
	uintptr_t at = (uintptr_t)addr;
	for (int i = 0; i < n; i++) {
		assert_int_equal(calls[i].addr, at);
		assert_true(calls[i].len > 0);
		at += calls[i].len;
		for (int j = 0; j < i; j++)
			assert_false(pthread_equal(calls[i].thread, calls[j].thread));
	}
	assert_int_equal(at, (uintptr_t)addr + len);
}

static void alloc_mode_and_check(size_t len, enum hc_huge_mode mode, unsigned threads,
				 int expect_calls)
{
	struct hc_mem_opts o = mt_opts();
	o.huge_mode = mode;
	o.prefault_threads = threads;
	struct hc_mem *m = NULL;
	reset(0, 0);
	assert_int_equal(hc_mem_alloc(len, &o, &m), 0);
	void *addr = hc_mem_addr(m);
	size_t mapped = hc_mem_mapped_len(m);
	check_tiling(addr, mapped, expect_calls);
	/* No huge page is faulted by two threads: ranges start on its bounds. */
	if (mode == HC_HUGE_THP && strcmp(mt_thp_mode(), "never"))
		for (int i = 0; i < expect_calls; i++)
			assert_int_equal((uintptr_t)calls[i].addr % (2 * MB), 0);
	assert_int_equal(mt_not_resident(addr, mapped), 0);
	/* Contents only where the sanitizer's shadow of them stays small (TSan
	 * shadows each byte with four). */
	if (mapped <= 256 * MB) {
		assert_true(mt_all_zero(addr, mapped));
		mt_fill(addr, mapped);
		assert_true(mt_check(addr, mapped));
	}
	hc_mem_free(m);
}

/* Base pages: the finest split, one range per page at most. */
static void alloc_and_check(size_t len, unsigned threads, int expect_calls)
{
	alloc_mode_and_check(len, HC_HUGE_OFF, threads, expect_calls);
}

static void test_threads_same_result(void **state)
{
	(void)state;
	/* An odd page count, so ranges are uneven. */
	size_t len = 64 * MB + 3 * 4096 + 5;
	alloc_and_check(len, 1, 1);
	alloc_and_check(len, 2, 2);
	alloc_and_check(len, 3, 3);
	alloc_and_check(len, 7, 7);
	/* automatic: under 1 GiB, one thread */
	alloc_and_check(len, 0, 1);
	/* more threads than pages: one per page at most */
	alloc_and_check(2 * 4096, 16, 2);
	alloc_and_check(1, 16, 1);
	/* thp (the default): ranges of whole huge pages, the tail to the last */
	if (strcmp(mt_thp_mode(), "never")) {
		alloc_mode_and_check(6 * MB + 4096 + 5, HC_HUGE_THP, 16, 3);
		alloc_mode_and_check(6 * MB, HC_HUGE_THP, 2, 2);
		alloc_mode_and_check(MB, HC_HUGE_THP, 4, 1);
	}
}

static void test_thread_count(void **state)
{
	(void)state;
	unsigned cpus = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	assert_int_equal(mem_prefault_threads(100 * MB, 0), 1);
	assert_int_equal(mem_prefault_threads(GB - 1, 0), 1);
	assert_int_equal(mem_prefault_threads(GB, 0), 1);
	unsigned two = mem_prefault_threads(2 * GB, 0);
	assert_true(two >= 1 && two <= 2 && two <= cpus);
	unsigned many = mem_prefault_threads((size_t)1 << 46, 0);
	assert_true(many >= 1 && many <= cpus);
	assert_int_equal(mem_prefault_threads(4096, 5), 5);
	assert_int_equal(mem_prefault_threads(4096, 100000), MEM_PREFAULT_MAX_THREADS);
}

/* The automatic choice on a region big enough for two threads, if the
 * machine has two CPUs. */
static void test_auto_two(void **state)
{
	(void)state;
	uint64_t avail = 0;
	if (hc_mem_available(&avail) || avail < 6 * GB)
		skip();
	int expect = (int)mem_prefault_threads(2 * GB, 0);
	alloc_and_check(2 * GB, 0, expect);
}

/* Kernels before 5.14 answer EINVAL: one write per page does the job. */
static void test_touch_fallback(void **state)
{
	(void)state;
	for (unsigned threads = 1; threads <= 3; threads++) {
		struct hc_mem_opts o = mt_opts();
		o.prefault_threads = threads;
		struct hc_mem *m = NULL;
		reset(EINVAL, 0);
		assert_int_equal(hc_mem_alloc(16 * MB + 4096, &o, &m), 0);
		assert_int_equal(atomic_load(&ncalls), (int)threads);
		void *addr = hc_mem_addr(m);
		size_t mapped = hc_mem_mapped_len(m);
		assert_int_equal(mt_not_resident(addr, mapped), 0);
		assert_true(mt_all_zero(addr, mapped));
		hc_mem_free(m);
	}
	reset(0, 0);
}

static int never_called(void *addr, size_t len, void *arg)
{
	(void)addr, (void)len, (void)arg;
	fail_msg("on_map called after a failed pre-fault");
	return 0;
}

/* A failure in any one range fails the whole allocation and unmaps it. */
static void test_failure_unmaps(void **state)
{
	(void)state;
	static const struct {
		int err, which, expect;
	} cases[] = {
		{ENOMEM, 0, -ENOMEM}, {ENOMEM, 2, -ENOMEM},       {ENOMEM, 3, -ENOMEM},
		{EFAULT, 1, -ENOMEM}, {EHWPOISON, 2, -EHWPOISON},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hc_mem_opts o = mt_opts();
		o.prefault_threads = 3;
		o.on_map = never_called;
		struct hc_mem *m = (struct hc_mem *)(uintptr_t)1;
		reset(cases[i].err, cases[i].which);
		assert_int_equal(hc_mem_alloc(12 * MB, &o, &m), cases[i].expect);
		assert_null(m);
		assert_last_error_contains("pre-faulting");
		/* all three ranges were attempted, and none of them is mapped now */
		assert_int_equal(atomic_load(&ncalls), 3);
		uintptr_t lo = UINTPTR_MAX, hi = 0;
		for (int c = 0; c < 3; c++) {
			lo = calls[c].addr < lo ? calls[c].addr : lo;
			hi = calls[c].addr + calls[c].len > hi ? calls[c].addr + calls[c].len : hi;
		}
		assert_int_equal(hi - lo, 12 * MB);
		assert_false(mt_mapped((void *)lo, hi - lo));
	}
	reset(0, 0);
}

static void test_no_prefault(void **state)
{
	(void)state;
	struct hc_mem_opts o = mt_opts();
	o.prefault = false;
	struct hc_mem *m = NULL;
	reset(0, 0);
	assert_int_equal(hc_mem_alloc(8 * MB, &o, &m), 0);
	assert_int_equal(atomic_load(&ncalls), 0);
	assert_int_equal(mt_not_resident(hc_mem_addr(m), 8 * MB), 8 * MB / 4096);
	mt_fill(hc_mem_addr(m), 8 * MB);
	assert_true(mt_check(hc_mem_addr(m), 8 * MB));
	hc_mem_free(m);
}

int main(void)
{
	if (sysconf(_SC_PAGESIZE) != 4096)
		return TEST_SKIP_CODE;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_same_result),
		cmocka_unit_test(test_thread_count),
		cmocka_unit_test(test_auto_two),
		cmocka_unit_test(test_touch_fallback),
		cmocka_unit_test(test_failure_unmaps),
		cmocka_unit_test(test_no_prefault),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
