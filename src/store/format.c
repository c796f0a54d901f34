/* Object trailer: written last in the object, checked structurally (magic,
 * version, its own checksum) before any field of it is trusted. */
#include "store/format.h"

#include <errno.h>
#include <string.h>
#include <xxhash.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the object format is little-endian; add byte swapping for this host"
#endif

static uint64_t self_check(const struct store_trailer *t)
{
	return XXH3_64bits(t, offsetof(struct store_trailer, self_check));
}

void format_trailer_write(void *block, const struct store_trailer *t)
{
	struct store_trailer copy = *t;
	copy.magic = FORMAT_MAGIC;
	copy.version = FORMAT_VERSION;
	copy.reserved = 0;
	copy.self_check = self_check(&copy);
	memset(block, 0, FORMAT_BLOCK - FORMAT_TRAILER_BYTES);
	memcpy((char *)block + FORMAT_BLOCK - FORMAT_TRAILER_BYTES, &copy, sizeof(copy));
}

int format_trailer_read(const void *block, struct store_trailer *out)
{
	memcpy(out, (const char *)block + FORMAT_BLOCK - FORMAT_TRAILER_BYTES, sizeof(*out));
	if (out->magic != FORMAT_MAGIC || out->version != FORMAT_VERSION ||
	    out->self_check != self_check(out))
		return -EBADMSG;
	return 0;
}
