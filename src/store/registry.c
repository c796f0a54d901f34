/*
 * Pool registration: contexts (naming, zero-copy or bounce, trailer
 * template), the pool table, and the references calls hold on it.
 *
 *   register     build the context without the lock (probe, bounce slots),
 *                then publish it under reg_lock after checking again that
 *                its name, anchor role and object names are free
 *   call         store_hold: look up every pool of the call under reg_lock
 *                once, one reference per distinct pool; store_release at
 *                the end (a started op: when its pages are done)
 *   unregister   take the context out of the table under reg_lock, wait on
 *                reg_cond until its references are gone, free it
 *
 * So a transfer never sees a context freed under it, registration may run
 * while other pools transfer, and a call's cost is one lock round trip to
 * hold its pools and one to release them.
 */
#define _GNU_SOURCE
#include "store/registry.h"
#include "store/store_work.h"
#include "util/opts.h"
#include "util/util.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* A segments pool's geometry: kind, page tokens, flat page bytes, the
 * number of buffers and each one's segment length, component and index. */
static uint64_t segments_hash(const struct hc_pool *pool)
{
	struct hc_segment segs[STORE_MAX_OBJS];
	int n = hc_pool_page_segments(pool, 0, segs, STORE_MAX_OBJS);
	uint64_t g[4 + 3 * STORE_MAX_OBJS] = {hc_pool_kind(pool), hc_pool_page_tokens(pool),
					      hc_pool_page_bytes(pool), n > 0 ? (uint64_t)n : 0};
	for (int i = 0; i < n; i++) {
		g[4 + 3 * i] = segs[i].len;
		g[5 + 3 * i] = segs[i].component;
		g[6 + 3 * i] = segs[i].index;
	}
	return XXH3_64bits(g, (4 + 3 * (size_t)(n > 0 ? n : 0)) * sizeof(g[0]));
}

/* Canonical geometry: what must match for bytes to mean the same thing. */
static uint64_t shape_hash(const struct hc_pool *pool)
{
	if (hc_pool_kind(pool) == HC_POOL_SEGMENTS)
		return segments_hash(pool);
	uint64_t g[24] = {0};
	g[0] = hc_pool_kind(pool);
	g[1] = hc_pool_page_tokens(pool);
	g[2] = hc_pool_page_bytes(pool);
	const struct hc_kv_geometry *kv = hc_pool_kv_geometry(pool);
	const struct hc_mamba_geometry *mg = hc_pool_mamba_geometry(pool);
	if (kv) {
		g[3] = kv->layout;
		g[4] = kv->layers;
		g[5] = kv->heads;
		g[6] = kv->head_dim;
		g[7] = kv->elem_bytes;
		g[8] = kv->mla;
	} else if (mg) {
		g[4] = mg->layers;
		g[9] = mg->temporal_bytes;
		g[10] = mg->nconv;
		for (unsigned i = 0; i < mg->nconv && i < HC_MAMBA_MAX_CONV; i++)
			g[11 + i] = mg->conv_bytes[i];
	}
	return XXH3_64bits(g, sizeof(g));
}

/* The trailer's geometry tag: the shape, and the element type when the
 * caller named one. Without one the tag is the shape's hash alone, as
 * every store before elem_type wrote it; with one, the name is hashed
 * over it, so bf16 and fp16 pages of one shape (same element width) are
 * objects of another geometry to each other. */
static uint64_t geometry_hash(const struct hc_pool *pool, const char *elem_type)
{
	uint64_t shape = shape_hash(pool);
	if (!*elem_type)
		return shape;
	return XXH3_64bits_withSeed(elem_type, strlen(elem_type), shape);
}

/* A caller's element type: NULL or "" = none, else [A-Za-z0-9_]{1,31}
 * (a name, never text that could be two names run together). */
static int elem_type_load(struct store_ctx *c, const char *elem_type)
{
	if (!elem_type || !*elem_type)
		return 0;
	size_t len = strnlen(elem_type, HC_ELEM_TYPE_MAX + 1);
	bool ok = len <= HC_ELEM_TYPE_MAX;
	for (size_t i = 0; ok && i < len; i++) {
		char ch = elem_type[i];
		ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		     (ch >= '0' && ch <= '9') || ch == '_';
	}
	if (!ok)
		return util_fail(-EINVAL,
				 "store: pool '%s': element type '%.*s%s' is not "
				 "[A-Za-z0-9_]{1,%d} (e.g. \"bfloat16\")",
				 c->name, HC_ELEM_TYPE_MAX, elem_type,
				 len > HC_ELEM_TYPE_MAX ? "..." : "", HC_ELEM_TYPE_MAX);
	memcpy(c->elem_type, elem_type, len + 1);
	return 0;
}

