/*
 * cache/radix — the page-aligned radix tree over token ids that indexes the
 * L1 (device) and L2 (host) tiers of one engine instance (internal).
 *
 * A path from the root spells a token sequence; every edge holds whole
 * pages (page_size tokens), so a partial last page is never inserted or
 * matched. Each node records, per page, where the page lives: a device slot
 * (L1), a host slot (L2), or both. Slots are opaque uint64 handles owned by
 * the caller's pools; the tree stores them, hands them back through
 * callbacks when it lets go of them, and never frees a pool itself.
 *
 *   root --- [sys prompt: 8 pages, dev+host] -+- [turn A: 4 pages, dev]
 *                                             `- [turn B: 6 pages, host]
 *
 * Shape rules the tree keeps (radix_check() verifies them):
 *   - every node other than the root holds >= 1 page and is on device,
 *     on host, or both (a node with neither is deleted);
 *   - device residency is prefix-closed: a node on device has a parent on
 *     device (or the root). So a match is "device prefix, then host
 *     prefix", each contiguous, and nothing needs re-checking per page;
 *   - lock refs and host pins count on the whole path root..node: a
 *     parent's count is at least the sum of its children's.
 *
 * Page keys: each node keeps the chained SHA-256 key of each of its pages
 * (hicache/key.h), computed once when the page enters the tree, chained
 * from the parent's last key (the tree's namespace seed at the root).
 * A split divides the key array; keys are never recomputed.
 *
 * Node pointers: returned nodes stay valid until the node is deleted,
 * which only eviction does (radix_evict_*). A split keeps the node that
 * ends where the old one ended (same pointer, fewer pages), so a pointer
 * always names "the pages ending at this position". Hold a lock (device
 * node) or a host pin (host node) to keep a node alive across calls.
 *
 * Errors: 0 (or a count) or a negative errno; messages via hc_last_error().
 *
 * Thread-safety: none. A tree, and every pointer it hands out, is used
 * under the cache controller's lock; no two calls on one tree may overlap.
 * Callbacks run on the calling thread, inside the call (see
 * struct radix_evict_ops for what they may call back into).
 */
#ifndef HC_SRC_CACHE_RADIX_H
#define HC_SRC_CACHE_RADIX_H

#include <hicache/key.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "No slot": an absent Mamba state, an unset out-parameter. */
#define RADIX_NO_SLOT UINT64_MAX

enum radix_tier {
	RADIX_DEV = 0,  /* L1: device pool */
	RADIX_HOST = 1, /* L2: host pool */
};

/* What radix_evict_device() does with a device leaf that has no host copy
 * (SGLang's HiCache write policies; docs/FLEET.md). The controller uses the same enum to decide
 * when to copy device pages to host. */
enum radix_write_policy {
	RADIX_WRITE_THROUGH,           /* backed up on insert; unbacked leaf: deleted */
	RADIX_WRITE_THROUGH_SELECTIVE, /* backed up once hot; unbacked leaf: deleted */
	RADIX_WRITE_BACK,              /* unbacked leaf: copied to host, then demoted */
};

struct radix_opts {
	uint32_t page_size; /* tokens per page, >= 1 */
	enum radix_write_policy write_policy;
	/* false: radix_evict_host() may drop host-only leaves that are not
	 * backed up to L3 (lost for good; the prompt is recomputed). true:
	 * such leaves wait for radix_set_backed_up(). Keep false when there
	 * is no L3, or the host pool can fill with unevictable pages. */
	bool host_keep_unbacked;
	/* Namespace seed chained into the first page's key (hc_key_seed()),
	 * NULL for none. Copied. One tree serves one namespace. */
	const struct hc_key *seed;
};

struct radix_tree;
struct radix_node;

/* Create an empty tree. Returns 0 or -EINVAL / -ENOMEM; *out NULL on error. */
int radix_create(const struct radix_opts *opts, struct radix_tree **out);
/* Free the tree and every node. Slots still recorded are forgotten, not
 * freed: the caller tears its pools down. NULL is a no-op. */
