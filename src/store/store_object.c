/*
 * Object images: the trailer of an object, its iovecs (zero-copy: pool
 * segment, pad, trailer block; bounce: its slot), the image built before a
 * put and the checks of one that was read (trailer, geometry, checksum).
 */
#define _GNU_SOURCE
#include "pool/pool_api.h"
#include "store/store_object.h"
#include "util/util.h"

#include <hicache/mem.h>
#include <errno.h>
#include <string.h>

/* A bounce page from this size on is hashed while it is copied, block by
 * block: into the pool after a verified read, into its slot before a
 * write. Hashing it whole and copying it are two passes over cold memory
 * (the disk wrote the slot; the device wrote the pool), of which the
 * second misses the cache once the page is larger than about half of L2.
 * Smaller pages do better in one hash and one copy from L2
 * (docs/PERFORMANCE-HISTORY.md). */
#define BOUNCE_SUMMED_MIN_BYTES ((size_t)1 << 20)

uint8_t store_zero_block[FORMAT_BLOCK_MAX] __attribute__((aligned(FORMAT_BLOCK_MAX)));

static void trailer_for(const struct store_ctx *c, unsigned o, uint64_t checksum, const char *name,
			struct store_trailer *t)
{
	*t = c->tmpl;
	t->name_hash = format_name_hash(name);
	t->component = (uint16_t)c->obj[o].kind;
	t->component_index = c->obj[o].index;
	t->payload_len = c->obj[o].payload;
	t->checksum = checksum;
}

/* iov for object o of a zero-copy page: segment, pad, trailer block. */
static unsigned zero_copy_iov(struct iovec *iov, const struct hc_segment *seg, uint64_t len,
			      size_t block, uint8_t *pad, uint8_t *trailer)
{
	unsigned n = 0;
	if (seg->len)
		iov[n++] = (struct iovec){seg->addr, seg->len};
	size_t padlen = (size_t)(len - block - seg->len);
	if (padlen)
		iov[n++] = (struct iovec){pad, padlen};
	iov[n++] = (struct iovec){trailer, block};
	return n;
}

/* Where an entry's page is for this chunk: its segments in the pool (when
 * its objects are, zero-copy or bounced) and its bounce slot, right after
 * the previous entry's. */
uint8_t *store_entry_page(const struct entry *e, struct work *w, size_t *slot_off,
			  struct hc_segment *segs)
{
	const struct store_ctx *c = e->ctx;
	if (c->split)
		hc_pool_page_segments(c->pool, e->page, segs, STORE_MAX_OBJS);
	if (e->buf) { /* a caller's buffer in place of the page's one segment */
		segs[0].addr = e->buf;
		segs[0].len = e->buf_len;
	}
	/* A zero-copy chunk may have no bounce buffer: no NULL + offset. */
	uint8_t *slot = w->bounce ? w->bounce + *slot_off : NULL;
	*slot_off += c->slot_bytes;
	return slot;
}

/* Copy len bytes from src to dst and return their checksum: in one pass
 * from BOUNCE_SUMMED_MIN_BYTES on (see there). */
static uint64_t copy_summed(void *dst, const void *src, size_t len)
{
	if (len < BOUNCE_SUMMED_MIN_BYTES) {
		memcpy(dst, src, len);
		return util_checksum(dst, len);
	}
	struct util_checksum_copy sum;
	util_checksum_copy_init(&sum);
	util_checksum_copy_add(&sum, dst, src, len);
	return util_checksum_copy_end(&sum);
}

/* The object's image around its iovecs, which are already in place: the
 * trailer with the payload's checksum and, in bounce mode, the page (a
 * split page: this object's segment) gathered into its slot and the
 * padding. */
