/*
 * Helpers of the store tests: temp dirs, opening stores (file or mem) from
 * a config JSON, deterministic page contents per (pool, page, byte), keys
 * from token chains, the on-disk path of an object, file counting and
 * damage (truncate, bit flips).
 *
 * Page contents follow the logical page (the key), never the slot, so a
 * page read back into another slot than it was written from is checked.
 */
#ifndef HC_STORE_TEST_H
#define HC_STORE_TEST_H

#define _GNU_SOURCE
#include "test_util.h"

#include <hicache/store.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* The model of every store the tests open, and its sanitised form. */
#define ST_MODEL "org/m-7b"
#define ST_MODEL_SAN "org-m-7b"
/* Suffixes for tp_rank 0 of 1: rank pools, rank-replicated (MLA) pools. */
#define ST_SUFFIX "_" ST_MODEL_SAN "_0_1"
#define ST_SUFFIX_MLA "_" ST_MODEL_SAN

/* ---- temp dirs ---- */

static int st_rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

/* rm -rf */
static inline void st_rmrf(const char *path)
{
	chmod(path, 0700);
	nftw(path, st_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static int st_unlink_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (flag != FTW_D && flag != FTW_DP)
		unlink(path);
	return 0;
}

/* Remove every file below dir, keep the dirs (bucket dirs are slow to
 * create and remove on some disks: reuse them between cases). */
static inline void st_empty_dir(const char *dir)
{
	nftw(dir, st_unlink_cb, 16, FTW_PHYS);
}

/* Every dir st_mkdtemp() made: removed at exit, also after a failed
 * assertion skipped a test's own clean-up. */
#define ST_MAX_TMPDIRS 256
static char st_tmpdirs[ST_MAX_TMPDIRS][PATH_MAX];
static unsigned st_ntmpdirs;

static void st_cleanup_tmpdirs(void)
{
	for (unsigned i = 0; i < st_ntmpdirs; i++) {
		struct stat sb;
		if (lstat(st_tmpdirs[i], &sb))
			continue;
		umount2(st_tmpdirs[i], MNT_DETACH); /* a test's mount, if any */
		st_rmrf(st_tmpdirs[i]);
	}
}

/* A fresh dir under base; false if it cannot be made. */
static inline bool st_mkdtemp_in(const char *base, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/hc_store_XXXXXX", base);
	if (!mkdtemp(out))
		return false;
	if (st_ntmpdirs == 0)
		atexit(st_cleanup_tmpdirs);
	if (st_ntmpdirs < ST_MAX_TMPDIRS)
		memcpy(st_tmpdirs[st_ntmpdirs++], out, PATH_MAX);
	return true;
}

/* A fresh dir under $HC_TEST_TMPDIR or /tmp (a disk file system, so that
 * O_DIRECT works there). */
static inline void st_mkdtemp(char out[PATH_MAX])
{
	const char *base = getenv("HC_TEST_TMPDIR");
	if (!st_mkdtemp_in(base && *base ? base : "/tmp", out))
		fail_msg("mkdtemp(%s): %s", out, strerror(errno));
}

/* Can a file be opened with O_DIRECT in dir? */
static inline bool st_dir_supports_direct(const char *dir)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof(p), "%s/.st_direct_probe", dir) >= (int)sizeof(p))
		return false;
	int fd = open(p, O_CREAT | O_WRONLY | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0) {
		unlink(p);
		return false;
	}
	close(fd);
	unlink(p);
	return true;
}

/* Give the process its own mount namespace (mounts made by the test vanish
 * with it). Call first thing in main(), before any thread exists. False
 * when not allowed (no CAP_SYS_ADMIN): tests that mount skip then. */
static inline bool st_private_mounts(void)
{
	return unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
}

/* ---- opening stores ---- */

/* Open with a config from json (NULL: no config object, so the defaults
 * and the environment apply). Returns hc_store_open()'s code. */
static inline int st_open_json(const char *backend, const char *json, const char *model,
			       uint32_t rank, uint32_t size, bool bounce, struct hc_store **out)
{
	struct hc_config *cfg = NULL;
	*out = NULL;
	if (json) {
		int rc = hc_config_create(json, &cfg);
		if (rc)
			return rc;
	}
	struct hc_store_opts o;
	hc_store_opts_init(&o, sizeof(o));
	o.backend = backend;
	o.config = cfg;
	o.model = model;
	o.tp_rank = rank;
	o.tp_size = size;
	o.force_bounce = bounce;
	int rc = hc_store_open(&o, out);
	hc_config_destroy(cfg); /* read at open only */
	return rc;
}

/* File store on dir (model ST_MODEL, rank 0 of 1, no cleaner thread).
 * extra: more JSON members ("\"verify_checksum\": false") or NULL. */