void radix_destroy(struct radix_tree *t);

/* The root: 0 pages, never locked, never evicted. */
struct radix_node *radix_root(const struct radix_tree *t);

/* ---- match ---- */

struct radix_match {
	size_t pages;      /* full pages matched, from the root: dev_pages + host_pages */
	size_t dev_pages;  /* leading pages on device */
	size_t host_pages; /* the pages after them, host only */
	/* Deepest node of the device prefix (the one to lock), root when
	 * dev_pages is 0. */
	struct radix_node *dev_node;
	/* Deepest matched node (load back / prefetch / insert after it), root
	 * when pages is 0. Ends exactly at page `pages` (the tree splits). */
	struct radix_node *last_node;
	/* Key of page pages-1, for chaining L3 keys over the unmatched tail;
	 * NULL when pages is 0 (chain from the seed). Points into the tree:
	 * valid until the next mutating call; copy it. */
	const struct hc_key *last_key;
	/* Hybrid (Mamba) models: the usable match ends at the deepest matched
	 * node holding a state ("Mamba boundary"). mamba_node: deepest with a
	 * state on either tier; mamba_dev_node: deepest with a device state
	 * (always within the device prefix). Root / 0 when none. */
	struct radix_node *mamba_node;
	size_t mamba_pages;
	struct radix_node *mamba_dev_node;
	size_t mamba_dev_pages;
};

/* Longest cached page-aligned prefix of tokens[0..ntokens). A match that
 * ends inside a node splits it at the page boundary. Every matched node's
 * last access becomes "now" and its hit count grows by one.
 * Returns 0, or -EINVAL, or -ENOMEM (a split failed: *m then holds the
 * shorter match up to the node above, which is valid), or -EBUSY (called
 * from a callback). */
int radix_match(struct radix_tree *t, const uint32_t *tokens, size_t ntokens,
		struct radix_match *m);

/* ---- insert ---- */

struct radix_insert {
	/* Node ending at the last inserted page (root when pages is 0). */
	struct radix_node *node;
	size_t pages; /* full pages in tokens */
	/* Slots the tree did NOT take: slots[0..kept) stay the caller's to
	 * free. The tree owns slots[kept..pages). */
	size_t kept;
	size_t new_pages; /* pages that got new nodes (a suffix of the pages) */
};

/* Insert a sequence whose every full page has a device slot
 * (dev_slots[i] for page i). Pages already present are reused:
 *   - already on device: their slots stay (these are exactly the first
 *     `kept` pages, device residency being prefix-closed); the caller
 *     frees dev_slots[0..kept);
 *   - present but host only: revived with the caller's slots (taken);
 *   - absent: a new node takes them.
 * Last access becomes "now" on the path; hit counts do not change.
 * Returns 0 or -EINVAL / -ENOMEM / -EIO (key hashing) / -EBUSY; on error
 * no slot was taken (the tree may have split a node, which changes no
 * content). */
int radix_insert(struct radix_tree *t, const uint32_t *tokens, size_t ntokens,
		 const uint64_t *dev_slots, struct radix_insert *res);

/* Insert host-only pages (prefetched from L3): pages not yet present get
 * new nodes with host_slots[i]; every page already present (any tier) is
 * left as it is, and `kept` is their count: the caller frees
 * host_slots[0..kept). keys may give the keys already computed for pages
 * keys_from.. (keys[0] is page keys_from's); pages before keys_from, or
 * all when keys is NULL, are hashed here. Errors as radix_insert(). */
int radix_insert_host(struct radix_tree *t, const uint32_t *tokens, size_t ntokens,
		      const uint64_t *host_slots, const struct hc_key *keys, size_t keys_from,
		      struct radix_insert *res);

/* ---- slots after the fact (copy completions) ---- */

/* The range "npages pages ending at node n" is how the controller names
 * what it copied: splits keep it valid, since they only add boundaries.
 * The range must start at a node boundary.
 *
 * Attach tier slots (slots[i] for the i-th page of the range) to the
 * nodes of the range that lack that tier: host slots after a device->host
 * backup, device slots after a host->device load-back. Nodes that already
 * have the tier keep their slots; taken[i] (optional, npages entries)
 * says which of the caller's slots the tree took. For RADIX_DEV the page
 * before the range must be on device (or the root). Returns the number of
 * pages taken, or -EINVAL / -EBUSY. */