void store_build_image(const struct obj_job *j)
{
	const struct store_ctx *c = j->e->ctx;
	struct store_trailer t;
	if (c->marker) {
		trailer_for(c, j->o, util_checksum(store_zero_block, 0), j->obj->name, &t);
	} else if (c->zero_copy) {
		trailer_for(c, j->o, util_checksum(j->seg.addr, j->seg.len), j->obj->name, &t);
	} else if (c->split) {
		/* The segment into its slice of the slot: the object a zero-copy
		 * pool writes from the pool, byte for byte. A caller's buffer
		 * may be shorter than the segment: zero padded to it, and the
		 * checksum covers the whole payload, as a reader checks it. */
		uint64_t pay = c->obj[j->o].payload;
		uint64_t sum;
		if (j->seg.len < pay) {
			memcpy(j->slot, j->seg.addr, j->seg.len);
			memset(j->slot + j->seg.len, 0, pay - j->seg.len);
			sum = util_checksum(j->slot, pay);
		} else {
			sum = copy_summed(j->slot, j->seg.addr, j->seg.len);
		}
		trailer_for(c, j->o, sum, j->obj->name, &t);
		memset(j->slot + pay, 0, j->obj->len - c->block - pay);
	} else {
		uint64_t sum;
		if (c->page_bytes >= BOUNCE_SUMMED_MIN_BYTES) {
			/* One pass over the pool's cold page instead of two (see
			 * BOUNCE_SUMMED_MIN_BYTES). */
			sum = pool_gather_summed(c->pool, j->e->page, j->slot);
		} else {
			hc_pool_gather(c->pool, j->e->page, j->slot, c->page_bytes);
			sum = util_checksum(j->slot, c->page_bytes);
		}
		memset(j->slot + c->page_bytes, 0, j->obj->len - c->block - c->page_bytes);
		trailer_for(c, j->o, sum, j->obj->name, &t);
	}
	format_trailer_write(j->block, c->block, &t);
}

/* Object k (object o of page e) of a chunk: its job and where its image
 * is: the trailer block alone (marker), the pool segment plus pad and
 * trailer block (zero-copy; pad is the zero block on set, the discard
 * block on get), or the page's bounce slot. */
void store_obj_job_init(struct hc_store *st, struct work *w, const struct entry *e, unsigned o,
			size_t k, uint8_t *slot, const struct hc_segment *segs, uint8_t *pad)
{
	const struct store_ctx *c = e->ctx;
	struct work_obj *wo = &w->item[k];
	struct store_obj *obj = &wo->so;
	struct obj_job *j = &wo->job;
	*j = (struct obj_job){.st = st,
			      .e = e,
			      .obj = obj,
			      .o = o,
			      .slot = slot,
			      .block = w->trailers + k * FORMAT_BLOCK_MAX};
	if (c->marker) {
		wo->iov[0] = (struct iovec){j->block, c->block};
		obj->iovcnt = 1;
	} else if (c->zero_copy) {
		j->seg = segs[o];
		obj->iovcnt = zero_copy_iov(wo->iov, &segs[o], obj->len, c->block, pad, j->block);
	} else {
		/* A split page's object o has its slice of the slot. */
		j->slot = slot + c->obj[o].slot_off;
		if (c->split)
			j->seg = segs[o];
		j->block = j->slot + obj->len - c->block;
		wo->iov[0] = (struct iovec){j->slot, obj->len};
		obj->iovcnt = 1;
	}
}

/* Check a fetched object; returns 0 or -EBADMSG. *damaged is set when the
 * object is broken (torn or flipped: no valid trailer, or a checksum that
 * does not match) rather than a whole object of another geometry, which
 * another writer may legitimately use. */
static int verify_trailer(const struct store_ctx *c, unsigned o, const char *name,
			  const uint8_t *block, struct store_trailer *got, bool *damaged)
{
	struct store_trailer want;
	*damaged = false;
	if (format_trailer_read(block + c->block - FORMAT_TRAILER_BYTES, got)) {
		*damaged = true;
		return -EBADMSG;
	}
	trailer_for(c, o, got->checksum, name, &want);
	want.magic = got->magic;
	want.version = got->version;
	want.self_check = got->self_check;
	return memcmp(got, &want, sizeof(*got)) ? -EBADMSG : 0;
}

