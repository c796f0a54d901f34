/*
 * cache/radix — what the files of the radix tree share. Private to
 * src/cache/radix*.c: the controller uses radix.h only.
 *
 *   radix_tree.c   create/destroy, node blocks, split, match, insert,
 *                  ranges, locks and pins, Mamba states, inspection
 *   radix_kids.c   the children table (open addressing on first pages)
 *   radix_lru.c    the LRU heaps, and the accounting that decides heap
 *                  membership (radix_node_begin/radix_node_end)
 *   radix_evict.c  eviction and its callbacks
 *   radix_check.c  the invariant checker
 *
 * What a match calls at every node on its path (the page hash, the
 * child-table probe) is static inline here, and the touch in
 * radix_tree.c, so that the walk compiles as it did in one file:
 * bench/radix_match.c measures that path.
 *
 * This header and radix.h are the bottom of the tree's files: they call
 * nothing defined in a radix*.c file, so every file's includes point down.
 */
#ifndef HC_SRC_CACHE_RADIX_INTERNAL_H
#define HC_SRC_CACHE_RADIX_INTERNAL_H

#include "cache/radix.h"

#include "util/util.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* Assertion levels: 1 cheap asserts (debug builds), 3 radix_check() after
 * every mutating call. */
#ifndef HC_DEBUG
#ifdef NDEBUG
#define HC_DEBUG 0
#else
#define HC_DEBUG 1
#endif
#endif
#if HC_DEBUG >= 1
#define radix_assert(x) assert(x)
#else
#define radix_assert(x) ((void)0)
#endif
#if HC_DEBUG >= 3
#define radix_assert_expensive(t) assert(radix_check(t) == 0)
#else
#define radix_assert_expensive(t) ((void)0)
#endif

enum { HEAP_DEV, HEAP_HOST, HEAP_MAMBA, HEAP_COUNT };
#define HEAP_NONE UINT32_MAX

/* What a callback may call back into (t->in_cb). */
enum { CB_NONE, CB_WRITE_BACK, CB_FREE };

/* The child's tokens ride along so that comparing its first page and
 * loading its header are two independent cache misses, not a chain. */
struct radix_kid {
	uint64_t hash;           /* of the child's first page */
	struct radix_node *node; /* NULL: empty slot */
	const uint32_t *tok;     /* node->tok */
};

struct radix_node {
	/* What a match reads and writes at every node comes first. */
	uint32_t *tok;
	struct radix_kid *kids; /* kcap entries (power of two), NULL when kcap is 0 */
	size_t kcap;
	size_t npages;
	uint64_t last_access;
	uint64_t hits;
	uint32_t hidx[HEAP_COUNT];
	bool on[2];
	bool backed_up;
	uint64_t mamba[2];

	struct radix_node *parent;
	size_t nkids;
	size_t ndev_kids; /* children on device */
	size_t end;       /* pages from the root to this node's end */
	uint64_t hash;
	uint64_t id;        /* creation order: tie-break in the heaps */
	uint64_t *slots[2]; /* per tier; meaningful when on[tier] */
	struct hc_key *keys;
	int32_t lock_ref;
	int32_t host_pin;
	struct radix_node *link; /* scratch list: subtree deletion, teardown */
	uint64_t data[];         /* the arrays; u64 first keeps them aligned */
};

struct radix_heap {
	struct radix_node **a;
	size_t n;
	size_t cap;
};

struct radix_tree {
	struct radix_node *root;
	uint32_t page_size;
	size_t page_bytes;
	enum radix_write_policy policy;
	bool keep_unbacked;
	bool has_seed;
	struct hc_key seed;
	uint64_t clock;
	uint64_t next_id;
	int in_cb;
	struct radix_heap heap[HEAP_COUNT];
	struct radix_stats st;
};

/* Fail with -EBUSY when called from a callback that may not call this
 * function (t->in_cb: what the running callback may call back into). */
#define RADIX_ENTER(t, allowed)                                                           \
	do {                                                                              \
		if ((t)->in_cb != CB_NONE && (t)->in_cb != (allowed))                     \
			return util_fail(-EBUSY, "radix tree: %s called from a callback", \
					 __func__);                                       \
	} while (0)

/* ---- small helpers ---- */

static inline uint64_t radix_page_hash(const struct radix_tree *t, const uint32_t *page)
{
	return XXH3_64bits(page, t->page_bytes);
}

static inline bool radix_host_droppable(const struct radix_tree *t, const struct radix_node *n)
{
	return n->backed_up || !t->keep_unbacked;
}

/* The key a node under parent chains from: parent's last, or the seed. */
static inline const struct hc_key *radix_node_prior(const struct radix_tree *t,
						    const struct radix_node *parent)
{
	if (parent != t->root)
		return &parent->keys[parent->npages - 1];
	return t->has_seed ? &t->seed : NULL;
}

/* ---- children table (radix_kids.c) ---- */

/* The child of n whose first page is `page` (hash h), or NULL. */
static inline struct radix_node *radix_kids_find(const struct radix_tree *t,
						 const struct radix_node *n, uint64_t h,
						 const uint32_t *page)
{
	if (!n->kcap)
		return NULL;
	size_t mask = n->kcap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		const struct radix_kid *k = &n->kids[i];
		if (!k->node)
			return NULL;
		if (k->hash == h) {
			__builtin_prefetch(k->node, 1);
			if (!memcmp(k->tok, page, t->page_bytes))
				return k->node;
		}
	}
}

/* Index of child in n's table (child must be there). */
size_t radix_kids_slot_of(const struct radix_node *n, const struct radix_node *child);
/* Room for one more child (load <= 3/4), so radix_kids_add() cannot fail.
 * Returns 0 or -ENOMEM. */
int radix_kids_reserve(struct radix_node *n);
/* Add child to n's table (room reserved) and count it. */
void radix_kids_add(struct radix_node *n, struct radix_node *child);
/* Remove child from n's table; a node left with no child frees its table. */
void radix_kids_del(struct radix_node *n, struct radix_node *child);

/* ---- LRU heaps and accounting (radix_lru.c) ---- */

/* Heap order: older first, then deeper, then created earlier. */
bool radix_heap_less(const struct radix_node *a, const struct radix_node *b);
/* Sift entry i of heap w down (its key was raised). */
void radix_heap_down(struct radix_heap *h, int w, size_t i);
/* Room in every heap for every node plus `extra`: pushes never fail.
 * Returns 0 or -ENOMEM. */
int radix_tree_reserve(struct radix_tree *t, size_t extra);
/* Whether n belongs in heap w now. */
bool radix_want_heap(const struct radix_tree *t, const struct radix_node *n, int w);
/* Add (or take out) n's contribution to the counters in *s. */
void radix_stats_add(struct radix_stats *s, const struct radix_tree *t, const struct radix_node *n,
		     bool add);
/* Bracket every change to a node: begin takes its contribution out of
 * the totals, end puts it back and fixes its place in the heaps. Both
 * ignore the root. */
void radix_node_begin(struct radix_tree *t, struct radix_node *n);
void radix_node_end(struct radix_tree *t, struct radix_node *n);
/* Out of the counters and every heap, for good (before freeing n). */
void radix_node_detach(struct radix_tree *t, struct radix_node *n);

#endif /* HC_SRC_CACHE_RADIX_INTERNAL_H */
