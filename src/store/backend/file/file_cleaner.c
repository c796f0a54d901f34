/*
 * The file backend's cleaner: a thread that keeps the store under its
 * capacity cap and the file systems under their watermarks, deleting the
 * oldest pages first.
 */
#define _GNU_SOURCE
#include "io/io_internal.h"
#include "store/backend.h"
#include "store/backend/file/file_scan.h"
#include "store/backend/file/file_internal.h"
#include "store/format.h"
#include "util/util.h"

#include <hicache/config.h>
#include <hicache/key.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

void file_kick_cleaner(struct file_be *fb)
{
	if (!fb->cleaner_started || !fb->capacity_bytes ||
	    atomic_load(&fb->used_bytes) <= fb->capacity_bytes)
		return;
	pthread_mutex_lock(&fb->lock);
	fb->kick = true;
	pthread_cond_signal(&fb->wake);
	pthread_mutex_unlock(&fb->lock);
}

#define CS(field) (offsetof(struct hc_store_cleaner_stats, field) / sizeof(uint64_t))

static void cs_add(struct file_be *fb, size_t field, uint64_t v)
{
	atomic_fetch_add_explicit(&fb->cs[field], v, memory_order_relaxed);
}

/* The file-system watermarks, per file system (base dirs on one share a
 * group): where use (as df reports it) is above the high mark, need[g] is
 * the excess over the low mark, used - low x (used + available). The L3
 * deletes at most that much of its own objects there, its target being
 * max(0, own - excess): what the low mark leaves for it beside the other
 * files. It is computed once per round from one statvfs, so deletions
 * that free nothing at once (a reader holding the file open, snapshots)
 * and other programs writing meanwhile never make it delete more. Returns
 * the number of groups over the high mark. */
static size_t watermark_needs(const struct file_be *fb, uint32_t *group, uint64_t *need)
{
	size_t ngroups = 0, over = 0;
	dev_t *devs = calloc(fb->ndirs, sizeof(*devs));
	if (!devs)
		return 0;
	for (size_t i = 0; i < fb->ndirs; i++) {
		struct stat st;
		/* A dir fstat fails on is a group of its own. */
		dev_t dev = fstat(fb->dirfds[i], &st) ? (dev_t)-1 - (dev_t)i : st.st_dev;
		size_t g = 0;
		while (g < ngroups && devs[g] != dev)
			g++;
		group[i] = (uint32_t)g;
		if (g < ngroups)
			continue;
		devs[ngroups] = dev;
		need[ngroups++] = 0;
		struct statvfs sv;
		if (fstatvfs(fb->dirfds[i], &sv) || sv.f_blocks == 0)
			continue;
		/* Blocks reserved for root count neither as used nor as
		 * available. Strictly above the mark, so that 100 means never
		 * (a root process may fill the reserve and still write). */
		double used = (double)(sv.f_blocks - sv.f_bfree) * (double)sv.f_frsize;
		double usable = used + (double)sv.f_bavail * (double)sv.f_frsize;
		if (usable <= 0 || 100.0 * used / usable <= fb->high_pct)
			continue;
		double excess = used - fb->low_pct / 100.0 * usable;
		need[g] = excess > 0 ? (uint64_t)excess : 0;
		over++;
	}
	free(devs);
	return over;
}

/* One round, holding the lease: the capacity cap, then the file-system
 * watermarks, then orphaned temp files. */
static void clean_locked(struct file_be *fb)
{
	struct file_scan scan;
	if (file_scan_dirs_aged((const char *const *)fb->dirs, fb->ndirs, fb->temp_age_ns, &scan))
		return;
	if (fb->capacity_bytes && scan.object_bytes > fb->capacity_bytes) {
		/* Hysteresis: delete down to the low/high fraction of the cap. */
		uint64_t target = (uint64_t)((double)fb->capacity_bytes * fb->low_pct /
					     fb->high_pct);
		uint64_t pages = 0, bytes = 0;
		file_scan_evict(&scan, target, &pages, &bytes);
		cs_add(fb, CS(capacity_pages), pages);
		cs_add(fb, CS(capacity_bytes), bytes);
		log_info("file store cleaner: capacity %.3f GB: deleted %llu pages (%llu bytes)",
			 (double)fb->capacity_bytes / 1e9, (unsigned long long)pages,
			 (unsigned long long)bytes);
	}
	uint32_t *group = calloc(fb->ndirs, sizeof(*group));
	uint64_t *need = calloc(fb->ndirs, sizeof(*need));
	if (group && need && watermark_needs(fb, group, need)) {
		uint64_t pages = 0, bytes = 0, want = 0;
		for (size_t g = 0; g < fb->ndirs; g++)
			want += need[g];
		file_scan_evict_needs(&scan, group, need, fb->ndirs, &pages, &bytes);
		cs_add(fb, CS(watermark_pages), pages);
		cs_add(fb, CS(watermark_bytes), bytes);
		log_info("file store cleaner: file system above %g%%: deleted %llu pages (%llu "
			 "bytes) of %llu bytes over %g%%",
			 fb->high_pct, (unsigned long long)pages, (unsigned long long)bytes,
			 (unsigned long long)want, fb->low_pct);
	}
	free(group);
	free(need);
	uint64_t temps = file_scan_remove_orphans(&scan, fb->temp_age_ns);
	if (temps) {
		cs_add(fb, CS(temps_removed), temps);
		log_info("file store cleaner: removed %llu orphaned temp files (older than %g s)",
			 (unsigned long long)temps, (double)fb->temp_age_ns / 1e9);
	}
	/* Writes since the scan began are not in it; the next pass sees them. */
	atomic_store(&fb->used_bytes, scan.object_bytes);
	file_scan_free(&scan);
}

/* One round, if this cleaner gets the lease. Returns false when another
 * cleaner held it (the round was skipped). */
static bool clean_once(struct file_be *fb)
{
	enum file_lease_state ls = file_lease_take(&fb->lease, fb->dirs);
	if (ls == LEASE_BUSY) {
		cs_add(fb, CS(rounds_skipped), 1);
		return false;
	}
	cs_add(fb, CS(rounds), 1);
	if (ls == LEASE_UNLOCKED)
		cs_add(fb, CS(rounds_unlocked), 1);
	clean_locked(fb);
	file_lease_drop(&fb->lease);
	return true;
}

void file_cleaner_stats(void *p, struct hc_store_cleaner_stats *out)
{
	struct file_be *fb = p;
	uint64_t *dst = (uint64_t *)out;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = atomic_load_explicit(&fb->cs[i], memory_order_relaxed);
}

void *file_cleaner_main(void *arg)
{
	struct file_be *fb = arg;
	pthread_mutex_lock(&fb->lock);
	while (!fb->stop) {
		pthread_mutex_unlock(&fb->lock);
		/* After a skipped round, writes crossing the cap do not wake
		 * it: the lease holder is cleaning; the next round is due at
		 * the interval. */
		bool ran = clean_once(fb);
		pthread_mutex_lock(&fb->lock);
		if (!ran)
			fb->kick = false;
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		double whole = (double)(time_t)fb->interval_s;
		until.tv_sec += (time_t)fb->interval_s;
		until.tv_nsec += (long)((fb->interval_s - whole) * 1e9);
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (!fb->stop && (!ran || !fb->kick))
			if (pthread_cond_timedwait(&fb->wake, &fb->lock, &until) == ETIMEDOUT)
				break;
		fb->kick = false;
	}
	pthread_mutex_unlock(&fb->lock);
	return NULL;
}
