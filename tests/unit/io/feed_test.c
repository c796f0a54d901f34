/*
 * io engines: feeds (io_write_feed / io_read_feed), batches that grow while
 * they run.
 *
 *   - every array the feed gives is handed back exactly once, and only when
 *     each of its requests has its final result (and, for a read that
 *     arrived, after its arrived hook ran);
 *   - arrays of any size, smaller and larger than the queue depth, with an
 *     invalid request and a refused prepare among them, move exactly the
 *     bytes a batch would;
 *   - a feed that says "nothing now" while requests are in flight is asked
 *     again: one call moves it all (the thread engine has nothing in
 *     flight when it asks, so the feed never pauses there);
 *   - no fixed-file slot, fd or temp file is left.
 *
 * Every case runs on both engines (the thread engine calls the hooks from
 * its workers: HC_TEST_CONCURRENCY, so TSan sees them).
 */
#include "io_test.h"

#include <stdatomic.h>

#define DEPTH 8
#define PAGE_BYTES 4096
#define MAX_ARRAYS 16

/* Array sizes: below, at and above the depth. */
static const size_t sizes[] = {1, 5, DEPTH - 1, DEPTH, DEPTH + 3, 2, 3 * DEPTH + 1, 4};
#define N_ARRAYS (sizeof(sizes) / sizeof(sizes[0]))
#define REFUSED 3 /* prepare of page 3 says -EEXIST */
#define INVALID 9 /* page 9's write request has no final name */

struct page {
	unsigned index;
	unsigned char *buf;
	struct iovec iov;
	char name[32], tmp[32];
	_Atomic unsigned prepared, arrived;
};

struct test_feed {
	struct io_feed feed;
	bool write;
	struct io_write_req *w; /* every page's request, arrays back to back */
	struct io_read_req *r;
	struct page *pages;
	size_t given, total_given;   /* arrays given so far */
	size_t starts[N_ARRAYS + 1]; /* first page of each array */
	unsigned handed_back[N_ARRAYS];
	unsigned calls; /* of next() */
	bool pause;     /* say "nothing now" every other time, when it may */
	bool paused;
	unsigned pauses;
	unsigned bad_done; /* arrays handed back with a request unfinished */
};

static int prepare_page(void *arg)
{
	struct page *p = arg;
	atomic_fetch_add(&p->prepared, 1);
	if (p->index == REFUSED)
		return -EEXIST;
	io_t_fill(p->buf, PAGE_BYTES, p->index);
	return 0;
}

static void arrived_page(void *arg)
{
	struct page *p = arg;
	atomic_fetch_add(&p->arrived, 1);
}

static size_t feed_next(struct io_feed *f, void **reqs)
{
	struct test_feed *t = (struct test_feed *)f;
	t->calls++;
	if (t->given == N_ARRAYS)
		return 0;
	/* Only while a request given is unfinished, i.e. in flight: all of
	 * them have been started whenever next() is asked. */
	bool in_flight = false;
	for (size_t i = 0; i < t->starts[t->given] && !in_flight; i++)
		in_flight = (t->write ? t->w[i].result : t->r[i].result) > 0;
	if (t->pause && !t->paused && in_flight) {
		t->paused = true;
		t->pauses++;
		return 0;
	}
	t->paused = false;
	size_t a = t->given++, first = t->starts[a];
	if (t->write)
		*reqs = &t->w[first];
	else
		*reqs = &t->r[first];
	return sizes[a];
}

static void feed_done(struct io_feed *f, void *reqs, size_t n)
{
	struct test_feed *t = (struct test_feed *)f;
	size_t first = t->write ? (size_t)((struct io_write_req *)reqs - t->w)
				: (size_t)((struct io_read_req *)reqs - t->r);
	size_t a = 0;
	while (a < N_ARRAYS && t->starts[a] != first)
		a++;
	assert_true(a < N_ARRAYS);
	assert_int_equal(n, sizes[a]);
	t->handed_back[a]++;
	for (size_t i = first; i < first + n; i++) {
		int res = t->write ? t->w[i].result : t->r[i].result;
		/* Final: 0 or -errno; a read that arrived had its hook run. */
		if (res > 0 || (!t->write && res == 0 && atomic_load(&t->pages[i].arrived) != 1))
			t->bad_done++;
	}
}

/* One call runs the whole feed. */
static void run_feed(struct io_engine *e, enum io_engine_kind kind, struct test_feed *t)
{
	int rc = t->write ? io_write_feed(e, &t->feed) : io_read_feed(e, &t->feed);
	assert_int_equal(rc, 0);
	assert_int_equal(t->given, N_ARRAYS);
	for (size_t a = 0; a < N_ARRAYS; a++)
		assert_int_equal(t->handed_back[a], 1);
	assert_int_equal(t->bad_done, 0);
	if (t->pause && kind == IO_ENGINE_URING)
		assert_true(t->pauses > 0);
	if (kind == IO_ENGINE_THREADS)
		assert_int_equal(t->pauses, 0);
}

