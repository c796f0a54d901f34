/* Shared helpers for the radix tree tests: trees, token sequences, and
 * eviction callbacks that record what the tree hands back. */
#ifndef HC_TEST_RADIX_HELPERS_H
#define HC_TEST_RADIX_HELPERS_H

#include "test_util.h"

#include "cache/radix.h"

#include <errno.h>
#include <stdlib.h>

#define REC_MAX 4096

/* Everything the tree handed back, in order. */
struct rec {
	uint64_t freed[2][REC_MAX]; /* per tier */
	size_t nfreed[2];
	size_t free_calls[2];
	uint64_t mamba[2][64];
	size_t nmamba[2];
	/* write_back: next host slot to hand out, how many more succeed
	 * (-1: all), and the calls seen. */
	uint64_t next_host;
	int wb_budget;
	size_t wb_calls;
	uint64_t wb_mamba; /* slot to hand out for a device state, or RADIX_NO_SLOT */
	size_t wb_mamba_asked;
	/* Optional hook run inside write_back (re-entrancy tests). */
	void (*wb_hook)(struct rec *r);
	struct radix_tree *tree;
};

static inline void rec_free_slots(void *arg, enum radix_tier tier, const uint64_t *slots, size_t n)
{
	struct rec *r = arg;
	r->free_calls[tier]++;
	for (size_t i = 0; i < n; i++) {
		assert_true(r->nfreed[tier] < REC_MAX);
		r->freed[tier][r->nfreed[tier]++] = slots[i];
	}
}

static inline void rec_free_mamba(void *arg, enum radix_tier tier, uint64_t slot)
{
	struct rec *r = arg;
	assert_true(r->nmamba[tier] < 64);
	r->mamba[tier][r->nmamba[tier]++] = slot;
}

static inline int rec_write_back(void *arg, const struct radix_node *node, uint64_t *host_out,
				 uint64_t *mamba_host)
{
	struct rec *r = arg;
	struct radix_node_info ni;

	r->wb_calls++;
	if (r->wb_hook)
		r->wb_hook(r);
	if (r->wb_budget == 0)
		return -ENOSPC;
	if (r->wb_budget > 0)
		r->wb_budget--;
	radix_node_info(node, &ni);
	for (size_t i = 0; i < ni.pages; i++)
		host_out[i] = r->next_host++;
	if (mamba_host) {
		r->wb_mamba_asked++;
		*mamba_host = r->wb_mamba;
	}
	return 0;
}

static inline void rec_init(struct rec *r, struct radix_tree *t)
{
	memset(r, 0, sizeof(*r));
	r->next_host = 100000;
	r->wb_budget = -1;
	r->wb_mamba = RADIX_NO_SLOT;
	r->tree = t;
}

static inline struct radix_evict_ops rec_ops(struct rec *r)
{
	struct radix_evict_ops ops = {
		.arg = r,
		.free_slots = rec_free_slots,
		.free_mamba = rec_free_mamba,
		.write_back = rec_write_back,
	};
	return ops;
}

static inline bool rec_has(const struct rec *r, enum radix_tier tier, uint64_t slot)
{
	for (size_t i = 0; i < r->nfreed[tier]; i++)
		if (r->freed[tier][i] == slot)
			return true;
	return false;
}

#define assert_radix_ok(t)                                                     \
	do {                                                                   \
		int rc_ = radix_check(t);                                      \
		if (rc_)                                                       \
			fail_msg("radix_check: %d: %s", rc_, hc_last_error()); \
	} while (0)

static inline struct radix_tree *tree_new(uint32_t ps, enum radix_write_policy pol)
{
	struct radix_opts o = {.page_size = ps, .write_policy = pol};
	struct radix_tree *t = NULL;
	assert_int_equal(radix_create(&o, &t), 0);
	assert_non_null(t);
	return t;
}

/* npages * ps tokens: page i of sequence `tag` is (tag, i, j). Sequences
 * with different tags differ from their first page on, but share the
 * first token (BOS-like) so the children table must key on whole pages. */
static inline uint32_t *seq_new(uint32_t tag, size_t npages, uint32_t ps)
{
	uint32_t *s = malloc((npages * ps + 1) * sizeof(*s));
	assert_non_null(s);
	for (size_t i = 0; i < npages * ps; i++)
		s[i] = i == 0 ? 1 : tag * 1000003u + (uint32_t)i;
	return s;
}

/* A copy of the first `shared` pages of base, then its own tail. */
static inline uint32_t *seq_branch(const uint32_t *base, size_t shared, uint32_t tag, size_t npages,
				   uint32_t ps)
{
	uint32_t *s = seq_new(tag, npages, ps);
	memcpy(s, base, shared * ps * sizeof(*s));
	return s;
}

/* Slots first, first+1, ... */
static inline uint64_t *slots_new(uint64_t first, size_t n)
{
	uint64_t *s = malloc((n + 1) * sizeof(*s));
	assert_non_null(s);
	for (size_t i = 0; i < n; i++)
		s[i] = first + i;
	return s;
}

static inline struct radix_node_info info_of(const struct radix_node *n)
{
	struct radix_node_info ni;
	radix_node_info(n, &ni);
	return ni;
}

static inline struct radix_stats stats_of(const struct radix_tree *t)
{
	struct radix_stats st;
	radix_stats(t, &st);
	return st;
}

/* Insert on device with slots base.. ; returns the result. */
static inline struct radix_insert ins_dev(struct radix_tree *t, const uint32_t *tok, size_t ntok,
					  uint64_t base)
{
	struct radix_insert res;
	uint64_t *sl = slots_new(base, ntok + 1);
	assert_int_equal(radix_insert(t, tok, ntok, sl, &res), 0);
	free(sl);
	assert_radix_ok(t);
	return res;
}

static inline struct radix_match match_of(struct radix_tree *t, const uint32_t *tok, size_t ntok)
{
	struct radix_match m;
	assert_int_equal(radix_match(t, tok, ntok, &m), 0);
	assert_radix_ok(t);
	return m;
}

#endif
