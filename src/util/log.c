/*
 * The logger: one process-wide handler and level. The level is read from
 * HICACHE_LOG on first use; hc_log_set_level() overrides it. Failures are
 * also kept per thread for hc_last_error(), whatever the level.
 */
#define _GNU_SOURCE
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define LOG_LINE_MAX 1024

static _Atomic int log_level = -1; /* -1: not yet read from the environment */
static pthread_rwlock_t handler_lock = PTHREAD_RWLOCK_INITIALIZER;
static hc_log_fn handler_fn;
static void *handler_arg;
static _Thread_local char last_error[LOG_LINE_MAX];
static _Thread_local unsigned fail_seq; /* failures recorded on this thread */

static const char *const level_names[] = {"off", "error", "warn", "info", "debug", "trace"};

int hc_log_parse_level(const char *text, enum hc_log_level *out)
{
	if (!text || !out)
		return -EINVAL;
	for (int i = 0; i <= HC_LOG_TRACE; i++) {
		if (!strcasecmp(text, level_names[i]) || (text[0] == '0' + i && text[1] == '\0')) {
			*out = (enum hc_log_level)i;
			return 0;
		}
	}
	if (!strcasecmp(text, "warning")) {
		*out = HC_LOG_WARN;
		return 0;
	}
	return -EINVAL;
}

static int current_level(void)
{
	int lvl = atomic_load_explicit(&log_level, memory_order_relaxed);
	if (lvl >= 0)
		return lvl;
	enum hc_log_level parsed = HC_LOG_WARN;
	const char *env = getenv("HICACHE_LOG");
	if (env && *env && hc_log_parse_level(env, &parsed) != 0) {
		fprintf(stderr,
			"hicache: warn: HICACHE_LOG=%s is not one of "
			"off|error|warn|info|debug|trace; using warn\n",
			env);
		parsed = HC_LOG_WARN;
	}
	int expected = -1;
	atomic_compare_exchange_strong(&log_level, &expected, (int)parsed);
	return atomic_load(&log_level);
}

void hc_log_set_level(enum hc_log_level level)
{
	if ((int)level < HC_LOG_OFF || level > HC_LOG_TRACE)
		return;
	atomic_store(&log_level, (int)level);
}

enum hc_log_level hc_log_get_level(void)
{
	return (enum hc_log_level)current_level();
}

void hc_log_set_handler(hc_log_fn fn, void *arg)
{
	pthread_rwlock_wrlock(&handler_lock);
	handler_fn = fn;
	handler_arg = arg;
	pthread_rwlock_unlock(&handler_lock);
}

bool util_log_enabled(enum hc_log_level level)
{
	return level != HC_LOG_OFF && (int)level <= current_level();
}

static void emit(enum hc_log_level level, const char *msg)
{
	pthread_rwlock_rdlock(&handler_lock);
	if (handler_fn)
		handler_fn(level, msg, handler_arg);
	else
		fprintf(stderr, "hicache: %s: %s\n", level_names[level], msg);
	pthread_rwlock_unlock(&handler_lock);
}

void util_vlog(enum hc_log_level level, const char *fmt, va_list ap)
{
	if (!util_log_enabled(level))
		return;
	char line[LOG_LINE_MAX];
	vsnprintf(line, sizeof(line), fmt, ap);
	emit(level, line);
}

void util_log(enum hc_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	util_vlog(level, fmt, ap);
	va_end(ap);
}

static void record(const char *fmt, va_list ap) UTIL_PRINTF(1, 0);
static void record(const char *fmt, va_list ap)
{
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	fail_seq++;
}

int util_fail(int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	record(fmt, ap);
	va_end(ap);
	if (util_log_enabled(HC_LOG_ERROR))
		emit(HC_LOG_ERROR, last_error);
	return rc;
}

unsigned util_fail_mark(void)
{
	return fail_seq;
}

int util_fail_ctx(unsigned mark, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (fail_seq != mark) {
		/* The callee said what went wrong; keep its words. */
		if (util_log_enabled(HC_LOG_DEBUG)) {
			char line[LOG_LINE_MAX];
			vsnprintf(line, sizeof(line), fmt, ap);
			emit(HC_LOG_DEBUG, line);
		}
		va_end(ap);
		return rc;
	}
	record(fmt, ap);
	va_end(ap);
	if (util_log_enabled(HC_LOG_ERROR))
		emit(HC_LOG_ERROR, last_error);
	return rc;
}

bool util_log_limit_pass(struct util_log_limit *l, uint64_t now, uint64_t *suppressed)
{
	uint64_t next = atomic_load_explicit(&l->next_ns, memory_order_relaxed);
	/* One thread wins the interval's line; the others count themselves. */
	if (now < next ||
	    !atomic_compare_exchange_strong(&l->next_ns, &next, now + l->interval_ns)) {
		atomic_fetch_add_explicit(&l->suppressed, 1, memory_order_relaxed);
		return false;
	}
	*suppressed = atomic_exchange(&l->suppressed, 0);
	return true;
}

static void vlog_limited(struct util_log_limit *l, enum hc_log_level level, const char *fmt,
			 va_list ap) UTIL_PRINTF(3, 0);
static void vlog_limited(struct util_log_limit *l, enum hc_log_level level, const char *fmt,
			 va_list ap)
{
	uint64_t dropped;
	if (!util_log_limit_pass(l, util_mono_ns(), &dropped))
		return;
	char line[LOG_LINE_MAX];
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	if (dropped && n >= 0 && (size_t)n < sizeof(line))
		snprintf(line + n, sizeof(line) - (size_t)n,
			 " (%llu similar lines suppressed in the last %llu s)",
			 (unsigned long long)dropped,
			 (unsigned long long)(l->interval_ns / 1000000000ull));
	emit(level, line);
}

void util_log_limited(struct util_log_limit *l, enum hc_log_level level, const char *fmt, ...)
{
	/* A disabled level costs neither the clock nor the count. */
	if (!util_log_enabled(level))
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog_limited(l, level, fmt, ap);
	va_end(ap);
}

int util_fail_limited(struct util_log_limit *l, enum hc_log_level level, int rc, const char *fmt,
		      ...)
{
	va_list ap;
	va_start(ap, fmt);
	record(fmt, ap);
	va_end(ap);
	if (util_log_enabled(level))
		util_log_limited(l, level, "%s", last_error);
	return rc;
}

const char *hc_last_error(void)
{
	return last_error;
}
