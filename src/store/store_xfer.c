/*
 * Transfers: a call's pages planned into entries, cut into chunks, each
 * chunk built into the objects a backend call moves (set: looked up first
 * where that pays, see SET_LOOKUP_PAYS) and finished into page results and
 * statistics.
 */
#define _GNU_SOURCE
#include "store/names.h"
#include "store/store_object.h"
#include "store/store_stats.h"
#include "store/store_work.h"
#include "store/store_xfer.h"
#include "util/util.h"

#include <hicache/store.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* A set looks an object up before writing it only from this size on.
 * Every backend's put refuses to replace an object (-EEXIST, untouched),
 * so the lookup only saves the transfer of one that exists; for a small
 * object that costs less than looking up every one
 * (docs/PERFORMANCE-HISTORY.md). */
#define SET_LOOKUP_MIN_BYTES ((uint64_t)256 << 10)
/* ... and only while at least 1 in SET_LOOKUP_PAYS of the recent sets of
 * such objects found one existing (by the lookup, or -EEXIST from a put
 * made without one). A lookup of a name that does not exist costs the
 * file store a directory search, a real share of the store thread's time
 * per object, for nothing; where pages are set again (another instance
 * wrote them, a restart), it saves the transfer. The window halves
 * every SET_LOOKUP_WINDOW objects, so the policy follows the workload. */
#define SET_LOOKUP_PAYS 8
#define SET_LOOKUP_WINDOW 256

/* Flatten transfers t[0..nt) (their pools held: ctxs[i]) into entries,
 * checking every page and name first so a bad transfer writes nothing
 * (pages NULL: a lookup's or delete's, which move none; page 0). A
 * name of a key's 64 hex digits becomes that key (in *hexkeys), so a page
 * has one identity however it is named. v1: names are the anchor's. */
int store_plan(struct hc_pool_transfer *t, size_t nt, struct store_ctx *const *ctxs, bool v1,
	       const struct iovec *bufs, struct entry **out, size_t *nout, struct hc_key **hexkeys,
	       const char *what)
{
	size_t total = 0, nhex = 0;
	for (size_t i = 0; i < nt; i++) {
		struct store_ctx *c = ctxs[i];
		uint64_t limit = hc_pool_pages(c->pool);
		for (size_t j = 0; t[i].pages && j < t[i].n; j++)
			if (t[i].pages[j] >= limit)
				return util_fail(-EFAULT,
						 "store: page %llu lies outside the "
						 "registered pool '%s' (%llu pages); "
						 "nothing was transferred",
						 (unsigned long long)t[i].pages[j], c->name,
						 (unsigned long long)limit);
		for (size_t j = 0; !t[i].keys && j < t[i].n; j++) {
			struct hc_key k;
			int rc = store_name_check(c, t[i].names[j], v1 ? SIZE_MAX : i, j, what);
			if (rc)
				return rc;
			nhex += store_name_is_key(t[i].names[j], &k);
		}
		total += t[i].n;
	}
	struct entry *e = util_fault_malloc((total ? total : 1) * sizeof(*e));
	struct hc_key *hk = nhex ? util_fault_malloc(nhex * sizeof(*hk)) : NULL;
	if (!e || (nhex && !hk)) {
		free(e);
		free(hk);
		return -ENOMEM;
	}
	size_t k = 0, h = 0;
	for (size_t i = 0; i < nt; i++) {
		for (size_t j = 0; j < t[i].n; j++, k++) {
			const struct hc_key *key = t[i].keys ? &t[i].keys[j] : NULL;
			const char *name = key ? NULL : t[i].names[j];
			/* hk is NULL when no name is a key: no &hk[h] then (UB). */
			if (name && hk && store_name_is_key(name, &hk[h])) {
				key = &hk[h++];
				name = NULL;
			}
			e[k] = (struct entry){.ctx = ctxs[i],
					      .key = key,
					      .name = name,
					      .page = t[i].pages ? t[i].pages[j] : 0,
					      .result = t[i].results ? &t[i].results[j] : NULL};
			if (bufs) { /* one transfer (store_op_plan) */
				e[k].buf = bufs[j].iov_base;
				e[k].buf_len = bufs[j].iov_len;
			}
			if (e[k].result)
				*e[k].result = -ENOENT;
		}
	}
	*out = e;
	*nout = total;
	*hexkeys = hk;
	return 0;
}