static inline struct hc_store *st_open_file(const char *dir, bool direct, bool bounce,
					    const char *extra)
{
	char json[PATH_MAX + 512];
	snprintf(json, sizeof(json),
		 "{\"dirs\": [\"%s\"], \"use_direct_io\": %s, \"l3_cleaner_interval_s\": 0%s%s}",
		 dir, direct ? "true" : "false", extra ? ", " : "", extra ? extra : "");
	struct hc_store *st;
	int rc = st_open_json("file", json, ST_MODEL, 0, 1, bounce, &st);
	if (rc)
		fail_msg("open file store %s: %s (%s)", json, hc_strerror(rc), hc_last_error());
	return st;
}

static inline struct hc_store *st_open_mem(bool bounce)
{
	struct hc_store *st;
	int rc = st_open_json("mem", "{}", ST_MODEL, 0, 1, bounce, &st);
	if (rc)
		fail_msg("open mem store: %s (%s)", hc_strerror(rc), hc_last_error());
	return st;
}

/* When the environment asks for io_uring and the kernel refuses it (old
 * kernel, seccomp), the .uring tests have nothing to test: skip them. */
static inline int st_engine_check(void)
{
	const char *engine = getenv("HICACHE_IO_ENGINE");
	if (!engine || strcmp(engine, "uring"))
		return 0;
	char dir[PATH_MAX];
	st_mkdtemp(dir);
	char json[PATH_MAX + 64];
	snprintf(json, sizeof(json), "{\"dirs\": [\"%s\"]}", dir);
	struct hc_store *st;
	int rc = st_open_json("file", json, ST_MODEL, 0, 1, false, &st);
	hc_store_close(st);
	st_rmrf(dir);
	if (rc && strstr(hc_last_error(), "io_uring")) {
		fprintf(stderr, "io_uring unavailable (%s): skipped\n", hc_last_error());
		return TEST_SKIP_CODE;
	}
	return 0;
}

/* ---- pools ---- */

/* The KV geometry of most tests: 2 layers, page of 8 tokens; MHA 2 heads of
 * 64 bf16 (a 4096-byte K or V segment per page), MLA 1 head of 128 (one
 * 4096-byte segment). */
static inline struct hc_kv_geometry st_kv_geo(enum hc_kv_layout layout, bool mla, uint64_t pages)
{
	struct hc_kv_geometry g = {.layers = 2,
				   .heads = mla ? 1 : 2,
				   .head_dim = mla ? 128 : 64,
				   .elem_bytes = 2,
				   .page_size = 8,
				   .pages = pages,
				   .layout = layout,
				   .mla = mla};
	return g;
}

static inline struct hc_pool *st_kv_pool(const struct hc_kv_geometry *g)
{
	struct hc_pool *p;
	int rc = hc_pool_create_kv(g, NULL, &p);
	if (rc)
		fail_msg("hc_pool_create_kv: %s", hc_last_error());
	return p;
}

static inline struct hc_pool *st_mamba_pool(const struct hc_mamba_geometry *g)
{
	struct hc_pool *p;
	int rc = hc_pool_create_mamba(g, NULL, &p);
	if (rc)
		fail_msg("hc_pool_create_mamba: %s", hc_last_error());
	return p;
}

static inline struct hc_pool *st_indexer_pool(uint64_t pages, uint32_t tokens, uint64_t bytes)
{
	struct hc_indexer_geometry g = {.pages = pages, .page_size = tokens, .page_bytes = bytes};
	struct hc_pool *p;
	int rc = hc_pool_create_indexer(&g, NULL, &p);
	if (rc)
		fail_msg("hc_pool_create_indexer: %s", hc_last_error());
	return p;
}

static inline struct hc_pool *st_anchor_pool(uint64_t pages, uint32_t tokens)
{
	struct hc_anchor_geometry g = {.pages = pages, .page_size = tokens};
	struct hc_pool *p;
	int rc = hc_pool_create_anchor(&g, &p);
	if (rc)
		fail_msg("hc_pool_create_anchor: %s", hc_last_error());
	return p;
}

/* ---- page contents ---- */

/* Byte i of logical page `page` of pool `pool_id`: distinct per pool, page
 * and byte. */
static inline void st_content(uint32_t pool_id, uint64_t page, uint8_t *out, size_t len)
{
	uint64_t seed = ((uint64_t)pool_id << 48) ^ (page << 24);
	for (size_t i = 0; i < len; i += 8) {
		uint64_t w = test_mix(seed + i / 8);
		size_t n = len - i < 8 ? len - i : 8;
		memcpy(out + i, &w, n);
	}
}

/* Put logical page `page` of pool_id into slot. */
static inline void st_fill(struct hc_pool *pool, uint64_t slot, uint32_t pool_id, uint64_t page)
{
	size_t len = hc_pool_page_bytes(pool);
	uint8_t *buf = malloc(len);
	assert_non_null(buf);
	st_content(pool_id, page, buf, len);
	assert_int_equal(hc_pool_scatter(pool, slot, buf, len), 0);
	free(buf);
}

/* Zero a slot (so a read that did nothing is seen). */
static inline void st_clear(struct hc_pool *pool, uint64_t slot)
{
	size_t len = hc_pool_page_bytes(pool);
	uint8_t *buf = calloc(1, len);
	assert_non_null(buf);
	assert_int_equal(hc_pool_scatter(pool, slot, buf, len), 0);
	free(buf);
}

