/*
 * Radix tree over token pages: the L1/L2 index of the cache layer.
 *
 * Layout
 * ------
 * A node is ONE allocation: the header, then four arrays of `pages`
 * entries each (device slots, host slots, keys, tokens):
 *
 *   +--------+-----------+------------+-----------------+-----------------+
 *   | header | dev[np]   | host[np]   | keys[np]        | tok[np * ps]    |
 *   +--------+-----------+------------+-----------------+-----------------+
 *              u64 each    u64 each     32 bytes each     u32 each
 *
 * The slot arrays are always there (16 bytes a page beside 4*ps bytes of
 * tokens), so gaining a tier later never allocates; on[tier] says whether
 * the array means anything.
 *
 * Children live in a small open-addressing table keyed by an XXH3 hash of
 * the child's FIRST PAGE (not its first token: at the root every sequence
 * starts with the same BOS token, and children differing only later in
 * their first page are still distinct edges). A lookup confirms the page
 * with memcmp, so hash collisions only cost a probe. Entries are
 * (hash, node, node's tokens): a lookup's two cache misses, the child's
 * header and its first page, then overlap. Leaves have no table.
 *
 *   node.kids --> [ h | node | tok ][ empty ][ h | node | tok ] ...
 *                        |      |                         (load <= 3/4)
 *                        v      `--> tokens inside the child's block
 *                      child
 *
 * A match costs one page hash and one table probe per node on the path,
 * plus one memcmp over the matched tokens; it allocates nothing unless
 * it splits. At 64-token pages that memcmp (the query and the tree's
 * tokens, 16 KiB for 32 pages) is most of the time: matching is
 * memory-bound, not pointer-bound (bench/radix_match.c).
 *
 * Split at page k (a match or insert ends or diverges inside X):
 *
 *     parent                       parent
 *       |  hash(page 0)              |  hash(page 0): same table slot
 *       X [p0 .. p(n-1)]    ==>      P [p0 .. p(k-1)]   new node, copies
 *       |                            |  hash(page k)
 *     kids                           X [pk .. p(n-1)]   same pointer, its
 *                                    |                  arrays advanced by k
 *                                  kids
 *
 * X keeps its allocation; its array pointers move forward by k (the k
 * pages before them become dead space, freed with X: never more than
 * what the P's above X hold). P copies the first k entries of each
 * array: the keys are divided, never recomputed. X keeps what belongs to
 * its end (Mamba state, children, heap positions); P inherits counts
 * that cover its pages (lock refs, pins, hits, access time, L3 flag).
 *
 * Accounting
 * ----------
 * Every counter in struct radix_stats is a sum over nodes of a per-node
 * contribution (node_account()). Any change to a node is bracketed by
 * node_begin() (take its contribution out) and node_end() (put it back,
 * then fix its place in the LRU heaps): totals stay exact and O(1) to
 * read, and radix_check() recomputes them from scratch.
 *
 * LRU
 * ---
 * Three binary min-heaps on (last access, depth, id), each node knowing its
 * index:
 *
 *   HEAP_DEV    device leaves: on device, no child on device, unlocked
 *   HEAP_HOST   host-only leaves: no child, unlocked, unpinned, droppable
 *   HEAP_MAMBA  nodes holding a host Mamba state, unpinned
 *
 * Membership is recomputed in node_end(), so a node enters a heap the
 * moment it becomes a candidate (its last device child demoted, an
 * unlock, ...) and eviction pops in O(log n) per node, never scanning the
 * tree. A touch raises a key, so it only sifts down. Access times are one
 * logical clock tick per match/insert, and a touch covers the whole path,
 * so a parent is never older than its child. Heap arrays are reserved
 * to the node count whenever a node is created, which makes every later
 * push infallible: unlock and eviction never fail for memory.
 *
 * Caveats
 * -------
 * - Not thread-safe (see radix.h). Callbacks run inside the call; the
 *   re-entry the API allows is checked (-EBUSY).
 * - One namespace (seed) per tree.
 * - Dead space after splits is bounded by the live copies above it
 *   (at most 2x the token/key metadata of the path).
 */
#define _GNU_SOURCE
#include "cache/radix.h"

#include "util/util.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
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
	uint64_t id; /* creation order: tie-break in the heaps */
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

/* ---- small helpers ---- */

static uint64_t page_hash(const struct radix_tree *t, const uint32_t *page)
{
	return XXH3_64bits(page, t->page_bytes);
}

static bool host_droppable(const struct radix_tree *t, const struct radix_node *n)
{
	return n->backed_up || !t->keep_unbacked;
}

static const struct hc_key *node_prior(const struct radix_tree *t, const struct radix_node *parent)
{
	if (parent != t->root)
		return &parent->keys[parent->npages - 1];
	return t->has_seed ? &t->seed : NULL;
}

static struct radix_node *node_new(struct radix_tree *t, size_t np)
{
	size_t per = 2 * sizeof(uint64_t) + sizeof(struct hc_key) + t->page_bytes;
	struct radix_node *n;

	if (np > (SIZE_MAX - sizeof(*n)) / per)
		return NULL;
	n = malloc(sizeof(*n) + np * per);
	if (!n)
		return NULL;
	memset(n, 0, sizeof(*n));
	n->npages = np;
	n->id = ++t->next_id;
	n->slots[RADIX_DEV] = n->data;
	n->slots[RADIX_HOST] = n->data + np;
	n->keys = (struct hc_key *)(n->data + 2 * np);
	n->tok = (uint32_t *)(n->keys + np);
	n->mamba[RADIX_DEV] = n->mamba[RADIX_HOST] = RADIX_NO_SLOT;
	for (int w = 0; w < HEAP_COUNT; w++)
		n->hidx[w] = HEAP_NONE;
	return n;
}

/* ---- children table ---- */

static struct radix_node *kids_find(const struct radix_tree *t, const struct radix_node *n,
				    uint64_t h, const uint32_t *page)
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

static size_t kids_slot_of(const struct radix_node *n, const struct radix_node *child)
{
	size_t mask = n->kcap - 1;
	size_t i = child->hash & mask;
	while (n->kids[i].node != child) {
		radix_assert(n->kids[i].node);
		i = (i + 1) & mask;
	}
	return i;
}