static int set_component(struct store_ctx *c, unsigned i, enum hc_component kind, const char *pool,
			 uint32_t index)
{
	int rc = hc_key_component(kind, pool, index, c->obj[i].component,
				  sizeof(c->obj[i].component));
	c->obj[i].kind = kind;
	c->obj[i].index = index;
	return rc < 0 ? rc : 0;
}

/* Whether a page's objects are its segments, one per buffer (split), or
 * one object of the flat page. It follows from the pool and the store's
 * configuration alone (kind, layout, contiguity, page bytes against
 * kv_one_object_max_bytes), never from this process's memory alignment,
 * use_direct_io or force_bounce, so every instance of one configuration
 * names a page alike: the layouts SGLang's NIXL backend moves zero-copy
 * (KV page_first and page_first_direct) and the pools whose pages are
 * contiguous per buffer (Mamba, indexer, segments) are split; KV
 * layer_first and page_head keep one object of the flat page, as SGLang
 * names them. Whether the objects then move zero-copy or through a
 * bounce slot is up to the memory (ctx_build); the names and the bytes
 * stored are the same.
 *
 * kv_one_object_max_bytes (0 = off, SGLang's and NIXL's names) makes a
 * page_first / page_first_direct MHA page of at most that many bytes one
 * object of its flat page (K then V, through a bounce slot), named as a
 * layer_first page is: below some size, a second file and trailer cost
 * more than the copy. An MLA page is one buffer: one object either way,
 * keeping its name. */
static bool objects_split(const struct hc_pool *pool, unsigned nsegs, uint64_t one_object_max)
{
	const struct hc_kv_geometry *kv = hc_pool_kv_geometry(pool);
	if (!nsegs || hc_pool_kind(pool) == HC_POOL_ANCHOR)
		return false;
	if (!kv)
		return true;
	if (kv->layout != HC_LAYOUT_PAGE_FIRST && kv->layout != HC_LAYOUT_PAGE_FIRST_DIRECT)
		return false;
	return kv->mla || nsegs < 2 || hc_pool_page_bytes(pool) > one_object_max;
}

/* Names as the reference: split KV "_k"/"_v" (MLA "_k"), one flat page
 * plain; side pools "_<pool>" for a flat page, split Mamba
 * "_mamba_temporal"/"_mamba_conv_<i>", two-buffer pools "_<pool>_k/_v",
 * other multi-buffer pools "_<pool>_<i>", one-buffer pools "_<pool>".
 * A bounce slot holds the page's object images back to back
 * (obj[i].slot_off), so a split page bounces into the same objects. */
static int name_objects(struct store_ctx *c, const struct hc_segment *segs, unsigned nsegs)
{
	const char *pool = c->name;
	if (c->marker) {
		c->nobj = 1;
		c->obj[0].payload = 0;
		return set_component(c, 0, HC_COMP_PLAIN, NULL, 0);
	}
	if (!c->split) {
		c->nobj = 1;
		c->obj[0].payload = c->page_bytes;
		return c->anchor ? set_component(c, 0, HC_COMP_PLAIN, NULL, 0)
				 : set_component(c, 0, HC_COMP_POOL, pool, 0);
	}
	c->nobj = nsegs;
	for (unsigned i = 0; i < nsegs; i++) {
		int rc;
		c->obj[i].payload = segs[i].len;
		if (c->anchor)
			rc = set_component(c, i, segs[i].component, NULL, 0);
		else if (segs[i].component == HC_COMP_MAMBA_TEMPORAL && !strcmp(pool, "mamba"))
			rc = set_component(c, i, HC_COMP_MAMBA_TEMPORAL, NULL, 0);
		else if (segs[i].component == HC_COMP_MAMBA_CONV && !strcmp(pool, "mamba"))
			rc = set_component(c, i, HC_COMP_MAMBA_CONV, NULL, segs[i].index);
		else if (nsegs == 1)
			rc = set_component(c, i, HC_COMP_POOL, pool, 0);
		else if (nsegs == 2 && segs[0].component == HC_COMP_K)
			rc = set_component(c, i, i == 0 ? HC_COMP_POOL_K : HC_COMP_POOL_V, pool, 0);
		else
			rc = set_component(c, i, HC_COMP_POOL_INDEX, pool, i);
		if (rc)
			return rc;
	}
	return 0;
}

