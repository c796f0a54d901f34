/* Directory scans of a file store. One pass over <dir>/<bucket>/ entries
 * collects objects and temp files; eviction groups objects by page key
 * (the 64 hex digits every physical name starts with; store/backend/page_plan.h). */
#define _GNU_SOURCE
#include "store/backend/file/file_scan.h"
#include "store/backend/page_plan.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HEX_LEN 64

bool file_scan_is_object(const char *name)
{
	for (int i = 0; i < HEX_LEN; i++) {
		char c = name[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
	}
	return true;
}

static int64_t mtime_of(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000ll + st->st_mtim.tv_nsec;
}

/* A temp file is orphaned by its age alone: its writer may be on another
 * host or in another pid namespace, where no pid says anything. A live
 * writer's temp file lives for one write. */
static bool temp_orphaned(int64_t mtime_ns, int64_t now_ns, int64_t age_ns)
{
	return now_ns - mtime_ns > age_ns;
}

static int64_t realtime_ns(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return (int64_t)now.tv_sec * 1000000000ll + now.tv_nsec;
}

static int push(void **arr, size_t *n, size_t *cap, size_t elem)
{
	if (*n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 1024;
	void *grown = realloc(*arr, ncap * elem);
	if (!grown)
		return -ENOMEM;
	*arr = grown;
	*cap = ncap;
	return 0;
}

/* Room for one more element of *arr, and a copy of name for it. */
static int push_named(void **arr, size_t *n, size_t *cap, size_t elem, const char *name, char **dup)
{
	int rc = push(arr, n, cap, elem);
	if (rc)
		return rc;
	*dup = strdup(name);
	return *dup ? 0 : -ENOMEM;
}

void file_scan_free(struct file_scan *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nobjs; i++)
		free(s->objs[i].name);
	for (size_t i = 0; i < s->ntemps; i++)
		free(s->temps[i].name);
	free(s->objs);
	free(s->temps);
	memset(s, 0, sizeof(*s));
}

static int scan_bucket(struct file_scan *s, int dirfd, uint32_t disk, uint32_t bucket,
		       int64_t now_ns, int64_t age_ns)
{
	char name[3];
	snprintf(name, sizeof(name), "%02x", bucket);
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
		/* A symlink (or a file) where a bucket belongs: never followed. */
		log_warn("file store: skipping bucket '%s/%s': not a directory (a symlink is "
			 "never followed in a store)",
			 s->dirs[disk], name);
		s->foreign++;
		return 0;
	}
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	int rc = 0;
	struct dirent *de;
	while (!rc && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue; /* deleted meanwhile */
		if (!S_ISREG(st.st_mode)) {
			s->foreign++;
			continue;
		}
		bool temp = !strncmp(de->d_name, ".tmp.", 5) || !strncmp(de->d_name, ".probe.", 7);
		char *dup;
		if (temp) {
			rc = push_named((void **)&s->temps, &s->ntemps, &s->cap_temps,
					sizeof(*s->temps), de->d_name, &dup);
			if (rc)
				break;
			s->temps[s->ntemps++] = (struct scan_temp){dup, disk, bucket, mtime_of(&st),
								   temp_orphaned(mtime_of(&st),
										 now_ns, age_ns)};
		} else if (strlen(de->d_name) >= HEX_LEN && file_scan_is_object(de->d_name)) {
			rc = push_named((void **)&s->objs, &s->nobjs, &s->cap_objs,
					sizeof(*s->objs), de->d_name, &dup);
			if (rc)
				break;
			int64_t m = mtime_of(&st);
			s->objs[s->nobjs++] = (struct scan_obj){.name = dup,
								.disk = disk,
								.bucket = bucket,
								.bytes = (uint64_t)st.st_size,
								.mtime_ns = m};
			s->object_bytes += (uint64_t)st.st_size;
			if (!s->oldest_ns || m < s->oldest_ns)
				s->oldest_ns = m;
			if (m > s->newest_ns)
				s->newest_ns = m;
		} else {
			s->foreign++;
		}
	}
	closedir(d);
	return rc;
}

int file_scan_dirs(const char *const *dirs, size_t ndirs, struct file_scan *out)
{
	return file_scan_dirs_aged(dirs, ndirs, FILE_TEMP_AGE_NS, out);
}

