/*
 * io engines under fault injection (util/fault.h): a batch of writes, then
 * of reads, with call 1, 2, ... of each kind failed in turn. Both engines
 * have an injection point at every open, write, read and rename of a page
 * (the io_uring engine makes the kernel fail that step of the chain), so
 * each page passes each point once. An injected open, write, read or
 * rename fails exactly its own page, with -EIO (not the -EBADF the kernel
 * gives the io_uring engine's invalid file); an injected allocation fails
 * pages or the batch with a negative errno. Either way every page reported
 * written holds its bytes, every failed one is absent, no temp file, fd or
 * io_uring slot is left, a read reported done holds the right bytes and
 * its arrived hook ran, and the next batch without a fault works.
 */
#include "io_test.h"

#include "util/fault.h"

#define N 6 /* pages per batch: more than DEPTH, so slots are reused */
#define DEPTH 4
#define LEN 8192

struct pages {
	int dfd;
	char *dir;
	unsigned char *src, *dst;
	char names[N][32], tmps[N][32];
	struct iovec wiov[N], riov[N];
	int arrived[N];
};

static void arrived(void *arg)
{
	(*(int *)arg)++;
}

static void pages_init(struct pages *p)
{
	memset(p, 0, sizeof(*p));
	p->dir = io_t_mkdtemp(&p->dfd);
	p->src = io_t_aligned((size_t)N * LEN);
	p->dst = io_t_aligned((size_t)N * LEN);
	io_t_fill(p->src, (size_t)N * LEN, 11);
	for (unsigned i = 0; i < N; i++) {
		snprintf(p->names[i], sizeof(p->names[i]), "page%u", i);
		snprintf(p->tmps[i], sizeof(p->tmps[i]), "tmp.page%u", i);
		p->wiov[i] = (struct iovec){p->src + (size_t)i * LEN, LEN};
		p->riov[i] = (struct iovec){p->dst + (size_t)i * LEN, LEN};
	}
}

static void pages_fini(struct pages *p)
{
	free(p->src);
	free(p->dst);
	io_t_rmtree(p->dir, p->dfd);
}

static int write_all(struct io_engine *e, struct pages *p, int res[N])
{
	struct io_write_req w[N];
	for (unsigned i = 0; i < N; i++)
		w[i] = (struct io_write_req){.dirfd = p->dfd,
					     .tmp_name = p->tmps[i],
					     .final_name = p->names[i],
					     .iov = &p->wiov[i],
					     .iovcnt = 1,
					     .len = LEN};
	int rc = io_write_batch(e, w, N);
	for (unsigned i = 0; i < N; i++)
		res[i] = w[i].result;
	return rc;
}

static int read_all(struct io_engine *e, struct pages *p, int res[N])
{
	struct io_read_req r[N];
	memset(p->dst, 0, (size_t)N * LEN);
	for (unsigned i = 0; i < N; i++) {
		p->arrived[i] = 0;
		r[i] = (struct io_read_req){.dirfd = p->dfd,
					    .name = p->names[i],
					    .iov = &p->riov[i],
					    .iovcnt = 1,
					    .len = LEN,
					    .arrived = arrived,
					    .arg = &p->arrived[i]};
	}
	int rc = io_read_batch(e, r, N);
	for (unsigned i = 0; i < N; i++)
		res[i] = r[i].result;
	return rc;
}

static bool published(struct pages *p, unsigned i)
{
	size_t len;
	unsigned char *got = io_t_get_file(p->dfd, p->names[i], &len);
	bool ok = got && len == LEN && !memcmp(got, p->src + (size_t)i * LEN, LEN);
	free(got);
	return ok;
}

/* Checks one batch's results; returns how many pages failed. */
static unsigned check_results(struct pages *p, bool write, int rc, const int res[N],
			      enum util_fault_kind fk, uint64_t nth)
{
	unsigned failed = 0;
	for (unsigned i = 0; i < N; i++) {
		if (res[i] > 0 || res[i] < -4095)
			fail_msg("%s %s fault %llu: page %u result %d", write ? "write" : "read",
				 util_fault_kind_name(fk), (unsigned long long)nth, i, res[i]);
		if (res[i] == 0) {
			if (write && !published(p, i))
				fail_msg("write %s fault %llu: page %u reported written, not there",
					 util_fault_kind_name(fk), (unsigned long long)nth, i);
			if (!write &&
			    (memcmp(p->dst + (size_t)i * LEN, p->src + (size_t)i * LEN, LEN) ||
			     p->arrived[i] != 1))
				fail_msg("read %s fault %llu: page %u reported read: wrong bytes "
					 "or arrived %d times",
					 util_fault_kind_name(fk), (unsigned long long)nth, i,
					 p->arrived[i]);
			continue;
		}
		failed++;
		if (fk != HC_FAULT_ALLOC && res[i] != -EIO)
			fail_msg("%s %s fault %llu: page %u failed with %d, not -EIO",
				 write ? "write" : "read", util_fault_kind_name(fk),
				 (unsigned long long)nth, i, res[i]);
		if (write && faccessat(p->dfd, p->names[i], F_OK, 0) == 0)
			fail_msg("write %s fault %llu: failed page %u was published",
				 util_fault_kind_name(fk), (unsigned long long)nth, i);
		if (!write && p->arrived[i])
			fail_msg("read %s fault %llu: arrived ran for failed page %u",
				 util_fault_kind_name(fk), (unsigned long long)nth, i);
	}
	if (rc < 0 && fk != HC_FAULT_ALLOC)
		fail_msg("%s %s fault %llu: the batch failed (%d), not one page",
			 write ? "write" : "read", util_fault_kind_name(fk),
			 (unsigned long long)nth, rc);
	if (nth && fk != HC_FAULT_ALLOC && failed != 1)
		fail_msg("%s %s fault %llu: %u pages failed, not 1", write ? "write" : "read",
			 util_fault_kind_name(fk), (unsigned long long)nth, failed);
	return failed;
}