/* A get's destination: entry k of the call, its pool's memory and page. */
struct dest {
	const struct hc_pool *pool;
	uint64_t page;
	size_t k;
};

static int dest_cmp(const void *pa, const void *pb)
{
	const struct dest *a = pa, *b = pb;
	if (a->pool != b->pool)
		return (uintptr_t)a->pool < (uintptr_t)b->pool ? -1 : 1;
	if (a->page != b->page)
		return a->page < b->page ? -1 : 1;
	return a->k < b->k ? -1 : a->k > b->k;
}

/* Transfer *ti and its page *tj of the call's flat entry k. */
static void entry_at(const struct hc_pool_transfer *t, size_t nt, size_t k, size_t *ti, size_t *tj)
{
	size_t i = 0;
	while (i + 1 < nt && k >= t[i].n) {
		k -= t[i].n;
		i++;
	}
	*ti = i;
	*tj = k;
}

static int dest_twice(const struct hc_pool_transfer *t, size_t nt, bool v1, const struct entry *e,
		      size_t a, size_t b, const char *what)
{
	size_t ta, ja, tb, jb;
	entry_at(t, nt, a, &ta, &ja);
	entry_at(t, nt, b, &tb, &jb);
	if (v1)
		return util_fail(-EINVAL,
				 "%s: page %llu of pool '%s' is the destination of pages[%zu] "
				 "and pages[%zu]; a get reads each page into its own slot, so "
				 "nothing was read",
				 what, (unsigned long long)e[a].page, e[a].ctx->name, ja, jb);
	return util_fail(-EINVAL,
			 "%s: page %llu of pool '%s' is the destination of page %zu of "
			 "transfer %zu and page %zu of transfer %zu; a get reads each page "
			 "into its own slot, so nothing was read",
			 what, (unsigned long long)e[a].page, e[a].ctx->name, ja, ta, jb, tb);
}

/* Whether the runs of entries of one pool so far all rise strictly, each
 * pool in one run (the engines' usual call): no page can repeat then.
 * Else false, and the sort below decides. */
static bool dests_rise(const struct entry *e, size_t n)
{
	const struct hc_pool *seen[STORE_MAX_POOLS];
	size_t nseen = 0;
	for (size_t k = 0; k < n; k++) {
		const struct hc_pool *p = e[k].ctx->pool;
		if (k && p == e[k - 1].ctx->pool) {
			if (e[k].page <= e[k - 1].page)
				return false;
			continue;
		}
		for (size_t s = 0; s < nseen; s++)
			if (seen[s] == p)
				return false;
		if (nseen == STORE_MAX_POOLS)
			return false;
		seen[nseen++] = p;
	}
	return true;
}

/* A get must not name one destination page twice (in one transfer, or in
 * two transfers of one pool): the second object read into a page the
 * first is being read into, or checked there, would fail its checksum
 * against the other's bytes, and a healthy object would be counted
 * corrupt and deleted. Refused whole before anything is read; cheap for
 * the usual call (dests_rise), a sort of a copy otherwise. Pages of a
 * logical anchor hold nothing and may repeat. Returns 0, -EINVAL naming
 * the page, or -ENOMEM. */
int store_plan_check_dests(const struct hc_pool_transfer *t, size_t nt, bool v1,
			   const struct entry *e, size_t n, const char *what)
{
	if (n < 2 || dests_rise(e, n))
		return 0;
	struct dest *d = util_fault_malloc(n * sizeof(*d));
	if (!d)
		return util_fail(-ENOMEM, "%s: no memory", what);
	size_t m = 0;
	for (size_t k = 0; k < n; k++)
		if (!e[k].ctx->marker)
			d[m++] = (struct dest){e[k].ctx->pool, e[k].page, k};
	qsort(d, m, sizeof(*d), dest_cmp);
	int rc = 0;
	for (size_t i = 1; i < m && !rc; i++)
		if (d[i].pool == d[i - 1].pool && d[i].page == d[i - 1].page)
			rc = dest_twice(t, nt, v1, e, d[i - 1].k, d[i].k, what);
	free(d);
	return rc;
}

static void set_result(struct entry *e, int rc)
{
	if (e->result)
		*e->result = rc;
}

/* Names the chunk's objects into w; *nobj gets their count. A name that
 * does not fit fails the chunk: registration makes that impossible, and
 * a stale name would move this page's bytes under another page's. Then
 * the chunk's bounce slots (bounce_bytes), for a set and a get alike. */