static void feed_one(enum io_engine_kind kind, bool pause)
{
	struct io_engine *e = io_t_engine(kind, DEPTH, 4);
	if (!e)
		return;
	int dfd;
	char *dir = io_t_mkdtemp(&dfd);
	int fds_before = io_t_fd_count();
	size_t n = 0, starts[N_ARRAYS + 1];
	for (size_t a = 0; a < N_ARRAYS; a++) {
		starts[a] = n;
		n += sizes[a];
	}
	starts[N_ARRAYS] = n;
	struct page *pages = calloc(n, sizeof(*pages));
	struct io_write_req *w = calloc(n, sizeof(*w));
	struct io_read_req *r = calloc(n, sizeof(*r));
	assert_non_null(pages);
	assert_non_null(w);
	assert_non_null(r);
	for (unsigned i = 0; i < n; i++) {
		struct page *p = &pages[i];
		p->index = i;
		p->buf = io_t_aligned(PAGE_BYTES);
		memset(p->buf, 0xee, PAGE_BYTES);
		p->iov = (struct iovec){p->buf, PAGE_BYTES};
		snprintf(p->name, sizeof(p->name), "page-%u", i);
		snprintf(p->tmp, sizeof(p->tmp), ".tmp-%u", i);
		w[i] = (struct io_write_req){.dirfd = dfd,
					     .tmp_name = p->tmp,
					     .final_name = i == INVALID ? NULL : p->name,
					     .iov = &p->iov,
					     .iovcnt = 1,
					     .len = PAGE_BYTES,
					     .noreplace = true,
					     .prepare = prepare_page,
					     .arg = p};
	}

	struct test_feed t = {.feed = {feed_next, feed_done},
			      .write = true,
			      .w = w,
			      .pages = pages,
			      .pause = pause};
	memcpy(t.starts, starts, sizeof(starts));
	run_feed(e, kind, &t);
	for (unsigned i = 0; i < n; i++) {
		int want = i == INVALID ? -EINVAL : i == REFUSED ? -EEXIST : 0;
		if (w[i].result != want)
			fail_msg("%s: write %u: result %d, expected %d", io_engine_kind_name(kind),
				 i, w[i].result, want);
		assert_int_equal(atomic_load(&pages[i].prepared), i == INVALID ? 0 : 1);
	}
	assert_int_equal(io_t_count_prefix(dfd, ".tmp"), 0);
	assert_int_equal(io_t_count_prefix(dfd, "page-"), n - 2);

	for (unsigned i = 0; i < n; i++) {
		memset(pages[i].buf, 0, PAGE_BYTES);
		r[i] = (struct io_read_req){.dirfd = dfd,
					    .name = pages[i].name,
					    .iov = &pages[i].iov,
					    .iovcnt = 1,
					    .len = PAGE_BYTES,
					    .arrived = arrived_page,
					    .arg = &pages[i]};
	}
	t = (struct test_feed){.feed = {feed_next, feed_done},
			       .write = false,
			       .r = r,
			       .pages = pages,
			       .pause = pause};
	memcpy(t.starts, starts, sizeof(starts));
	run_feed(e, kind, &t);
	unsigned char *want = malloc(PAGE_BYTES);
	assert_non_null(want);
	for (unsigned i = 0; i < n; i++) {
		bool missing = i == INVALID || i == REFUSED;
		assert_int_equal(r[i].result, missing ? -ENOENT : 0);
		assert_int_equal(atomic_load(&pages[i].arrived), missing ? 0 : 1);
		if (!missing) {
			io_t_fill(want, PAGE_BYTES, i);
			assert_memory_equal(pages[i].buf, want, PAGE_BYTES);
		}
	}
	free(want);
	assert_int_equal(io_t_open_slots(), 0);
	assert_int_equal(io_t_fd_count(), fds_before);
	for (unsigned i = 0; i < n; i++)
		free(pages[i].buf);
	free(pages);
	free(w);
	free(r);
	io_engine_destroy(e);
	io_t_rmtree(dir, dfd);
}

static void test_feed(void **state)
{
	(void)state;
	for (size_t k = 0; k < IO_T_NKINDS; k++)
		feed_one(io_t_kinds[k], false);
}

static void test_feed_pauses(void **state)
{
	(void)state;
	for (size_t k = 0; k < IO_T_NKINDS; k++)
		feed_one(io_t_kinds[k], true);
}

/* Two arrays of one read each, counted back. */
struct pair_feed {
	struct io_feed feed;
	struct io_read_req r[2];
	unsigned given, back;
};

static size_t pair_next(struct io_feed *f, void **reqs)
{
	struct pair_feed *p = (struct pair_feed *)f;
	if (p->given == 2)
		return 0;
	*reqs = &p->r[p->given++];
	return 1;
}

static void pair_done(struct io_feed *f, void *reqs, size_t n)
{
	struct pair_feed *p = (struct pair_feed *)f;
	assert_int_equal(n, 1);
	assert_true(reqs == &p->r[0] || reqs == &p->r[1]);
	p->back++;
}

/* No engine, or an incomplete feed: -EINVAL; every array given is still
 * handed back, with that result. */
static void test_feed_errors(void **state)
{
	(void)state;
	struct io_feed none = {NULL, NULL};
	assert_int_equal(io_write_feed(NULL, &none), -EINVAL);
	assert_int_equal(io_read_feed(NULL, NULL), -EINVAL);

	static unsigned char buf[PAGE_BYTES];
	struct iovec iov = {buf, PAGE_BYTES};
	struct pair_feed p = {.feed = {pair_next, pair_done}};
	for (int i = 0; i < 2; i++)
		p.r[i] = (struct io_read_req){.dirfd = AT_FDCWD,
					      .name = "x",
					      .iov = &iov,
					      .iovcnt = 1,
					      .len = PAGE_BYTES};
	assert_int_equal(io_read_feed(NULL, &p.feed), -EINVAL);
	assert_int_equal(p.given, 2);
	assert_int_equal(p.back, 2);
	assert_int_equal(p.r[0].result, -EINVAL);
	assert_int_equal(p.r[1].result, -EINVAL);
}

int main(void)
{
	/* HC_TEST_CONCURRENCY: the thread engine runs the hooks on workers. */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_feed),
		cmocka_unit_test(test_feed_pauses),
		cmocka_unit_test(test_feed_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
