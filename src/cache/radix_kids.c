/*
 * The radix tree's children table.
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
 * Linear probing keeps a lookup to one run of adjacent entries; a
 * deletion shifts later entries back instead of leaving tombstones, so a
 * table never fills with dead entries however children come and go.
 */
#define _GNU_SOURCE
#include "cache/radix_internal.h"
#include "util/fault.h"

#include <errno.h>
#include <stdlib.h>

size_t radix_kids_slot_of(const struct radix_node *n, const struct radix_node *child)
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

/* Room for one more child (load <= 3/4), so radix_kids_add() cannot fail. */
int radix_kids_reserve(struct radix_node *n)
{
	if ((n->nkids + 1) * 4 <= n->kcap * 3)
		return 0;
	size_t cap = n->kcap ? n->kcap * 2 : 4;
	struct radix_kid *tab = util_fault_calloc(cap, sizeof(*tab));
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

void radix_kids_add(struct radix_node *n, struct radix_node *child)
{
	radix_assert((n->nkids + 1) * 4 <= n->kcap * 3);
	kids_put(n->kids, n->kcap, child);
	n->nkids++;
	if (child->on[RADIX_DEV])
		n->ndev_kids++;
}

/* Linear probing without tombstones: shift later entries of the cluster
 * back into the hole unless their home slot lies cyclically in (hole, j]. */
void radix_kids_del(struct radix_node *n, struct radix_node *child)
{
	size_t mask = n->kcap - 1;
	size_t i = radix_kids_slot_of(n, child);
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