static int chunk_begin(struct hc_store *st, struct work *w, const struct entry *e, size_t from,
		       size_t to, size_t bounce_bytes, size_t *nobj)
{
	size_t k = 0;
	for (size_t i = from; i < to; i++) {
		const struct store_ctx *c = e[i].ctx;
		for (unsigned o = 0; o < c->nobj; o++, k++) {
			struct work_obj *wo = &w->item[k];
			int rc = store_object_name(c, e[i].key, e[i].name, o, wo->name);
			if (rc)
				return rc;
			wo->so = (struct store_obj){
				.name = wo->name,
				.route = hc_key_route_hash(wo->name),
				.iov = wo->iov,
				.len = c->obj[o].len,
				.result = -ENOENT,
			};
		}
	}
	*nobj = k;
	return work_bounce(st, w, bounce_bytes);
}

/* Whether a set of this object looks it up first (see SET_LOOKUP_PAYS),
 * with `pending` lookups already decided whose outcome is not known yet:
 * counted as misses, so a chunk of new pages decided at once makes no
 * more lookups than one decided object by object would. */
static bool set_looks_up(struct hc_store *st, uint64_t len, uint32_t pending)
{
	if (len < SET_LOOKUP_MIN_BYTES)
		return false;
	uint32_t recent = atomic_load_explicit(&st->set_recent, memory_order_relaxed);
	uint32_t existed = atomic_load_explicit(&st->set_existed, memory_order_relaxed);
	return (uint64_t)existed * SET_LOOKUP_PAYS >= (uint64_t)recent + pending;
}

/* One set of an object of SET_LOOKUP_MIN_BYTES or more, and whether it
 * existed. Races between threads only blur the window. */
static void set_note_existing(struct hc_store *st, bool existed)
{
	uint32_t recent = atomic_fetch_add_explicit(&st->set_recent, 1, memory_order_relaxed) + 1;
	if (existed)
		atomic_fetch_add_explicit(&st->set_existed, 1, memory_order_relaxed);
	if (recent >= SET_LOOKUP_WINDOW) {
		atomic_store_explicit(&st->set_recent, recent / 2, memory_order_relaxed);
		atomic_store_explicit(&st->set_existed,
				      atomic_load_explicit(&st->set_existed, memory_order_relaxed) /
					      2,
				      memory_order_relaxed);
	}
}

/* One backend lookup for the n (<= CHUNK_OBJS) objects *objs[i]; found[i]
 * says whether each exists. Their results are left alone. */
static void set_lookup(struct hc_store *st, struct store_obj **objs, size_t n, bool *found)
{
	struct store_obj look[CHUNK_OBJS];
	for (size_t i = 0; i < n; i++) {
		look[i] = *objs[i];
		look[i].result = -ENOENT;
	}
	if (n)
		st->ops->exists(st->be, look, n, false);
	for (size_t i = 0; i < n; i++)
		found[i] = look[i].result == 0;
}

/* set_lookup of objects about to be set, counted in the window that
 * set_looks_up reads. */
static void set_lookup_first(struct hc_store *st, struct store_obj **objs, size_t n, bool *found)
{
	set_lookup(st, objs, n, found);
	for (size_t i = 0; i < n; i++)
		set_note_existing(st, found[i]);
}

/* store_obj.prepare of a set, before the object is written: its image is
 * made here, one object at a time, while the objects before it are
 * already on their way to the disk. (An object the backend finds existing
 * first, look_first, never gets here.) */
static int set_prepare(void *arg)
{
	store_build_image(arg);
	return 0;
}

/* Whether an object whose write failed with err may still be there: the
 * store refused the write (read-only, full, no permission), not an
 * unreachable one, which a lookup would only wait for once more. */
static bool set_failure_worth_lookup(int err)
{
	switch (err) {
	case -ETIMEDOUT:
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -ECONNABORTED:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -ENOMEM:
	case -ENOTUNIQ: /* another geometry's object: a lookup would find its name */
		return false;
	default:
		return true;
	}
}

/* The images and the objects to write of entries [from, to) into w:
 * w->objs[0..w->nmove). */
