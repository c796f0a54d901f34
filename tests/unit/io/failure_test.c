/*
 * io engines: pages that fail in the middle of a batch (missing directory,
 * bad dirfd, misaligned O_DIRECT buffer, taken temp name, rename into a
 * missing directory, noreplace on an existing page; on reads: missing,
 * shorter, longer, misaligned, a directory) fail alone: the other pages
 * are published, no temp file remains, no fd and no io_uring slot stays
 * open, and the engine keeps working. Both engines.
 */
#include "io_test.h"

#define N 40
#define DEPTH 8
#define LEN 8192

enum fault {
	F_NONE,
	F_NO_DIR,      /* tmp and final in a missing subdir */
	F_BAD_DIRFD,   /* dirfd that is not open */
	F_MISALIGNED,  /* O_DIRECT with a buffer off by one byte */
	F_ODD_LEN,     /* O_DIRECT with a length that is not a sector multiple */
	F_TMP_TAKEN,   /* the temp name exists already */
	F_RENAME_FAIL, /* final name in a missing subdir: fails after the write */
	F_EXISTS,      /* noreplace and the final name exists */
	F_COUNT,
};

static enum fault fault_of(unsigned i)
{
	/* Spread over chunks, with normal pages in between and a run of two. */
	static const enum fault at[N] = {
		[1] = F_NO_DIR,     [4] = F_BAD_DIRFD,    [7] = F_MISALIGNED, [8] = F_ODD_LEN,
		[12] = F_TMP_TAKEN, [15] = F_RENAME_FAIL, [16] = F_EXISTS,    [23] = F_MISALIGNED,
		[31] = F_NO_DIR,    [39] = F_RENAME_FAIL,
	};
	return at[i];
}

static int expected_write(enum fault f)
{
	switch (f) {
	case F_NONE:
		return 0;
	case F_NO_DIR:
	case F_RENAME_FAIL:
		return -ENOENT;
	case F_BAD_DIRFD:
		return -EBADF;
	case F_MISALIGNED:
	case F_ODD_LEN:
		return -EINVAL;
	case F_TMP_TAKEN:
		return -EBUSY;
	case F_EXISTS:
		return -EEXIST;
	case F_COUNT:
		break;
	}
	return 1;
}

static void write_faults(enum io_engine_kind kind)
{
	struct io_engine *e = io_t_engine(kind, DEPTH, 3);
	if (!e)
		return;
	int dfd;
	char *dir = io_t_mkdtemp(&dfd);
	if (!io_t_direct_ok(dfd)) {
		print_message("O_DIRECT unsupported in %s: skipped\n", dir);
		io_t_rmtree(dir, dfd);
		io_engine_destroy(e);
		return;
	}
	unsigned char *buf = io_t_aligned((size_t)N * (LEN + 4096));
	char names[N][48], tmps[N][48];
	struct iovec iov[N][2];
	struct io_write_req w[N];
	unsigned char old[100];
	io_t_fill(old, sizeof(old), 42);
	for (unsigned i = 0; i < N; i++) {
		enum fault f = fault_of(i);
		unsigned char *p = buf + (size_t)i * (LEN + 4096);
		io_t_fill(p, LEN + 1, i + 1000 * kind);
		snprintf(names[i], sizeof(names[i]), "%spage-%02u", f == F_NO_DIR ? "nosuch/" : "",
			 i);
		if (f == F_RENAME_FAIL)
			snprintf(names[i], sizeof(names[i]), "nosuch/page-%02u", i);
		snprintf(tmps[i], sizeof(tmps[i]), "%stmp-%02u", f == F_NO_DIR ? "nosuch/" : "", i);
		size_t len = f == F_ODD_LEN ? LEN - 100 : LEN;
		iov[i][0] = (struct iovec){p + (f == F_MISALIGNED), 4096};
		iov[i][1] = (struct iovec){p + (f == F_MISALIGNED) + 4096, len - 4096};
		w[i] = (struct io_write_req){.dirfd = f == F_BAD_DIRFD ? 1000000 : dfd,
					     .tmp_name = tmps[i],
					     .final_name = names[i],
					     .iov = iov[i],
					     .iovcnt = 2,
					     .len = len,
					     .direct = i % 2 || f == F_MISALIGNED || f == F_ODD_LEN,
					     .noreplace = f == F_EXISTS};
		if (f == F_TMP_TAKEN)
			io_t_put_file(dfd, tmps[i], old, sizeof(old));
		if (f == F_EXISTS)
			io_t_put_file(dfd, names[i], old, sizeof(old));
	}
	int fds = io_t_fd_count();
	assert_int_equal(io_write_batch(e, w, N), 0);
	assert_int_equal(io_t_fd_count(), fds);
	assert_int_equal(io_t_open_slots(), 0);
	/* The taken temp name is another writer's file: left alone. */
	assert_int_equal(io_t_count_prefix(dfd, "tmp-"), 1);
	assert_int_equal(unlinkat(dfd, tmps[12], 0), 0);
	unsigned published = 0;
	for (unsigned i = 0; i < N; i++) {
		enum fault f = fault_of(i);
		if (w[i].result != expected_write(f))
			fail_msg("%s: page %u (fault %d): result %d, expected %d",
				 io_engine_kind_name(kind), i, f, w[i].result, expected_write(f));
		size_t len;
		unsigned char *got = io_t_get_file(dfd, names[i], &len);
		if (f == F_NONE) {
			assert_non_null(got);
			assert_int_equal(len, LEN);
			assert_memory_equal(got, buf + (size_t)i * (LEN + 4096), LEN);
			published++;
		} else if (f == F_EXISTS) {
			assert_int_equal(len, sizeof(old));
			assert_memory_equal(got, old, sizeof(old));
		} else {
			assert_null(got);
		}
		free(got);
	}
	/* The pages, the one that existed, and nothing else. */
	assert_int_equal(io_t_count_prefix(dfd, ""), published + 1);

	/* The same engine (slots reused) still writes a whole batch. */
	for (unsigned i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "again-%02u", i);
		snprintf(tmps[i], sizeof(tmps[i]), "tmp-%02u", i);
		iov[i][0].iov_base = buf + (size_t)i * (LEN + 4096);
		iov[i][1].iov_base = buf + (size_t)i * (LEN + 4096) + 4096;
		iov[i][1].iov_len = LEN - 4096;
		w[i].dirfd = dfd;
		w[i].final_name = names[i];
		w[i].len = LEN;
		w[i].noreplace = true;
	}
	assert_int_equal(io_write_batch(e, w, N), 0);
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(w[i].result, 0);
	assert_int_equal(io_t_count_prefix(dfd, "again-"), N);
	assert_int_equal(io_t_count_prefix(dfd, "tmp-"), 0);
	assert_int_equal(io_t_fd_count(), fds);
	assert_int_equal(io_t_open_slots(), 0);
	free(buf);
	io_t_rmtree(dir, dfd);
	io_engine_destroy(e);
}

