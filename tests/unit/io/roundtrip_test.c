/*
 * io engines: many pages written and read back (buffered and O_DIRECT,
 * multi-iovec, more pages than one submission), result codes of single
 * pages, request validation, the stat batch. Every case runs on both
 * engines.
 */
#include "io_test.h"

#include <liburing.h>

#define N_PAGES 300
#define DEPTH 32

struct page {
	char name[32], tmp[32];
	size_t len;
	unsigned char *src, *dst;
	struct iovec wiov[3], riov[2];
};

/* Smallest O_DIRECT granularity that works in dirfd (512 on this disk, 4096
 * on a 4Kn one), or 0 when O_DIRECT does not work. */
static size_t direct_align(int dirfd)
{
	if (!io_t_direct_ok(dirfd))
		return 0;
	int fd = openat(dirfd, "align-probe", O_CREAT | O_WRONLY | O_DIRECT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	unsigned char *buf = io_t_aligned(4096);
	memset(buf, 0, 4096);
	bool small = pwrite(fd, buf + 512, 512, 512) == 512;
	free(buf);
	close(fd);
	unlinkat(dirfd, "align-probe", 0);
	return small ? 512 : 4096;
}

/* Cut [0, len) at two points that are multiples of g. */
static void split3(size_t len, size_t g, uint64_t seed, size_t cut[2])
{
	size_t units = len / g;
	size_t a = units ? test_mix(seed) % (units + 1) : 0;
	size_t b = units ? a + test_mix(seed + 1) % (units - a + 1) : 0;
	cut[0] = a * g;
	cut[1] = b * g;
}

static void roundtrip(enum io_engine_kind kind, bool direct)
{
	struct io_engine *e = io_t_engine(kind, DEPTH, 4);
	if (!e)
		return;
	int dfd;
	char *dir = io_t_mkdtemp(&dfd);
	size_t g = 1;
	if (direct) {
		g = direct_align(dfd);
		if (!g) {
			print_message("O_DIRECT unsupported in %s: skipped\n", dir);
			io_t_rmtree(dir, dfd);
			io_engine_destroy(e);
			return;
		}
	}
	int fds = io_t_fd_count();
	struct page *pg = calloc(N_PAGES, sizeof(*pg));
	struct io_write_req *w = calloc(N_PAGES, sizeof(*w));
	struct io_read_req *r = calloc(N_PAGES, sizeof(*r));
	for (unsigned i = 0; i < N_PAGES; i++) {
		struct page *p = &pg[i];
		uint64_t seed = test_mix(i * 7 + kind * 1000 + direct);
		snprintf(p->name, sizeof(p->name), "page-%03u", i);
		snprintf(p->tmp, sizeof(p->tmp), "tmp-%03u", i);
		p->len = direct ? g * (1 + seed % 24) : 1 + seed % 20000;
		if (i == 0)
			p->len = 0; /* an empty page works too */
		p->src = io_t_aligned(p->len);
		p->dst = io_t_aligned(p->len);
		io_t_fill(p->src, p->len, seed);
		memset(p->dst, 0xee, p->len);
		size_t c[2];
		split3(p->len, g, seed, c);
		p->wiov[0] = (struct iovec){p->src, c[0]};
		p->wiov[1] = (struct iovec){p->src + c[0], c[1] - c[0]};
		p->wiov[2] = (struct iovec){p->src + c[1], p->len - c[1]};
		split3(p->len, g, seed + 5, c);
		p->riov[0] = (struct iovec){p->dst, c[0]};
		p->riov[1] = (struct iovec){p->dst + c[0], p->len - c[0]};
		w[i] = (struct io_write_req){.dirfd = dfd,
					     .tmp_name = p->tmp,
					     .final_name = p->name,
					     .iov = p->wiov,
					     .iovcnt = 3,
					     .len = p->len,
					     .direct = direct,
					     .noreplace = i % 2,
					     .result = 99};
		r[i] = (struct io_read_req){.dirfd = dfd,
					    .name = p->name,
					    .iov = p->riov,
					    .iovcnt = 2,
					    .len = p->len,
					    .direct = direct,
					    .result = 99};
	}
	assert_int_equal(io_write_batch(e, w, N_PAGES), 0);
	for (unsigned i = 0; i < N_PAGES; i++)
		assert_int_equal(w[i].result, 0);
	assert_int_equal(io_t_count_prefix(dfd, "tmp-"), 0);
	assert_int_equal(io_t_count_prefix(dfd, "page-"), N_PAGES);
	for (unsigned i = 0; i < N_PAGES; i++) {
		struct stat st;
		assert_int_equal(fstatat(dfd, pg[i].name, &st, 0), 0);
		assert_int_equal(st.st_mode & 07777, 0600);
		assert_true(S_ISREG(st.st_mode));
		assert_int_equal(st.st_size, pg[i].len);
	}
	assert_int_equal(io_read_batch(e, r, N_PAGES), 0);
	for (unsigned i = 0; i < N_PAGES; i++) {
		assert_int_equal(r[i].result, 0);
		if (pg[i].len)
			assert_memory_equal(pg[i].src, pg[i].dst, pg[i].len);
	}
	assert_int_equal(io_t_fd_count(), fds);
	assert_int_equal(io_t_open_slots(), 0);
	for (unsigned i = 0; i < N_PAGES; i++) {
		free(pg[i].src);
		free(pg[i].dst);
	}
	free(pg);
	free(w);
	free(r);
	io_t_rmtree(dir, dfd);
	io_engine_destroy(e);
}

static void test_roundtrip_buffered(void **state)
{
	(void)state;
	for (size_t k = 0; k < IO_T_NKINDS; k++)
		roundtrip(io_t_kinds[k], false);
}

static void test_roundtrip_direct(void **state)
{
	(void)state;
	for (size_t k = 0; k < IO_T_NKINDS; k++)
		roundtrip(io_t_kinds[k], true);
}

static int write_one(struct io_engine *e, int dfd, const char *tmp, const char *name,
		     const void *buf, size_t len, bool noreplace)
{
	struct iovec iov = {(void *)buf, len};
	struct io_write_req w = {.dirfd = dfd,
				 .tmp_name = tmp,
				 .final_name = name,
				 .iov = &iov,
				 .iovcnt = 1,
				 .len = len,
				 .noreplace = noreplace};
	assert_int_equal(io_write_batch(e, &w, 1), 0);
	return w.result;
}

static int read_one(struct io_engine *e, int dfd, const char *name, void *buf, size_t len,
		    bool direct)
{
	struct iovec iov = {buf, len};
	struct io_read_req r = {.dirfd = dfd,
				.name = name,
				.iov = &iov,
				.iovcnt = 1,
				.len = len,
				.direct = direct};
	assert_int_equal(io_read_batch(e, &r, 1), 0);
	return r.result;
}

static void results_one(enum io_engine_kind kind)
{
	struct io_engine *e = io_t_engine(kind, 4, 2);
	if (!e)
		return;
	int dfd;
	char *dir = io_t_mkdtemp(&dfd);
	unsigned char *a = io_t_aligned(16384), *b = io_t_aligned(16384);
	unsigned char *got = io_t_aligned(16384 + 4096);
	io_t_fill(a, 16384, 1);
	io_t_fill(b, 16384, 2);

	/* noreplace on an existing name: -EEXIST, old content, no temp file. */
	assert_int_equal(write_one(e, dfd, "t", "f", a, 8192, true), 0);
	assert_int_equal(write_one(e, dfd, "t", "f", b, 4096, true), -EEXIST);
	assert_int_equal(io_t_count_prefix(dfd, "t"), 0);
	size_t len;
	unsigned char *content = io_t_get_file(dfd, "f", &len);
	assert_int_equal(len, 8192);
	assert_memory_equal(content, a, 8192);
	free(content);
	/* Without noreplace the rename replaces it whole. */
	assert_int_equal(write_one(e, dfd, "t", "f", b, 4096, false), 0);
	content = io_t_get_file(dfd, "f", &len);
	assert_int_equal(len, 4096);
	assert_memory_equal(content, b, 4096);
	free(content);

	/* Lengths, buffered and (when supported) direct. */
	bool direct_ok = io_t_direct_ok(dfd);
	for (int direct = 0; direct <= (int)direct_ok; direct++) {
		assert_int_equal(read_one(e, dfd, "missing", got, 4096, direct), -ENOENT);
		assert_int_equal(read_one(e, dfd, "f", got, 4096, direct), 0);
		assert_memory_equal(got, b, 4096);
		assert_int_equal(read_one(e, dfd, "f", got, 8192, direct), -ENODATA);
		assert_int_equal(read_one(e, dfd, "f", got, 512 * !direct + 3584 * direct, direct),
				 -EFBIG);
	}
	/* Longer by more than the scratch block, and by one byte. */
	assert_int_equal(write_one(e, dfd, "t", "big", a, 16384, false), 0);
	assert_int_equal(read_one(e, dfd, "big", got, 8192, false), -EFBIG);
	assert_int_equal(read_one(e, dfd, "big", got, 16383, false), -EFBIG);
	assert_int_equal(read_one(e, dfd, "big", got, 16385, false), -ENODATA);
	assert_int_equal(read_one(e, dfd, "big", got, 16384, false), 0);
	assert_memory_equal(got, a, 16384);
	/* An empty file read as empty, and as one byte. */
	assert_int_equal(write_one(e, dfd, "t", "empty", a, 0, false), 0);
	assert_int_equal(read_one(e, dfd, "empty", got, 0, false), 0);
	assert_int_equal(read_one(e, dfd, "empty", got, 1, false), -ENODATA);
	/* A temp name that exists (maybe another writer's live temp file):
	 * -EBUSY, not -EEXIST, and that file is left alone. */
	io_t_put_file(dfd, "stale", a, 100);
	assert_int_equal(write_one(e, dfd, "stale", "g", a, 100, true), -EBUSY);
	assert_int_equal(faccessat(dfd, "stale", F_OK, 0), 0);
	assert_int_equal(unlinkat(dfd, "stale", 0), 0);
	assert_int_equal(faccessat(dfd, "g", F_OK, 0), -1);
	/* A directory where the file should be. */
	assert_int_equal(mkdirat(dfd, "adir", 0700), 0);
	assert_int_equal(read_one(e, dfd, "adir", got, 4096, false), -EISDIR);
	assert_int_equal(io_t_open_slots(), 0);

	free(a);
	free(b);
	free(got);
	io_t_rmtree(dir, dfd);
	io_engine_destroy(e);
}

static void test_results(void **state)
{
	(void)state;
	for (size_t k = 0; k < IO_T_NKINDS; k++)
		results_one(io_t_kinds[k]);
}

static void invalid_one(enum io_engine_kind kind)
{
	struct io_engine *e = io_t_engine(kind, 2, 1);
	if (!e)
		return;
	int dfd;
	char *dir = io_t_mkdtemp(&dfd);
	char buf[64] = "hello";
	struct iovec iov = {buf, 64};
	struct iovec *many = calloc(1025, sizeof(*many));
	for (int i = 0; i < 1025; i++)
		many[i] = (struct iovec){buf, 0};
	struct io_write_req w[5] = {
		{.dirfd = dfd,
		 .tmp_name = "t0",
		 .final_name = "f0",
		 .iov = &iov,
		 .iovcnt = 1,
		 .len = 63}, /* iovecs do not add up to len */
		{.dirfd = dfd,
		 .tmp_name = NULL,
		 .final_name = "f1",
		 .iov = &iov,
		 .iovcnt = 1,
		 .len = 64},
		{.dirfd = dfd,
		 .tmp_name = "t2",
		 .final_name = "f2",
		 .iov = &iov,
		 .iovcnt = 1,
		 .len = 64}, /* the good one */
		{.dirfd = dfd,
		 .tmp_name = "t3",
		 .final_name = "f3",
		 .iov = many,
		 .iovcnt = 1025,
		 .len = 0}, /* above IOV_MAX */
		{.dirfd = dfd,
		 .tmp_name = "t4",
		 .final_name = "f4",
		 .iov = NULL,
		 .iovcnt = 1,
		 .len = 0},
	};
	assert_int_equal(io_write_batch(e, w, 5), 0);
	assert_int_equal(w[0].result, -EINVAL);
	assert_last_error_contains("write request 0 is invalid");
	assert_int_equal(w[1].result, -EINVAL);
	assert_int_equal(w[2].result, 0);
	assert_int_equal(w[3].result, -EINVAL);
	assert_int_equal(w[4].result, -EINVAL);
	assert_int_equal(io_t_count_prefix(dfd, ""), 1);

	/* 1024 iovecs are fine for a write; a read needs one for itself. */
	w[3].iovcnt = 1024;
	assert_int_equal(io_write_batch(e, &w[3], 1), 0);
	assert_int_equal(w[3].result, 0);
	struct io_read_req r[3] = {
		{.dirfd = dfd, .name = "f3", .iov = many, .iovcnt = 1024, .len = 0},
		{.dirfd = dfd, .name = "f3", .iov = many, .iovcnt = 1023, .len = 0},
		{.dirfd = dfd, .name = NULL, .iov = &iov, .iovcnt = 1, .len = 64},
	};
	assert_int_equal(io_read_batch(e, r, 3), 0);
	assert_int_equal(r[0].result, -EINVAL);
	assert_int_equal(r[1].result, 0);
	assert_int_equal(r[2].result, -EINVAL);

	/* Nothing to run: fine. NULL array or engine: -EINVAL. */
	assert_int_equal(io_write_batch(e, NULL, 0), 0);
	assert_int_equal(io_read_batch(e, NULL, 0), 0);
	assert_int_equal(io_write_batch(e, NULL, 1), -EINVAL);
	assert_int_equal(io_read_batch(NULL, r, 1), -EINVAL);
	assert_int_equal(r[0].result, -EINVAL);
	assert_int_equal(io_stat_batch(e, NULL, 1, false), -EINVAL);
	free(many);
	io_t_rmtree(dir, dfd);
	io_engine_destroy(e);
}

static void test_invalid(void **state)
{
	(void)state;
	for (size_t k = 0; k < IO_T_NKINDS; k++)
		invalid_one(io_t_kinds[k]);
}

static void test_kinds(void **state)
{
	(void)state;
	enum io_engine_kind k;
	assert_int_equal(io_engine_parse_kind("uring", &k), 0);
	assert_int_equal(k, IO_ENGINE_URING);
	assert_int_equal(io_engine_parse_kind("threads", &k), 0);
	assert_int_equal(k, IO_ENGINE_THREADS);
	assert_int_equal(io_engine_parse_kind("auto", &k), 0);
	assert_int_equal(k, IO_ENGINE_AUTO);
	k = IO_ENGINE_URING;
	assert_int_equal(io_engine_parse_kind("", &k), 0);
	assert_int_equal(k, IO_ENGINE_AUTO);
	assert_int_equal(io_engine_parse_kind("URING", &k), -EINVAL);
	assert_int_equal(io_engine_parse_kind(NULL, &k), -EINVAL);
	assert_string_equal(io_engine_kind_name(IO_ENGINE_URING), "uring");
	assert_string_equal(io_engine_kind_name(IO_ENGINE_THREADS), "threads");
	assert_string_equal(io_engine_kind_name(IO_ENGINE_AUTO), "auto");

	struct io_engine *e = (struct io_engine *)1;
	struct io_engine_opts o = {.kind = (enum io_engine_kind)7};
	assert_int_equal(io_engine_create(&o, &e), -EINVAL);
	assert_null(e);
	o = (struct io_engine_opts){.kind = IO_ENGINE_THREADS, .queue_depth = 100000};
	assert_int_equal(io_engine_create(&o, &e), -EINVAL);
	assert_last_error_contains("queue_depth");
	assert_int_equal(io_engine_create(&o, NULL), -EINVAL);
	io_engine_destroy(NULL);
	/* AUTO resolves to a concrete kind; NULL opts are the defaults. */
	assert_int_equal(io_engine_create(NULL, &e), 0);
	assert_true(io_engine_kind(e) == IO_ENGINE_URING || io_engine_kind(e) == IO_ENGINE_THREADS);
	io_engine_destroy(e);
}

static void stat_one(enum io_engine_kind kind)
{
	struct io_engine *e = io_t_engine(kind, 0, 0);
	if (!e)
		return;
	int dfd;
	char *dir = io_t_mkdtemp(&dfd);
	char buf[300] = {0};
	io_t_put_file(dfd, "a", buf, 100);
	io_t_put_file(dfd, "b", buf, 200);
	io_t_put_file(dfd, "c", buf, 300);
	struct io_stat_req s[4] = {
		{.dirfd = dfd, .name = "a"},
		{.dirfd = dfd, .name = "b"},
		{.dirfd = dfd, .name = "nope"},
		{.dirfd = dfd, .name = "c", .result = 5},
	};
	assert_int_equal(io_stat_batch(e, s, 4, true), 2);
	assert_int_equal(s[0].result, 0);
	assert_int_equal(s[0].size, 100);
	assert_true(s[0].mtime_ns > 0);
	assert_int_equal(s[1].result, 0);
	assert_int_equal(s[1].size, 200);
	assert_int_equal(s[2].result, -ENOENT);
	assert_int_equal(s[3].result, -ENOENT); /* not looked up */
	assert_int_equal(s[3].size, 0);
	assert_int_equal(io_stat_batch(e, s, 4, false), 2);
	assert_int_equal(s[2].result, -ENOENT);
	assert_int_equal(s[3].result, 0);
	assert_int_equal(s[3].size, 300);
	struct stat st;
	assert_int_equal(fstatat(dfd, "c", &st, 0), 0);
	assert_int_equal(s[3].mtime_ns, st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec);
	assert_int_equal(io_stat_batch(e, s, 0, true), 0);
	assert_int_equal(io_stat_batch(e, s + 2, 2, true), 0);
	io_t_rmtree(dir, dfd);
	io_engine_destroy(e);
}

static void test_stat(void **state)
{
	(void)state;
	for (size_t k = 0; k < IO_T_NKINDS; k++)
		stat_one(io_t_kinds[k]);
}

/* Every chain in flight may block in an io-wq worker of its own (a create,
 * an extending O_DIRECT write): after a batch, the submitting thread's
 * bounded worker limit is the queue depth. 37 is none of the kernel's
 * defaults, min(SQ entries, 4 x CPUs). */
static void test_worker_limit(void **state)
{
	(void)state;
	enum { WORKER_DEPTH = 37 };
	struct io_engine *e = io_t_engine(IO_ENGINE_URING, WORKER_DEPTH, 1);
	if (!e)
		return;
	int dfd;
	char *dir = io_t_mkdtemp(&dfd);
	char data[100] = "worker limit";
	struct iovec iov = {data, sizeof(data)};
	struct io_write_req w = {.dirfd = dfd,
				 .tmp_name = "t",
				 .final_name = "f",
				 .iov = &iov,
				 .iovcnt = 1,
				 .len = sizeof(data),
				 .result = 99};
	assert_int_equal(io_write_batch(e, &w, 1), 0);
	assert_int_equal(w.result, 0);
	struct io_uring probe;
	assert_int_equal(io_uring_queue_init(4, &probe, 0), 0);
	unsigned limits[2] = {0, 0}; /* 0: only report the current limits */
	int rc = io_uring_register_iowq_max_workers(&probe, limits);
	io_uring_queue_exit(&probe);
	io_t_rmtree(dir, dfd);
	io_engine_destroy(e);
	if (rc == -EINVAL) {
		print_message("no io-wq worker limits before Linux 5.15: skipped\n");
		return;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(limits[0], WORKER_DEPTH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_buffered),
		cmocka_unit_test(test_roundtrip_direct),
		cmocka_unit_test(test_results),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_stat),
		cmocka_unit_test(test_worker_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