static void remove_pages(struct pages *p)
{
	for (unsigned i = 0; i < N; i++)
		unlinkat(p->dfd, p->names[i], 0);
}

static struct io_engine *engine(enum io_engine_kind kind)
{
	struct io_engine_opts o = {.kind = kind, .queue_depth = DEPTH, .threads = 3};
	struct io_engine *e = NULL;
	assert_int_equal(io_engine_create(&o, &e), 0);
	return e;
}

/* A fresh engine (its set-up is swept too: rings, slots, workers), then a
 * write batch, or a write batch and a read batch, with call nth of fk
 * failed in the last one (or in the set-up); returns the calls of fk. */
static uint64_t round_trip(enum io_engine_kind kind, struct pages *p, bool write,
			   enum util_fault_kind fk, uint64_t nth)
{
	int fds = io_t_fd_count(), slots = io_t_open_slots();
	int res[N];
	remove_pages(p);
	struct io_engine *e = NULL;
	if (!write) {
		e = engine(kind);
		assert_int_equal(write_all(e, p, res), 0);
		io_engine_destroy(e);
		e = NULL;
	}
	struct io_engine_opts o = {.kind = kind, .queue_depth = DEPTH, .threads = 3};
	util_fault_arm(fk, nth);
	int rc = io_engine_create(&o, &e);
	if (rc == 0)
		rc = write ? write_all(e, p, res) : read_all(e, p, res);
	else if (fk != HC_FAULT_ALLOC || rc != -ENOMEM)
		fail_msg("engine set-up with %s fault %llu: %d (%s)", util_fault_kind_name(fk),
			 (unsigned long long)nth, rc, hc_last_error());
	util_fault_disarm();
	uint64_t seen = util_fault_seen(fk);
	if (nth && nth <= seen && !util_fault_fired())
		fail_msg("%s fault %llu did not fire", util_fault_kind_name(fk),
			 (unsigned long long)nth);
	if (e) {
		unsigned failed = check_results(p, write, rc, res, fk, nth);
		if (!nth && failed)
			fail_msg("%s %s counting: %u pages failed", write ? "write" : "read",
				 util_fault_kind_name(fk), failed);
	} else {
		e = engine(kind);
	}
	assert_int_equal(io_t_count_prefix(p->dfd, "tmp."), 0);
	/* The next batches, without a fault, work. */
	assert_int_equal(write_all(e, p, res), 0);
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(res[i], 0);
	assert_int_equal(read_all(e, p, res), 0);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(res[i], 0);
		assert_int_equal(p->arrived[i], 1);
	}
	assert_memory_equal(p->dst, p->src, (size_t)N * LEN);
	io_engine_destroy(e);
	assert_int_equal(io_t_fd_count(), fds);
	assert_int_equal(io_t_open_slots(), slots);
	return seen;
}

static void sweep(enum io_engine_kind kind)
{
	struct io_engine *e = io_t_engine(kind, DEPTH, 3);
	if (!e)
		return;
	io_engine_destroy(e);
	struct pages p;
	pages_init(&p);
	static const struct {
		bool write;
		enum util_fault_kind fk;
	} cases[] = {
		{true, HC_FAULT_ALLOC},  {true, HC_FAULT_OPEN},   {true, HC_FAULT_WRITE},
		{true, HC_FAULT_RENAME}, {false, HC_FAULT_ALLOC}, {false, HC_FAULT_OPEN},
		{false, HC_FAULT_READ},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		uint64_t calls = round_trip(kind, &p, cases[c].write, cases[c].fk, 0);
		/* One point per page and kind; allocations: the engine's and the
		 * batch's. */
		if (cases[c].fk != HC_FAULT_ALLOC)
			assert_int_equal(calls, N);
		for (uint64_t n = 1; n <= calls; n++)
			round_trip(kind, &p, cases[c].write, cases[c].fk, n);
		print_message("%s %s: %llu %s faults swept\n", io_engine_kind_name(kind),
			      cases[c].write ? "write" : "read", (unsigned long long)calls,
			      util_fault_kind_name(cases[c].fk));
	}
	pages_fini(&p);
}

static void sweep_uring(void **state)
{
	(void)state;
	sweep(IO_ENGINE_URING);
}

static void sweep_threads(void **state)
{
	(void)state;
	sweep(IO_ENGINE_THREADS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sweep_uring),
		cmocka_unit_test(sweep_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
