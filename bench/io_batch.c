/*
 * io engine throughput: write and read batches of N page files of S bytes,
 * io_uring engine against thread engine, in one run; then the cost of a
 * warm stat batch (the io_stat_batch loop against io_uring statx, median
 * of 15 passes, in us per name).
 *
 *   bench_io_batch [files=2048] [size=65536] [batch=64] [threads=8] [dir=/tmp] [direct=1]
 *
 * Files go to 256 bucket dirs under a fresh directory per engine, like the
 * store's layout. Nothing is deleted until the end: creating files right
 * after deleting many is slow on ext4 (docs/PERFORMANCE.md, "Measuring here"),
 * which would penalise whichever engine runs second.
 */
#define _GNU_SOURCE
#include "../src/io/io.h"

#include <hicache/hicache.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(p) : unlink(p);
}

struct run {
	unsigned long files;
	size_t size;
	unsigned batch;
	bool direct;
	int buckets[256];
	char (*names)[32]; /* "page-NNNNNN" */
	unsigned char *src;
	unsigned char *dst; /* batch * size */
};

static int open_buckets(struct run *r, const char *dir)
{
	if (mkdir(dir, 0700))
		return -errno;
	for (int b = 0; b < 256; b++) {
		char p[4400];
		snprintf(p, sizeof(p), "%s/%02x", dir, b);
		if (mkdir(p, 0700))
			return -errno;
		r->buckets[b] = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (r->buckets[b] < 0)
			return -errno;
	}
	return 0;
}

static void close_buckets(struct run *r)
{
	for (int b = 0; b < 256; b++)
		close(r->buckets[b]);
}

/* Returns seconds, or a negative value on any failed page. */
static double do_writes(struct io_engine *e, struct run *r)
{
	struct io_write_req *w = calloc(r->batch, sizeof(*w));
	struct iovec iov = {r->src, r->size};
	char(*tmps)[32] = calloc(r->batch, sizeof(*tmps));
	double t0 = now();
	for (unsigned long off = 0; off < r->files; off += r->batch) {
		unsigned n = (unsigned)(r->files - off < r->batch ? r->files - off : r->batch);
		for (unsigned i = 0; i < n; i++) {
			unsigned long f = off + i;
			snprintf(tmps[i], sizeof(tmps[0]), ".tmp-%lu", f);
			w[i] = (struct io_write_req){.dirfd = r->buckets[f % 256],
						     .tmp_name = tmps[i],
						     .final_name = r->names[f],
						     .iov = &iov,
						     .iovcnt = 1,
						     .len = r->size,
						     .direct = r->direct,
						     .noreplace = true};
		}
		io_write_batch(e, w, n);
		for (unsigned i = 0; i < n; i++) {
			if (w[i].result) {
				fprintf(stderr, "write %s: %s\n", r->names[off + i],
					strerror(-w[i].result));
				free(w);
				free(tmps);
				return -1;
			}
		}
	}
	double t = now() - t0;
	free(w);
	free(tmps);
	return t;
}

static double do_reads(struct io_engine *e, struct run *r)
{
	struct io_read_req *q = calloc(r->batch, sizeof(*q));
	struct iovec *iov = calloc(r->batch, sizeof(*iov));
	double t0 = now();
	for (unsigned long off = 0; off < r->files; off += r->batch) {
		unsigned n = (unsigned)(r->files - off < r->batch ? r->files - off : r->batch);
		for (unsigned i = 0; i < n; i++) {
			unsigned long f = off + i;
			iov[i] = (struct iovec){r->dst + (size_t)i * r->size, r->size};
			q[i] = (struct io_read_req){.dirfd = r->buckets[f % 256],
						    .name = r->names[f],
						    .iov = &iov[i],
						    .iovcnt = 1,
						    .len = r->size,
						    .direct = r->direct};
		}
		io_read_batch(e, q, n);
		for (unsigned i = 0; i < n; i++) {
			if (q[i].result) {
				fprintf(stderr, "read %s: %s\n", r->names[off + i],
					strerror(-q[i].result));
				free(q);
				free(iov);
				return -1;
			}
		}
	}
	double t = now() - t0;
	if (memcmp(r->dst, r->src, r->size))
		fprintf(stderr, "read back differs\n");
	free(q);
	free(iov);
	return t;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

#define STAT_REPS 15

/* Median us per name over STAT_REPS passes, alternating: io_stat_batch (the
 * fstatat loop), then io_uring statx of the same names, batch names per
 * submission. Warm: every name was just written and read. */
static void do_stats(struct io_engine *e, struct run *r, double *loop_us, double *uring_us)
{
	unsigned n = r->batch;
	struct io_stat_req *s = calloc(n, sizeof(*s));
	struct statx *stx = calloc(n, sizeof(*stx));
	double tl[STAT_REPS], tu[STAT_REPS];
	unsigned long count = r->files / n * n;
	struct io_uring ring;
	bool have_ring = io_uring_queue_init(n, &ring, 0) == 0;
	*loop_us = *uring_us = -1;
	for (int rep = 0; rep < STAT_REPS; rep++) {
		double t0 = now();
		for (unsigned long off = 0; off < count; off += n) {
			for (unsigned i = 0; i < n; i++)
				s[i] = (struct io_stat_req){.dirfd = r->buckets[(off + i) % 256],
							    .name = r->names[off + i]};
			io_stat_batch(e, s, n, false);
		}
		tl[rep] = (now() - t0) * 1e6 / (double)count;
		if (!have_ring)
			continue;
		t0 = now();
		for (unsigned long off = 0; off < count; off += n) {
			for (unsigned i = 0; i < n; i++) {
				struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
				io_uring_prep_statx(sqe, r->buckets[(off + i) % 256],
						    r->names[off + i], AT_STATX_DONT_SYNC,
						    STATX_SIZE | STATX_MTIME, &stx[i]);
			}
			io_uring_submit_and_wait(&ring, n);
			struct io_uring_cqe *cqe;
			unsigned head, seen = 0;
			io_uring_for_each_cqe(&ring, head, cqe) seen++;
			io_uring_cq_advance(&ring, seen);
		}
		tu[rep] = (now() - t0) * 1e6 / (double)count;
	}
	if (count) {
		qsort(tl, STAT_REPS, sizeof(double), cmp_double);
		*loop_us = tl[STAT_REPS / 2];
		if (have_ring) {
			qsort(tu, STAT_REPS, sizeof(double), cmp_double);
			*uring_us = tu[STAT_REPS / 2];
		}
	}
	if (have_ring)
		io_uring_queue_exit(&ring);
	free(s);
	free(stx);
}

static unsigned long arg_ul(const char *s, bool *bad)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 0);
	if (errno || end == s || *end)
		*bad = true;
	return v;
}

