/*
 * Fault injection for tests: fail the n-th allocation, open, write, read or
 * rename that passes an injection point. Compiled into every build and
 * inert until a test arms it: the disarmed cost is one relaxed load.
 *
 * A sweep (tests/unit/store/fault_sweep*, tests/unit/cache/fault_sweep*)
 * first counts the calls of one round trip (arm with nth 0), then repeats
 * the round trip failing call 1, 2, ... of each kind in turn. Process-wide:
 * arm only in single-test programs. Not part of the public API.
 */
#ifndef HC_SRC_UTIL_FAULT_H
#define HC_SRC_UTIL_FAULT_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum util_fault_kind {
	HC_FAULT_ALLOC,
	HC_FAULT_OPEN,
	HC_FAULT_WRITE,
	HC_FAULT_READ,
	HC_FAULT_RENAME,
	HC_FAULT_KINDS
};

extern _Atomic int util_fault_armed;

/* Count calls of every kind from now on; for kind, fail call number nth
 * (1-based, once; 0: count only). Resets every count. */
void util_fault_arm(enum util_fault_kind kind, uint64_t nth);
/* Stop counting and failing. */
void util_fault_disarm(void);
/* Calls of kind seen since util_fault_arm. */
uint64_t util_fault_seen(enum util_fault_kind kind);
/* Whether the armed failure has happened. */
bool util_fault_fired(void);
const char *util_fault_kind_name(enum util_fault_kind kind);

bool util_fault_hit_slow(enum util_fault_kind kind);

/* An injection point: true when this call is to fail. */
static inline bool util_fault_hit(enum util_fault_kind kind)
{
	return atomic_load_explicit(&util_fault_armed, memory_order_relaxed) &&
	       util_fault_hit_slow(kind);
}

/* malloc/calloc/realloc that fail (NULL, errno ENOMEM) when an armed
 * allocation fault hits. */
void *util_fault_malloc(size_t size);
void *util_fault_calloc(size_t n, size_t size);
void *util_fault_realloc(void *p, size_t size);

/* A system call returning -1 + errno on failure: fails with err instead of
 * running when an armed fault of kind hits. */
#define HC_FAULT_SYS(kind, err, call) (util_fault_hit(kind) ? (errno = (err), -1) : (call))

#endif
