/*
 * hicache — logging.
 *
 * The library never prints to stdout. Every message goes through one
 * handler: by default it writes to stderr the messages at or above the
 * level from the environment variable HICACHE_LOG (off, error, warn, info,
 * debug, trace; default warn). An embedding engine installs its own handler
 * to route messages into its logs.
 *
 * Thread-safety: hc_log_set_handler() and hc_log_set_level() may be called
 * at any time from any thread; a handler may be called concurrently from
 * several threads and must be thread-safe itself.
 */
#ifndef HICACHE_LOG_H
#define HICACHE_LOG_H

#include <hicache/common.h>

#ifdef __cplusplus
extern "C" {
#endif

enum hc_log_level {
	HC_LOG_OFF = 0,
	HC_LOG_ERROR = 1,
	HC_LOG_WARN = 2,
	HC_LOG_INFO = 3,
	HC_LOG_DEBUG = 4,
	HC_LOG_TRACE = 5,
};

/* msg is NUL-terminated, without a trailing newline, valid only during the
 * call. */
typedef void (*hc_log_fn)(enum hc_log_level level, const char *msg, void *arg);

/* Install a handler (NULL restores the default stderr handler). Messages
 * above the current level are not formatted and never reach it. */
HC_API void hc_log_set_handler(hc_log_fn fn, void *arg);

/* Set the level: messages above it are dropped (HC_LOG_OFF drops all).
 * Overrides HICACHE_LOG; a value outside the enum is ignored. */
HC_API void hc_log_set_level(enum hc_log_level level);
/* The current level (from HICACHE_LOG until hc_log_set_level()). */
HC_API enum hc_log_level hc_log_get_level(void);

/* Parse "off|error|warn|info|debug|trace" (case-insensitive) or "0".."5".
 * Returns 0, or -EINVAL for anything else. */
HC_API int hc_log_parse_level(const char *text, enum hc_log_level *out);

#ifdef __cplusplus
}
#endif

#endif /* HICACHE_LOG_H */