int store_set_chunk_build(struct hc_store *st, struct work *w, struct entry *e, size_t from,
			  size_t to, size_t bounce_bytes)
{
	size_t nobj = 0;
	int rc = chunk_begin(st, w, e, from, to, bounce_bytes, &nobj);
	if (rc)
		return rc;
	bool hooks = st->ops->object_hooks;
	/* Objects already stored are not rewritten: looked up in set_prepare,
	 * or here for the whole chunk when the backend has no hooks (small
	 * ones are not looked up: the put refuses them). */
	bool looked[CHUNK_OBJS] = {false};
	if (!hooks) {
		struct store_obj *big[CHUNK_OBJS];
		bool found[CHUNK_OBJS];
		size_t nbig = 0;
		for (size_t b = 0; b < nobj; b++)
			if ((looked[b] = set_looks_up(st, w->item[b].so.len, 0)))
				big[nbig++] = &w->item[b].so;
		set_lookup_first(st, big, nbig, found);
		for (size_t b = 0; b < nbig; b++)
			big[b]->result = found[b] ? 0 : -ENOENT;
	}
	size_t nmove = 0, k = 0, slot_off = 0;
	uint32_t pending = 0; /* look_first decided in this chunk */
	for (size_t i = from; i < to; i++) {
		struct store_ctx *c = e[i].ctx;
		struct hc_segment segs[STORE_MAX_OBJS];
		uint8_t *slot = store_entry_page(&e[i], w, &slot_off, segs);
		for (unsigned o = 0; o < c->nobj; o++, k++) {
			struct store_obj *obj = &w->item[k].so;
			struct obj_job *j = &w->item[k].job;
			store_obj_job_init(st, w, &e[i], o, k, slot, segs, store_zero_block);
			j->at = SIZE_MAX;
			if (looked[k]) {
				j->looked_up = true;
				stat_add(c, st, STAT(set_lookups), 1);
			}
			if (!hooks && obj->result == 0) {
				j->existed = true;
				continue;
			}
			if (hooks) {
				obj->prepare = set_prepare;
				obj->hook_arg = j;
				/* Whether to look it up is decided now, for
				 * the backend to do before it prepares it. */
				if ((obj->look_first = set_looks_up(st, obj->len, pending))) {
					pending++;
					j->looked_up = true;
					stat_add(c, st, STAT(set_lookups), 1);
				}
			} else {
				store_build_image(j);
			}
			/* The backend takes a contiguous array: the ones to
			 * write, in order. */
			j->at = nmove;
			w->objs[nmove++] = *obj;
		}
	}
	w->nobj = nobj;
	w->nmove = nmove;
	return 0;
}

/* After the put of w->objs: the pages' results and statistics. */
void store_set_chunk_finish(struct hc_store *st, struct work *w, struct entry *e)
{
	size_t from = w->from, to = w->to, k;
	struct store_obj *failed[CHUNK_OBJS];
	bool found[CHUNK_OBJS];
	size_t nfailed = 0;
	for (k = 0; k < w->nobj; k++) {
		struct work_obj *wo = &w->item[k];
		if (wo->job.at == SIZE_MAX)
			continue; /* not written */
		int r = wo->so.result = w->objs[wo->job.at].result;
		/* Looked up by the backend (look_first), or written without
		 * a lookup: whether one pays. A chunk-wide lookup (no hooks)
		 * was counted when it was made. */
		if (wo->so.len >= SET_LOOKUP_MIN_BYTES &&
		    (wo->so.look_first || !wo->job.looked_up) && (r == 0 || r == -EEXIST))
			set_note_existing(st, r == -EEXIST);
		/* An object written without a lookup that failed may exist
		 * all the same (a read-only store, a full disk): that is no
		 * failure. */
		if (r && r != -EEXIST && !wo->job.looked_up && set_failure_worth_lookup(r))
			failed[nfailed++] = &wo->so;
	}
	set_lookup(st, failed, nfailed, found);
	for (size_t j = 0; j < nfailed; j++)
		if (found[j])
			failed[j]->result = -EEXIST;

	k = 0;
	for (size_t i = from; i < to; i++) {
		struct store_ctx *c = e[i].ctx;
		int page_rc = 0;
		bool wrote = false, all_existed = true;
		uint64_t bytes = 0;
		for (unsigned o = 0; o < c->nobj; o++, k++) {
			int r = w->item[k].so.result;
			if (w->item[k].job.existed || r == -EEXIST)
				continue;
			all_existed = false;
			if (r == 0) {
				wrote = true;
				bytes += c->obj[o].payload;
			} else if (!page_rc) {
				page_rc = r;
			}
		}
		set_result(&e[i], page_rc);
		stat_add(c, st,
			 page_rc       ? STAT(failures)
			 : all_existed ? STAT(pages_existing)
				       : STAT(pages_written),
			 1);
		if (page_rc == -ENOTUNIQ)
			stat_add(c, st, STAT(other_geometry), 1);
		if (wrote)
			stat_add(c, st, STAT(bytes_written), bytes);
	}
}