static void test_write_faults(void **state)
{
	(void)state;
	for (size_t k = 0; k < IO_T_NKINDS; k++)
		write_faults(io_t_kinds[k]);
}

enum rfault { R_NONE, R_MISSING, R_SHORT, R_LONG, R_MISALIGNED, R_DIR, R_BAD_DIRFD };

static void read_faults(enum io_engine_kind kind)
{
	struct io_engine *e = io_t_engine(kind, DEPTH, 3);
	if (!e)
		return;
	int dfd;
	char *dir = io_t_mkdtemp(&dfd);
	bool direct = io_t_direct_ok(dfd);
	unsigned char *src = io_t_aligned(LEN + 512);
	unsigned char *dst = io_t_aligned((size_t)N * (LEN + 4096));
	io_t_fill(src, LEN + 512, 7);
	char names[N][32];
	struct iovec iov[N];
	struct io_read_req r[N];
	enum rfault rf[N];
	for (unsigned i = 0; i < N; i++) {
		rf[i] = i % 5 == 1 ? (enum rfault)(1 + (i / 5) % 6) : R_NONE;
		if (rf[i] == R_MISALIGNED && !direct)
			rf[i] = R_NONE;
		snprintf(names[i], sizeof(names[i]), "page-%02u", i);
		size_t flen = rf[i] == R_SHORT ? LEN - 512 : rf[i] == R_LONG ? LEN + 512 : LEN;
		if (rf[i] == R_DIR)
			assert_int_equal(mkdirat(dfd, names[i], 0700), 0);
		else if (rf[i] != R_MISSING)
			io_t_put_file(dfd, names[i], src, flen);
		unsigned char *p = dst + (size_t)i * (LEN + 4096) + (rf[i] == R_MISALIGNED);
		iov[i] = (struct iovec){p, LEN};
		r[i] = (struct io_read_req){.dirfd = rf[i] == R_BAD_DIRFD ? 1000000 : dfd,
					    .name = names[i],
					    .iov = &iov[i],
					    .iovcnt = 1,
					    .len = LEN,
					    .direct = direct && i % 2};
		if (rf[i] == R_MISALIGNED)
			r[i].direct = true;
		if (rf[i] == R_DIR)
			r[i].direct = false; /* O_DIRECT open of a directory is -EINVAL */
	}
	int fds = io_t_fd_count();
	for (int round = 0; round < 2; round++) {
		assert_int_equal(io_read_batch(e, r, N), 0);
		assert_int_equal(io_t_fd_count(), fds);
		assert_int_equal(io_t_open_slots(), 0);
		for (unsigned i = 0; i < N; i++) {
			static const int want[] = {0,       -ENOENT, -ENODATA, -EFBIG,
						   -EINVAL, -EISDIR, -EBADF};
			if (r[i].result != want[rf[i]])
				fail_msg("%s: page %u (fault %d): result %d, expected %d",
					 io_engine_kind_name(kind), i, rf[i], r[i].result,
					 want[rf[i]]);
			if (rf[i] == R_NONE)
				assert_memory_equal(iov[i].iov_base, src, LEN);
		}
	}
	free(src);
	free(dst);
	io_t_rmtree(dir, dfd);
	io_engine_destroy(e);
}

static void test_read_faults(void **state)
{
	(void)state;
	for (size_t k = 0; k < IO_T_NKINDS; k++)
		read_faults(io_t_kinds[k]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_faults),
		cmocka_unit_test(test_read_faults),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
