/*
 * bench_prefault: time hc_mem_alloc() pre-faulting one region with 1 thread
 * and with N threads, interleaved (the order alternates per run so drift
 * in the machine's state hits both alike), and print each run, the medians
 * and the speed-up.
 *
 *   bench_prefault [size_gib=4] [runs=5] [threads=2] [thp|off|prefer|required]
 *
 * One unmeasured run of each comes first: on a virtual machine the first
 * touch of guest memory also faults on the host, which is not what is being
 * measured. GB/s counts 10^9 bytes. Public API only.
 */
#include <hicache/hicache.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RUNS 101

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	double tmp[MAX_RUNS];
	memcpy(tmp, v, (size_t)n * sizeof(*v));
	qsort(tmp, (size_t)n, sizeof(*tmp), cmp_double);
	return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

/* Seconds to map and pre-fault len bytes with threads threads; <0 on error. */
static double one_run(size_t len, unsigned threads, enum hc_huge_mode mode, const char **backing)
{
	struct hc_mem_opts o;
	hc_mem_opts_init(&o, sizeof(o));
	o.prefault = true;
	o.prefault_threads = threads;
	o.huge_mode = mode;
	struct hc_mem *m = NULL;
	double t0 = now();
	int rc = hc_mem_alloc(len, &o, &m);
	double t = now() - t0;
	if (rc) {
		fprintf(stderr, "bench_prefault: hc_mem_alloc(%zu bytes, %u threads): %s\n", len,
			threads, hc_last_error());
		return -1;
	}
	*backing = hc_mem_backing_name(hc_mem_backing(m));
	hc_mem_free(m);
	return t;
}

/* A whole-string number, or -1 (which every caller rejects). */
static double arg_number(int argc, char **argv, int i, double fallback)
{
	if (argc <= i)
		return fallback;
	char *end;
	double v = strtod(argv[i], &end);
	return end != argv[i] && *end == '\0' ? v : -1;
}

int main(int argc, char **argv)
{
	double gib = arg_number(argc, argv, 1, 4);
	int runs = (int)arg_number(argc, argv, 2, 5);
	int many = (int)arg_number(argc, argv, 3, 2);
	enum hc_huge_mode mode = HC_HUGE_THP; /* the library's default */
	if (argc > 4 && hc_mem_parse_huge_mode(argv[4], &mode)) {
		fprintf(stderr, "bench_prefault: %s\n", hc_last_error());
		return 2;
	}
	if (gib <= 0 || runs < 1 || runs > MAX_RUNS || many < 2) {
		fprintf(stderr,
			"usage: bench_prefault [size_gib>0] [runs 1..%d] [threads>=2] "
			"[thp|off|prefer|required]\n",
			MAX_RUNS);
		return 2;
	}
	size_t len = (size_t)(gib * (double)(1ull << 30));
	uint64_t avail = 0;
	if (hc_mem_available(&avail) == 0 && avail < len + (len >> 3)) {
		fprintf(stderr, "bench_prefault: %.2f GiB wanted, %.2f GiB available\n", gib,
			(double)avail / (1ull << 30));
		return 1;
	}

	const unsigned counts[2] = {1, (unsigned)many};
	double t[2][MAX_RUNS];
	const char *backing = "?";
	printf("pre-fault of %.2f GiB (%zu bytes), huge pages %s, %d runs, 1 vs %d threads\n", gib,
	       len, argc > 4 ? argv[4] : "thp", runs, many);
	for (int k = 0; k < 2; k++)
		if (one_run(len, counts[k], mode, &backing) < 0)
			return 1;
	for (int r = 0; r < runs; r++) {
		for (int k = 0; k < 2; k++) {
			int which = (r % 2) ? 1 - k : k;
			double s = one_run(len, counts[which], mode, &backing);
			if (s < 0)
				return 1;
			t[which][r] = s;
			printf("run %2d  %2u thread%s  %7.3f s  %6.2f GB/s  (%s)\n", r + 1,
			       counts[which], counts[which] == 1 ? " " : "s", s,
			       (double)len / s / 1e9, backing);
		}
	}
	double m1 = median(t[0], runs), mn = median(t[1], runs);
	printf("median   1 thread   %7.3f s  %6.2f GB/s\n", m1, (double)len / m1 / 1e9);
	printf("median  %2d threads  %7.3f s  %6.2f GB/s\n", many, mn, (double)len / mn / 1e9);
	printf("speed-up %d threads / 1 thread: %.2fx\n", many, m1 / mn);
	return 0;
}
