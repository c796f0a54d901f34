/* Helpers shared by the io engine tests: engines of both kinds, scratch
 * directories, leak probes (fds, io_uring slots, temp files). */
#ifndef HC_TEST_IO_TEST_H
#define HC_TEST_IO_TEST_H

#define _GNU_SOURCE
#include "test_util.h"

#include "io/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const enum io_engine_kind io_t_kinds[] = {IO_ENGINE_URING, IO_ENGINE_THREADS};
#define IO_T_NKINDS (sizeof(io_t_kinds) / sizeof(io_t_kinds[0]))

/* An engine of this kind, or NULL when io_uring cannot be used here (the
 * caller skips the io_uring half of its test). */
static inline struct io_engine *io_t_engine(enum io_engine_kind kind, unsigned depth,
					    unsigned threads)
{
	struct io_engine_opts o = {.kind = kind, .queue_depth = depth, .threads = threads};
	struct io_engine *e = NULL;
	int rc = io_engine_create(&o, &e);
	if (rc && kind == IO_ENGINE_URING && (rc == -ENOSYS || rc == -EPERM)) {
		print_message("io_uring unavailable (%s): uring cases skipped\n", hc_last_error());
		return NULL;
	}
	assert_int_equal(rc, 0);
	assert_non_null(e);
	assert_int_equal(io_engine_kind(e), kind);
	return e;
}

/* A fresh directory under $TMPDIR (or /tmp); *fd is an O_PATH-free dirfd. */
static inline char *io_t_mkdtemp(int *fd)
{
	const char *base = getenv("TMPDIR");
	char *path;
	assert_true(asprintf(&path, "%s/hicache-io-XXXXXX", base && *base ? base : "/tmp") > 0);
	assert_non_null(mkdtemp(path));
	if (fd) {
		*fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(*fd >= 0);
	}
	return path;
}

static int io_t_rm_one(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(p) : unlink(p);
}

static inline void io_t_rmtree(char *path, int fd)
{
	if (fd >= 0)
		close(fd);
	if (path)
		nftw(path, io_t_rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(path);
}

/* Entries of /proc/self/fd (fds open in the process). */
static inline int io_t_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the DIR's own fd */
}

/* Files open in fixed-file slots of every io_uring of this process, from
 * /proc/self/fdinfo: after "UserFiles:" the kernel lists each occupied
 * slot as "<index>: <path>". A finished batch must leave none. */
static inline int io_t_open_slots(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int slots = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char link[300], target[256];
		snprintf(link, sizeof(link), "/proc/self/fd/%s", de->d_name);
		ssize_t len = readlink(link, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (!strstr(target, "io_uring"))
			continue;
		char info[300];
		snprintf(info, sizeof(info), "/proc/self/fdinfo/%s", de->d_name);
		FILE *f = fopen(info, "re");
		if (!f)
			continue;
		char line[512];
		bool in_files = false;
		while (fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "UserFiles:", 10)) {
				in_files = true;
				continue;
			}
			unsigned idx;
			char colon;
			if (in_files && sscanf(line, " %u%c", &idx, &colon) == 2 && colon == ':')
				slots++;
			else if (in_files)
				in_files = false;
		}
		fclose(f);
	}
	closedir(d);
	return slots;
}

/* Entries of a directory whose name starts with prefix ("" = all). */
static inline int io_t_count_prefix(int dirfd, const char *prefix)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	DIR *d = fdopendir(fd);
	assert_non_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n += !strncmp(de->d_name, prefix, strlen(prefix));
	}
	closedir(d);
	return n;
}

static inline void io_t_fill(void *buf, size_t len, uint64_t seed)
{
	unsigned char *p = buf;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = test_mix(seed ^ (i * 0x100000001b3ull));
		memcpy(p + i, &v, len - i < 8 ? len - i : 8);
	}
}

static inline void *io_t_aligned(size_t len)
{
	void *p = NULL;
	assert_int_equal(posix_memalign(&p, 4096, len ? len : 1), 0);
	return p;
}

/* Write a file the plain way (to set up a case). */
static inline void io_t_put_file(int dirfd, const char *name, const void *buf, size_t len)
{
	int fd = openat(dirfd, name, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* Whole content of a file, or NULL; *len set. */
static inline void *io_t_get_file(int dirfd, const char *name, size_t *len)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	void *buf = malloc((size_t)st.st_size + 1);
	assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* O_DIRECT works on the file system of dirfd. */
static inline bool io_t_direct_ok(int dirfd)
{
	int fd = openat(dirfd, "direct-probe", O_CREAT | O_WRONLY | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	void *buf = io_t_aligned(4096);
	memset(buf, 0, 4096);
	bool ok = write(fd, buf, 4096) == 4096;
	free(buf);
	close(fd);
	unlinkat(dirfd, "direct-probe", 0);
	return ok;
}

#endif
