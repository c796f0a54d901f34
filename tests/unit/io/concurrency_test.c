/* HC_TEST_CONCURRENCY
 * io engines: several threads run write and read batches on one engine at
 * once (each its own files); every page comes back intact, and nothing is
 * left open or behind. Both engines; the io_uring one grows its ring pool.
 */
#include "io_test.h"

#include <pthread.h>

#define THREADS 4
#define PAGES 150
#define ROUNDS 3
#define DEPTH 16

struct worker {
	struct io_engine *e;
	int dfd;
	unsigned id;
	bool direct;
	int failures;
};

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	char(*names)[32] = calloc(PAGES, sizeof(*names));
	char(*tmps)[32] = calloc(PAGES, sizeof(*tmps));
	struct iovec(*wiov)[2] = calloc(PAGES, sizeof(*wiov));
	struct iovec *riov = calloc(PAGES, sizeof(*riov));
	struct io_write_req *w = calloc(PAGES, sizeof(*w));
	struct io_read_req *r = calloc(PAGES, sizeof(*r));
	unsigned char **src = calloc(PAGES, sizeof(*src));
	unsigned char **dst = calloc(PAGES, sizeof(*dst));
	size_t *len = calloc(PAGES, sizeof(*len));
	for (unsigned round = 0; round < ROUNDS; round++) {
		bool direct = wk->direct && round % 2;
		for (unsigned i = 0; i < PAGES; i++) {
			uint64_t seed = test_mix(wk->id * 1000003u + round * 1009u + i);
			len[i] = 4096 * (1 + seed % 4) + (direct ? 0 : seed % 4096);
			src[i] = io_t_aligned(len[i]);
			dst[i] = io_t_aligned(len[i]);
			io_t_fill(src[i], len[i], seed);
			snprintf(names[i], sizeof(names[i]), "t%u-r%u-p%03u", wk->id, round, i);
			snprintf(tmps[i], sizeof(tmps[i]), "tmp-t%u-p%03u", wk->id, i);
			wiov[i][0] = (struct iovec){src[i], 4096};
			wiov[i][1] = (struct iovec){src[i] + 4096, len[i] - 4096};
			riov[i] = (struct iovec){dst[i], len[i]};
			w[i] = (struct io_write_req){.dirfd = wk->dfd,
						     .tmp_name = tmps[i],
						     .final_name = names[i],
						     .iov = wiov[i],
						     .iovcnt = 2,
						     .len = len[i],
						     .direct = direct,
						     .noreplace = true};
			r[i] = (struct io_read_req){.dirfd = wk->dfd,
						    .name = names[i],
						    .iov = &riov[i],
						    .iovcnt = 1,
						    .len = len[i],
						    .direct = direct};
		}
		if (io_write_batch(wk->e, w, PAGES) || io_read_batch(wk->e, r, PAGES))
			wk->failures++;
		for (unsigned i = 0; i < PAGES; i++) {
			if (w[i].result || r[i].result || memcmp(src[i], dst[i], len[i]))
				wk->failures++;
			free(src[i]);
			free(dst[i]);
		}
	}
	free(names);
	free(tmps);
	free(wiov);
	free(riov);
	free(w);
	free(r);
	free(src);
	free(dst);
	free(len);
	return NULL;
}

static void run_threads(enum io_engine_kind kind)
{
	struct io_engine *e = io_t_engine(kind, DEPTH, 3);
	if (!e)
		return;
	int dfd;
	char *dir = io_t_mkdtemp(&dfd);
	bool direct = io_t_direct_ok(dfd);
	pthread_t tid[THREADS];
	struct worker wk[THREADS];
	for (unsigned t = 0; t < THREADS; t++) {
		wk[t] = (struct worker){.e = e, .dfd = dfd, .id = t, .direct = direct};
		assert_int_equal(pthread_create(&tid[t], NULL, worker_main, &wk[t]), 0);
	}
	for (unsigned t = 0; t < THREADS; t++) {
		assert_int_equal(pthread_join(tid[t], NULL), 0);
		assert_int_equal(wk[t].failures, 0);
	}
	assert_int_equal(io_t_count_prefix(dfd, "tmp-"), 0);
	assert_int_equal(io_t_count_prefix(dfd, ""), THREADS * ROUNDS * PAGES);
	assert_int_equal(io_t_open_slots(), 0);
	io_t_rmtree(dir, dfd);
	int fds = io_t_fd_count();
	io_engine_destroy(e);
	/* Destroy releases every ring the pool grew (at most one per thread). */
	int rings = fds - io_t_fd_count();
	if (kind == IO_ENGINE_URING)
		assert_true(rings >= 1 && rings <= THREADS);
	else
		assert_int_equal(rings, 0);
}

static void test_threads(void **state)
{
	(void)state;
	for (size_t k = 0; k < IO_T_NKINDS; k++)
		run_threads(io_t_kinds[k]);
}

/* Many engines created and destroyed while others work: create/destroy
 * are self-contained (no global state). */
static void *churn_main(void *arg)
{
	enum io_engine_kind kind = *(enum io_engine_kind *)arg;
	for (int i = 0; i < 20; i++) {
		struct io_engine_opts o = {.kind = kind, .queue_depth = 4, .threads = 2};
		struct io_engine *e;
		if (io_engine_create(&o, &e) == 0)
			io_engine_destroy(e);
	}
	return NULL;
}

static void test_create_destroy(void **state)
{
	(void)state;
	int fds = io_t_fd_count();
	for (size_t k = 0; k < IO_T_NKINDS; k++) {
		enum io_engine_kind kind = io_t_kinds[k];
		pthread_t tid[THREADS];
		for (unsigned t = 0; t < THREADS; t++)
			assert_int_equal(pthread_create(&tid[t], NULL, churn_main, &kind), 0);
		for (unsigned t = 0; t < THREADS; t++)
			assert_int_equal(pthread_join(tid[t], NULL), 0);
	}
	assert_int_equal(io_t_fd_count(), fds);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_create_destroy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