static void kids_put(struct radix_kid *tab, size_t cap, struct radix_node *child)
{
	size_t i = child->hash & (cap - 1);
	while (tab[i].node)
		i = (i + 1) & (cap - 1);
	tab[i].hash = child->hash;
	tab[i].node = child;
	tab[i].tok = child->tok;
}

/* Room for one more child (load <= 3/4), so kids_add() cannot fail. */
static int kids_reserve(struct radix_node *n)
{
	if ((n->nkids + 1) * 4 <= n->kcap * 3)
		return 0;
	size_t cap = n->kcap ? n->kcap * 2 : 4;
	struct radix_kid *tab = calloc(cap, sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	for (size_t i = 0; i < n->kcap; i++)
		if (n->kids[i].node)
			kids_put(tab, cap, n->kids[i].node);
	free(n->kids);
	n->kids = tab;
	n->kcap = cap;
	return 0;
}

static void kids_add(struct radix_node *n, struct radix_node *child)
{
	radix_assert((n->nkids + 1) * 4 <= n->kcap * 3);
	kids_put(n->kids, n->kcap, child);
	n->nkids++;
	if (child->on[RADIX_DEV])
		n->ndev_kids++;
}

/* Linear probing without tombstones: shift later entries of the cluster
 * back into the hole unless their home slot lies cyclically in (hole, j]. */
static void kids_del(struct radix_node *n, struct radix_node *child)
{
	size_t mask = n->kcap - 1;
	size_t i = kids_slot_of(n, child);
	for (size_t j = i;;) {
		j = (j + 1) & mask;
		if (!n->kids[j].node)
			break;
		size_t home = n->kids[j].hash & mask;
		bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
		if (!stays) {
			n->kids[i] = n->kids[j];
			i = j;
		}
	}
	n->kids[i].node = NULL;
	n->nkids--;
	if (child->on[RADIX_DEV])
		n->ndev_kids--;
	if (!n->nkids) {
		/* Leaves are most nodes: they hold no table. */
		free(n->kids);
		n->kids = NULL;
		n->kcap = 0;
	}
}

/* ---- LRU heaps ---- */

/* Older first; on a tie (a touch stamps a whole path alike) the deeper node
 * first, so a parent's Mamba state outlives its children's, as an LRU list
 * that moves parents to the front after children would have it. */
static bool heap_less(const struct radix_node *a, const struct radix_node *b)
{
	if (a->last_access != b->last_access)
		return a->last_access < b->last_access;
	if (a->end != b->end)
		return a->end > b->end;
	return a->id < b->id;
}

static void heap_place(struct radix_heap *h, int w, size_t i, struct radix_node *x)
{
	h->a[i] = x;
	x->hidx[w] = (uint32_t)i;
}

static void heap_up(struct radix_heap *h, int w, size_t i)
{
	struct radix_node *x = h->a[i];
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!heap_less(x, h->a[p]))
			break;
		heap_place(h, w, i, h->a[p]);
		i = p;
	}
	heap_place(h, w, i, x);
}

static void heap_down(struct radix_heap *h, int w, size_t i)
{
	struct radix_node *x = h->a[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && heap_less(h->a[c + 1], h->a[c]))
			c++;
		if (!heap_less(h->a[c], x))
			break;
		heap_place(h, w, i, h->a[c]);
		i = c;
	}
	heap_place(h, w, i, x);
}

static void heap_push(struct radix_tree *t, int w, struct radix_node *x)
{
	struct radix_heap *h = &t->heap[w];
	radix_assert(h->n < h->cap);
	heap_place(h, w, h->n++, x);
	heap_up(h, w, h->n - 1);
}

static void heap_remove(struct radix_tree *t, int w, struct radix_node *x)
{
	struct radix_heap *h = &t->heap[w];
	size_t i = x->hidx[w];
	struct radix_node *last = h->a[--h->n];
	x->hidx[w] = HEAP_NONE;
	if (i < h->n) {
		heap_place(h, w, i, last);
		heap_up(h, w, i);
		heap_down(h, w, last->hidx[w]);
	}
}

