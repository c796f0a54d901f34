/* The open-addressing set (util/hashset.h). */
#include "util/hashset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int hashset_init(struct hashset *s, size_t elem, size_t cap, size_t (*hash)(const void *e),
		 bool (*eq)(const void *a, const void *b))
{
	*s = (struct hashset){.cap = cap, .elem = elem, .hash = hash, .eq = eq};
	s->slots = calloc(cap, elem);
	s->used = calloc(cap, sizeof(*s->used));
	if (!s->slots || !s->used) {
		hashset_free(s);
		return -ENOMEM;
	}
	return 0;
}

void hashset_free(struct hashset *s)
{
	free(s->slots);
	free(s->used);
	s->slots = NULL;
	s->used = NULL;
}

/* Where e is, or the free slot it goes to. */
static size_t slot_of(const struct hashset *s, const unsigned char *slots, const bool *used,
		      size_t cap, const void *e)
{
	size_t i = s->hash(e) & (cap - 1);
	while (used[i] && !s->eq(slots + i * s->elem, e))
		i = (i + 1) & (cap - 1);
	return i;
}

static int grow(struct hashset *s)
{
	size_t cap = s->cap * 2;
	unsigned char *slots = calloc(cap, s->elem);
	bool *used = calloc(cap, sizeof(*used));
	if (!slots || !used) {
		free(slots);
		free(used);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->cap; i++) {
		if (!s->used[i])
			continue;
		size_t j = slot_of(s, slots, used, cap, s->slots + i * s->elem);
		memcpy(slots + j * s->elem, s->slots + i * s->elem, s->elem);
		used[j] = true;
	}
	free(s->slots);
	free(s->used);
	s->slots = slots;
	s->used = used;
	s->cap = cap;
	return 0;
}

int hashset_add(struct hashset *s, const void *e)
{
	if (2 * (s->n + 1) > s->cap) {
		int rc = grow(s);
		if (rc)
			return rc;
	}
	size_t i = slot_of(s, s->slots, s->used, s->cap, e);
	if (!s->used[i]) {
		memcpy(s->slots + i * s->elem, e, s->elem);
		s->used[i] = true;
		s->n++;
	}
	return 0;
}

bool hashset_has(const struct hashset *s, const void *e)
{
	return s->used[slot_of(s, s->slots, s->used, s->cap, e)];
}