int file_scan_dirs_aged(const char *const *dirs, size_t ndirs, int64_t age_ns,
			struct file_scan *out)
{
	memset(out, 0, sizeof(*out));
	out->dirs = dirs;
	out->ndirs = ndirs;
	int64_t now_ns = realtime_ns();
	struct stat *ids = calloc(ndirs ? ndirs : 1, sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < ndirs; i++) {
		int fd = open(dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			int rc = util_fail(-errno, "file store: cannot open '%s': %s", dirs[i],
					   hc_strerror(-errno));
			file_scan_free(out);
			free(ids);
			return rc;
		}
		/* The same dir twice (or through a symlink) would have every
		 * object counted twice and found misplaced in one of them. */
		int rc = fstat(fd, &ids[i]) ? -errno : 0;
		for (size_t j = 0; j < i && !rc; j++)
			if (ids[j].st_dev == ids[i].st_dev && ids[j].st_ino == ids[i].st_ino)
				rc = util_fail(-EINVAL,
					       "file store: '%s' and '%s' are the same "
					       "directory; give each base dir once",
					       dirs[j], dirs[i]);
		if (rc) {
			close(fd);
			file_scan_free(out);
			free(ids);
			return rc;
		}
		for (uint32_t b = 0; b < 256; b++) {
			rc = scan_bucket(out, fd, (uint32_t)i, b, now_ns, age_ns);
			if (rc) {
				close(fd);
				file_scan_free(out);
				free(ids);
				return util_fail(rc, "file store: scanning '%s': %s", dirs[i],
						 hc_strerror(rc));
			}
		}
		close(fd);
	}
	free(ids);
	return 0;
}