/* Room in every heap for every node plus `extra`: pushes never fail. */
static int tree_reserve(struct radix_tree *t, size_t extra)
{
	size_t need = t->st.nodes + extra;
	if (need >= HEAP_NONE)
		return -ENOMEM; /* heap indexes are 32-bit */
	for (int w = 0; w < HEAP_COUNT; w++) {
		struct radix_heap *h = &t->heap[w];
		if (h->cap >= need)
			continue;
		size_t cap = h->cap * 2 > need ? h->cap * 2 : need + 16;
		struct radix_node **a = realloc(h->a, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		h->a = a;
		h->cap = cap;
	}
	return 0;
}

/* ---- accounting ---- */

static bool want_heap(const struct radix_tree *t, const struct radix_node *n, int w)
{
	switch (w) {
	case HEAP_DEV:
		/* Without a host copy the node may be deleted with its subtree,
		 * which a pin below it forbids. */
		return n->on[RADIX_DEV] && !n->ndev_kids && !n->lock_ref &&
		       (n->on[RADIX_HOST] || !n->host_pin);
	case HEAP_HOST:
		return n->on[RADIX_HOST] && !n->on[RADIX_DEV] && !n->nkids && !n->lock_ref &&
		       !n->host_pin && host_droppable(t, n);
	default:
		return n->mamba[RADIX_HOST] != RADIX_NO_SLOT && !n->host_pin;
	}
}

static void stats_add(struct radix_stats *s, const struct radix_tree *t,
		      const struct radix_node *n, bool add)
{
	size_t np = n->npages;
	size_t dev = n->on[RADIX_DEV] ? np : 0;
	size_t host = n->on[RADIX_HOST] ? np : 0;
	size_t dev_ev = n->lock_ref ? 0 : dev;
	size_t host_ev = !dev && !n->lock_ref && !n->host_pin && host_droppable(t, n) ? host : 0;
	size_t md = n->mamba[RADIX_DEV] != RADIX_NO_SLOT;
	size_t mh = n->mamba[RADIX_HOST] != RADIX_NO_SLOT;

	if (add) {
		s->nodes++;
		s->pages += np;
		s->dev_pages += dev;
		s->host_pages += host;
		s->dev_evictable += dev_ev;
		s->host_evictable += host_ev;
		s->mamba_dev += md;
		s->mamba_host += mh;
	} else {
		s->nodes--;
		s->pages -= np;
		s->dev_pages -= dev;
		s->host_pages -= host;
		s->dev_evictable -= dev_ev;
		s->host_evictable -= host_ev;
		s->mamba_dev -= md;
		s->mamba_host -= mh;
	}
}

static void node_account(struct radix_tree *t, const struct radix_node *n, bool add)
{
	stats_add(&t->st, t, n, add);
}

static void node_begin(struct radix_tree *t, struct radix_node *n)
{
	if (n != t->root)
		node_account(t, n, false);
}

static void node_end(struct radix_tree *t, struct radix_node *n)
{
	if (n == t->root)
		return;
	node_account(t, n, true);
	for (int w = 0; w < HEAP_COUNT; w++) {
		bool want = want_heap(t, n, w);
		bool in = n->hidx[w] != HEAP_NONE;
		if (want && !in) {
			heap_push(t, w, n);
		} else if (!want && in) {
			heap_remove(t, w, n);
		} else if (in) {
			heap_up(&t->heap[w], w, n->hidx[w]);
			heap_down(&t->heap[w], w, n->hidx[w]);
		}
	}
}

/* Out of the counters and every heap, for good. */
static void node_detach(struct radix_tree *t, struct radix_node *n)
{
	node_account(t, n, false);
	for (int w = 0; w < HEAP_COUNT; w++)
		if (n->hidx[w] != HEAP_NONE)
			heap_remove(t, w, n);
}

/* Key raised to now: only a downward sift can be needed. */
static void node_touch(struct radix_tree *t, struct radix_node *n, uint64_t now, bool hit)
{
	n->last_access = now;
	n->hits += hit;
	for (int w = 0; w < HEAP_COUNT; w++)
		if (n->hidx[w] != HEAP_NONE)
			heap_down(&t->heap[w], w, n->hidx[w]);
}

/* Give n the tier's slots (src: n->npages entries). */
static void node_set_tier(struct radix_tree *t, struct radix_node *n, enum radix_tier tier,
			  const uint64_t *src)
{
	struct radix_node *p = n->parent;
	node_begin(t, n);
	node_begin(t, p);
	memcpy(n->slots[tier], src, n->npages * sizeof(uint64_t));
	n->on[tier] = true;
	if (tier == RADIX_DEV)
		p->ndev_kids++;
	node_end(t, n);
	node_end(t, p);
}

/* ---- create / destroy ---- */

int radix_create(const struct radix_opts *o, struct radix_tree **out)
{
	struct radix_tree *t;
	int rc;

	if (!out)
		return util_fail(-EINVAL, "radix_create: out is NULL");
	*out = NULL;
	if (!o)
		return util_fail(-EINVAL, "radix_create: opts is NULL");
	if (o->page_size == 0 || o->page_size > (1u << 24))
		return util_fail(-EINVAL, "radix tree: page_size %u out of range [1, 2^24]",
				 o->page_size);
	if (o->write_policy != RADIX_WRITE_THROUGH &&
	    o->write_policy != RADIX_WRITE_THROUGH_SELECTIVE &&
	    o->write_policy != RADIX_WRITE_BACK)
		return util_fail(-EINVAL, "radix tree: unknown write policy %d",
				 (int)o->write_policy);
	t = calloc(1, sizeof(*t));
	if (!t)
		return util_fail(-ENOMEM, "radix tree: no memory");
	t->page_size = o->page_size;
	t->page_bytes = (size_t)o->page_size * sizeof(uint32_t);
	t->policy = o->write_policy;
	t->keep_unbacked = o->host_keep_unbacked;
	if (o->seed) {
		t->has_seed = true;
		t->seed = *o->seed;
	}
	t->root = node_new(t, 0);
	if (!t->root) {
		rc = -ENOMEM;
		goto err;
	}
	rc = tree_reserve(t, 16);
	if (rc)
		goto err;
	*out = t;
	return 0;
err:
	radix_destroy(t);
	return util_fail(rc, "radix tree: no memory");
}

void radix_destroy(struct radix_tree *t)
{
	if (!t)
		return;
	struct radix_node *list = t->root;
	if (list)
		list->link = NULL;
	while (list) {
		struct radix_node *n = list;
		list = n->link;
		for (size_t i = 0; i < n->kcap; i++) {
			struct radix_node *c = n->kids[i].node;
			if (c) {
				c->link = list;
				list = c;
			}
		}
		free(n->kids);
		free(n);
	}
	for (int w = 0; w < HEAP_COUNT; w++)
		free(t->heap[w].a);
	free(t);
}

struct radix_node *radix_root(const struct radix_tree *t)
{
	return t ? t->root : NULL;
}

/* ---- split ---- */

/* Split x after its first k pages (0 < k < npages); returns the new upper
 * node or NULL (-ENOMEM, nothing changed). */
static struct radix_node *node_split(struct radix_tree *t, struct radix_node *x, size_t k)
{
	struct radix_node *parent = x->parent;
	struct radix_node *p;

	radix_assert(k > 0 && k < x->npages);
	if (tree_reserve(t, 1))
		return NULL;
	p = node_new(t, k);
	if (!p)
		return NULL;
	if (kids_reserve(p)) {
		free(p);
		return NULL;
	}
	node_begin(t, x);
	memcpy(p->tok, x->tok, k * t->page_bytes);
	memcpy(p->keys, x->keys, k * sizeof(*p->keys));
	for (int tier = 0; tier < 2; tier++) {
		p->on[tier] = x->on[tier];
		if (x->on[tier])
			memcpy(p->slots[tier], x->slots[tier], k * sizeof(uint64_t));
	}
	p->parent = parent;
	p->hash = x->hash;
	p->end = x->end - (x->npages - k);
	p->lock_ref = x->lock_ref;
	p->host_pin = x->host_pin;
	p->hits = x->hits;
	p->last_access = x->last_access;
	p->backed_up = x->backed_up;
	/* Same first page, same hash: P takes X's slot in the parent's table. */
	struct radix_kid *slot = &parent->kids[kids_slot_of(parent, x)];
	slot->node = p;
	slot->tok = p->tok;

	x->tok += k * t->page_size;
	x->keys += k;
	x->slots[RADIX_DEV] += k;
	x->slots[RADIX_HOST] += k;
	x->npages -= k;
	x->hash = page_hash(t, x->tok);
	x->parent = p;
	kids_add(p, x);
	t->st.splits++;
	node_end(t, x);
	node_end(t, p);
	return p;
}

/* Pages of x equal to q (x's first page is known equal), at most avail. */
static size_t common_pages(const struct radix_tree *t, const struct radix_node *x,
			   const uint32_t *q, size_t avail)
{
	size_t lim = x->npages < avail ? x->npages : avail;
	size_t ps = t->page_size;

	if (lim <= 1 || !memcmp(x->tok + ps, q + ps, (lim - 1) * t->page_bytes))
		return lim;
	size_t i = 1;
	while (i < lim && !memcmp(x->tok + i * ps, q + i * ps, t->page_bytes))
		i++;
	return i;
}

/*
 * Walk from the root along tokens, splitting the last node when the walk
 * ends or diverges inside it, touching every node passed. Returns the
 * deepest node whose end is a matched position; *pos gets that position.
 * On -ENOMEM (a split), stops at the node above.
 */
static int walk(struct radix_tree *t, const uint32_t *tokens, size_t want, bool hit,
		struct radix_match *m, struct radix_node **last, size_t *pos_out)
{
	uint64_t now = ++t->clock;
	struct radix_node *n = t->root;
	size_t pos = 0;
	int rc = 0;

	while (pos < want) {
		const uint32_t *q = tokens + pos * t->page_size;
		struct radix_node *c = kids_find(t, n, page_hash(t, q), q);
		if (!c)
			break;
		size_t k = common_pages(t, c, q, want - pos);
		bool partial = k < c->npages;
		if (partial) {
			struct radix_node *p = node_split(t, c, k);
			if (!p) {
				rc = util_fail(-ENOMEM, "radix tree: no memory to split a node");
				break;
			}
			c = p;
		}
		node_touch(t, c, now, hit);
		pos += k;
		n = c;
		if (m) {
			if (c->on[RADIX_DEV]) {
				m->dev_pages = pos;
				m->dev_node = c;
			}
			if (c->mamba[RADIX_DEV] != RADIX_NO_SLOT) {
				m->mamba_dev_pages = pos;
				m->mamba_dev_node = c;
			}
			if (c->mamba[RADIX_DEV] != RADIX_NO_SLOT ||
			    c->mamba[RADIX_HOST] != RADIX_NO_SLOT) {
				m->mamba_pages = pos;
				m->mamba_node = c;
			}
		}
		if (partial)
			break;
	}
	*last = n;
	*pos_out = pos;
	return rc;
}

#define RADIX_ENTER(t, allowed)                                                                \
	do {                                                                                   \
		if ((t)->in_cb != CB_NONE && (t)->in_cb != (allowed))                          \
			return util_fail(-EBUSY, "radix tree: %s called from a callback",      \
					 __func__);                                            \
	} while (0)

int radix_match(struct radix_tree *t, const uint32_t *tokens, size_t ntokens,
		struct radix_match *m)
{
	struct radix_node *last;
	size_t pos;
	int rc;

	if (!t || !m || (!tokens && ntokens))
		return util_fail(-EINVAL, "radix_match: NULL argument");
	RADIX_ENTER(t, CB_NONE);
	memset(m, 0, sizeof(*m));
	m->dev_node = m->mamba_node = m->mamba_dev_node = t->root;
	rc = walk(t, tokens, ntokens / t->page_size, true, m, &last, &pos);
	m->pages = pos;
	m->host_pages = pos - m->dev_pages;
	m->last_node = last;
	m->last_key = pos ? &last->keys[last->npages - 1] : NULL;
	radix_assert_expensive(t);
	return rc;
}

/* ---- insert ---- */

static int insert_common(struct radix_tree *t, const uint32_t *tokens, size_t ntokens,
			 enum radix_tier tier, const uint64_t *slots, const struct hc_key *keys,
			 size_t keys_from, struct radix_insert *res)
{
	size_t want = ntokens / t->page_size;
	struct radix_node *n, *fresh = NULL;
	size_t pos, kept;
	int rc;

	memset(res, 0, sizeof(*res));
	res->node = t->root;
	rc = walk(t, tokens, want, false, NULL, &n, &pos);
	if (rc)
		return rc;

	if (pos < want) {
		size_t np = want - pos;
		const struct hc_key *prior = node_prior(t, n);
		size_t nhash = np;

		if (tree_reserve(t, 1) || kids_reserve(n))
			return util_fail(-ENOMEM, "radix tree: no memory to insert");
		fresh = node_new(t, np);
		if (!fresh)
			return util_fail(-ENOMEM, "radix tree: no memory for a %zu-page node", np);
		memcpy(fresh->tok, tokens + pos * t->page_size, np * t->page_bytes);
		if (keys)
			nhash = keys_from > pos ? (keys_from < want ? keys_from : want) - pos : 0;
		if (nhash) {
			int64_t got = hc_key_chain(prior, fresh->tok, nhash * t->page_size,
						   t->page_size, fresh->keys, nhash);
			if (got != (int64_t)nhash) {
				free(fresh);
				return util_fail(got < 0 ? (int)got : -EIO,
						 "radix tree: hashing %zu page keys failed", nhash);
			}
			t->st.pages_hashed += nhash;
		}
		if (nhash < np)
			memcpy(fresh->keys + nhash, keys + (pos + nhash - keys_from),
			       (np - nhash) * sizeof(*keys));
		memcpy(fresh->slots[tier], slots + pos, np * sizeof(uint64_t));
		fresh->on[tier] = true;
		fresh->parent = n;
		fresh->hash = page_hash(t, fresh->tok);
		fresh->end = pos + np;
		fresh->last_access = t->clock;
	}

	/* Nothing can fail from here on. Device pages present only on host
	 * take the caller's slots; by prefix-closure they are the tail of
	 * the walked path. */
	kept = pos;
	if (tier == RADIX_DEV) {
		for (struct radix_node *x = n; x != t->root && !x->on[RADIX_DEV]; x = x->parent) {
			kept = x->end - x->npages;
			node_set_tier(t, x, RADIX_DEV, slots + kept);
		}
	}
	if (fresh) {
		node_begin(t, n);
		kids_add(n, fresh);
		node_end(t, n);
		node_end(t, fresh);
		n = fresh;
	}
	res->node = n;
	res->pages = want;
	res->kept = kept;
	res->new_pages = want - pos;
	return 0;
}

int radix_insert(struct radix_tree *t, const uint32_t *tokens, size_t ntokens,
		 const uint64_t *dev_slots, struct radix_insert *res)
{
	if (!t || !res || (ntokens && (!tokens || !dev_slots)))
		return util_fail(-EINVAL, "radix_insert: NULL argument");
	RADIX_ENTER(t, CB_NONE);
	int rc = insert_common(t, tokens, ntokens, RADIX_DEV, dev_slots, NULL, 0, res);
	radix_assert_expensive(t);
	return rc;
}

int radix_insert_host(struct radix_tree *t, const uint32_t *tokens, size_t ntokens,
		      const uint64_t *host_slots, const struct hc_key *keys, size_t keys_from,
		      struct radix_insert *res)
{
	if (!t || !res || (ntokens && (!tokens || !host_slots)))
		return util_fail(-EINVAL, "radix_insert_host: NULL argument");
	RADIX_ENTER(t, CB_NONE);
	if (keys && keys_from > ntokens / t->page_size)
		return util_fail(-EINVAL, "radix_insert_host: keys_from %zu past the last page",
				 keys_from);
	int rc = insert_common(t, tokens, ntokens, RADIX_HOST, host_slots, keys, keys_from, res);
	radix_assert_expensive(t);
	return rc;
}

/* ---- ranges ---- */

/* Top node of "npages pages ending at n", or NULL when the range does not
 * start at a node boundary. */
static struct radix_node *range_top(const struct radix_tree *t, struct radix_node *n,
				    size_t npages)
{
	if (!npages || n == t->root || npages > n->end)
		return NULL;
	size_t start = n->end - npages;
	while (n->end - n->npages > start)
		n = n->parent;
	return n->end - n->npages == start ? n : NULL;
}

int64_t radix_set_slots(struct radix_tree *t, struct radix_node *n, size_t npages,
			enum radix_tier tier, const uint64_t *slots, bool *taken)
{
	struct radix_node *top;
	int64_t got = 0;

	if (!t || !n || (tier != RADIX_DEV && tier != RADIX_HOST) || (npages && !slots))
		return util_fail(-EINVAL, "radix_set_slots: bad argument");
	RADIX_ENTER(t, CB_NONE);
	if (!npages)
		return 0;
	top = range_top(t, n, npages);
	if (!top)
		return util_fail(-EINVAL, "radix_set_slots: %zu pages ending at page %zu do not "
				 "start at a node boundary", npages, n->end);
	if (tier == RADIX_DEV && !top->on[RADIX_DEV] && top->parent != t->root &&
	    !top->parent->on[RADIX_DEV])
		return util_fail(-EINVAL, "radix_set_slots: the page before the range is not "
				 "on device");
	size_t start = n->end - npages;
	if (taken)
		memset(taken, 0, npages * sizeof(*taken));
	for (struct radix_node *x = n;; x = x->parent) {
		size_t off = x->end - x->npages - start;
		if (!x->on[tier]) {
			node_set_tier(t, x, tier, slots + off);
			if (taken)
				memset(taken + off, 1, x->npages * sizeof(*taken));
			got += (int64_t)x->npages;
		}
		if (x == top)
			break;
	}
	radix_assert_expensive(t);
	return got;
}

int radix_set_backed_up(struct radix_tree *t, struct radix_node *n, size_t npages)
{
	struct radix_node *top;

	if (!t || !n)
		return util_fail(-EINVAL, "radix_set_backed_up: NULL argument");
	RADIX_ENTER(t, CB_NONE);
	if (!npages)
		return 0;
	top = range_top(t, n, npages);
	if (!top)
		return util_fail(-EINVAL, "radix_set_backed_up: range does not start at a node "
				 "boundary");
	for (struct radix_node *x = n;; x = x->parent) {
		node_begin(t, x);
		x->backed_up = true;
		node_end(t, x);
		if (x == top)
			break;
	}
	radix_assert_expensive(t);
	return 0;
}

int64_t radix_path_slots(const struct radix_node *n, size_t first_page, enum radix_tier tier,
			 uint64_t *out)
{
	if (!n || (tier != RADIX_DEV && tier != RADIX_HOST) || first_page > n->end ||
	    (first_page < n->end && !out))
		return util_fail(-EINVAL, "radix_path_slots: bad argument");
	for (const struct radix_node *x = n; x->end > first_page; x = x->parent) {
		size_t begin = x->end - x->npages;
		size_t skip = begin < first_page ? first_page - begin : 0;
		if (!x->on[tier])
			return -ENOENT;
		memcpy(out + (begin + skip - first_page), x->slots[tier] + skip,
		       (x->npages - skip) * sizeof(uint64_t));
	}
	return (int64_t)(n->end - first_page);
}

/* ---- locks and pins ---- */

static int path_count(struct radix_tree *t, struct radix_node *n, bool lock, int delta)
{
	if (!t || !n)
		return util_fail(-EINVAL, "radix tree: NULL node");
	RADIX_ENTER(t, CB_NONE);
	if (n == t->root)
		return 0;
	int32_t cur = lock ? n->lock_ref : n->host_pin;
	if (delta < 0 && cur <= 0)
		return util_fail(-EINVAL, "radix tree: %s of a node that holds none",
				 lock ? "unlock" : "host unpin");
	/* The root-side count is the largest on the path. */
	int32_t top = 0;
	for (struct radix_node *x = n; x != t->root; x = x->parent)
		top = lock ? x->lock_ref : x->host_pin;
	if (delta > 0 && top == INT32_MAX)
		return util_fail(-EOVERFLOW, "radix tree: lock count overflow");
	for (struct radix_node *x = n; x != t->root; x = x->parent) {
		node_begin(t, x);
		if (lock)
			x->lock_ref += delta;
		else
			x->host_pin += delta;
		node_end(t, x);
	}
	radix_assert_expensive(t);
	return 0;
}

int radix_lock(struct radix_tree *t, struct radix_node *n)
{
	return path_count(t, n, true, 1);
}

int radix_unlock(struct radix_tree *t, struct radix_node *n)
{
	return path_count(t, n, true, -1);
}

int radix_pin_host(struct radix_tree *t, struct radix_node *n)
{
	return path_count(t, n, false, 1);
}

int radix_unpin_host(struct radix_tree *t, struct radix_node *n)
{
	return path_count(t, n, false, -1);
}

/* ---- Mamba ---- */

int radix_mamba_set(struct radix_tree *t, struct radix_node *n, enum radix_tier tier,
		    uint64_t slot)
{
	if (!t || !n || n == t->root || (tier != RADIX_DEV && tier != RADIX_HOST) ||
	    slot == RADIX_NO_SLOT)
		return util_fail(-EINVAL, "radix_mamba_set: bad argument");
	RADIX_ENTER(t, CB_NONE);
	if (tier == RADIX_DEV && !n->on[RADIX_DEV])
		return util_fail(-EINVAL, "radix_mamba_set: device state on a node not on device");
	if (n->mamba[tier] != RADIX_NO_SLOT)
		return util_fail(-EEXIST, "radix_mamba_set: the node already holds a state");
	node_begin(t, n);
	n->mamba[tier] = slot;
	node_end(t, n);
	radix_assert_expensive(t);
	return 0;
}

int radix_mamba_clear(struct radix_tree *t, struct radix_node *n, enum radix_tier tier,
		      uint64_t *slot)
{
	if (!t || !n || !slot || n == t->root || (tier != RADIX_DEV && tier != RADIX_HOST))
		return util_fail(-EINVAL, "radix_mamba_clear: bad argument");
	RADIX_ENTER(t, CB_NONE);
	if (n->mamba[tier] == RADIX_NO_SLOT)
		return -ENOENT;
	node_begin(t, n);
	*slot = n->mamba[tier];
	n->mamba[tier] = RADIX_NO_SLOT;
	node_end(t, n);
	radix_assert_expensive(t);
	return 0;
}

/* ---- eviction ---- */

static void cb_free_slots(struct radix_tree *t, const struct radix_evict_ops *ops,
			  enum radix_tier tier, const uint64_t *slots, size_t n)
{
	int saved = t->in_cb;
	t->in_cb = CB_FREE;
	ops->free_slots(ops->arg, tier, slots, n);
	t->in_cb = saved;
}

static void cb_free_mamba(struct radix_tree *t, const struct radix_evict_ops *ops,
			  enum radix_tier tier, uint64_t slot)
{
	int saved = t->in_cb;
	t->in_cb = CB_FREE;
	ops->free_mamba(ops->arg, tier, slot);
	t->in_cb = saved;
}

/* Delete x and everything below it, handing every slot and state back.
 * Free callbacks may not call into the tree (CB_FREE), so each node can be
 * detached, reported and freed in one pass. */
static void subtree_delete(struct radix_tree *t, struct radix_node *x,
			   const struct radix_evict_ops *ops)
{
	struct radix_node *parent = x->parent;
	struct radix_node *list = x;

	node_begin(t, parent);
	kids_del(parent, x);
	node_end(t, parent);
	x->link = NULL;
	while (list) {
		struct radix_node *y = list;
		list = y->link;
		node_detach(t, y);
		for (size_t i = 0; i < y->kcap; i++) {
			struct radix_node *c = y->kids[i].node;
			if (c) {
				c->link = list;
				list = c;
			}
		}
		/* States first: a state never outlives the pages it sits on. */
		for (int tier = 0; tier < 2; tier++)
			if (y->mamba[tier] != RADIX_NO_SLOT)
				cb_free_mamba(t, ops, tier, y->mamba[tier]);
		for (int tier = 0; tier < 2; tier++)
			if (y->on[tier])
				cb_free_slots(t, ops, tier, y->slots[tier], y->npages);
		free(y->kids);
		free(y);
	}
}

static void demote(struct radix_tree *t, struct radix_node *x, const struct radix_evict_ops *ops)
{
	struct radix_node *p = x->parent;
	uint64_t state = x->mamba[RADIX_DEV];

	node_begin(t, x);
	node_begin(t, p);
	x->on[RADIX_DEV] = false;
	x->mamba[RADIX_DEV] = RADIX_NO_SLOT;
	p->ndev_kids--;
	node_end(t, x);
	node_end(t, p);
	if (state != RADIX_NO_SLOT)
		cb_free_mamba(t, ops, RADIX_DEV, state);
	cb_free_slots(t, ops, RADIX_DEV, x->slots[RADIX_DEV], x->npages);
}

static void write_back(struct radix_tree *t, struct radix_node *x,
		       const struct radix_evict_ops *ops)
{
	uint64_t state = RADIX_NO_SLOT;
	bool want_state = x->mamba[RADIX_DEV] != RADIX_NO_SLOT &&
			  x->mamba[RADIX_HOST] == RADIX_NO_SLOT;
	int rc;

	t->in_cb = CB_WRITE_BACK;
	rc = ops->write_back(ops->arg, x, x->slots[RADIX_HOST], want_state ? &state : NULL);
	t->in_cb = CB_NONE;
	if (rc) {
		t->st.write_back_failures++;
		return;
	}
	node_begin(t, x);
	x->on[RADIX_HOST] = true;
	if (want_state && state != RADIX_NO_SLOT && x->mamba[RADIX_HOST] == RADIX_NO_SLOT)
		x->mamba[RADIX_HOST] = state;
	node_end(t, x);
}

static int check_ops(const struct radix_tree *t, const struct radix_evict_ops *ops,
		     bool need_wb)
{
	if (!t || !ops || !ops->free_slots)
		return util_fail(-EINVAL, "radix eviction: free_slots callback missing");
	if (!ops->free_mamba && (t->st.mamba_dev || t->st.mamba_host))
		return util_fail(-EINVAL, "radix eviction: free_mamba callback missing");
	if (need_wb && t->policy == RADIX_WRITE_BACK && !ops->write_back)
		return util_fail(-EINVAL, "radix eviction: write_back callback missing");
	return 0;
}

int64_t radix_evict_device(struct radix_tree *t, size_t npages, const struct radix_evict_ops *ops)
{
	size_t freed = 0;
	int rc = check_ops(t, ops, true);

	if (rc)
		return rc;
	RADIX_ENTER(t, CB_NONE);
	while (freed < npages && t->heap[HEAP_DEV].n) {
		struct radix_node *x = t->heap[HEAP_DEV].a[0];
		size_t np = x->npages;
		if (!x->on[RADIX_HOST] && t->policy == RADIX_WRITE_BACK)
			write_back(t, x, ops);
		/* The write-back callback may have evicted host pages, but
		 * never x: it is on device. */
		radix_assert(t->heap[HEAP_DEV].a[0] == x);
		if (x->on[RADIX_HOST])
			demote(t, x, ops);
		else
			subtree_delete(t, x, ops);
		freed += np;
	}
	radix_assert_expensive(t);
	return (int64_t)freed;
}

int64_t radix_evict_host(struct radix_tree *t, size_t npages, const struct radix_evict_ops *ops)
{
	size_t freed = 0;
	int rc = check_ops(t, ops, false);

	if (rc)
		return rc;
	RADIX_ENTER(t, CB_WRITE_BACK);
	while (freed < npages && t->heap[HEAP_HOST].n) {
		struct radix_node *x = t->heap[HEAP_HOST].a[0];
		freed += x->npages;
		subtree_delete(t, x, ops);
	}
	radix_assert_expensive(t);
	return (int64_t)freed;
}

int64_t radix_evict_mamba_host(struct radix_tree *t, size_t nstates,
			       const struct radix_evict_ops *ops)
{
	size_t freed = 0;
	int rc = check_ops(t, ops, false);

	if (rc)
		return rc;
	RADIX_ENTER(t, CB_WRITE_BACK);
	while (freed < nstates && t->heap[HEAP_MAMBA].n) {
		struct radix_node *x = t->heap[HEAP_MAMBA].a[0];
		uint64_t state = x->mamba[RADIX_HOST];
		node_begin(t, x);
		x->mamba[RADIX_HOST] = RADIX_NO_SLOT;
		node_end(t, x);
		cb_free_mamba(t, ops, RADIX_HOST, state);
		freed++;
		if (!x->nkids && !x->on[RADIX_DEV] && !x->lock_ref && !x->host_pin)
			subtree_delete(t, x, ops);
	}
	radix_assert_expensive(t);
	return (int64_t)freed;
}

/* ---- inspection ---- */

void radix_node_info(const struct radix_node *n, struct radix_node_info *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->mamba[0] = o->mamba[1] = RADIX_NO_SLOT;
	if (!n)
		return;
	o->parent = n->parent;
	o->pages = n->npages;
	o->end = n->end;
	o->children = n->nkids;
	o->tokens = n->tok;
	o->keys = n->keys;
	o->dev = n->on[RADIX_DEV] ? n->slots[RADIX_DEV] : NULL;
	o->host = n->on[RADIX_HOST] ? n->slots[RADIX_HOST] : NULL;
	o->lock_ref = n->lock_ref;
	o->host_pins = n->host_pin;
	o->hits = n->hits;
	o->last_access = n->last_access;
	o->backed_up = n->backed_up;
	o->mamba[0] = n->mamba[0];
	o->mamba[1] = n->mamba[1];
}

void radix_stats(const struct radix_tree *t, struct radix_stats *out)
{
	if (!out)
		return;
	if (!t) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = t->st;
}

size_t radix_dev_evictable(const struct radix_tree *t)
{
	return t ? t->st.dev_evictable : 0;
}

struct radix_node *radix_dev_lru(const struct radix_tree *t)
{
	return t && t->heap[HEAP_DEV].n ? t->heap[HEAP_DEV].a[0] : NULL;
}

size_t radix_host_evictable(const struct radix_tree *t)
{
	return t ? t->st.host_evictable : 0;
}

/* ---- invariant checker ---- */

#define CHECK(cond, ...)                                                                       \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			rc = util_fail(-EUCLEAN, "radix_check: " __VA_ARGS__);                 \
			goto out;                                                              \
		}                                                                              \
	} while (0)

