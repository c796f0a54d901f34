/*
 * hicache — common definitions shared by every public header.
 *
 * Error convention: functions return 0 (or a count) on success and a
 * negative errno on failure. Per-item outcomes go into caller-provided
 * arrays. Callers never read the global errno. hc_strerror() turns any
 * return code into text; hc_last_error() gives the detailed message of the
 * most recent failure on the calling thread (the same text the logger got).
 */
#ifndef HICACHE_COMMON_H
#define HICACHE_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define HC_API __attribute__((visibility("default")))
#else
#define HC_API
#endif

#define HC_VERSION_MAJOR 0
#define HC_VERSION_MINOR 1
#define HC_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH" of the library actually linked (may differ from the
 * header's HC_VERSION_* when linked dynamically). */
HC_API const char *hc_version(void);

/* Text for a return code: 0, a negative errno, or a positive errno.
 * The returned string is static; never free it. */
HC_API const char *hc_strerror(int rc);

/* The detailed message of the most recent failed hicache call made on this
 * thread ("" if none). Thread-local; valid until this thread's next failing
 * hicache call. Never free it. */
HC_API const char *hc_last_error(void);

/* A contiguous piece of host memory. */
struct hc_region {
	void *addr;
	size_t len;
};

#ifdef __cplusplus
}
#endif

#endif /* HICACHE_COMMON_H */
