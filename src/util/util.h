/* Internal helpers shared by every layer: logging, failure reporting. */
#ifndef HC_SRC_UTIL_H
#define HC_SRC_UTIL_H

#include <hicache/common.h>
#include <hicache/log.h>

#include "util/clock.h"
#include "util/fault.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t, for util_checksum_copy */
#include <xxhash.h>

#define UTIL_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* Log one message if level is enabled. */
void util_log(enum hc_log_level level, const char *fmt, ...) UTIL_PRINTF(2, 3);
void util_vlog(enum hc_log_level level, const char *fmt, va_list ap) UTIL_PRINTF(2, 0);
bool util_log_enabled(enum hc_log_level level);

/* Record a failure: the message becomes this thread's hc_last_error() and
 * is logged at error level. Returns rc, so `return util_fail(-EINVAL, ...)`. */
int util_fail(int rc, const char *fmt, ...) UTIL_PRINTF(2, 3);

/*
 * Keeping the precise message. A caller that reports a callee's failure in
 * vaguer words takes a mark before the call and reports with
 * util_fail_ctx: when the callee recorded a failure of its own since the
 * mark, that message stays this thread's hc_last_error() (the context
 * goes to the debug log), else the context is recorded as util_fail does.
 *
 *	unsigned mark = util_fail_mark();
 *	if ((rc = load(...)))
 *		return util_fail_ctx(mark, rc, "hc_cache_alloc: load failed");
 */
unsigned util_fail_mark(void);
int util_fail_ctx(unsigned mark, int rc, const char *fmt, ...) UTIL_PRINTF(3, 4);

/*
 * Rate-limited logging for conditions that are expected on a hot path
 * (slots exhausted inside a retry loop, a corrupt object treated as a
 * miss): at most one line per interval per call site; the next line that
 * passes says how many were left out. Thread-safe; a limit lives in a
 * static (one per call site) or in the object it is about.
 */
struct util_log_limit {
	uint64_t interval_ns;
	_Atomic uint64_t next_ns;    /* no line before this (CLOCK_MONOTONIC) */
	_Atomic uint64_t suppressed; /* lines left out since the last one */
};
#define HC_LOG_INTERVAL_S 10
#define HC_LOG_LIMIT_INIT(seconds)                               \
	{                                                        \
		.interval_ns = (uint64_t)(seconds)*1000000000ull \
	}

/* Whether a line may go out at now_ns; when it may, *suppressed gets the
 * count of lines left out before it (and the count restarts). */
bool util_log_limit_pass(struct util_log_limit *l, uint64_t now_ns, uint64_t *suppressed);
/* util_log through limit l ("... (N similar lines suppressed)"). */
void util_log_limited(struct util_log_limit *l, enum hc_log_level level, const char *fmt, ...)
	UTIL_PRINTF(3, 4);
/* An expected failure on a hot path: recorded as this thread's
 * hc_last_error() like util_fail, but logged at level through limit l,
 * never at error level. Returns rc. */
int util_fail_limited(struct util_log_limit *l, enum hc_log_level level, int rc, const char *fmt,
		      ...) UTIL_PRINTF(4, 5);

/* One limit per call site, HC_LOG_INTERVAL_S apart. */
#define log_limited(level, ...)                                                                 \
	do {                                                                                    \
		static struct util_log_limit log_limit_ = HC_LOG_LIMIT_INIT(HC_LOG_INTERVAL_S); \
		util_log_limited(&log_limit_, (level), __VA_ARGS__);                            \
	} while (0)
#define fail_limited(level, rc, ...)                                                             \
	({                                                                                       \
		static struct util_log_limit fail_limit_ = HC_LOG_LIMIT_INIT(HC_LOG_INTERVAL_S); \
		util_fail_limited(&fail_limit_, (level), (rc), __VA_ARGS__);                     \
	})

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
