/*
 * Page-key hashing throughput on one core, in GB/s of token bytes.
 *
 *   bench_key_hash [--tokens N] [--page-size P] [--reps R] [--dump FILE]
 *
 * Hashes N pseudo-random token ids (default 64 Mi) as one chain of P-token
 * pages (default 64), R times (default 5), and prints the best run. --dump
 * writes the tokens as little-endian u32 to FILE so another implementation
 * (bench/key_hash.py) can hash exactly the same input; the last key printed
 * lets the two be checked against each other.
 */
#define _GNU_SOURCE
#include <hicache/hicache.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-')
		return false;
	*out = v;
	return true;
}

static int dump(const char *path, const uint32_t *tok, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f) {
		perror(path);
		return -1;
	}
	/* The file is little-endian whatever the host. */
	uint8_t buf[4096];
	for (size_t i = 0; i < n;) {
		size_t m = 0;
		for (; m < sizeof(buf) / 4 && i < n; m++, i++) {
			buf[4 * m] = (uint8_t)tok[i];
			buf[4 * m + 1] = (uint8_t)(tok[i] >> 8);
			buf[4 * m + 2] = (uint8_t)(tok[i] >> 16);
			buf[4 * m + 3] = (uint8_t)(tok[i] >> 24);
		}
		if (fwrite(buf, 4, m, f) != m) {
			perror(path);
			fclose(f);
			return -1;
		}
	}
	return fclose(f) ? -1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"tokens", required_argument, NULL, 'n'},
		{"page-size", required_argument, NULL, 'p'},
		{"reps", required_argument, NULL, 'r'},
		{"dump", required_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	uint64_t ntok = 64ull << 20, ps = 64, reps = 5;
	const char *dump_path = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "n:p:r:d:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (!parse_u64(optarg, &ntok) || !ntok || ntok > (1ull << 32))
				goto usage;
			break;
		case 'p':
			if (!parse_u64(optarg, &ps) || !ps || ps > (1u << 24))
				goto usage;
			break;
		case 'r':
			if (!parse_u64(optarg, &reps) || !reps || reps > 1000)
				goto usage;
			break;
		case 'd':
			dump_path = optarg;
			break;
		case 'h':
			printf("usage: %s [--tokens N] [--page-size P] [--reps R] [--dump FILE]\n",
			       argv[0]);
			return 0;
		default:
			goto usage;
		}
	}
	if (optind != argc || ntok < ps)
		goto usage;

	size_t npages = ntok / ps;
	uint32_t *tok = malloc(ntok * sizeof(*tok));
	struct hc_key *keys = malloc(npages * sizeof(*keys));
	if (!tok || !keys) {
		fprintf(stderr, "bench_key_hash: out of memory\n");
		return 1;
	}
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < ntok; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		tok[i] = (uint32_t)((x * 0x2545f4914f6cdd1dull) >> 32);
	}
	if (dump_path && dump(dump_path, tok, ntok))
		return 1;

	double best = 1e30, best_cpu = 1e30;
	for (uint64_t r = 0; r < reps; r++) {
		double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID);
		int64_t n = hc_key_chain(NULL, tok, ntok, (uint32_t)ps, keys, npages);
		double t1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_THREAD_CPUTIME_ID);
		if (n != (int64_t)npages) {
			fprintf(stderr, "bench_key_hash: hc_key_chain: %s\n", hc_strerror((int)n));
			return 1;
		}
		if (t1 - t0 < best)
			best = t1 - t0;
		if (c1 - c0 < best_cpu)
			best_cpu = c1 - c0;
	}
	double bytes = (double)npages * (double)ps * 4;
	char hex[HC_KEY_HEX_LEN + 1];
	hc_key_to_hex(&keys[npages - 1], hex);
	printf("impl=c tokens=%zu page_size=%llu pages=%zu reps=%llu best_s=%.4f gbps=%.3f "
	       "cpu_gbps=%.3f pages_per_s=%.0f last=%s\n",
	       (size_t)(npages * ps), (unsigned long long)ps, npages, (unsigned long long)reps,
	       best, bytes / best / 1e9, bytes / best_cpu / 1e9, (double)npages / best, hex);
	free(tok);
	free(keys);
	return 0;

usage:
	fprintf(stderr,
		"usage: %s [--tokens N (1..2^32)] [--page-size P (<= N)] [--reps R] "
		"[--dump FILE]\n",
		argv[0]);
	return 2;
}
