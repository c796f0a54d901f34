/*
 * The mem backend: an in-process L3 for tests and single-process use.
 * Objects are the same images as on disk (payload, pad, trailer), kept in
 * a hash table with an LRU list and a byte cap; one mutex, since every
 * operation is a memcpy and a few pointer moves.
 */
#define _GNU_SOURCE
#include "store/backend.h"
#include "store/format.h"
#include "util/util.h"

#include <hicache/config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

struct mem_obj {
	struct mem_obj *hnext;       /* hash chain */
	struct mem_obj *prev, *next; /* LRU: head is the most recent */
	uint64_t hash;
	size_t len;
	uint8_t *data;
	char name[];
};

struct mem_be {
	pthread_mutex_t lock;
	struct mem_obj **table;
	size_t nbuckets, count;
	struct mem_obj *head, *tail;
	uint64_t bytes, cap;
};

static void mem_close(void *p)
{
	struct mem_be *m = p;
	if (!m)
		return;
	struct mem_obj *o = m->head;
	while (o) {
		struct mem_obj *next = o->next;
		free(o->data);
		free(o);
		o = next;
	}
	free(m->table);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static int mem_open(const struct hc_config *cfg, void **out)
{
	int64_t cap;
	int rc = hc_config_get_int(cfg, "mem_capacity_bytes", &cap);
	if (rc)
		return rc;
	struct mem_be *m = util_fault_calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->cap = (uint64_t)cap;
	m->nbuckets = 1024;
	m->table = util_fault_calloc(m->nbuckets, sizeof(*m->table));
	if (!m->table) {
		mem_close(m);
		return -ENOMEM;
	}
	*out = m;
	return 0;
}

static size_t mem_alignment(void *p)
{
	(void)p;
	return 1;
}

static struct mem_obj **slot_of(struct mem_be *m, const char *name, uint64_t h)
{
	struct mem_obj **pp = &m->table[h & (m->nbuckets - 1)];
	while (*pp && ((*pp)->hash != h || strcmp((*pp)->name, name)))
		pp = &(*pp)->hnext;
	return pp;
}

static void lru_unlink(struct mem_be *m, struct mem_obj *o)
{
	if (o->prev)
		o->prev->next = o->next;
	else
		m->head = o->next;
	if (o->next)
		o->next->prev = o->prev;
	else
		m->tail = o->prev;
	o->prev = o->next = NULL;
}

static void lru_push(struct mem_be *m, struct mem_obj *o)
{
	o->prev = NULL;
	o->next = m->head;
	if (m->head)
		m->head->prev = o;
	m->head = o;
	if (!m->tail)
		m->tail = o;
}

static void remove_obj(struct mem_be *m, struct mem_obj *o)
{
	struct mem_obj **pp = slot_of(m, o->name, o->hash);
	*pp = o->hnext;
	lru_unlink(m, o);
	m->bytes -= o->len;
	m->count--;
	free(o->data);
	free(o);
}

static void grow(struct mem_be *m)
{
	size_t n = m->nbuckets * 2;
	struct mem_obj **t = util_fault_calloc(n, sizeof(*t));
	if (!t)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct mem_obj *o = m->table[i];
		while (o) {
			struct mem_obj *next = o->hnext;
			o->hnext = t[o->hash & (n - 1)];
			t[o->hash & (n - 1)] = o;
			o = next;
		}
	}
	free(m->table);
	m->table = t;
	m->nbuckets = n;
}

static int put_one(struct mem_be *m, struct store_obj *obj)
{
	if (m->cap && obj->len > m->cap)
		return -ENOSPC;
	uint64_t h = XXH3_64bits(obj->name, strlen(obj->name));
	if (*slot_of(m, obj->name, h))
		return -EEXIST;
	size_t nlen = strlen(obj->name) + 1;
	struct mem_obj *o = util_fault_malloc(sizeof(*o) + nlen);
	uint8_t *data = util_fault_malloc(obj->len ? obj->len : 1);
	if (!o || !data) {
		free(o);
		free(data);
		return -ENOMEM;
	}
	size_t off = 0;
	for (unsigned i = 0; i < obj->iovcnt; i++) {
		memcpy(data + off, obj->iov[i].iov_base, obj->iov[i].iov_len);
		off += obj->iov[i].iov_len;
	}
	if (off != obj->len) {
		free(o);
		free(data);
		return -EINVAL;
	}
	while (m->cap && m->bytes + obj->len > m->cap && m->tail)
		remove_obj(m, m->tail);
	memcpy(o->name, obj->name, nlen);
	o->hash = h;
	o->len = obj->len;
	o->data = data;
	struct mem_obj **pp = &m->table[h & (m->nbuckets - 1)];
	o->hnext = *pp;
	*pp = o;
	lru_push(m, o);
	m->bytes += o->len;
	if (++m->count > m->nbuckets)
		grow(m);
	return 0;
}