/* The objects of entries [from, to) into w->objs[0..w->nmove), each
 * checked by its arrived hook (backends with hooks) or by the finish. */
int store_get_chunk_build(struct hc_store *st, struct work *w, struct entry *e, size_t from,
			  size_t to, size_t bounce_bytes)
{
	size_t nobj = 0;
	int rc = chunk_begin(st, w, e, from, to, bounce_bytes, &nobj);
	if (rc)
		return rc;
	bool hooks = st->ops->object_hooks;
	size_t k = 0, slot_off = 0;
	for (size_t i = from; i < to; i++) {
		struct store_ctx *c = e[i].ctx;
		struct hc_segment segs[STORE_MAX_OBJS];
		uint8_t *slot = store_entry_page(&e[i], w, &slot_off, segs);
		for (unsigned o = 0; o < c->nobj; o++, k++) {
			struct store_obj *obj = &w->item[k].so;
			struct obj_job *j = &w->item[k].job;
			store_obj_job_init(st, w, &e[i], o, k, slot, segs, w->discard);
			if (hooks) {
				obj->arrived = store_get_arrived;
				obj->hook_arg = j;
			}
			j->at = k;
			w->objs[k] = *obj;
		}
	}
	w->nobj = nobj;
	w->nmove = nobj;
	return 0;
}

/* After the get of w->objs: checks left, results, statistics, healing. A
 * page is a hit only once every object of it passed its check, here or in
 * its arrived hook (j->checked): a hook that has not run leaves its
 * check to this loop. */
void store_get_chunk_finish(struct hc_store *st, struct work *w, struct entry *e)
{
	size_t from = w->from, to = w->to, k;
	/* Broken objects are removed, so the next set of the page heals it
	 * (objects are never overwritten in place). */
	struct store_obj heal[CHUNK_OBJS];
	size_t nheal = 0, ncorrupt = 0;
	const char *first_corrupt = NULL;
	k = 0;
	for (size_t i = from; i < to; i++) {
		struct store_ctx *c = e[i].ctx;
		int page_rc = 0;
		for (unsigned o = 0; o < c->nobj; o++, k++) {
			struct obj_job *j = &w->item[k].job;
			int r = w->objs[k].result;
			if (r == -ENODATA || r == -EFBIG)
				r = -EBADMSG; /* wrong size: not an object of this geometry */
			if (r == 0) {
				if (!j->checked)
					store_get_check(j);
				r = j->verdict;
				if (j->damaged && st->ops->remove)
					heal[nheal++] = w->objs[k];
			}
			if (r == -EBADMSG) {
				stat_add(c, st, STAT(corrupt), 1);
				if (!ncorrupt++)
					first_corrupt = w->objs[k].name;
			}
			if (r && !page_rc)
				page_rc = r;
		}
		set_result(&e[i], page_rc);
		if (!page_rc) {
			stat_add(c, st, STAT(hits), 1);
			stat_add(c, st, STAT(pages_read), 1);
			stat_add(c, st, STAT(bytes_read), c->page_bytes);
		} else if (page_rc == -ENOENT || page_rc == -EBADMSG) {
			stat_add(c, st, STAT(misses), 1);
		} else {
			stat_add(c, st, STAT(failures), 1);
		}
	}
	if (ncorrupt)
		store_log_bad(&st->bad_get, "get", "corrupt or of another geometry", ncorrupt,
			      first_corrupt);
	if (nheal)
		st->ops->remove(st->be, heal, nheal);
}

/* MLA: rank 0 writes for every rank; the others report success. Returns
 * how many entries are left to write. */
size_t store_drop_skipped_writes(struct entry *e, size_t n)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (e[i].ctx->skip_writes)
			set_result(&e[i], 0);
		else
			e[m++] = e[i];
	}
	return m;
}