int main(int argc, char **argv)
{
	struct run r = {.files = 2048, .size = 65536, .batch = 64, .direct = true};
	unsigned threads = 8;
	const char *base = "/tmp";
	bool bad = false;
	if (argc > 1)
		r.files = arg_ul(argv[1], &bad);
	if (argc > 2)
		r.size = arg_ul(argv[2], &bad);
	if (argc > 3)
		r.batch = (unsigned)arg_ul(argv[3], &bad);
	if (argc > 4)
		threads = (unsigned)arg_ul(argv[4], &bad);
	if (argc > 5)
		base = argv[5];
	if (argc > 6)
		r.direct = arg_ul(argv[6], &bad) != 0;
	if (bad || !r.files || !r.size || !r.batch || r.batch > 4096 ||
	    (r.direct && r.size % 4096)) {
		fprintf(stderr,
			"usage: %s [files] [size, a 4096 multiple with direct] [batch <= 4096] "
			"[threads] [dir] [direct 0/1]\n",
			argv[0]);
		return 2;
	}
	char top[4096];
	snprintf(top, sizeof(top), "%s/hc-io-bench-XXXXXX", base);
	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 1;
	}
	r.names = calloc(r.files, sizeof(*r.names));
	for (unsigned long f = 0; f < r.files; f++)
		snprintf(r.names[f], sizeof(r.names[0]), "page-%06lu", f);
	if (posix_memalign((void **)&r.src, 4096, r.size) ||
	    posix_memalign((void **)&r.dst, 4096, (size_t)r.batch * r.size)) {
		fprintf(stderr, "no memory\n");
		return 1;
	}
	for (size_t i = 0; i < r.size; i++)
		r.src[i] = (unsigned char)(i * 131 + 7);
	memset(r.dst, 0, (size_t)r.batch * r.size);

	printf("io_batch: %lu files x %zu bytes, batch %u, %u threads, %s, in %s\n", r.files,
	       r.size, r.batch, threads, r.direct ? "O_DIRECT" : "buffered", top);
	printf("%-8s %10s %12s %10s %12s %12s %12s\n", "engine", "write GB/s", "write files/s",
	       "read GB/s", "read files/s", "stat us/name", "statx-uring");
	int rc = 0;
	const enum io_engine_kind kinds[] = {IO_ENGINE_URING, IO_ENGINE_THREADS};
	for (int k = 0; k < 2; k++) {
		struct io_engine_opts o = {.kind = kinds[k],
					   .queue_depth = r.batch,
					   .threads = threads};
		struct io_engine *e;
		if (io_engine_create(&o, &e)) {
			printf("%-8s unavailable: %s\n", io_engine_kind_name(kinds[k]),
			       hc_last_error());
			continue;
		}
		char dir[4200];
		snprintf(dir, sizeof(dir), "%s/%s", top, io_engine_kind_name(kinds[k]));
		if (open_buckets(&r, dir)) {
			perror("bucket dirs");
			rc = 1;
			io_engine_destroy(e);
			break;
		}
		double tw = do_writes(e, &r);
		double tr = tw < 0 ? -1 : do_reads(e, &r);
		double st_loop = 0, st_uring = 0;
		if (tr >= 0)
			do_stats(e, &r, &st_loop, &st_uring);
		double bytes = (double)r.files * (double)r.size;
		if (tw < 0 || tr < 0)
			rc = 1;
		else
			printf("%-8s %10.2f %12.0f %10.2f %12.0f %12.2f %12.2f\n",
			       io_engine_kind_name(kinds[k]), bytes / tw / 1e9,
			       (double)r.files / tw, bytes / tr / 1e9, (double)r.files / tr,
			       st_loop, st_uring);
		close_buckets(&r);
		io_engine_destroy(e);
	}
	nftw(top, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(r.names);
	free(r.src);
	free(r.dst);
	return rc;
}
