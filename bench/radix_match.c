/*
 * Radix tree match throughput: match a 32-page prefix in a tree holding
 * many sequences that share prefixes, one core, matches/s. Also prints
 * what building and tearing the tree down cost (insert and device
 * eviction rates), since the controller runs those under the same lock.
 *
 *   bench_radix_match [sequences=10000] [page_size=64] [match_pages=32] [seconds=3]
 *
 * Sequence i = system prompt (8 pages, one of 16) + conversation
 * (8..15 pages, one of 64 per prompt) + its own turn, 32..64 pages in all:
 * a three-level tree like a multi-turn chat service's. Queries are the
 * first match_pages pages of random sequences; a warm-up pass does the
 * splits at the query boundaries first, so the timed loop measures the
 * steady state (walk, hash and compare, LRU touch).
 */
#define _GNU_SOURCE
#include "../src/cache/radix.h"

#include <hicache/hicache.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NPROMPT 16
#define NCONV 64
#define PROMPT_PAGES 8
#define NQUERY 1024

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint32_t ps;

/* Pages of sequence i and its tokens (out: npages * ps). */
static size_t seq_fill(uint64_t i, uint32_t *out)
{
	uint64_t prompt = i % NPROMPT;
	uint64_t conv = prompt * NCONV + (i / NPROMPT) % NCONV;
	size_t conv_pages = 8 + conv % 8;
	size_t npages = 32 + mix(i) % 33;
	for (size_t p = 0; p < npages; p++) {
		uint64_t owner = p < PROMPT_PAGES                ? prompt
				 : p < PROMPT_PAGES + conv_pages ? 1000 + conv
								 : 1000000 + i;
		for (uint32_t k = 0; k < ps; k++)
			out[p * ps + k] = (uint32_t)mix(owner << 32 ^ (p * ps + k));
	}
	return npages;
}

static void free_slots(void *arg, enum radix_tier tier, const uint64_t *slots, size_t n)
{
	(void)tier;
	(void)slots;
	*(size_t *)arg += n;
}

int main(int argc, char **argv)
{
	size_t nseq = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
	ps = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 64;
	size_t qpages = argc > 3 ? strtoul(argv[3], NULL, 10) : 32;
	double seconds = argc > 4 ? strtod(argv[4], NULL) : 3.0;
	struct radix_opts o = {.page_size = ps, .write_policy = RADIX_WRITE_THROUGH};
	struct radix_tree *t;
	struct radix_stats st;
	int rc;

	if (!nseq || !ps || !qpages || qpages > 32 || seconds <= 0) {
		fprintf(stderr, "usage: %s [sequences] [page_size] [match_pages<=32] [seconds]\n",
			argv[0]);
		return 2;
	}
	rc = radix_create(&o, &t);
	if (rc) {
		fprintf(stderr, "radix_create: %s\n", hc_strerror(rc));
		return 1;
	}
	uint32_t *buf = malloc(64 * (size_t)ps * sizeof(*buf));
	uint64_t *slots = malloc(64 * sizeof(*slots));
	uint32_t *queries = malloc((size_t)NQUERY * qpages * ps * sizeof(*queries));
	if (!buf || !slots || !queries)
		return 1;

	double t0 = now();
	uint64_t next_slot = 0;
	for (size_t i = 0; i < nseq; i++) {
		struct radix_insert r;
		size_t np = seq_fill(i, buf);
		for (size_t p = 0; p < np; p++)
			slots[p] = next_slot + p;
		rc = radix_insert(t, buf, np * ps, slots, &r);
		if (rc) {
			fprintf(stderr, "radix_insert: %s\n", hc_strerror(rc));
			return 1;
		}
		next_slot += np;
	}
	double t_insert = now() - t0;
	radix_stats(t, &st);
	printf("tree: %zu sequences, page %u tokens: %zu nodes, %zu pages "
	       "(%.0f inserts/s, %.1f us each, %" PRIu64 " page keys hashed)\n",
	       nseq, ps, st.nodes, st.pages, (double)nseq / t_insert, t_insert / (double)nseq * 1e6,
	       st.pages_hashed);

	uint64_t q = 12345;
	for (size_t i = 0; i < NQUERY; i++) {
		q = mix(q);
		seq_fill(q % nseq, buf);
		memcpy(queries + i * qpages * ps, buf, qpages * ps * sizeof(*buf));
	}
	for (size_t i = 0; i < NQUERY; i++) {
		struct radix_match m;
		rc = radix_match(t, queries + i * qpages * ps, qpages * ps, &m);
		if (rc || m.pages != qpages || m.dev_pages != qpages) {
			fprintf(stderr, "warm-up match %zu: rc %d, %zu pages\n", i, rc, m.pages);
			return 1;
		}
	}
	radix_stats(t, &st);
	size_t depth = 0;
	for (size_t i = 0; i < NQUERY; i++) {
		struct radix_match m;
		radix_match(t, queries + i * qpages * ps, qpages * ps, &m);
		for (struct radix_node *n = m.last_node; n != radix_root(t);) {
			struct radix_node_info ni;
			radix_node_info(n, &ni);
			depth++;
			n = ni.parent;
		}
	}

	size_t matches = 0;
	double start = now(), end = start;
	while (end - start < seconds) {
		for (size_t k = 0; k < 4096; k++) {
			struct radix_match m;
			radix_match(t, queries + (k % NQUERY) * qpages * ps, qpages * ps, &m);
		}
		matches += 4096;
		end = now();
	}
	double rate = (double)matches / (end - start);
	printf("match %zu pages (%zu tokens): %.2f M matches/s, %.0f ns each, "
	       "%.1f nodes on the path, %zu nodes after warm-up splits\n",
	       qpages, qpages * ps, rate / 1e6, 1e9 / rate, (double)depth / NQUERY, st.nodes);

	/* Tear down through the device LRU: one heap pop per node. */
	size_t freed = 0;
	struct radix_evict_ops ops = {.arg = &freed, .free_slots = free_slots};
	size_t nodes = st.nodes;
	t0 = now();
	while (radix_evict_device(t, 1, &ops) > 0)
		;
	double t_evict = now() - t0;
	printf("evict_device: %zu nodes (%zu pages) in %.3f s: %.2f M nodes/s\n", nodes, freed,
	       t_evict, (double)nodes / t_evict / 1e6);
	radix_destroy(t);
	free(buf);
	free(slots);
	free(queries);
	return 0;
}