/* Does slot hold logical page `page` of pool_id? -1 if so, else the first
 * differing byte of the flat page. */
static inline long st_diff(const struct hc_pool *pool, uint64_t slot, uint32_t pool_id,
			   uint64_t page)
{
	size_t len = hc_pool_page_bytes(pool);
	uint8_t *want = malloc(len), *got = malloc(len);
	assert_non_null(want);
	assert_non_null(got);
	st_content(pool_id, page, want, len);
	assert_int_equal(hc_pool_gather(pool, slot, got, len), 0);
	long at = -1;
	for (size_t i = 0; i < len && at < 0; i++)
		if (want[i] != got[i])
			at = (long)i;
	free(want);
	free(got);
	return at;
}

#define st_assert_page(pool, slot, pool_id, page)                                           \
	do {                                                                                \
		long at_ = st_diff((pool), (slot), (pool_id), (page));                      \
		if (at_ >= 0)                                                               \
			fail_msg("slot %llu does not hold page %llu of pool %u (byte %ld)", \
				 (unsigned long long)(slot), (unsigned long long)(page),    \
				 (unsigned)(pool_id), at_);                                 \
	} while (0)

/* ---- keys ---- */

/* n chained keys over n pages of deterministic tokens; seeds give
 * unrelated chains. */
static inline void st_keys(uint32_t seed, size_t n, uint32_t page_size, struct hc_key *out)
{
	size_t nt = n * page_size;
	uint32_t *tokens = malloc((nt ? nt : 1) * sizeof(*tokens));
	assert_non_null(tokens);
	for (size_t i = 0; i < nt; i++)
		tokens[i] = (uint32_t)test_mix(((uint64_t)seed << 32) | i) & 0xffffff;
	assert_int_equal(hc_key_chain(NULL, tokens, nt, page_size, out, n), (int64_t)n);
	free(tokens);
}

/* ---- objects on disk ---- */

/* "<dir>/<bucket>/<hex><suffix><component>", the base dir chosen among
 * dirs as docs/FORMAT.md says. */
static inline void st_obj_path_in(const char *const *dirs, unsigned ndirs, const struct hc_key *key,
				  const char *suffix, const char *component, char out[PATH_MAX])
{
	char name[HC_NAME_MAX], bucket[3];
	assert_true(hc_key_name(key, suffix, component, name, sizeof(name)) > 0);
	uint64_t h = hc_key_route_hash(name);
	hc_key_bucket_hex(h, bucket);
	snprintf(out, PATH_MAX, "%s/%s/%s", dirs[hc_key_disk(h, ndirs)], bucket, name);
}

static inline void st_obj_path(const char *dir, const struct hc_key *key, const char *suffix,
			       const char *component, char out[PATH_MAX])
{
	st_obj_path_in(&dir, 1, key, suffix, component, out);
}

/* Size of a file, or -1 if it does not exist. */
static inline long long st_file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) ? -1 : (long long)sb.st_size;
}

#define st_assert_file(path, size)                                                                \
	do {                                                                                      \
		long long sz_ = st_file_size(path);                                               \
		if (sz_ != (long long)(size))                                                     \
			fail_msg("%s: size %lld, expected %lld", (path), sz_, (long long)(size)); \
	} while (0)

/* Object bytes for a payload in st (docs/FORMAT.md). */
static inline uint64_t st_obj_len(const struct hc_store *st, uint64_t payload)
{
	uint64_t b = hc_store_object_block(st);
	return (payload + b - 1) / b * b + b;
}

struct st_count {
	size_t files; /* regular files, temp files included */
	size_t tmps;  /* ".tmp.*" */
	size_t dirs;  /* below the root */
};

static struct st_count st_count_acc;

static int st_count_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	if (ftw->level == 0)
		return 0;
	if (flag == FTW_F) {
		st_count_acc.files++;
		if (!strncmp(path + ftw->base, ".tmp", 4))
			st_count_acc.tmps++;
	} else if (flag == FTW_D || flag == FTW_DP) {
		st_count_acc.dirs++;
	}
	return 0;
}

/* Not thread-safe. */
static inline struct st_count st_count(const char *dir)
{
	memset(&st_count_acc, 0, sizeof(st_count_acc));
	assert_int_equal(nftw(dir, st_count_cb, 16, FTW_PHYS), 0);
	return st_count_acc;
}

/* XOR one byte of a file with mask (offset < 0: from the end). */
static inline void st_flip(const char *path, long long offset, uint8_t mask)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		fail_msg("open %s: %s", path, strerror(errno));
	if (offset < 0)
		offset += st_file_size(path);
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, offset), 1);
	b ^= mask;
	assert_int_equal(pwrite(fd, &b, 1, offset), 1);
	close(fd);
}

/* ---- stats ---- */

static inline struct hc_store_stats st_stats(const struct hc_store *st, const char *pool)
{
	struct hc_store_stats s;
	int rc = hc_store_stats(st, pool, &s);
	if (rc)
		fail_msg("hc_store_stats(%s): %s", pool ? pool : "NULL", hc_last_error());
	return s;
}

#endif
