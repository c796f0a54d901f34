/*
 * Helpers shared by the store robustness tests (crash, fullfs, fds,
 * concurrency, cleaner): temp dirs, fd and temp-file counts, keys whose page
 * content is a function of the key, file stores on a KV pool, object paths,
 * and loop-mounted small file systems.
 */
#ifndef HC_TEST_STORE_ROBUST_H
#define HC_TEST_STORE_ROBUST_H

#define _GNU_SOURCE
#include "test_util.h"

#include <hicache/store.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Model and rank every test store uses: object names end in "_m_0_1". */
#define RT_MODEL "m"

/* snprintf of a path that must fit. */
static inline void rt_pathf(char *out, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static inline void rt_pathf(char *out, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, size, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size)
		fail_msg("path too long: %s...", out);
}

/* ---- time ---- */

static inline double rt_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void rt_sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- directories ---- */

/* A fresh directory under $TMPDIR (or /tmp); out holds PATH_MAX bytes. */
static inline void rt_mkdtemp(char *out, const char *tag)
{
	const char *base = getenv("TMPDIR");
	if (!base || !*base)
		base = "/tmp";
	rt_pathf(out, PATH_MAX, "%s/hc-%s-XXXXXX", base, tag);
	if (!mkdtemp(out))
		fail_msg("mkdtemp(%s): %s", out, strerror(errno));
}

static inline int rt_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP || flag == FTW_D)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

