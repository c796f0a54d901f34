/* Shared by the fault sweeps (store and cache): the open fd count, and the
 * check that a result is a clean error. */
#ifndef HC_TEST_FAULT_SWEEP_H
#define HC_TEST_FAULT_SWEEP_H

#include "test_util.h"
#include "util/fault.h"

#include <dirent.h>

static inline int fs_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* 0 (or a count), or a negative errno: never a positive code or a wild
 * value. */
#define fs_assert_clean(rc, what, kind, nth)                                                  \
	do {                                                                                  \
		long long rc_ = (long long)(rc);                                              \
		if (rc_ < -4095)                                                              \
			fail_msg("%s with %s fault %llu: %lld is no errno", (what),           \
				 util_fault_kind_name(kind), (unsigned long long)(nth), rc_); \
	} while (0)

#endif
