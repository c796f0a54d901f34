/*
 * Time for deadlines, back-offs, latencies and rate limits: one monotonic
 * clock in nanoseconds, so that no layer converts timespecs by hand.
 * CLOCK_MONOTONIC: never steps back when the wall clock is set.
 */
#ifndef HC_SRC_UTIL_CLOCK_H
#define HC_SRC_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t util_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* from_ns plus secs, saturating: a NaN, negative or huge timeout is no
 * deadline at all (UINT64_MAX) rather than an overflowed one. */
static inline uint64_t util_deadline_ns(uint64_t from_ns, double secs)
{
	if (!(secs >= 0))
		return from_ns;
	if (secs >= (double)(UINT64_MAX - from_ns) / 1e9)
		return UINT64_MAX;
	return from_ns + (uint64_t)(secs * 1e9);
}

/* The time on clock clk ns from now, for the timed waits of pthreads. */
static inline struct timespec util_clock_after(clockid_t clk, uint64_t ns)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	uint64_t nsec = (uint64_t)ts.tv_nsec + ns % 1000000000ull;
	ts.tv_sec += (time_t)(ns / 1000000000ull + nsec / 1000000000ull);
	ts.tv_nsec = (long)(nsec % 1000000000ull);
	return ts;
}

#endif