static int mem_put(void *p, struct store_obj *objs, size_t n)
{
	struct mem_be *m = p;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < n; i++)
		objs[i].result = put_one(m, &objs[i]);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static int mem_get(void *p, struct store_obj *objs, size_t n)
{
	struct mem_be *m = p;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < n; i++) {
		struct store_obj *obj = &objs[i];
		struct mem_obj *o = *slot_of(m, obj->name,
					     XXH3_64bits(obj->name, strlen(obj->name)));
		if (!o) {
			obj->result = -ENOENT;
			continue;
		}
		if (o->len != obj->len) {
			obj->result = o->len < obj->len ? -ENODATA : -EFBIG;
			continue;
		}
		size_t off = 0;
		for (unsigned j = 0; j < obj->iovcnt; j++) {
			memcpy(obj->iov[j].iov_base, o->data + off, obj->iov[j].iov_len);
			off += obj->iov[j].iov_len;
		}
		lru_unlink(m, o);
		lru_push(m, o);
		obj->result = 0;
	}
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static int64_t mem_exists(void *p, struct store_obj *objs, size_t n, bool stop_at_miss)
{
	struct mem_be *m = p;
	int64_t lead = 0;
	bool missed = false;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < n; i++) {
		if (missed && stop_at_miss) {
			objs[i].result = -ENOENT;
			continue;
		}
		struct mem_obj *o = *slot_of(m, objs[i].name,
					     XXH3_64bits(objs[i].name, strlen(objs[i].name)));
		objs[i].result = !o ? -ENOENT : o->len == objs[i].len ? 0 : -EBADMSG;
		if (objs[i].result)
			missed = true;
		else if (!missed)
			lead++;
	}
	pthread_mutex_unlock(&m->lock);
	return lead;
}

/* Healing after a get found an object damaged: removed only when the
 * bytes stored under its name are themselves not a valid object (as the
 * file backend checks the file it moved aside). A get's verdict is made
 * on the copy in the caller's memory, which something else may have
 * written meanwhile (a caller's buffer reused under the read); the stored
 * image is what decides. A valid one stays: -EEXIST. */
static int mem_remove(void *p, struct store_obj *objs, size_t n)
{
	struct mem_be *m = p;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < n; i++) {
		struct mem_obj *o = *slot_of(m, objs[i].name,
					     XXH3_64bits(objs[i].name, strlen(objs[i].name)));
		struct store_trailer t;
		if (!o)
			objs[i].result = -ENOENT;
		else if (!format_check_image(o->data, o->len, objs[i].name, &t))
			objs[i].result = -EEXIST;
		else
			objs[i].result = 0;
		if (!objs[i].result)
			remove_obj(m, o);
	}
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static int mem_erase(void *p, struct store_obj *objs, size_t n)
{
	struct mem_be *m = p;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < n; i++) {
		struct mem_obj *o = *slot_of(m, objs[i].name,
					     XXH3_64bits(objs[i].name, strlen(objs[i].name)));
		objs[i].result = o ? 0 : -ENOENT;
		if (o)
			remove_obj(m, o);
	}
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static int64_t mem_remove_matching(void *p, bool (*match)(const char *name, void *arg), void *arg)
{
	struct mem_be *m = p;
	int64_t n = 0;
	pthread_mutex_lock(&m->lock);
	for (struct mem_obj *o = m->head, *next; o; o = next) {
		next = o->next;
		if (match(o->name, arg)) {
			remove_obj(m, o);
			n++;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return n;
}

const struct store_backend_ops store_mem_ops = {
	.name = "mem",
	.open = mem_open,
	.close = mem_close,
	.alignment = mem_alignment,
	.put = mem_put,
	.get = mem_get,
	.exists = mem_exists,
	.remove = mem_remove,
	.erase = mem_erase,
	.remove_matching = mem_remove_matching,
};