#if UINTPTR_MAX == UINT64_MAX
/* ABI: elem_type came after force_bounce, past the 32 bytes callers built
 * before it pass (not in their tail padding, which util_opts_load copies). */
_Static_assert(offsetof(struct hc_pool_reg, elem_type) == 32 && sizeof(struct hc_pool_reg) == 40,
	       "struct hc_pool_reg is ABI: new fields go at the end");
#endif

void hc_pool_reg_init(struct hc_pool_reg *reg, size_t size)
{
	if (!reg)
		return;
	static const struct hc_pool_reg d = {.struct_size = sizeof(d),
					     .sharing = HC_POOL_SHARING_AUTO};
	util_opts_init(reg, size, &d, sizeof(d));
}

/* A caller's suffix: at most HC_SUFFIX_MAX - 1 bytes of printable bytes,
 * no '/'. */
static int suffix_check(const char *name, const char *suffix)
{
	size_t len = strnlen(suffix, HC_SUFFIX_MAX);
	if (len >= HC_SUFFIX_MAX)
		return util_fail(-EINVAL, "store: pool '%s': suffix longer than %d bytes", name,
				 HC_SUFFIX_MAX - 1);
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)suffix[i];
		if (ch == '/' || ch < 0x20 || ch == 0x7f)
			return util_fail(-EINVAL, "store: pool '%s': suffix '%s' holds %s", name,
					 ch == '/' ? suffix : "(a control byte)",
					 ch == '/' ? "a '/'" : "a control byte");
	}
	return 0;
}

/* The context's suffix and who writes, from the sharing rule. */
static int ctx_naming(struct hc_store *st, struct store_ctx *c, const struct hc_pool_reg *reg)
{
	const struct hc_kv_geometry *kv = hc_pool_kv_geometry(c->pool);
	bool replicated;
	switch (reg->sharing) {
	case HC_POOL_SHARING_AUTO:
		replicated = kv && kv->mla;
		break;
	case HC_POOL_RANK_SHARDED:
		replicated = false;
		break;
	case HC_POOL_RANK_REPLICATED:
		replicated = true;
		break;
	default:
		return util_fail(-EINVAL, "store: pool '%s': unknown sharing %d", c->name,
				 (int)reg->sharing);
	}
	c->skip_writes = replicated && st->tp_rank != 0;
	const char *suffix = replicated ? st->suffix_shared : st->suffix_rank;
	if (reg->suffix) {
		int rc = suffix_check(c->name, reg->suffix);
		if (rc)
			return rc;
		suffix = reg->suffix;
	}
	memcpy(c->suffix, suffix, strlen(suffix) + 1);
	return 0;
}

/* Every name the pool can produce fits NAME_MAX: "<64 hex><suffix><component>". */
static int ctx_names_fit(struct store_ctx *c)
{
	size_t longest = 0;
	for (unsigned i = 0; i < c->nobj; i++) {
		size_t l = strlen(c->obj[i].component);
		longest = l > longest ? l : longest;
	}
	size_t fixed = strlen(c->suffix) + longest;
	if (HC_KEY_HEX_LEN + fixed > STORE_NAME_LEN_MAX)
		return util_fail(-EINVAL,
				 "store: pool '%s' would name objects of %zu bytes "
				 "('<64 hex digits>%s' + a %zu-byte component), over the %d a "
				 "file name may have",
				 c->name, HC_KEY_HEX_LEN + fixed, c->suffix, longest,
				 STORE_NAME_LEN_MAX);
	c->name_room = STORE_NAME_LEN_MAX - fixed;
	if (c->name_room > HC_STORE_NAME_MAX)
		c->name_room = HC_STORE_NAME_MAX;
	/* And through the function that names them: whatever else it checks
	 * (a '/', its own length limit) holds for every component now, so no
	 * transfer can meet a name that fails. */
	struct hc_key k;
	memset(&k, 0, sizeof(k));
	char out[HC_NAME_MAX];
	for (unsigned i = 0; i < c->nobj; i++) {
		int n = hc_key_name(&k, c->suffix, c->obj[i].component, out, sizeof(out));
		if (n < 0)
			return util_fail(-EINVAL,
					 "store: pool '%s' cannot name its objects (suffix '%s', "
					 "component '%s'): %s",
					 c->name, c->suffix, c->obj[i].component, hc_strerror(n));
	}
	return 0;
}

/* Do object i of a and object j of b end their names alike (suffix then
 * component)? */