int64_t radix_set_slots(struct radix_tree *t, struct radix_node *n, size_t npages,
			enum radix_tier tier, const uint64_t *slots, bool *taken);

/* Mark the range as backed up to L3 (host eviction may then drop it under
 * host_keep_unbacked). Returns 0 or -EINVAL / -EBUSY. */
int radix_set_backed_up(struct radix_tree *t, struct radix_node *n, size_t npages);

/* Copy the tier slots of pages [first_page, n's end) of the path ending at
 * n into out (n's end - first_page entries). Returns that count, or
 * -EINVAL, or -ENOENT when some page of the range is not on the tier. */
int64_t radix_path_slots(const struct radix_node *n, size_t first_page, enum radix_tier tier,
			 uint64_t *out);

/* ---- locks (device) and pins (host) ---- */

/* lock: +1 device lock ref on every node of root..n; a locked node is never
 * evicted from device. pin_host: +1 host pin on root..n; a pinned node
 * never loses its host pages or host Mamba state. The root is ignored.
 * unlock/unpin of a count that is 0 fails with -EINVAL and changes nothing. */
int radix_lock(struct radix_tree *t, struct radix_node *n);
int radix_unlock(struct radix_tree *t, struct radix_node *n);
int radix_pin_host(struct radix_tree *t, struct radix_node *n);
int radix_unpin_host(struct radix_tree *t, struct radix_node *n);

/* ---- Mamba states (hybrid models) ---- */

/* A state belongs to the position at the END of node n (the recurrent
 * state after its last token); splits keep it there. A device state needs
 * n on device and leaves with n's device pages. Returns 0, -EINVAL (root,
 * RADIX_NO_SLOT, device state on a node not on device), -EEXIST. */
int radix_mamba_set(struct radix_tree *t, struct radix_node *n, enum radix_tier tier,
		    uint64_t slot);
/* Detach a state without freeing it: *slot gets it, the caller frees it.
 * The node stays even if it now holds no state (a tombstone).
 * Returns 0, -EINVAL, -ENOENT (no state there). */
int radix_mamba_clear(struct radix_tree *t, struct radix_node *n, enum radix_tier tier,
		      uint64_t *slot);

/* ---- eviction ---- */

struct radix_evict_ops {
	void *arg;
	/* The tree let go of slots[0..n) of tier: free them. Required. */
	void (*free_slots)(void *arg, enum radix_tier tier, const uint64_t *slots, size_t n);
	/* The tree let go of a Mamba state. Required once a state was set. */
	void (*free_mamba)(void *arg, enum radix_tier tier, uint64_t slot);
	/* RADIX_WRITE_BACK only (required there): copy node's device pages to
	 * host now; write radix_node_info(node).pages host slots to host_out
	 * and return 0, or return a negative errno (no room): the node is then
	 * deleted. mamba_host is non-NULL when node has a device Mamba state
	 * and no host one: store the host copy's slot there, or leave
	 * RADIX_NO_SLOT. May call radix_evict_host() and
	 * radix_evict_mamba_host() on this tree to make room; nothing else. */
	int (*write_back)(void *arg, const struct radix_node *node, uint64_t *host_out,
			  uint64_t *mamba_host);
};
/* free_slots and free_mamba must not call into the tree at all. */

/* Free at least npages device pages (fewer if nothing else is evictable),
 * least recently used first. Candidates: nodes on device with no child on
 * device and no lock (a node without a host copy also needs no host pin:
 * it may be deleted). Per candidate:
 *   - on host too: demoted (device pages and device Mamba state freed;
 *     the node stays, host only);
 *   - otherwise, RADIX_WRITE_BACK: ops->write_back copies it to host,
 *     then it is demoted; if that fails, as below;
 *   - otherwise: deleted with its (host-only) subtree: every slot and
 *     state in it freed.
 * The parent may then become a candidate. Cost: O(pages freed + log n)
 * per node evicted. Returns the device pages freed (whole nodes: may
 * exceed npages), or -EINVAL (missing callback) / -EBUSY. */