static int check_heaps(const struct radix_tree *t, const size_t members[HEAP_COUNT])
{
	int rc = 0;
	for (int w = 0; w < HEAP_COUNT; w++) {
		const struct radix_heap *h = &t->heap[w];
		CHECK(h->n == members[w], "heap %d holds %zu nodes, %zu are candidates", w, h->n,
		      members[w]);
		CHECK(h->cap >= t->st.nodes, "heap %d capacity %zu below %zu nodes", w, h->cap,
		      t->st.nodes);
		for (size_t i = 0; i < h->n; i++) {
			CHECK(h->a[i]->hidx[w] == i, "heap %d entry %zu has index %u", w, i,
			      h->a[i]->hidx[w]);
			CHECK(i == 0 || !heap_less(h->a[i], h->a[(i - 1) / 2]),
			      "heap %d order broken at %zu", w, i);
		}
	}
out:
	return rc;
}

static int check_node(const struct radix_tree *t, const struct radix_node *x,
		      struct radix_stats *s, size_t members[HEAP_COUNT], struct hc_key *tmp)
{
	const struct radix_node *p = x->parent;
	size_t nk = 0, ndev = 0;
	int64_t lock_sum = 0, pin_sum = 0;
	int rc = 0;

	for (size_t i = 0; i < x->kcap; i++) {
		const struct radix_node *c = x->kids[i].node;
		if (!c)
			continue;
		nk++;
		ndev += c->on[RADIX_DEV];
		lock_sum += c->lock_ref;
		pin_sum += c->host_pin;
		CHECK(c->parent == x, "node %" PRIu64 ": child %" PRIu64 " has another parent",
		      x->id, c->id);
		CHECK(x->kids[i].hash == c->hash && x->kids[i].tok == c->tok,
		      "node %" PRIu64 ": stale entry of a child", x->id);
	}
	CHECK(nk == x->nkids, "node %" PRIu64 ": %zu children, counted %zu", x->id, nk,
	      x->nkids);
	CHECK(ndev == x->ndev_kids, "node %" PRIu64 ": %zu device children, counted %zu", x->id,
	      ndev, x->ndev_kids);
	CHECK(x->kcap == 0 ? !x->kids && !nk
			   : (x->kcap & (x->kcap - 1)) == 0 && nk * 4 <= x->kcap * 3,
	      "node %" PRIu64 ": bad child table (cap %zu, %zu entries)", x->id, x->kcap, nk);
	/* The root carries no counts of its own. */
	CHECK(x == t->root || x->lock_ref >= lock_sum,
	      "node %" PRIu64 ": lock ref %d below its children's %" PRId64, x->id, x->lock_ref,
	      lock_sum);
	CHECK(x == t->root || x->host_pin >= pin_sum,
	      "node %" PRIu64 ": host pins %d below its children's %" PRId64, x->id, x->host_pin,
	      pin_sum);
	if (x == t->root) {
		CHECK(!x->npages && !x->end && !x->on[0] && !x->on[1] && !x->lock_ref &&
		      !x->host_pin && x->mamba[0] == RADIX_NO_SLOT &&
		      x->mamba[1] == RADIX_NO_SLOT, "the root holds state");
		for (int w = 0; w < HEAP_COUNT; w++)
			CHECK(x->hidx[w] == HEAP_NONE, "the root is in heap %d", w);
		return 0;
	}
	CHECK(p, "node %" PRIu64 ": no parent", x->id);
	CHECK(kids_find(t, p, x->hash, x->tok) == x,
	      "node %" PRIu64 ": not found in its parent's table", x->id);
	CHECK(x->npages >= 1, "node %" PRIu64 ": empty", x->id);
	CHECK(x->end == p->end + x->npages, "node %" PRIu64 ": end %zu, parent ends at %zu + %zu",
	      x->id, x->end, p->end, x->npages);
	CHECK(x->hash == page_hash(t, x->tok), "node %" PRIu64 ": hash is not its first page's",
	      x->id);
	CHECK(x->on[RADIX_DEV] || x->on[RADIX_HOST], "node %" PRIu64 ": on no tier", x->id);
	CHECK(!x->on[RADIX_DEV] || p == t->root || p->on[RADIX_DEV],
	      "node %" PRIu64 ": on device under a parent that is not", x->id);
	CHECK(x->lock_ref >= 0 && x->host_pin >= 0, "node %" PRIu64 ": negative count", x->id);
	CHECK(x->mamba[RADIX_DEV] == RADIX_NO_SLOT || x->on[RADIX_DEV],
	      "node %" PRIu64 ": device Mamba state without device pages", x->id);
	CHECK(p == t->root || p->last_access >= x->last_access,
	      "node %" PRIu64 ": accessed after its parent", x->id);
	for (int w = 0; w < HEAP_COUNT; w++) {
		bool want = want_heap(t, x, w);
		size_t i = x->hidx[w];
		CHECK(want == (i != HEAP_NONE), "node %" PRIu64 ": heap %d membership %d, want %d",
		      x->id, w, i != HEAP_NONE, want);
		CHECK(i == HEAP_NONE || (i < t->heap[w].n && t->heap[w].a[i] == x),
		      "node %" PRIu64 ": heap %d index %zu is not it", x->id, w, i);
		members[w] += want;
	}
	int64_t got = hc_key_chain(node_prior(t, p), x->tok, x->npages * t->page_size,
				   t->page_size, tmp, x->npages);
	CHECK(got == (int64_t)x->npages, "node %" PRIu64 ": hashing failed", x->id);
	CHECK(!memcmp(tmp, x->keys, x->npages * sizeof(*tmp)),
	      "node %" PRIu64 ": page keys do not chain from the parent", x->id);

