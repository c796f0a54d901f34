/*
 * io_uring engine, the paths a healthy kernel almost never takes: the
 * kernel consumes only part of a submission (cutting a chain at every
 * possible step), or refuses a submission outright. The cut page fails
 * with -EIO and publishes nothing, the other pages are unaffected, no temp
 * file remains, and the engine goes on working with a fresh ring.
 * Driven through the io_ring_submit_fn test hook. io_uring only.
 */
#include "io_test.h"

#include "io/io_internal.h"

#include <liburing.h>

static unsigned g_take; /* the next submit lets only this many SQEs through */
static int g_fail;      /* the next submit fails with this, submitting nothing */

static int hooked_submit(struct io_uring *ring)
{
	if (g_fail) {
		int rc = g_fail;
		g_fail = 0;
		return rc;
	}
	unsigned pending = ring->sq.sqe_tail - ring->sq.sqe_head;
	if (g_take && pending > g_take) {
		/* Show the kernel only the first g_take SQEs, as a short submit. */
		unsigned tail = ring->sq.sqe_tail;
		ring->sq.sqe_tail = ring->sq.sqe_head + g_take;
		int rc = io_uring_submit(ring);
		ring->sq.sqe_tail = tail;
		g_take = 0;
		return rc;
	}
	return io_uring_submit(ring);
}

#define PAGES 3
#define LEN 12288

static void test_cut_writes(void **state)
{
	(void)state;
	struct io_engine *e = io_t_engine(IO_ENGINE_URING, 4, 1);
	if (!e)
		skip();
	io_ring_submit_fn = hooked_submit;
	int dfd;
	char *dir = io_t_mkdtemp(&dfd);
	unsigned char *buf = io_t_aligned(LEN * PAGES);
	io_t_fill(buf, LEN * PAGES, 3);
	for (unsigned take = 1; take < 4 * PAGES; take++) {
		char names[PAGES][32], tmps[PAGES][32];
		struct iovec iov[PAGES][2];
		struct io_write_req w[PAGES];
		for (unsigned i = 0; i < PAGES; i++) {
			snprintf(names[i], sizeof(names[i]), "take%02u-page%u", take, i);
			snprintf(tmps[i], sizeof(tmps[i]), "tmp-%u", i);
			iov[i][0] = (struct iovec){buf + i * LEN, 4096};
			iov[i][1] = (struct iovec){buf + i * LEN + 4096, LEN - 4096};
			w[i] = (struct io_write_req){.dirfd = dfd,
						     .tmp_name = tmps[i],
						     .final_name = names[i],
						     .iov = iov[i],
						     .iovcnt = 2,
						     .len = LEN,
						     .direct = take % 2};
		}
		g_take = take;
		assert_int_equal(io_write_batch(e, w, PAGES), 0);
		unsigned cut = take % 4 ? take / 4 : PAGES; /* 4 SQEs per write chain */
		for (unsigned i = 0; i < PAGES; i++) {
			size_t len;
			unsigned char *got = io_t_get_file(dfd, names[i], &len);
			if (i == cut) {
				assert_int_equal(w[i].result, -EIO);
				assert_null(got);
			} else {
				assert_int_equal(w[i].result, 0);
				assert_non_null(got);
				assert_int_equal(len, LEN);
				assert_memory_equal(got, buf + i * LEN, LEN);
			}
			free(got);
		}
		assert_int_equal(io_t_count_prefix(dfd, "tmp-"), 0);
		assert_int_equal(io_t_open_slots(), 0);
	}
	/* A submission the kernel refuses: nothing ran, nothing changed. */
	struct iovec iov = {buf, LEN};
	struct io_write_req w[PAGES];
	for (unsigned i = 0; i < PAGES; i++)
		w[i] = (struct io_write_req){.dirfd = dfd,
					     .tmp_name = "tmp-x",
					     .final_name = "x",
					     .iov = &iov,
					     .iovcnt = 1,
					     .len = LEN};
	int files = io_t_count_prefix(dfd, "");
	g_fail = -ENOMEM;
	assert_int_equal(io_write_batch(e, w, 1), 0);
	assert_int_equal(w[0].result, -ENOMEM);
	assert_int_equal(io_t_count_prefix(dfd, ""), files);
	/* And then it works again. */
	assert_int_equal(io_write_batch(e, w, 1), 0);
	assert_int_equal(w[0].result, 0);
	assert_int_equal(io_t_count_prefix(dfd, ""), files + 1);
	io_ring_submit_fn = io_uring_submit;
	free(buf);
	io_t_rmtree(dir, dfd);
	io_engine_destroy(e);
}

static void test_cut_reads(void **state)
{
	(void)state;
	struct io_engine *e = io_t_engine(IO_ENGINE_URING, 4, 1);
	if (!e)
		skip();
	io_ring_submit_fn = hooked_submit;
	int dfd;
	char *dir = io_t_mkdtemp(&dfd);
	unsigned char *src = io_t_aligned(LEN), *dst = io_t_aligned(LEN * PAGES);
	io_t_fill(src, LEN, 4);
	io_t_put_file(dfd, "f", src, LEN);
	int fds = io_t_fd_count();
	for (unsigned take = 1; take < 3 * PAGES; take++) {
		struct iovec iov[PAGES];
		struct io_read_req r[PAGES];
		memset(dst, 0, LEN * PAGES);
		for (unsigned i = 0; i < PAGES; i++) {
			iov[i] = (struct iovec){dst + i * LEN, LEN};
			r[i] = (struct io_read_req){.dirfd = dfd,
						    .name = "f",
						    .iov = &iov[i],
						    .iovcnt = 1,
						    .len = LEN,
						    .direct = take % 2};
		}
		g_take = take;
		assert_int_equal(io_read_batch(e, r, PAGES), 0);
		unsigned cut = take % 3 ? take / 3 : PAGES; /* 3 SQEs per read chain */
		for (unsigned i = 0; i < PAGES; i++) {
			if (i == cut) {
				assert_int_equal(r[i].result, -EIO);
			} else {
				assert_int_equal(r[i].result, 0);
				assert_memory_equal(dst + i * LEN, src, LEN);
			}
		}
		assert_int_equal(io_t_open_slots(), 0);
		/* A cut ring is discarded, never reused: at most the one ring. */
		assert_true(io_t_fd_count() <= fds);
	}
	io_ring_submit_fn = io_uring_submit;
	free(src);
	free(dst);
	io_t_rmtree(dir, dfd);
	io_engine_destroy(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cut_writes),
		cmocka_unit_test(test_cut_reads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