/* rm -rf path (never crosses into another file system). */
static inline void rt_rmtree(const char *path)
{
	if (path && *path)
		nftw(path, rt_rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* Entries of /proc/self/fd (the directory's own fd is in every count). */
static inline int rt_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		fail_msg("opendir /proc/self/fd: %s", strerror(errno));
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Print what /proc/self/fd holds (for a failing fd count). */
static inline void rt_dump_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char p[300], target[PATH_MAX];
		rt_pathf(p, sizeof(p), "/proc/self/fd/%s", de->d_name);
		ssize_t n = readlink(p, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = 0;
		print_message("fd %s -> %s\n", de->d_name, target);
	}
	closedir(d);
}

/* Entries of every <dir>/<bucket>/ that start with prefix (".tmp." for temp
 * files). The base dir itself is looked at too. verbose: print each. */
static inline unsigned rt_count_prefixed(const char *dir, const char *prefix, bool verbose)
{
	unsigned n = 0;
	for (int b = -1; b < 256; b++) {
		char path[PATH_MAX + 8];
		if (b < 0)
			rt_pathf(path, sizeof(path), "%s", dir);
		else
			rt_pathf(path, sizeof(path), "%s/%02x", dir, b);
		DIR *d = opendir(path);
		if (!d)
			continue;
		struct dirent *de;
		while ((de = readdir(d)))
			if (!strncmp(de->d_name, prefix, strlen(prefix))) {
				if (verbose)
					print_message("found %s/%s\n", path, de->d_name);
				n++;
			}
		closedir(d);
	}
	return n;
}

/* Temp files (".tmp.*", ".probe.*") under dir; each is printed. */
static inline unsigned rt_count_temps(const char *dir)
{
	return rt_count_prefixed(dir, ".tmp.", true) + rt_count_prefixed(dir, ".probe.", true);
}

static inline unsigned rt_count_temps_quiet(const char *dir)
{
	return rt_count_prefixed(dir, ".tmp.", false) + rt_count_prefixed(dir, ".probe.", false);
}

/* Make every temp file under dir look `age_s` seconds old (what a dead
 * writer's leftovers are once the orphan age passed). Returns how many. */
static inline unsigned rt_age_temps(const char *dir, unsigned age_s)
{
	unsigned n = 0;
	struct timespec t[2];
	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= age_s;
	t[1] = t[0];
	for (int b = 0; b < 256; b++) {
		char path[PATH_MAX + 8];
		rt_pathf(path, sizeof(path), "%s/%02x", dir, b);
		DIR *d = opendir(path);
		if (!d)
			continue;
		struct dirent *de;
		while ((de = readdir(d)))
			if (!strncmp(de->d_name, ".tmp.", 5) || !strncmp(de->d_name, ".probe.", 7))
				n += utimensat(dirfd(d), de->d_name, t, AT_SYMLINK_NOFOLLOW) == 0;
		closedir(d);
	}
	return n;
}

/* ---- keys and content ---- */

/* Key number id (distinct ids give distinct keys). */
static inline struct hc_key rt_key(uint64_t id)
{
	struct hc_key k;
	for (int w = 0; w < 4; w++) {
		uint64_t v = test_mix(id * 4 + (uint64_t)w + 0x5eed);
		memcpy(k.bytes + 8 * w, &v, 8);
	}
	return k;
}

static inline uint64_t rt_seed(const struct hc_key *k, unsigned variant)
{
	uint64_t s;
	memcpy(&s, k->bytes, 8);
	return s ^ ((uint64_t)variant * 0x9e3779b97f4a7c15ull);
}

/* Flat page content of key k (variant 0 is "the" content). len % 8 == 0. */
static inline void rt_fill(void *buf, size_t len, const struct hc_key *k, unsigned variant)
{
	uint64_t s = rt_seed(k, variant), *w = buf;
	for (size_t i = 0; i < len / 8; i++)
		w[i] = test_mix(s + i);
}

/* Does buf[off, off + len) hold bytes [off, off + len) of key k's content? */
static inline bool rt_matches(const void *buf, size_t off, size_t len, const struct hc_key *k,
			      unsigned variant)
{
	uint64_t s = rt_seed(k, variant);
	const uint64_t *w = (const uint64_t *)((const uint8_t *)buf + off);
	for (size_t i = 0; i < len / 8; i++)
		if (w[i] != test_mix(s + off / 8 + i))
			return false;
	return true;
}

/* ---- pools and stores ---- */

/* A page_first KV pool (zero-copy capable) of `pages` pages, each
 * 2 * tokens * 2 * 64 bytes (K and V halves of tokens * 256 bytes). */
static inline struct hc_pool *rt_pool(uint32_t tokens, uint64_t pages)
{
	struct hc_kv_geometry g = {.layers = 2,
				   .heads = 1,
				   .head_dim = 64,
				   .elem_bytes = 2,
				   .page_size = tokens,
				   .pages = pages,
				   .layout = HC_LAYOUT_PAGE_FIRST,
				   .mla = false};
	struct hc_pool *pool = NULL;
	int rc = hc_pool_create_kv(&g, NULL, &pool);
	if (rc)
		fail_msg("hc_pool_create_kv: %d (%s)", rc, hc_last_error());
	return pool;
}

/* Put key k's content into pool page p. */
static inline void rt_put_page(struct hc_pool *pool, uint64_t p, const struct hc_key *k,
			       unsigned variant, void *scratch)
{
	size_t pb = hc_pool_page_bytes(pool);
	rt_fill(scratch, pb, k, variant);
	assert_int_equal(hc_pool_scatter(pool, p, scratch, pb), 0);
}

/* Does pool page p hold key k's content (variant 0)? */
static inline bool rt_page_ok(struct hc_pool *pool, uint64_t p, const struct hc_key *k,
			      void *scratch)
{
	size_t pb = hc_pool_page_bytes(pool);
	if (hc_pool_gather(pool, p, scratch, pb))
		return false;
	return rt_matches(scratch, 0, pb, k, 0);
}

/* Open a store: backend "file" on dir (or "mem" when dir is NULL), with
 * extra JSON members (e.g. "\"use_direct_io\": false") and the io engine
 * from HICACHE_IO_ENGINE. Registers pool as the anchor "kv". Returns 0 or
 * the error of the open (the store is then NULL). */
static inline int rt_open(const char *dir, const char *extra, bool force_bounce,
			  struct hc_pool *pool, struct hc_store **out)
{
	char json[PATH_MAX + 512];
	if (dir)
		rt_pathf(json, sizeof(json), "{\"dirs\": [\"%s\"]%s%s}", dir,
			 extra && *extra ? ", " : "", extra ? extra : "");
	else
		rt_pathf(json, sizeof(json), "{%s}", extra ? extra : "");
	struct hc_config *cfg = NULL;
	int rc = hc_config_create(json, &cfg);
	if (rc)
		fail_msg("hc_config_create(%s): %d (%s)", json, rc, hc_last_error());
	struct hc_store_opts o;
	hc_store_opts_init(&o, sizeof(o));
	o.backend = dir ? "file" : "mem";
	o.config = cfg;
	o.model = RT_MODEL;
	o.force_bounce = force_bounce;
	*out = NULL;
	rc = hc_store_open(&o, out);
	hc_config_destroy(cfg);
	if (rc)
		return rc;
	/* The engine asked for is the engine in use (ctest runs each test
	 * once per engine). */
	const char *want = getenv("HICACHE_IO_ENGINE");
	if (dir && want && (!strcmp(want, "uring") || !strcmp(want, "threads")) &&
	    strcmp(hc_store_io_engine(*out), want))
		fail_msg("io engine %s, expected %s", hc_store_io_engine(*out), want);
	if (pool) {
		rc = hc_store_register_pool(*out, "kv", pool, true);
		if (rc)
			fail_msg("hc_store_register_pool: %d (%s)", rc, hc_last_error());
	}
	return 0;
}

/* rt_open that must succeed. */
static inline struct hc_store *rt_open_ok(const char *dir, const char *extra, bool force_bounce,
					  struct hc_pool *pool)
{
	struct hc_store *st;
	int rc = rt_open(dir, extra, force_bounce, pool, &st);
	if (rc)
		fail_msg("hc_store_open(%s): %d (%s)", dir ? dir : "mem", rc, hc_last_error());
	return st;
}

/* Exit 77 when HICACHE_IO_ENGINE=uring and io_uring cannot be used here. */
static inline void rt_skip_without_engine(void)
{
	char dir[PATH_MAX];
	rt_mkdtemp(dir, "probe");
	struct hc_store *st = NULL;
	int rc = rt_open(dir, NULL, false, NULL, &st);
	hc_store_close(st);
	rt_rmtree(dir);
	if (rc == -ENOSYS || rc == -EPERM) {
		fprintf(stderr, "skipped: io engine unavailable: %s\n", hc_last_error());
		exit(TEST_SKIP_CODE);
	}
}

/* ---- object names ---- */

/* Components of a page of the rt_pool() anchor: "_k", "_v" (page_first
 * pages are K and V objects, zero-copy or bounced alike). */
static inline unsigned rt_components(const char **comp)
{
	comp[0] = "_k";
	comp[1] = "_v";
	return 2;
}

/* "<dir>/<bucket>/<name>" of key k's object with that component. */
static inline void rt_obj_path(const char *dir, const struct hc_key *k, const char *component,
			       char *out, size_t size)
{
	char suffix[HC_SUFFIX_MAX], name[HC_NAME_MAX], bucket[3];
	assert_true(hc_key_suffix(RT_MODEL, 0, 1, false, suffix, sizeof(suffix)) > 0);
	assert_true(hc_key_name(k, suffix, component, name, sizeof(name)) > 0);
	hc_key_bucket_hex(hc_key_route_hash(name), bucket);
	rt_pathf(out, size, "%s/%s/%s", dir, bucket, name);
}

/* How many of key k's objects exist under dir. */
static inline unsigned rt_objects_present(const char *dir, const struct hc_key *k)
{
	const char *comp[2];
	unsigned n = rt_components(comp), have = 0;
	for (unsigned i = 0; i < n; i++) {
		char path[PATH_MAX];
		struct stat st;
		rt_obj_path(dir, k, comp[i], path, sizeof(path));
		if (stat(path, &st) == 0)
			have++;
	}
	return have;
}

/* ---- small loop-mounted file systems ---- */

struct rt_mount {
	char base[PATH_MAX]; /* temp dir holding img and mnt */
	char img[PATH_MAX + 8];
	char mnt[PATH_MAX + 8];
	bool mounted;
};

/* Unmount (retrying EBUSY: io_uring releases its files asynchronously) and
 * remove everything. Safe to call twice and on a failed rt_mount_ext4. */
static inline void rt_umount(struct rt_mount *m)
{
	if (m->mounted) {
		for (int i = 0; i < 100; i++) {
			if (umount2(m->mnt, 0) == 0 || errno == EINVAL || errno == ENOENT) {
				m->mounted = false;
				break;
			}
			rt_sleep_ms(100);
		}
		if (m->mounted) {
			print_message("umount %s: %s; detaching lazily\n", m->mnt, strerror(errno));
			if (umount2(m->mnt, MNT_DETACH) == 0)
				m->mounted = false;
		}
	}
	if (m->base[0] && !m->mounted) {
		rmdir(m->mnt);
		unlink(m->img);
		rmdir(m->base);
		m->base[0] = 0;
	}
}

/* A fresh ext4 of size_mb MiB (4 KiB blocks, no journal, no reserved
 * blocks) mounted on m->mnt. Returns 0, or -EPERM when this process may not
 * mount (the caller skips), or fails the test on other errors. */
static inline int rt_mount_ext4(struct rt_mount *m, unsigned size_mb)
{
	memset(m, 0, sizeof(*m));
	rt_mkdtemp(m->base, "mnt");
	rt_pathf(m->img, sizeof(m->img), "%s/img", m->base);
	rt_pathf(m->mnt, sizeof(m->mnt), "%s/mnt", m->base);
	if (mkdir(m->mnt, 0700))
		fail_msg("mkdir %s: %s", m->mnt, strerror(errno));
	int fd = open(m->img, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)size_mb << 20))
		fail_msg("creating %s: %s", m->img, strerror(errno));
	close(fd);
	char cmd[3 * PATH_MAX + 128];
	rt_pathf(cmd, sizeof(cmd),
		 "mkfs.ext4 -q -F -b 4096 -O ^has_journal -m 0 '%s' >/dev/null 2>&1", m->img);
	if (system(cmd) != 0) {
		print_message("mkfs.ext4 failed or missing: cannot test on a small fs\n");
		rt_umount(m);
		return -EPERM;
	}
	rt_pathf(cmd, sizeof(cmd), "mount -o loop '%s' '%s' >/dev/null 2>&1", m->img, m->mnt);
	if (geteuid() != 0 || system(cmd) != 0) {
		print_message("mounting a loop file system is not permitted here\n");
		rt_umount(m);
		return -EPERM;
	}
	m->mounted = true;
	return 0;
}