static bool same_ending(const struct store_ctx *a, unsigned i, const struct store_ctx *b,
			unsigned j)
{
	char x[HC_SUFFIX_MAX + COMPONENT_MAX], y[HC_SUFFIX_MAX + COMPONENT_MAX];
	snprintf(x, sizeof(x), "%s%s", a->suffix, a->obj[i].component);
	snprintf(y, sizeof(y), "%s%s", b->suffix, b->obj[j].component);
	return !strcmp(x, y);
}

/* Whether c may join the table now: its name, its anchor role, room, and
 * object names no other pool writes. Under reg_lock. */
static int ctx_conflict(const struct hc_store *st, const struct store_ctx *c)
{
	for (size_t p = 0; p < st->nctx; p++)
		if (!strcmp(st->ctx[p]->name, c->name))
			return util_fail(-EEXIST, "store: pool '%s' is already registered",
					 c->name);
	if (c->anchor && st->anchor)
		return util_fail(-EEXIST, "store: '%s' is already the anchor", st->anchor->name);
	if (st->nctx == STORE_MAX_POOLS)
		return util_fail(-ENOSPC, "store: at most %d pools", STORE_MAX_POOLS);
	/* Two pools must never write the same file: a side pool named "k" or
	 * "swa_k" would otherwise shadow the anchor's or swa's objects (and
	 * a suffix given at registration could do the same). */
	for (size_t p = 0; p < st->nctx; p++) {
		const struct store_ctx *other = st->ctx[p];
		for (unsigned i = 0; i < c->nobj; i++)
			for (unsigned j = 0; j < other->nobj; j++)
				if (same_ending(c, i, other, j))
					return util_fail(-EEXIST,
							 "store: pool '%s' would name its "
							 "objects '<key>%s%s' like pool '%s'; "
							 "choose another name",
							 c->name, c->suffix, c->obj[i].component,
							 other->name);
	}
	return 0;
}

static int ctx_check_locked(struct hc_store *st, const struct store_ctx *c)
{
	pthread_mutex_lock(&st->reg_lock);
	int rc = ctx_conflict(st, c);
	pthread_mutex_unlock(&st->reg_lock);
	return rc;
}

/* The context of pool under name: naming, mode, objects, trailer. */
static int ctx_build(struct hc_store *st, const char *name, struct hc_pool *pool,
		     const struct hc_pool_reg *reg, struct store_ctx *c)
{
	enum hc_pool_kind kind = hc_pool_kind(pool);
	memcpy(c->name, name, strlen(name));
	c->pool = pool;
	c->anchor = reg->anchor;
	c->marker = kind == HC_POOL_ANCHOR;
	c->page_bytes = hc_pool_page_bytes(pool);
	c->alignment = st->ops->alignment(st->be);
	c->block = st->block;
	int rc = ctx_naming(st, c, reg);
	if (!rc)
		rc = elem_type_load(c, reg->elem_type);
	if (rc)
		return rc;

	struct hc_segment segs[STORE_MAX_OBJS];
	unsigned nsegs = hc_pool_segment_count(pool);
	if (nsegs > STORE_MAX_OBJS)
		nsegs = 0;
	if (nsegs && (rc = hc_pool_page_segments(pool, 0, segs, STORE_MAX_OBJS)) < 0)
		return rc;
	c->split = !c->marker && objects_split(pool, nsegs, st->kv_one_object_max);
	c->zero_copy = c->split && !st->force_bounce && !reg->force_bounce &&
		       hc_pool_aligned(pool, c->alignment);
	if (c->zero_copy && st->ops->probe_memory) {
		/* The reference's zero-length-file bug came from memory that
		 * O_DIRECT could not read; try one aligned write from it. */
		rc = st->ops->probe_memory(st->be, segs[0].addr, segs[0].len);
		if (rc)
			return rc;
		c->alignment = st->ops->alignment(st->be);
	}
	if ((rc = name_objects(c, segs, nsegs)))
		return rc;
	/* An anchor names its objects by their components alone: a segments
	 * pool as the anchor needs distinct ones (K and V, or one buffer). */
	for (unsigned i = 0; i < c->nobj; i++)
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(c->obj[i].component, c->obj[j].component))
				return util_fail(
					-EINVAL,
					"store: pool '%s' would name two objects "
					"of a page '<key>%s%s' (buffers %u and %u have the "
					"same component)",
					name, c->suffix, c->obj[i].component, j, i);
	if ((rc = ctx_names_fit(c)))
		return rc;
	uint64_t images = 0;
	for (unsigned i = 0; i < c->nobj; i++) {
		c->obj[i].len = format_object_len(c->obj[i].payload, c->block);
		if (!c->obj[i].len || images + c->obj[i].len < images)
			return util_fail(-EINVAL, "store: pool '%s' pages are too large", name);
		c->obj[i].slot_off = images;
		images += c->obj[i].len;
	}
	if (!c->zero_copy && images > SIZE_MAX)
		return util_fail(-EINVAL, "store: pool '%s' pages are too large", name);
	c->slot_bytes = c->zero_copy ? 0 : (size_t)images;
	const struct hc_kv_geometry *kv = hc_pool_kv_geometry(pool);
	c->tmpl.pool_kind = (uint16_t)kind;
	c->tmpl.layout = kv ? (uint16_t)kv->layout : 0;
	c->tmpl.page_tokens = hc_pool_page_tokens(pool);
	c->tmpl.geometry = geometry_hash(pool, c->elem_type);
	return 0;
}