int file_scan_bucket_fd(const struct file_scan *s, uint32_t disk, uint32_t bucket)
{
	int base = open(s->dirs[disk], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (base < 0)
		return -errno;
	char name[3];
	snprintf(name, sizeof(name), "%02x", bucket);
	int fd = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc = fd < 0 ? -errno : fd;
	close(base);
	return rc;
}

int file_scan_unlink(const struct file_scan *s, uint32_t disk, uint32_t bucket, const char *name)
{
	int fd = file_scan_bucket_fd(s, disk, bucket);
	if (fd < 0)
		return fd;
	int rc = unlinkat(fd, name, 0) ? -errno : 0;
	close(fd);
	return rc;
}

uint64_t file_scan_remove_orphans(const struct file_scan *s, int64_t age_ns)
{
	uint64_t n = 0;
	int bfd = -1;
	uint32_t bdisk = UINT32_MAX, bbucket = UINT32_MAX;
	for (size_t i = 0; i < s->ntemps; i++) {
		const struct scan_temp *t = &s->temps[i];
		if (!t->orphaned)
			continue;
		if (t->disk != bdisk || t->bucket != bbucket) {
			if (bfd >= 0)
				close(bfd);
			bfd = file_scan_bucket_fd(s, t->disk, t->bucket);
			bdisk = t->disk;
			bbucket = t->bucket;
		}
		if (bfd < 0)
			continue;
		/* Still old now: not a name a writer has written to since. */
		struct stat st;
		if (fstatat(bfd, t->name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
		    !temp_orphaned(mtime_of(&st), realtime_ns(), age_ns))
			continue;
		n += unlinkat(bfd, t->name, 0) == 0;
	}
	if (bfd >= 0)
		close(bfd);
	return n;
}

int file_scan_path(const struct file_scan *s, uint32_t disk, uint32_t bucket, const char *name,
		   char *out, size_t size)
{
	int n = snprintf(out, size, "%s/%02x/%s", s->dirs[disk], bucket, name);
	return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

static int by_page(const void *a, const void *b)
{
	const struct scan_obj *x = a, *y = b;
	return memcmp(x->name, y->name, HEX_LEN);
}

uint64_t file_scan_pages(const struct file_scan *s)
{
	/* Sorting a copy of pointers would be kinder to callers, but every
	 * user scans then throws the scan away, so sort in place. */
	if (s->nobjs) /* objs is NULL for an empty store: qsort must not see it */
		qsort(s->objs, s->nobjs, sizeof(*s->objs), by_page);
	uint64_t pages = 0;
	for (size_t i = 0; i < s->nobjs; i++)
		if (i == 0 || memcmp(s->objs[i].name, s->objs[i - 1].name, HEX_LEN))
			pages++;
	return pages;
}

static bool scan_same_page(const void *arg, size_t first, size_t i)
{
	const struct scan_obj *o = arg;
	return !memcmp(o[i].name, o[first].name, HEX_LEN);
}

static uint64_t scan_bytes(const void *arg, size_t i)
{
	return ((const struct scan_obj *)arg)[i].bytes;
}

static int64_t scan_mtime(const void *arg, size_t i)
{
	return ((const struct scan_obj *)arg)[i].mtime_ns;
}

/* What one eviction stops on: the scanned bytes down to target, or (with
 * need) every file system group's need met. */
struct evict_goal {
	uint64_t target;
	const uint32_t *group_of_disk; /* with need */
	uint64_t *need;                /* bytes still to free per group, or NULL */
	size_t ngroups;
};

static bool goal_met(const struct evict_goal *goal, uint64_t total)
{
	if (!goal->need)
		return total <= goal->target;
	for (size_t i = 0; i < goal->ngroups; i++)
		if (goal->need[i])
			return false;
	return true;
}

/* Does page g have an object on a group that still needs bytes freed? */
static bool page_helps(const struct file_scan *s, const struct evict_goal *goal,
		       const struct page_group *g)
{
	if (!goal->need)
		return true;
	for (size_t j = g->first; j < g->first + g->count; j++)
		if (goal->need[goal->group_of_disk[s->objs[j].disk]])
			return true;
	return false;
}

static int evict(struct file_scan *s, const struct evict_goal *goal, uint64_t *pages_out,
		 uint64_t *bytes_out)
{
	file_scan_pages(s); /* sorts objects by page */
	const struct page_objs objs = {.arg = s->objs,
				       .n = s->nobjs,
				       .same_page = scan_same_page,
				       .bytes = scan_bytes,
				       .mtime_ns = scan_mtime};
	struct page_group *g;
	size_t k;
	int rc = page_plan(&objs, &g, &k);
	if (rc)
		return rc;
	uint64_t total = s->object_bytes, pages = 0, bytes = 0;
	for (size_t i = 0; i < k && !goal_met(goal, total); i++) {
		if (!page_helps(s, goal, &g[i]))
			continue;
		bool unlinked = false;
		for (size_t j = g[i].first; j < g[i].first + g[i].count; j++) {
			const struct scan_obj *o = &s->objs[j];
			s->objs[j].deleted = true;
			/* Through the bucket's fd, never a symlink. Gone already
			 * (another cleaner, a gc) frees the bytes as well, but is
			 * not counted as this call's deletion. */
			int urc = file_scan_unlink(s, o->disk, o->bucket, o->name);
			if (urc == 0) {
				bytes += o->bytes;
				unlinked = true;
			}
			if (goal->need) {
				uint64_t *n = &goal->need[goal->group_of_disk[o->disk]];
				*n = *n > o->bytes ? *n - o->bytes : 0;
			}
		}
		total -= g[i].bytes;
		pages += unlinked;
	}
	free(g);
	/* Drop what was deleted, so a second eviction over the same scan (the
	 * cleaner does capacity, then watermarks) sees only what is left. */
	size_t kept = 0;
	for (size_t i = 0; i < s->nobjs; i++) {
		if (s->objs[i].deleted) {
			free(s->objs[i].name);
			continue;
		}
		s->objs[kept++] = s->objs[i];
	}
	s->nobjs = kept;
	s->object_bytes = total;
	if (pages_out)
		*pages_out = pages;
	if (bytes_out)
		*bytes_out = bytes;
	return 0;
}

int file_scan_evict(struct file_scan *s, uint64_t target, uint64_t *pages, uint64_t *bytes)
{
	struct evict_goal goal = {.target = target};
	return evict(s, &goal, pages, bytes);
}

int file_scan_evict_needs(struct file_scan *s, const uint32_t *group_of_disk, uint64_t *need,
			  size_t ngroups, uint64_t *pages, uint64_t *bytes)
{
	struct evict_goal goal = {.group_of_disk = group_of_disk, .need = need, .ngroups = ngroups};
	return evict(s, &goal, pages, bytes);
}

uint64_t file_scan_disk_bytes(const struct file_scan *s, uint32_t disk)
{
	uint64_t n = 0;
	for (size_t i = 0; i < s->nobjs; i++)
		if (s->objs[i].disk == disk)
			n += s->objs[i].bytes;
	return n;
}
