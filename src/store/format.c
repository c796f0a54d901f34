/* Object trailer: written last in the object, checked structurally (magic,
 * version, its own checksum) before any field of it is trusted. */
#include "store/format.h"
#include "util/fault.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the object format is little-endian; add byte swapping for this host"
#endif

static uint64_t self_check(const struct store_trailer *t)
{
	return XXH3_64bits(t, offsetof(struct store_trailer, self_check));
}

uint64_t format_name_hash(const char *name)
{
	return XXH3_64bits(name, strlen(name));
}

uint64_t format_block_of(uint64_t payload, uint64_t size)
{
	for (uint64_t b = FORMAT_BLOCK_MIN; b <= FORMAT_BLOCK_MAX; b *= 2)
		if (format_object_len(payload, b) == size)
			return b;
	return 0;
}

void format_trailer_write(void *trailer_block, uint64_t block, const struct store_trailer *t)
{
	struct store_trailer copy = *t;
	copy.magic = FORMAT_MAGIC;
	copy.version = FORMAT_VERSION;
	copy.self_check = self_check(&copy);
	memset(trailer_block, 0, block - FORMAT_TRAILER_BYTES);
	memcpy((char *)trailer_block + block - FORMAT_TRAILER_BYTES, &copy, sizeof(copy));
}

int format_trailer_read(const void *tail, struct store_trailer *out)
{
	memcpy(out, tail, sizeof(*out));
	if (out->magic != FORMAT_MAGIC || out->version != FORMAT_VERSION ||
	    out->self_check != self_check(out))
		return -EBADMSG;
	return 0;
}

/* What the trailer says of an object of size bytes under name, before
 * its payload is read. */
static bool trailer_fits(const struct store_trailer *t, uint64_t size, const char *name)
{
	return format_block_of(t->payload_len, size) && t->name_hash == format_name_hash(name);
}

#define CHECK_CHUNK ((size_t)1 << 20)

static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA;
		got += (size_t)n;
	}
	return 0;
}

int format_check_fd(int fd, uint64_t size, const char *name, struct store_trailer *out)
{
	if (size < FORMAT_BLOCK_MIN || size % FORMAT_BLOCK_MIN)
		return -EBADMSG;
	size_t chunk = size < CHECK_CHUNK ? (size_t)size : CHECK_CHUNK;
	uint8_t *buf = util_fault_malloc(chunk);
	if (!buf)
		return -ENOMEM;
	int rc = read_at(fd, buf, FORMAT_TRAILER_BYTES, size - FORMAT_TRAILER_BYTES);
	if (!rc && (format_trailer_read(buf, out) || !trailer_fits(out, size, name)))
		rc = -EBADMSG;
	XXH3_state_t *h = rc ? NULL : XXH3_createState();
	if (!rc && !h)
		rc = -ENOMEM;
	if (!rc)
		XXH3_64bits_reset(h);
	for (uint64_t off = 0; !rc && off < out->payload_len;) {
		uint64_t left = out->payload_len - off;
		size_t n = left < chunk ? (size_t)left : chunk;
		rc = read_at(fd, buf, n, off);
		if (!rc)
			XXH3_64bits_update(h, buf, n);
		off += n;
	}
	if (!rc && XXH3_64bits_digest(h) != out->checksum)
		rc = -EBADMSG;
	XXH3_freeState(h);
	free(buf);
	return rc;
}

int format_check_image(const void *obj, uint64_t len, const char *name, struct store_trailer *out)
{
	if (len < FORMAT_BLOCK_MIN || len % FORMAT_BLOCK_MIN)
		return -EBADMSG;
	if (format_trailer_read((const char *)obj + len - FORMAT_TRAILER_BYTES, out) ||
	    !trailer_fits(out, len, name))
		return -EBADMSG;
	if (XXH3_64bits(obj, out->payload_len) != out->checksum)
		return -EBADMSG;
	return 0;
}