int hc_store_register_pool_ex(struct hc_store *st, const char *name, struct hc_pool *pool,
			      const struct hc_pool_reg *reg_in)
{
	if (!st || !name || !pool)
		return util_fail(-EINVAL, "hc_store_register_pool: NULL argument");
	struct hc_pool_reg reg;
	hc_pool_reg_init(&reg, sizeof(reg));
	if (reg_in) {
		int rc = util_opts_load(&reg, sizeof(reg), reg_in,
					"hc_store_register_pool_ex: reg");
		if (rc)
			return rc;
	}
	if (!hc_key_pool_name_ok(name))
		return util_fail(-EINVAL, "store: pool name '%s' is not [a-z0-9_]{1,%d}", name,
				 HC_POOL_NAME_MAX);
	enum hc_pool_kind kind = hc_pool_kind(pool);
	if (reg.anchor && kind != HC_POOL_KV && kind != HC_POOL_ANCHOR && kind != HC_POOL_SEGMENTS)
		return util_fail(-EINVAL,
				 "store: anchor '%s' must be a kv or anchor pool (or "
				 "segments)",
				 name);
	if (!reg.anchor && kind == HC_POOL_ANCHOR)
		return util_fail(-EINVAL,
				 "store: a logical anchor pool ('%s') can only be the anchor",
				 name);

	struct store_ctx *c = util_fault_calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	memcpy(c->name, name, strlen(name));
	c->anchor = reg.anchor;
	/* Name and anchor role first: a clear error before any work. */
	int rc = ctx_check_locked(st, c);
	if (!rc)
		rc = ctx_build(st, name, pool, &reg, c);
	if (!rc)
		rc = ctx_check_locked(st, c);
	if (!rc && c->slot_bytes)
		rc = bounce_reserve(st, c);
	if (!rc) {
		pthread_mutex_lock(&st->reg_lock);
		/* Again: another registration may have won meanwhile. */
		rc = ctx_conflict(st, c);
		if (!rc) {
			st->ctx[st->nctx++] = c;
			if (c->anchor)
				st->anchor = c;
		}
		pthread_mutex_unlock(&st->reg_lock);
	}
	if (rc) {
		free(c);
		return rc;
	}
	log_info("store: pool '%s' (%s%s%s, %zu-byte pages): %s, %u object(s) per page, '%s'%s",
		 name, hc_pool_kind_name(kind), *c->elem_type ? " of " : "", c->elem_type,
		 c->page_bytes,
		 c->marker      ? "marker"
		 : c->zero_copy ? "zero-copy"
				: "bounce",
		 c->nobj, c->suffix, c->skip_writes ? ", written by rank 0" : "");
	return 0;
}

int hc_store_register_pool(struct hc_store *st, const char *name, struct hc_pool *pool, bool anchor)
{
	struct hc_pool_reg reg;
	hc_pool_reg_init(&reg, sizeof(reg));
	reg.anchor = anchor;
	return hc_store_register_pool_ex(st, name, pool, &reg);
}

int hc_store_register_group(struct hc_store *st, const struct hc_pool_group *g)
{
	if (!st || !g)
		return util_fail(-EINVAL, "hc_store_register_group: NULL argument");
	struct hc_pool *anchor = hc_pool_group_anchor(g);
	for (size_t i = 0; i < hc_pool_group_count(g); i++) {
		const char *name;
		struct hc_pool *p = hc_pool_group_at(g, i, &name);
		int rc = hc_store_register_pool(st, name, p, p == anchor);
		if (rc)
			return rc;
	}
	return 0;
}