/* Percentage of the file system in use, as the cleaner computes it. */
static inline double rt_fs_used_pct(const char *path)
{
	struct statvfs sv;
	if (statvfs(path, &sv) || !sv.f_blocks)
		fail_msg("statvfs %s: %s", path, strerror(errno));
	/* As df and the cleaner count it: root's reserve is neither. */
	double used = (double)(sv.f_blocks - sv.f_bfree);
	return 100.0 * used / (used + (double)sv.f_bavail);
}

/* fsck of one dir that must succeed. */
static inline struct hc_fsck_report rt_fsck(const char *dir, bool repair)
{
	struct hc_fsck_report r;
	const char *dirs[] = {dir};
	int rc = hc_file_fsck(dirs, 1, repair, &r);
	if (rc)
		fail_msg("hc_file_fsck(%s): %d (%s)", dir, rc, hc_last_error());
	return r;
}

static inline uint64_t rt_json_u64(const char *json, const char *field)
{
	char pat[64];
	rt_pathf(pat, sizeof(pat), "\"%s\": ", field);
	const char *p = strstr(json, pat);
	if (!p)
		fail_msg("no \"%s\" in %s", field, json);
	return strtoull(p + strlen(pat), NULL, 10);
}

/* Is there a CLI binary ($HICACHE_BIN) to run? */
static inline bool rt_have_cli(void)
{
	const char *bin = getenv("HICACHE_BIN");
	return bin && *bin && access(bin, X_OK) == 0;
}

