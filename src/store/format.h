/*
 * The object format shared by every backend (docs/FORMAT.md), version 2:
 *
 *   | payload (P bytes) | zeros to a multiple of B | B-byte trailer block |
 *                                                  the last 64 bytes are
 *                                                  struct store_trailer
 *
 * B, the store's object block, is a power of two from 512 to 4096: the
 * file system's direct-I/O alignment for the file backend, so every piece
 * stays aligned for O_DIRECT, and 512 elsewhere. Object size =
 * round_up(P, B) + B is known from the geometry and B alone (exists
 * compares sizes), and a size names its B: round_up(P, B) + B grows with B,
 * so a checker that knows only the file infers it. The trailer carries a
 * hash of the object's name, so an object renamed or copied under another
 * page's name is refused. All integers little-endian.
 */
#ifndef HC_SRC_STORE_FORMAT_H
#define HC_SRC_STORE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FORMAT_BLOCK_MIN 512u
#define FORMAT_BLOCK_MAX 4096u
#define FORMAT_MAGIC 0x3130454741504348ull /* "HCPAGE01" read as little-endian bytes */
#define FORMAT_VERSION 2u
#define FORMAT_TRAILER_BYTES 64u

struct store_trailer {
	uint64_t magic;
	uint16_t version;
	uint16_t pool_kind; /* enum hc_pool_kind */
	uint16_t layout;    /* enum hc_kv_layout for KV, 0 otherwise */
	uint16_t component; /* enum hc_component */
	uint32_t component_index;
	uint32_t page_tokens;
	uint64_t geometry;    /* XXH3-64 of the pool's canonical geometry */
	uint64_t payload_len; /* P */
	uint64_t checksum;    /* XXH3-64 of the payload; any value, 0 included */
	uint64_t name_hash;   /* XXH3-64 of the object's name (format_name_hash) */
	uint64_t self_check;  /* XXH3-64 of the 56 bytes above */
};
_Static_assert(sizeof(struct store_trailer) == FORMAT_TRAILER_BYTES, "on-disk trailer ABI");

static inline bool format_block_valid(uint64_t block)
{
	return block >= FORMAT_BLOCK_MIN && block <= FORMAT_BLOCK_MAX && !(block & (block - 1));
}

/* Object bytes for a payload in blocks of `block`, or 0 on overflow. */
static inline uint64_t format_object_len(uint64_t payload, uint64_t block)
{
	uint64_t padded = (payload + block - 1) / block * block;
	if (padded < payload || padded + block < padded)
		return 0;
	return padded + block;
}

/* The block an object of size bytes with this payload was written in, or
 * 0 when no block gives that size. */
uint64_t format_block_of(uint64_t payload, uint64_t size);

/* The name hash every trailer carries: XXH3-64 of the name's bytes. */
uint64_t format_name_hash(const char *name);

/* Fill a trailer block of `block` bytes: zeros, then the trailer. */
void format_trailer_write(void *trailer_block, uint64_t block, const struct store_trailer *t);
/* Check a trailer structurally: magic, version, self-check. `tail` points
 * at an object's last FORMAT_TRAILER_BYTES. Copies the trailer to *out.
 * Returns 0 or -EBADMSG. */
int format_trailer_read(const void *tail, struct store_trailer *out);

/* The one check of an object file on its own (fsck, the store's healing,
 * the fuzzer): fd is open on a regular file of size bytes stored under
 * name. The trailer is read first; the size must be an object size of its
 * payload_len (in any valid block), and the name hash must be name's, so
 * at most that many bytes are read, through a bounded buffer (never a
 * buffer of the file's size). The payload checksum must match. Returns 0
 * (*out filled), -EBADMSG (not a valid object of that name), or -errno of
 * a read (-ENODATA: the file shrank while read). */
int format_check_fd(int fd, uint64_t size, const char *name, struct store_trailer *out);

/* The same check of an object image in memory (the mem and S3 backends'
 * healing): len bytes at obj. Returns 0 (*out filled) or -EBADMSG. */
int format_check_image(const void *obj, uint64_t len, const char *name, struct store_trailer *out);

#endif