static int verify_sum(uint64_t sum, const struct store_trailer *got, bool *damaged)
{
	*damaged = sum != got->checksum;
	return *damaged ? -EBADMSG : 0;
}

static int verify_object(const struct hc_store *st, const struct store_ctx *c, unsigned o,
			 const char *name, const uint8_t *block, const void *payload, bool *damaged)
{
	struct store_trailer got;
	int rc = verify_trailer(c, o, name, block, &got, damaged);
	if (rc || !st->verify || !c->obj[o].payload)
		return rc;
	return verify_sum(util_checksum(payload, c->obj[o].payload), &got, damaged);
}

/* A verified bounce page of BOUNCE_SUMMED_MIN_BYTES or more. A page that
 * fails has been copied all the same; its pool page holds what was read,
 * as a zero-copy page that fails does. */
static int get_bounce_verified(struct obj_job *j)
{
	const struct store_ctx *c = j->e->ctx;
	struct store_trailer got;
	int rc = verify_trailer(c, j->o, j->obj->name, j->block, &got, &j->damaged);
	if (rc)
		return rc;
	return verify_sum(pool_scatter_summed(c->pool, j->e->page, j->slot), &got, &j->damaged);
}

/* A bounced object of a split page: checked, and its payload copied into
 * its own segment of the pool (never another object's) when it passes; in
 * one pass from BOUNCE_SUMMED_MIN_BYTES on, which copies a segment that
 * fails all the same, as get_bounce_verified does a page. */
static int get_segment_bounced(struct obj_job *j)
{
	const struct store_ctx *c = j->e->ctx;
	struct store_trailer got;
	int rc = verify_trailer(c, j->o, j->obj->name, j->block, &got, &j->damaged);
	if (rc)
		return rc;
	uint64_t pay = c->obj[j->o].payload;
	if (j->seg.len < pay) { /* a caller's shorter buffer: the page is checked whole */
		if (j->st->verify &&
		    (rc = verify_sum(util_checksum(j->slot, pay), &got, &j->damaged)))
			return rc;
		memcpy(j->seg.addr, j->slot, j->seg.len);
		return 0;
	}
	if (j->st->verify && j->seg.len >= BOUNCE_SUMMED_MIN_BYTES)
		return verify_sum(copy_summed(j->seg.addr, j->slot, j->seg.len), &got, &j->damaged);
	if (j->st->verify &&
	    (rc = verify_sum(util_checksum(j->slot, j->seg.len), &got, &j->damaged)))
		return rc;
	memcpy(j->seg.addr, j->slot, j->seg.len);
	return 0;
}

/* Check an object that was read whole. A bounce page that passes goes into
 * the pool at once (a split page object by object, each into its segment). */
void store_get_check(struct obj_job *j)
{
	const struct store_ctx *c = j->e->ctx;
	j->checked = true;
	if (!c->zero_copy && c->split) {
		j->verdict = get_segment_bounced(j);
		return;
	}
	if (!c->zero_copy && !c->marker && j->st->verify &&
	    c->page_bytes >= BOUNCE_SUMMED_MIN_BYTES) {
		j->verdict = get_bounce_verified(j);
		return;
	}
	const void *payload = c->marker ? NULL : c->zero_copy ? j->seg.addr : j->slot;
	j->verdict = verify_object(j->st, c, j->o, j->obj->name, j->block, payload, &j->damaged);
	if (!j->verdict && !c->zero_copy && !c->marker)
		hc_pool_scatter(c->pool, j->e->page, j->slot, c->page_bytes);
}

/* store_obj.arrived of a get: the checksum of this object is taken while
 * the rest of the chunk is still being read. */
void store_get_arrived(void *arg)
{
	store_get_check(arg);
}