/* The context registered as name; "kv" always means the anchor, whatever
 * it was registered as. Under reg_lock. */
static struct store_ctx *find_locked(const struct hc_store *st, const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < st->nctx; i++)
		if (!strcmp(st->ctx[i]->name, name))
			return st->ctx[i];
	if (!strcmp(name, "kv") && st->anchor)
		return st->anchor;
	return NULL;
}

int hc_store_unregister_pool(struct hc_store *st, const char *name)
{
	if (!st || !name)
		return util_fail(-EINVAL, "hc_store_unregister_pool: NULL argument");
	pthread_mutex_lock(&st->reg_lock);
	struct store_ctx *c = find_locked(st, name);
	if (!c) {
		pthread_mutex_unlock(&st->reg_lock);
		return util_fail(-ENOENT, "store: no pool '%s' is registered", name);
	}
	size_t i = 0;
	while (st->ctx[i] != c)
		i++;
	memmove(&st->ctx[i], &st->ctx[i + 1], (st->nctx - i - 1) * sizeof(st->ctx[0]));
	st->nctx--;
	if (st->anchor == c)
		st->anchor = NULL;
	/* Lookups miss it from here on; the calls that hold it finish. */
	while (c->refs)
		pthread_cond_wait(&st->reg_cond, &st->reg_lock);
	pthread_mutex_unlock(&st->reg_lock);
	log_info("store: pool '%s' unregistered", c->name);
	free(c);
	return 0;
}

int store_hold(struct hc_store *st, const struct hc_pool_transfer *t, size_t nt, bool anchor,
	       bool missing_ok, struct store_ctx **ctxs, struct store_ctx **held, size_t *nheld,
	       const char *what)
{
	int rc = 0;
	size_t n = 0;
	pthread_mutex_lock(&st->reg_lock);
	for (size_t i = 0; i < nt && !rc; i++) {
		struct store_ctx *c = anchor ? st->anchor : find_locked(st, t[i].pool);
		ctxs[i] = c;
		if (!c) {
			if (anchor)
				rc = util_fail(-EINVAL, "%s: no anchor pool is registered", what);
			else if (!missing_ok)
				rc = util_fail(-EINVAL, "store: pool '%s' is not registered",
					       t[i].pool ? t[i].pool : "(null)");
			continue;
		}
		bool seen = false;
		for (size_t j = 0; j < n && !seen; j++)
			seen = held[j] == c;
		if (!seen) {
			held[n++] = c; /* at most STORE_MAX_POOLS: they are all in the table */
			c->refs++;
		}
	}
	if (rc) {
		for (size_t j = 0; j < n; j++)
			held[j]->refs--;
		n = 0;
		pthread_cond_broadcast(&st->reg_cond);
	}
	pthread_mutex_unlock(&st->reg_lock);
	*nheld = n;
	return rc;
}

void store_release(struct hc_store *st, struct store_ctx *const *held, size_t n)
{
	if (!n)
		return;
	bool last = false;
	pthread_mutex_lock(&st->reg_lock);
	for (size_t i = 0; i < n; i++)
		last |= --held[i]->refs == 0;
	if (last)
		pthread_cond_broadcast(&st->reg_cond);
	pthread_mutex_unlock(&st->reg_lock);
}

void store_registry_free(struct hc_store *st)
{
	for (size_t i = 0; i < st->nctx; i++)
		free(st->ctx[i]);
	st->nctx = 0;
	st->anchor = NULL;
}

int hc_store_pool_info(const struct hc_store *cst, const char *pool, struct hc_store_pool_info *out)
{
	if (!cst || !out)
		return util_fail(-EINVAL, "hc_store_pool_info: NULL argument");
	/* The table's lock is the only thing written: the store stays the same. */
	struct hc_store *st = (struct hc_store *)(uintptr_t)cst;
	pthread_mutex_lock(&st->reg_lock);
	const struct store_ctx *c = find_locked(st, pool);
	if (c)
		*out = (struct hc_store_pool_info){
			.zero_copy = c->zero_copy,
			.slot_bytes = c->slot_bytes,
			.page_bytes = c->page_bytes,
			.alignment = c->alignment,
			.objects = c->nobj,
		};
	pthread_mutex_unlock(&st->reg_lock);
	if (!c)
		return util_fail(-ENOENT, "store: no pool '%s' is registered",
				 pool ? pool : "(null)");
	return 0;
}