int64_t radix_evict_device(struct radix_tree *t, size_t npages, const struct radix_evict_ops *ops);

/* Free at least npages host pages, least recently used first. Candidates:
 * host-only leaves (no device pages, no children) with no lock and no pin,
 * backed up to L3 unless host_keep_unbacked is false. Each is deleted (host
 * slots and host Mamba state freed); its parent may become a candidate.
 * Host copies of nodes still on device are never evicted here: demote
 * first. Returns the host pages freed, or -EINVAL / -EBUSY. */
int64_t radix_evict_host(struct radix_tree *t, size_t npages, const struct radix_evict_ops *ops);

/* Drop at least nstates host Mamba states, least recently used node first
 * (own LRU: nodes holding a host state and no host pin, internal or leaf).
 * An internal node keeps its pages and becomes a tombstone for that tier.
 * A leaf holding no device pages, no lock and no pin is deleted with its
 * state (its host pages freed too): below the Mamba boundary its KV is of
 * no use to a hybrid model. A leaf still on device, locked or pinned
 * stays. Returns the states dropped, or -EINVAL / -EBUSY. */
int64_t radix_evict_mamba_host(struct radix_tree *t, size_t nstates,
			       const struct radix_evict_ops *ops);

/* ---- inspection ---- */

struct radix_node_info {
	struct radix_node *parent; /* NULL for the root */
	size_t pages;              /* pages in this node */
	size_t end;                /* pages from the root to this node's end */
	size_t children;
	/* Arrays of `pages` entries, pointing into the tree: valid until the
	 * next mutating call. dev/host NULL when the node is not on the tier. */
	const uint32_t *tokens; /* pages * page_size */
	const struct hc_key *keys;
	const uint64_t *dev;
	const uint64_t *host;
	int32_t lock_ref;
	int32_t host_pins;
	uint64_t hits;
	uint64_t last_access; /* logical clock: one tick per match/insert */
	bool backed_up;       /* on L3 */
	uint64_t mamba[2];    /* per tier, RADIX_NO_SLOT when absent */
};
void radix_node_info(const struct radix_node *n, struct radix_node_info *out);

/* Counters kept incrementally: reading them is O(1). "Evictable" pages
 * are those no lock (device) / no lock or pin (host) protects: device:
 * pages on device in unlocked nodes; host: host-only pages in unlocked,
 * unpinned nodes that host eviction may drop. Exact, except that an
 * unbacked node held by a pin below it counts as evictable. */
struct radix_stats {
	size_t nodes; /* without the root */
	size_t pages;
	size_t dev_pages;
	size_t host_pages;
	size_t dev_evictable;
	size_t host_evictable;
	size_t mamba_dev; /* states */
	size_t mamba_host;
	uint64_t pages_hashed; /* page keys ever computed (SHA-256 runs) */
	uint64_t splits;
	uint64_t write_back_failures;
};
void radix_stats(const struct radix_tree *t, struct radix_stats *out);
size_t radix_dev_evictable(const struct radix_tree *t);
/* The device eviction candidate radix_evict_device() takes first (least
 * recently used), or NULL. */
struct radix_node *radix_dev_lru(const struct radix_tree *t);
size_t radix_host_evictable(const struct radix_tree *t);

/* Walk the whole tree and verify every invariant: shape rules, parent and
 * child links, counters against a recount, lock/pin sums, LRU heap
 * membership and order, and every page key against hc_key_chain().
 * O(nodes + pages) plus one SHA-256 per page: for tests and debug builds
 * (HC_DEBUG >= 3 runs it after every mutating call). Returns 0, or
 * -EUCLEAN naming the broken invariant in hc_last_error(), or -ENOMEM. */
int radix_check(const struct radix_tree *t);

#endif /* HC_SRC_CACHE_RADIX_H */
