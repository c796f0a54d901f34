/*
 * hicache bench store: the run itself. Set up the workers, the pool and
 * the store; store what the get batches of a mixed (or mem) run will read;
 * warm the pool and drop the page cache when asked; run the timed phase;
 * print the summary.
 */
#define _GNU_SOURCE
#include "bench.h"

#include "../commands.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the page cache ---- */

/* Returns true when the page cache was dropped. */
static bool drop_page_cache(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "hicache bench: --drop-caches needs root; the page cache "
				"was not dropped\n");
		return false;
	}
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	int err = fd < 0 ? errno : write(fd, "3", 1) == 1 ? 0 : errno ? errno : EIO;
	if (fd >= 0)
		close(fd);
	if (err)
		fprintf(stderr, "hicache bench: cannot write /proc/sys/vm/drop_caches: %s\n",
			hc_strerror(-err));
	return !err;
}

/* Prepare a get and say how cold it will be. */
static const char *prepare_get(const struct bench_args *a, bool direct)
{
	if (strcmp(a->backend, "file"))
		return a->backend;
	bool dropped = a->drop_caches && drop_page_cache();
	if (direct)
		return "o_direct";
	return dropped ? "dropped" : "warm";
}

/* ---- the command ---- */

/*
 * Read one page that the timed reads will want (each thread's first get
 * page) into every pool slot, untimed, so that every slot has been written
 * by the device once. Reading one page many times, rather than a batch of
 * them, keeps the warm-up from caching (anywhere below the file system)
 * more than one page per thread of what is then timed, and writes nothing.
 * Returns whether any slot was read into.
 */
static bool warm_pool(struct bench *b)
{
	const struct bench_args *a = b->a;
	bool warmed = false;

	for (unsigned t = 0; t < a->threads; t++) {
		struct worker *w = &b->workers[t];
		/* A mixed run's odd threads start with a set batch. */
		uint64_t page = w->first + (a->op == OP_MIXED ? (t % 2) * a->batch : 0);
		if (page >= w->end || bench_page_key(a->seed, page, &w->keys[0]))
			continue;
		size_t slots = bench_slot_per_page(a) ? (size_t)(w->end - w->first)
						      : (size_t)a->batch;
		for (size_t j = 1; j < slots; j++)
			w->keys[j] = w->keys[0];
		if (hc_store_get(b->store, w->keys, slots, w->slots, w->results) > 0)
			warmed = true;
	}
	return warmed;
}

static uint64_t pages_existing(const struct bench *b)
{
	struct hc_store_stats st;

	return hc_store_stats(b->store, NULL, &st) ? 0 : st.pages_existing;
}

static int bench_run(struct bench *b)
{
	const struct bench_args *a = b->a;
	struct hc_store_pool_info info;
	struct summary s = {.cache = "n/a"};
	int rc;

	rc = hc_store_pool_info(b->store, "kv", &info);
	if (rc) {
		cli_report("bench: pool info", rc);
		return 1;
	}
	struct env_info e = {
		.engine = hc_store_io_engine(b->store),
		.direct = hc_store_direct_io(b->store),
		.zero_copy = info.zero_copy,
		.mla = a->mla || a->page_bytes % 2,
		.objects = info.objects,
	};
	if (info.objects) {
		/* docs/FORMAT.md: payload rounded up to the object block, then
		 * a trailer block. */
		uint64_t payload = a->page_bytes / info.objects;
		uint64_t block = hc_store_object_block(b->store);
		e.object_bytes = (payload + block - 1) / block * block + block;
	}
	/* The mem backend starts empty in every process; a mixed run needs the
	 * pages its get batches read. */
	if (a->op == OP_MIXED) {
		if (bench_run_phase(b, PHASE_LAYOUT, OP_SET, "mixed layout"))
			return 1;
	} else if (a->op != OP_SET && !strcmp(a->backend, "mem") &&
		   bench_run_phase(b, PHASE_ALL, OP_SET, "mem fill")) {
		return 1;
	}
	/* Before the drop, so the warm-up's reads leave nothing cached. */
	if (a->pool_warmup && !strcmp(a->backend, "file") && (a->op == OP_GET || a->op == OP_MIXED))
		s.warmed = warm_pool(b);
	if (a->op == OP_GET || a->op == OP_MIXED)
		s.cache = prepare_get(a, e.direct);
	uint64_t existing = pages_existing(b);
	if (bench_run_phase(b, a->op == OP_MIXED ? PHASE_MIXED : PHASE_ALL, a->op,
			    bench_op_names[a->op]) ||
	    bench_summarize(b, &s))
		return 1;
	s.existing = pages_existing(b) - existing;
	if (a->json)
		bench_print_json(a, &e, &s);
	else
		bench_print_human(a, &e, &s);
	if (s.all.t.first_err)
		fprintf(stderr, "hicache: bench: page %llu: %s (first page error)\n",
			(unsigned long long)s.all.t.first_err_page, hc_strerror(s.all.t.first_err));
	if (s.all.failed)
		bench_say_failed(a, &s);
	if (fflush(stdout)) {
		cli_report("bench: writing stdout", -EIO);
		return 1;
	}
	return s.all.failed ? 1 : 0;
}

int bench_store(int argc, char **argv)
{
	struct bench_args a;
	struct bench b = {.a = &a};
	int rc = bench_parse_args(argc, argv, &a);

	if (rc)
		return rc < 0 ? 0 : rc;
	/* Only a person watching wants the line; a log or a pipe does not. */
	b.show_progress = isatty(STDERR_FILENO);
	b.workers = calloc(a.threads, sizeof(*b.workers));
	if (!b.workers) {
		cli_report("bench: threads", -ENOMEM);
		return 1;
	}
	rc = 1;
	for (unsigned t = 0; t < a.threads; t++) {
		if (bench_worker_init(&b, &b.workers[t], t)) {
			cli_report("bench: buffers", -ENOMEM);
			goto out;
		}
	}
	if (bench_create_pool(&a, &b.pool) || bench_open_store(&a, b.pool, &b.store))
		goto out;
	rc = bench_run(&b);
out:
	hc_store_close(b.store); /* before the pool it points into */
	hc_pool_destroy(b.pool);
	for (unsigned t = 0; t < a.threads; t++)
		bench_worker_free(&b.workers[t]);
	free(b.workers);
	return rc;
}
