/* Payload checksums: XXH3-64. Debian builds libxxhash's plain entry point
 * for SSE2 only; its _dispatch variant picks AVX2/AVX-512 at run time and
 * hashed twice as fast here (58 vs 30 GB/s on 2 MiB buffers). Same values. */
#include "util/util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xxh_x86dispatch.h>
#define CHECKSUM_FN XXH3_64bits_dispatch
#else
#include <xxhash.h>
#define CHECKSUM_FN XXH3_64bits
#endif

uint64_t util_checksum(const void *data, size_t len)
{
	return CHECKSUM_FN(data, len);
}
