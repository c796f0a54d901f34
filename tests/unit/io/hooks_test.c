/*
 * io engines: the per-request hooks (io_write_req.prepare and
 * io_read_req.arrived) over batches of more pages than one submission.
 *
 *   prepare  runs exactly once per valid request, before its bytes go out
 *            (the file holds what prepare put into the buffer); a negative
 *            return is the result and leaves nothing behind; never runs for
 *            a request that failed validation
 *   arrived  runs exactly once per read that ends with result 0, when the
 *            buffer already holds the file; never for a miss or a file of
 *            the wrong size
 *
 * Every case runs on both engines (the thread engine calls the hooks from
 * its workers: HC_TEST_CONCURRENCY, so TSan sees them).
 */
#include "io_test.h"

#include <stdatomic.h>

#define N_PAGES 100
#define DEPTH 8
#define PAGE_BYTES 8192
#define SKIP_EVERY 7 /* prepare refuses pages 0, 7, 14, ... with -EEXIST */

struct hooked {
	unsigned index;
	unsigned char *buf;
	_Atomic unsigned prepared;
	_Atomic unsigned arrived;
	bool arrived_whole; /* the buffer held the file when arrived ran */
};

static int prepare_page(void *arg)
{
	struct hooked *h = arg;
	atomic_fetch_add(&h->prepared, 1);
	if (h->index % SKIP_EVERY == 0)
		return -EEXIST;
	io_t_fill(h->buf, PAGE_BYTES, h->index);
	return 0;
}

static void arrived_page(void *arg)
{
	struct hooked *h = arg;
	atomic_fetch_add(&h->arrived, 1);
	unsigned char *want = malloc(PAGE_BYTES);
	assert_non_null(want);
	io_t_fill(want, PAGE_BYTES, h->index);
	h->arrived_whole = !memcmp(want, h->buf, PAGE_BYTES);
	free(want);
}

static void hooks_one(enum io_engine_kind kind)
{
	struct io_engine *e = io_t_engine(kind, DEPTH, 4);
	if (!e)
		return;
	int dfd;
	char *dir = io_t_mkdtemp(&dfd);
	int fds_before = io_t_fd_count();
	static struct hooked h[N_PAGES];
	static char names[N_PAGES][32], tmps[N_PAGES][32];
	struct iovec iov[N_PAGES];
	struct io_write_req w[N_PAGES];
	for (unsigned i = 0; i < N_PAGES; i++) {
		h[i] = (struct hooked){.index = i, .buf = io_t_aligned(PAGE_BYTES)};
		memset(h[i].buf, 0xee, PAGE_BYTES); /* prepare must replace this */
		snprintf(names[i], sizeof(names[i]), "page-%u", i);
		snprintf(tmps[i], sizeof(tmps[i]), ".tmp-%u", i);
		iov[i] = (struct iovec){h[i].buf, PAGE_BYTES};
		w[i] = (struct io_write_req){.dirfd = dfd,
					     .tmp_name = tmps[i],
					     .final_name = names[i],
					     .iov = &iov[i],
					     .iovcnt = 1,
					     .len = PAGE_BYTES,
					     .noreplace = true,
					     .prepare = prepare_page,
					     .arg = &h[i]};
	}
	/* One invalid request: validation fails it before any hook. */
	w[N_PAGES - 1].final_name = NULL;
	assert_int_equal(io_write_batch(e, w, N_PAGES), 0);
	for (unsigned i = 0; i < N_PAGES; i++) {
		if (i == N_PAGES - 1) {
			assert_int_equal(w[i].result, -EINVAL);
			assert_int_equal(atomic_load(&h[i].prepared), 0);
			continue;
		}
		assert_int_equal(atomic_load(&h[i].prepared), 1);
		assert_int_equal(w[i].result, i % SKIP_EVERY == 0 ? -EEXIST : 0);
	}
	assert_int_equal(io_t_count_prefix(dfd, ".tmp"), 0);
	assert_int_equal(io_t_count_prefix(dfd, "page-"),
			 N_PAGES - 1 - (N_PAGES - 1 + SKIP_EVERY - 1) / SKIP_EVERY);
	for (unsigned i = 0; i < N_PAGES - 1; i++) {
		size_t len;
		unsigned char *got = io_t_get_file(dfd, names[i], &len);
		if (i % SKIP_EVERY == 0) {
			assert_null(got);
			continue;
		}
		assert_non_null(got);
		assert_int_equal(len, PAGE_BYTES);
		unsigned char *want = malloc(PAGE_BYTES);
		assert_non_null(want);
		io_t_fill(want, PAGE_BYTES, i);
		assert_memory_equal(got, want, PAGE_BYTES);
		free(want);
		free(got);
	}

	/* Reads: the skipped pages are misses; page 1 is made longer and page
	 * 2 shorter (wrong sizes); the rest arrive, each exactly once. */
	unsigned char pad[16] = {0};
	int fd = openat(dfd, names[1], O_WRONLY | O_APPEND | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, pad, sizeof(pad)), (ssize_t)sizeof(pad));
	close(fd);
	fd = openat(dfd, names[2], O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 100), 0);
	close(fd);
	struct io_read_req r[N_PAGES];
	for (unsigned i = 0; i < N_PAGES; i++) {
		memset(h[i].buf, 0, PAGE_BYTES);
		r[i] = (struct io_read_req){.dirfd = dfd,
					    .name = names[i],
					    .iov = &iov[i],
					    .iovcnt = 1,
					    .len = PAGE_BYTES,
					    .arrived = arrived_page,
					    .arg = &h[i]};
	}
	assert_int_equal(io_read_batch(e, r, N_PAGES), 0);
	for (unsigned i = 0; i < N_PAGES; i++) {
		int want = i % SKIP_EVERY == 0 || i == N_PAGES - 1 ? -ENOENT
			   : i == 1                                ? -EFBIG
			   : i == 2                                ? -ENODATA
								   : 0;
		if (r[i].result != want)
			fail_msg("%s: read %u: result %d, expected %d", io_engine_kind_name(kind),
				 i, r[i].result, want);
		assert_int_equal(atomic_load(&h[i].arrived), want == 0 ? 1 : 0);
		if (want == 0)
			assert_true(h[i].arrived_whole);
	}
	assert_int_equal(io_t_open_slots(), 0);
	assert_int_equal(io_t_fd_count(), fds_before);
	for (unsigned i = 0; i < N_PAGES; i++)
		free(h[i].buf);
	io_engine_destroy(e);
	io_t_rmtree(dir, dfd);
}

static void test_hooks(void **state)
{
	(void)state;
	for (size_t k = 0; k < IO_T_NKINDS; k++)
		hooks_one(io_t_kinds[k]);
}

int main(void)
{
	/* HC_TEST_CONCURRENCY: the thread engine runs the hooks on workers. */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hooks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
