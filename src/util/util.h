/* Internal helpers shared by every layer: logging, failure reporting. */
#ifndef HC_SRC_UTIL_H
#define HC_SRC_UTIL_H

#include <hicache/common.h>
#include <hicache/log.h>

#include <stdarg.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t, for util_checksum_copy */
#include <xxhash.h>

#define UTIL_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* Log one message if level is enabled. */
void util_log(enum hc_log_level level, const char *fmt, ...) UTIL_PRINTF(2, 3);
void util_vlog(enum hc_log_level level, const char *fmt, va_list ap);
bool util_log_enabled(enum hc_log_level level);

/* Record a failure: the message becomes this thread's hc_last_error() and
 * is logged at error level. Returns rc, so `return util_fail(-EINVAL, ...)`. */
int util_fail(int rc, const char *fmt, ...) UTIL_PRINTF(2, 3);

#define log_error(...) util_log(HC_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) util_log(HC_LOG_WARN, __VA_ARGS__)
#define log_info(...) util_log(HC_LOG_INFO, __VA_ARGS__)
#define log_debug(...) util_log(HC_LOG_DEBUG, __VA_ARGS__)

/* XXH3-64 of a payload, on the fastest code path this CPU has. */
uint64_t util_checksum(const void *data, size_t len);

/* util_checksum of bytes given in pieces, each copied to dst as it is
 * hashed: block by block, so that the copy reads what the hash brought
 * into the cache (one pass over cold memory instead of two). The state
 * lives with the caller (on the stack): nothing to allocate per page. */
struct util_checksum_copy {
	XXH3_state_t state;
};
void util_checksum_copy_init(struct util_checksum_copy *c);
void util_checksum_copy_add(struct util_checksum_copy *c, void *dst, const void *src, size_t len);
/* The checksum of every piece added. */
uint64_t util_checksum_copy_end(struct util_checksum_copy *c);

/* a * b into *out; false on overflow. */
static inline bool util_mul(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

static inline bool util_is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

/* Round up to a multiple of align (a power of two); false on overflow. */
static inline bool util_round_up(uint64_t x, uint64_t align, uint64_t *out)
{
	uint64_t r;
	if (__builtin_add_overflow(x, align - 1, &r))
		return false;
	*out = r & ~(align - 1);
	return true;
}

#endif
