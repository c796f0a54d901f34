/*
 * The object format shared by every backend (docs/FORMAT.md):
 *
 *   | payload (P bytes) | zeros to a multiple of 4096 | 4096-byte trailer block |
 *                                                      the last 64 bytes are
 *                                                      struct store_trailer
 *
 * Object size = round_up(P, 4096) + 4096, so it is known from the geometry
 * alone (exists compares sizes) and every piece stays aligned for O_DIRECT
 * on any disk up to 4 KiB sectors. All integers little-endian.
 */
#ifndef HC_SRC_STORE_FORMAT_H
#define HC_SRC_STORE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FORMAT_BLOCK 4096u
#define FORMAT_MAGIC 0x3130454741504348ull /* "HCPAGE01" read as little-endian bytes */
#define FORMAT_VERSION 1u
#define FORMAT_TRAILER_BYTES 64u

struct store_trailer {
	uint64_t magic;
	uint16_t version;
	uint16_t pool_kind; /* enum hc_pool_kind */
	uint16_t layout;    /* enum hc_kv_layout for KV, 0 otherwise */
	uint16_t component; /* enum hc_component */
	uint32_t component_index;
	uint32_t page_tokens;
	uint64_t geometry; /* XXH3-64 of the pool's canonical geometry */
	uint64_t payload_len;
	uint64_t checksum;   /* XXH3-64 of the payload (0 = not computed) */
	uint64_t self_check; /* XXH3-64 of the 48 bytes above */
	uint64_t reserved;
};
_Static_assert(sizeof(struct store_trailer) == FORMAT_TRAILER_BYTES, "on-disk trailer ABI");

/* Object bytes for a payload, or 0 on overflow. */
static inline uint64_t format_object_len(uint64_t payload)
{
	uint64_t padded = (payload + FORMAT_BLOCK - 1) / FORMAT_BLOCK * FORMAT_BLOCK;
	if (padded < payload || padded + FORMAT_BLOCK < padded)
		return 0;
	return padded + FORMAT_BLOCK;
}

/* Fill the trailer block (FORMAT_BLOCK bytes: zeros, then the trailer). */
void format_trailer_write(void *block, const struct store_trailer *t);
/* Check a trailer block structurally: magic, version, self-check. Copies
 * the trailer to *out. Returns 0 or -EBADMSG. */
int format_trailer_read(const void *block, struct store_trailer *out);

/* The one check of an object file on its own (fsck, the store's healing,
 * the fuzzer): fd is open on a regular file of size bytes. The trailer is
 * read first; the size must be the object size of its payload_len, so at
 * most that many bytes are read, through a bounded buffer (never a buffer
 * of the file's size). The payload checksum must match and must have been
 * computed (0 on a non-empty payload is rejected, as the store's reads
 * reject it). Returns 0 (*out filled), -EBADMSG (not a valid object), or
 * -errno of a read (-ENODATA: the file shrank while read). */
int format_check_fd(int fd, uint64_t size, struct store_trailer *out);

/* The same check of an object image in memory (the mem backend's
 * healing): len bytes at obj. Returns 0 (*out filled) or -EBADMSG. */
int format_check_image(const void *obj, uint64_t len, struct store_trailer *out);

#endif