/* `$HICACHE_BIN fsck [--repair] --json dir`: fills *out from its JSON and
 * returns its exit status. */
static inline int rt_cli_fsck(const char *dir, bool repair, struct hc_fsck_report *out)
{
	const char *bin = getenv("HICACHE_BIN");
	if (!rt_have_cli())
		fail_msg("no HICACHE_BIN to run");
	char cmd[2 * PATH_MAX + 64], line[1024] = "";
	rt_pathf(cmd, sizeof(cmd), "'%s' fsck %s--json '%s' 2>/dev/null", bin,
		 repair ? "--repair " : "", dir);
	FILE *p = popen(cmd, "r");
	if (!p)
		fail_msg("popen %s: %s", cmd, strerror(errno));
	if (!fgets(line, sizeof(line), p))
		line[0] = 0;
	int status = pclose(p);
	if (!WIFEXITED(status))
		fail_msg("%s: did not exit", cmd);
	memset(out, 0, sizeof(*out));
	out->ok = rt_json_u64(line, "ok");
	out->corrupt = rt_json_u64(line, "corrupt");
	out->orphaned_temp = rt_json_u64(line, "orphaned_temp");
	out->foreign = rt_json_u64(line, "foreign");
	out->removed = rt_json_u64(line, "removed");
	out->bytes = rt_json_u64(line, "bytes");
	return WEXITSTATUS(status);
}

static inline struct hc_ls_report rt_ls(const char *dir)
{
	struct hc_ls_report r;
	const char *dirs[] = {dir};
	int rc = hc_file_ls(dirs, 1, &r);
	if (rc)
		fail_msg("hc_file_ls(%s): %d (%s)", dir, rc, hc_last_error());
	return r;
}

#endif
