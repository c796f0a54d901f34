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
 * Files
 * -----
 * This file holds what changes the tree's shape and what reads it; the
 * children table (radix_kids.c), the LRU heaps and the counters
 * (radix_lru.c), eviction (radix_evict.c) and the invariant checker
 * (radix_check.c) live beside it, sharing radix_internal.h.
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
#include "cache/radix_internal.h"
#include "util/fault.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Key raised to now: only a downward sift can be needed. */
static inline void radix_node_touch(struct radix_tree *t, struct radix_node *n, uint64_t now,
				    bool hit)
{
	n->last_access = now;
	n->hits += hit;
	for (int w = 0; w < HEAP_COUNT; w++)
		if (n->hidx[w] != HEAP_NONE)
			radix_heap_down(&t->heap[w], w, n->hidx[w]);
}

/* ---- nodes ---- */

static struct radix_node *node_new(struct radix_tree *t, size_t np)
{
	size_t per = 2 * sizeof(uint64_t) + sizeof(struct hc_key) + t->page_bytes;
	struct radix_node *n;

	if (np > (SIZE_MAX - sizeof(*n)) / per)
		return NULL;
	n = util_fault_malloc(sizeof(*n) + np * per);
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

/* Give n the tier's slots (src: n->npages entries). */
static void node_set_tier(struct radix_tree *t, struct radix_node *n, enum radix_tier tier,
			  const uint64_t *src)
{
	struct radix_node *p = n->parent;
	radix_node_begin(t, n);
	radix_node_begin(t, p);
	memcpy(n->slots[tier], src, n->npages * sizeof(uint64_t));
	n->on[tier] = true;
	if (tier == RADIX_DEV)
		p->ndev_kids++;
	radix_node_end(t, n);
	radix_node_end(t, p);
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
	    o->write_policy != RADIX_WRITE_THROUGH_SELECTIVE && o->write_policy != RADIX_WRITE_BACK)
		return util_fail(-EINVAL, "radix tree: unknown write policy %d",
				 (int)o->write_policy);
	t = util_fault_calloc(1, sizeof(*t));
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
	rc = radix_tree_reserve(t, 16);
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
	if (radix_tree_reserve(t, 1))
		return NULL;
	p = node_new(t, k);
	if (!p)
		return NULL;
	if (radix_kids_reserve(p)) {
		free(p);
		return NULL;
	}
	radix_node_begin(t, x);
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
	struct radix_kid *slot = &parent->kids[radix_kids_slot_of(parent, x)];
	slot->node = p;
	slot->tok = p->tok;

	x->tok += k * t->page_size;
	x->keys += k;
	x->slots[RADIX_DEV] += k;
	x->slots[RADIX_HOST] += k;
	x->npages -= k;
	x->hash = radix_page_hash(t, x->tok);
	x->parent = p;
	radix_kids_add(p, x);
	t->st.splits++;
	radix_node_end(t, x);
	radix_node_end(t, p);
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
		struct radix_node *c = radix_kids_find(t, n, radix_page_hash(t, q), q);
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
		radix_node_touch(t, c, now, hit);
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

int radix_match(struct radix_tree *t, const uint32_t *tokens, size_t ntokens, struct radix_match *m)
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
		const struct hc_key *prior = radix_node_prior(t, n);
		size_t nhash = np;

		if (radix_tree_reserve(t, 1) || radix_kids_reserve(n))
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
		fresh->hash = radix_page_hash(t, fresh->tok);
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
		radix_node_begin(t, n);
		radix_kids_add(n, fresh);
		radix_node_end(t, n);
		radix_node_end(t, fresh);
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
static struct radix_node *range_top(const struct radix_tree *t, struct radix_node *n, size_t npages)
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
		return util_fail(-EINVAL,
				 "radix_set_slots: %zu pages ending at page %zu do not "
				 "start at a node boundary",
				 npages, n->end);
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
		radix_node_begin(t, x);
		x->backed_up = true;
		radix_node_end(t, x);
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
		radix_node_begin(t, x);
		if (lock)
			x->lock_ref += delta;
		else
			x->host_pin += delta;
		radix_node_end(t, x);
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

int radix_mamba_set(struct radix_tree *t, struct radix_node *n, enum radix_tier tier, uint64_t slot)
{
	if (!t || !n || n == t->root || (tier != RADIX_DEV && tier != RADIX_HOST) ||
	    slot == RADIX_NO_SLOT)
		return util_fail(-EINVAL, "radix_mamba_set: bad argument");
	RADIX_ENTER(t, CB_NONE);
	if (tier == RADIX_DEV && !n->on[RADIX_DEV])
		return util_fail(-EINVAL, "radix_mamba_set: device state on a node not on device");
	if (n->mamba[tier] != RADIX_NO_SLOT)
		return util_fail(-EEXIST, "radix_mamba_set: the node already holds a state");
	radix_node_begin(t, n);
	n->mamba[tier] = slot;
	radix_node_end(t, n);
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
	radix_node_begin(t, n);
	*slot = n->mamba[tier];
	n->mamba[tier] = RADIX_NO_SLOT;
	radix_node_end(t, n);
	radix_assert_expensive(t);
	return 0;
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