	stats_add(s, t, x, true);
out:
	return rc;
}

int radix_check(const struct radix_tree *t)
{
	struct radix_stats s = {0};
	size_t members[HEAP_COUNT] = {0};
	struct radix_node **stack = NULL;
	struct hc_key *tmp = NULL;
	size_t sp = 0, cap = 0, tmp_cap = 0;
	int rc = 0;

	if (!t || !t->root)
		return util_fail(-EINVAL, "radix_check: NULL tree");
	/* Explicit stack: chains of single-child nodes can be deep. */
	cap = 64;
	stack = malloc(cap * sizeof(*stack));
	if (!stack)
		return -ENOMEM;
	stack[sp++] = t->root;
	while (sp) {
		struct radix_node *x = stack[--sp];
		if (x->npages > tmp_cap) {
			free(tmp);
			tmp_cap = x->npages;
			tmp = malloc(tmp_cap * sizeof(*tmp));
			if (!tmp) {
				rc = -ENOMEM;
				goto out;
			}
		}
		CHECK(s.nodes <= t->st.nodes, "more nodes reachable than counted (%zu)",
		      t->st.nodes);
		rc = check_node(t, x, &s, members, tmp);
		if (rc)
			goto out;
		for (size_t i = 0; i < x->kcap; i++) {
			if (!x->kids[i].node)
				continue;
			if (sp == cap) {
				struct radix_node **ns = realloc(stack, 2 * cap * sizeof(*stack));
				if (!ns) {
					rc = -ENOMEM;
					goto out;
				}
				stack = ns;
				cap *= 2;
			}
			stack[sp++] = x->kids[i].node;
		}
	}
	CHECK(s.nodes == t->st.nodes && s.pages == t->st.pages &&
	      s.dev_pages == t->st.dev_pages && s.host_pages == t->st.host_pages &&
	      s.mamba_dev == t->st.mamba_dev && s.mamba_host == t->st.mamba_host,
	      "totals differ from a recount (nodes %zu/%zu pages %zu/%zu dev %zu/%zu host %zu/%zu)",
	      t->st.nodes, s.nodes, t->st.pages, s.pages, t->st.dev_pages, s.dev_pages,
	      t->st.host_pages, s.host_pages);
	CHECK(s.dev_evictable == t->st.dev_evictable && s.host_evictable == t->st.host_evictable,
	      "evictable totals differ from a recount (dev %zu/%zu host %zu/%zu)",
	      t->st.dev_evictable, s.dev_evictable, t->st.host_evictable, s.host_evictable);
	rc = check_heaps(t, members);
out:
	free(stack);
	free(tmp);
	return rc;
}
