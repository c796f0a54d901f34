/*
 * A call's op: planned from transfers (its pools held, its entries and
 * results), freed, and what it returns once over. The synchronous calls,
 * the started ones, lookups and deletes all go through one op; the files
 * that run and finish ops (store_stream.c, store_cq.c, store_meta.c) sit
 * above this one, and the calls (store_call.c) above them.
 */
#define _GNU_SOURCE
#include "store/registry.h"
#include "store/store_op.h"
#include "store/store_stats.h"
#include "store/store_xfer.h"
#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* What a set returns: a whole-call error, else the first failed page's. */
static int set_outcome(int rc, const int *results, size_t n)
{
	for (size_t i = 0; !rc && i < n; i++)
		if (results[i])
			rc = results[i];
	return rc;
}

static int64_t leading(const int *results, size_t n)
{
	size_t i = 0;
	while (i < n && results[i] == 0)
		i++;
	return (int64_t)i;
}

void store_op_free(struct hc_store_op *o)
{
	store_release(o->st, o->touched, o->ntouched);
	free(o->e);
	free(o->hexkeys);
	free(o->out);
	free(o->own);
	free(o);
}

/* Whether every transfer names its pages (keys or names) and, where it
 * moves them, pages. */
static int transfers_check(const struct hc_pool_transfer *t, size_t nt, bool moves)
{
	for (size_t i = 0; i < nt; i++)
		if (t[i].n && ((!t[i].keys && !t[i].names) || (moves && !t[i].pages)))
			return util_fail(-EINVAL,
					 "store: transfer %zu ('%s') has NULL keys or pages", i,
					 t[i].pool ? t[i].pool : "(null)");
	return 0;
}

/* Caller buffers (bufs, one per page of the one transfer t[0]) stand in
 * for the pages of a bounce pool whose page is one object: the object is
 * built in, and read into, the pool's bounce slot, so a buffer needs no
 * alignment and may be shorter than the page. */
static int bufs_check(struct store_ctx *const *ctxs, const struct hc_pool_transfer *t, size_t nt,
		      const struct iovec *bufs, const char *what)
{
	if (!bufs)
		return 0;
	if (nt != 1)
		return util_fail(-EINVAL, "%s: one transfer with buffers, not %zu", what, nt);
	const struct store_ctx *c = ctxs[0];
	if (c->marker || c->zero_copy || !c->split || c->nobj != 1)
		return util_fail(-EINVAL,
				 "%s: pool '%s' cannot take caller buffers: it must hold one "
				 "buffer per page (a segments or indexer pool) and be registered "
				 "in bounce mode (force_bounce)",
				 what, c->name);
	for (size_t i = 0; i < t->n; i++)
		if (!bufs[i].iov_base || !bufs[i].iov_len || bufs[i].iov_len > c->obj[0].payload)
			return util_fail(-EINVAL,
					 "%s: buffer %zu (%zu bytes at %p) must be non-empty and "
					 "at most the page's %llu bytes",
					 what, i, bufs[i].iov_len, bufs[i].iov_base,
					 (unsigned long long)c->obj[0].payload);
	return 0;
}

/* Plan transfers t[0..nt) into a new op (a started one, or run_now's),
 * holding its pools (v1: the anchor) until it is over. Transfers without
 * results get ours: the outcome needs every page's. */
int store_op_plan(struct hc_store *st, struct hc_pool_transfer *t, size_t nt, enum transfer_op dir,
		  bool v1, const struct iovec *bufs, struct hc_store_op **out, const char *what)
{
	*out = NULL;
	int rc = transfers_check(t, nt, (dir == OP_SET || dir == OP_GET) && !bufs);
	if (rc)
		return rc;
	size_t extra = 0;
	for (size_t i = 0; i < nt; i++)
		if (!t[i].results)
			extra += t[i].n;
	struct hc_store_op *o = util_fault_calloc(1, sizeof(*o));
	struct hc_pool_transfer *c = util_fault_malloc((nt ? nt : 1) * sizeof(*c));
	struct store_ctx **ctxs = util_fault_malloc((nt ? nt : 1) * sizeof(*ctxs));
	if (o) {
		o->st = st;
		o->out = util_fault_malloc((nt ? nt : 1) * sizeof(*o->out));
		o->own = util_fault_malloc((extra ? extra : 1) * sizeof(*o->own));
	}
	if (!o || !c || !ctxs || !o->out || !o->own) {
		if (o)
			store_op_free(o);
		free(c);
		free(ctxs);
		return util_fail(-ENOMEM, "%s: no memory", what);
	}
	o->dir = dir;
	o->nout = nt;
	for (size_t i = 0, off = 0; i < nt; i++) {
		c[i] = t[i];
		if (!c[i].results) {
			c[i].results = o->own + off;
			off += c[i].n;
		}
		o->out[i] = (struct op_out){c[i].results, c[i].n};
	}
	rc = store_hold(st, c, nt, v1, false, ctxs, o->touched, &o->ntouched, what);
	if (!rc && v1 && dir == OP_GET && ctxs[0]->marker)
		rc = util_fail(-EINVAL,
			       "%s: the anchor '%s' is a logical pool with no data; use "
			       "hc_store_get_v2",
			       what, ctxs[0]->name);
	if (!rc)
		rc = bufs_check(ctxs, c, nt, bufs, what);
	if (!rc)
		rc = store_plan(c, nt, ctxs, v1, bufs, &o->e, &o->ne, &o->hexkeys, what);
	/* Caller buffers are the caller's to keep apart (they are not pages). */
	if (!rc && dir == OP_GET && !bufs)
		rc = store_plan_check_dests(c, nt, v1, o->e, o->ne, what);
	free(c);
	free(ctxs);
	if (rc) {
		store_op_free(o);
		return rc;
	}
	o->t0 = now_us();
	if (dir == OP_SET)
		o->ne = store_drop_skipped_writes(o->e, o->ne);
	*out = o;
	return 0;
}

/* What a started op returns, as its synchronous call would. */
int64_t store_op_outcome(const struct hc_store_op *o)
{
	if (o->dir == OP_LOOKUP || o->dir == OP_DELETE) {
		if (o->rc)
			return o->rc;
		int64_t found = 0;
		for (size_t i = 0; i < o->nout; i++)
			for (size_t j = 0; j < o->out[i].n; j++)
				found += o->out[i].results[j] == 0;
		return found;
	}
	if (o->dir == OP_GET)
		return o->rc ? o->rc : o->nout ? leading(o->out[0].results, o->out[0].n) : 0;
	int rc = o->rc;
	for (size_t i = 0; !rc && i < o->nout; i++)
		rc = set_outcome(0, o->out[i].results, o->out[i].n);
	return rc;
}
