/* Directory scans of a file store. One pass over <dir>/<bucket>/ entries
 * collects objects and temp files; eviction groups objects by page key
 * (the 64 hex digits every physical name starts with). */
#define _GNU_SOURCE
#include "store/file_scan.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ORPHAN_AGE_NS (60ll * 1000000000ll)
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

/* ".tmp.<16 hex>.<pid>.<seq>": orphaned when that process is gone. */
static bool temp_orphaned(const char *name, int64_t mtime_ns, int64_t now_ns)
{
	if (now_ns - mtime_ns > ORPHAN_AGE_NS)
		return true;
	const char *p = strrchr(name, '.');
	if (!p || p == name)
		return false;
	const char *q = p - 1;
	while (q > name && *q != '.')
		q--;
	char *end;
	long pid = strtol(q + 1, &end, 10);
	if (end != p || pid <= 0 || pid > INT_MAX)
		return false;
	return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
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
		       int64_t now_ns)
{
	char name[3];
	snprintf(name, sizeof(name), "%02x", bucket);
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
		if (temp) {
			rc = push((void **)&s->temps, &s->ntemps, &s->cap_temps, sizeof(*s->temps));
			if (rc)
				break;
			char *dup = strdup(de->d_name);
			if (!dup) {
				rc = -ENOMEM;
				break;
			}
			s->temps[s->ntemps++] = (struct scan_temp){
				dup, disk, bucket, mtime_of(&st),
				temp_orphaned(de->d_name, mtime_of(&st), now_ns)};
		} else if (strlen(de->d_name) >= HEX_LEN && file_scan_is_object(de->d_name)) {
			rc = push((void **)&s->objs, &s->nobjs, &s->cap_objs, sizeof(*s->objs));
			if (rc)
				break;
			char *dup = strdup(de->d_name);
			if (!dup) {
				rc = -ENOMEM;
				break;
			}
			int64_t m = mtime_of(&st);
			s->objs[s->nobjs++] = (struct scan_obj){.name = dup, .disk = disk,
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
	memset(out, 0, sizeof(*out));
	out->dirs = dirs;
	out->ndirs = ndirs;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t now_ns = (int64_t)now.tv_sec * 1000000000ll + now.tv_nsec;
	for (size_t i = 0; i < ndirs; i++) {
		int fd = open(dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			int rc = util_fail(-errno, "file store: cannot open '%s': %s", dirs[i],
					   hc_strerror(-errno));
			file_scan_free(out);
			return rc;
		}
		for (uint32_t b = 0; b < 256; b++) {
			int rc = scan_bucket(out, fd, (uint32_t)i, b, now_ns);
			if (rc) {
				close(fd);
				file_scan_free(out);
				return util_fail(rc, "file store: scanning '%s': %s", dirs[i],
						 hc_strerror(rc));
			}
		}
		close(fd);
	}
	return 0;
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

struct page_group {
	size_t first, count;
	int64_t newest_ns;
	uint64_t bytes;
};

static int by_age(const void *a, const void *b)
{
	const struct page_group *x = a, *y = b;
	return (x->newest_ns > y->newest_ns) - (x->newest_ns < y->newest_ns);
}

int file_scan_evict(struct file_scan *s, uint64_t target, bool (*keep_going)(void *), void *arg,
		    uint64_t *pages_out, uint64_t *bytes_out)
{
	uint64_t npages = file_scan_pages(s); /* also sorts objects by page */
	struct page_group *g = calloc(npages ? npages : 1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < s->nobjs; i++) {
		if (i == 0 || memcmp(s->objs[i].name, s->objs[i - 1].name, HEX_LEN)) {
			g[k++] = (struct page_group){.first = i};
		}
		struct page_group *cur = &g[k - 1];
		cur->count++;
		cur->bytes += s->objs[i].bytes;
		if (s->objs[i].mtime_ns > cur->newest_ns)
			cur->newest_ns = s->objs[i].mtime_ns;
	}
	qsort(g, k, sizeof(*g), by_age);
	uint64_t total = s->object_bytes, pages = 0, bytes = 0;
	char path[PATH_MAX];
	for (size_t i = 0; i < k; i++) {
		if (keep_going ? !keep_going(arg) : total <= target)
			break;
		for (size_t j = g[i].first; j < g[i].first + g[i].count; j++) {
			const struct scan_obj *o = &s->objs[j];
			s->objs[j].deleted = true;
			if (file_scan_path(s, o->disk, o->bucket, o->name, path, sizeof(path)))
				continue;
			/* Gone already (another cleaner, a gc) is as good as deleted. */
			if (unlink(path) == 0 || errno == ENOENT)
				bytes += o->bytes;
		}
		total -= g[i].bytes;
		pages++;
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
