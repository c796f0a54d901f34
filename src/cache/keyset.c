/*
 * The no_data L3 stand-in: keys "stored" when the cache runs without a
 * store, an open-addressing set behind one mutex.
 */
#define _GNU_SOURCE
#include "cache/cache_internal.h"
#include "cache/device.h"
#include "cache/radix.h"
#include "util/util.h"

#include <hicache/store.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ctl_keyset {
	pthread_mutex_t lock;
	struct hc_key *keys;
	bool *used;
	size_t cap, n;
};

int ctl_keyset_create(struct ctl_keyset **out)
{
	struct ctl_keyset *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cap = 1024;
	s->keys = calloc(s->cap, sizeof(*s->keys));
	s->used = calloc(s->cap, sizeof(*s->used));
	if (!s->keys || !s->used) {
		free(s->keys);
		free(s->used);
		free(s);
		return -ENOMEM;
	}
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

void ctl_keyset_destroy(struct ctl_keyset *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->keys);
	free(s->used);
	free(s);
}

static size_t keyset_slot(const struct hc_key *keys, const bool *used, size_t cap,
			  const struct hc_key *k)
{
	uint64_t h;
	memcpy(&h, k->bytes, sizeof(h)); /* SHA-256 bytes: already uniform */
	size_t i = h & (cap - 1);
	while (used[i] && memcmp(&keys[i], k, sizeof(*k)))
		i = (i + 1) & (cap - 1);
	return i;
}

int ctl_keyset_add(struct ctl_keyset *s, const struct hc_key *k)
{
	pthread_mutex_lock(&s->lock);
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap * 2;
		struct hc_key *keys = calloc(cap, sizeof(*keys));
		bool *used = calloc(cap, sizeof(*used));
		if (!keys || !used) {
			free(keys);
			free(used);
			pthread_mutex_unlock(&s->lock);
			return -ENOMEM;
		}
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->used[i])
				continue;
			size_t j = keyset_slot(keys, used, cap, &s->keys[i]);
			keys[j] = s->keys[i];
			used[j] = true;
		}
		free(s->keys);
		free(s->used);
		s->keys = keys;
		s->used = used;
		s->cap = cap;
	}
	size_t i = keyset_slot(s->keys, s->used, s->cap, k);
	if (!s->used[i]) {
		s->keys[i] = *k;
		s->used[i] = true;
		s->n++;
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

bool ctl_keyset_has(struct ctl_keyset *s, const struct hc_key *k)
{
	pthread_mutex_lock(&s->lock);
	bool has = s->used[keyset_slot(s->keys, s->used, s->cap, k)];
	pthread_mutex_unlock(&s->lock);
	return has;
}
