/*
 * A file store on a shared host: whom it trusts, and symlinks.
 *
 * owner/mode:  a base dir or bucket owned by another uid, or writable by
 *              group or others, is refused with a message saying how to
 *              fix it; l3_file_shared_group accepts a group-writable one
 *              (never one writable by others).
 * symlinks:    a bucket that is a symlink is refused at open; one swapped
 *              in while the store is open gets no object written through
 *              it; an object that is a symlink to a valid object outside is
 *              never served; fsck --repair and gc never delete through a
 *              symlinked bucket.
 * healing:     the backend's removal of a damaged object keeps a valid
 *              object found under the name (a good copy published since
 *              the read) and removes a bad one.
 * validator:   a zero checksum on a non-empty payload is corrupt for fsck
 *              as for get.
 * fsck:        the same dir twice (also through a symlink) is refused and
 *              nothing is removed; dirs in another order: misplaced,
 *              reported, never removed; fsck beside a gc that deletes
 *              everything reports no corrupt object.
 */
#include "robust_test.h"
#include "store/backend.h"
#include "store/format.h"

#include <hicache/config.h>
#include <hicache/key.h>

#include <pthread.h>
#include <stdatomic.h>
#include <xxhash.h>

#define TOKENS 16
#define NPAGES 8
#define CFG "\"l3_cleaner_interval_s\": 0"

struct fx {
	char dir[PATH_MAX], out[PATH_MAX];
	struct hc_pool *pool;
	void *scratch;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	rt_mkdtemp(f->dir, "trust");
	rt_mkdtemp(f->out, "outside");
	f->pool = rt_pool(TOKENS, 4 * NPAGES);
	f->scratch = malloc(hc_pool_page_bytes(f->pool));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	hc_pool_destroy(f->pool);
	rt_rmtree(f->dir);
	rt_rmtree(f->out);
	free(f->scratch);
	free(f);
	return 0;
}

/* Set pages of keys [base, base + n) (n <= NPAGES); all must work. */
static void set_keys(struct fx *f, struct hc_store *st, uint64_t base, unsigned n)
{
	struct hc_key keys[NPAGES];
	uint64_t pages[NPAGES];
	int res[NPAGES];
	for (unsigned i = 0; i < n; i++) {
		keys[i] = rt_key(base + i);
		pages[i] = i;
		rt_put_page(f->pool, i, &keys[i], 0, f->scratch);
	}
	assert_int_equal(hc_store_set(st, keys, n, pages, res), 0);
}

/* How many of keys [base, base + n) read back right. */
static unsigned good_keys(struct fx *f, struct hc_store *st, uint64_t base, unsigned n)
{
	unsigned good = 0;
	for (unsigned i = 0; i < n; i++) {
		struct hc_key k = rt_key(base + i);
		uint64_t p = NPAGES + 1;
		int r;
		if (hc_store_get(st, &k, 1, &p, &r) == 1 && rt_page_ok(f->pool, p, &k, f->scratch))
			good++;
	}
	return good;
}

static unsigned count_files(const char *dir)
{
	char cmd[PATH_MAX + 64];
	rt_pathf(cmd, sizeof(cmd), "find '%s' -type f | wc -l", dir);
	FILE *p = popen(cmd, "r");
	unsigned n = 0;
	assert_non_null(p);
	assert_int_equal(fscanf(p, "%u", &n), 1);
	pclose(p);
	return n;
}

static void expect_refused(const char *dir, const char *extra, const char *says)
{
	struct hc_store *st = NULL;
	int rc = rt_open(dir, extra, false, NULL, &st);
	if (rc != -EPERM && rc != -ENOTDIR)
		fail_msg("open of %s: %d, expected a refusal", dir, rc);
	if (!strstr(hc_last_error(), says))
		fail_msg("message '%s' lacks '%s'", hc_last_error(), says);
}

static void test_owner_and_mode(void **state)
{
	struct fx *f = *state;
	if (geteuid() != 0)
		skip(); /* chown to another uid needs root */
	/* Another user's dir. */
	assert_int_equal(chown(f->dir, 12345, 12345), 0);
	expect_refused(f->dir, CFG, "owned by uid 12345");
	assert_int_equal(chown(f->dir, geteuid(), getegid()), 0);
	/* Writable by others, by the group. */
	assert_int_equal(chmod(f->dir, 0777), 0);
	expect_refused(f->dir, CFG, "writable by others");
	expect_refused(f->dir, CFG ", \"l3_file_shared_group\": true", "writable by others");
	assert_int_equal(chmod(f->dir, 0770), 0);
	expect_refused(f->dir, CFG, "l3_file_shared_group");
	/* A group that is trusted: opens, and files are group-readable. */
	struct hc_store *st = rt_open_ok(f->dir, CFG ", \"l3_file_shared_group\": true", false,
					 f->pool);
	set_keys(f, st, 0, 1);
	hc_store_close(st);
	char obj[PATH_MAX];
	struct hc_key k = rt_key(0);
	struct stat sb;
	rt_obj_path(f->dir, &k, "_k", obj, sizeof(obj));
	assert_int_equal(stat(obj, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0640);
	assert_int_equal(chmod(f->dir, 0700), 0);
	/* A bucket: another owner, then writable by others. */
	char bucket[PATH_MAX + 8];
	rt_pathf(bucket, sizeof(bucket), "%s/7f", f->dir);
	assert_int_equal(chown(bucket, 12345, 12345), 0);
	expect_refused(f->dir, CFG, "7f' is owned by uid 12345");
	assert_int_equal(chown(bucket, geteuid(), getegid()), 0);
	assert_int_equal(chmod(bucket, 0757), 0);
	expect_refused(f->dir, CFG, "writable by others");
	assert_int_equal(chmod(bucket, 0700), 0);
	st = rt_open_ok(f->dir, CFG, false, f->pool);
	assert_int_equal(good_keys(f, st, 0, 1), 1);
	hc_store_close(st);
}

/* Replace the bucket of key k's component object by a symlink to f->out. */
static void symlink_bucket(struct fx *f, const struct hc_key *k, const char *comp, char *bucket,
			   size_t size)
{
	char obj[PATH_MAX];
	rt_obj_path(f->dir, k, comp, obj, sizeof(obj));
	rt_pathf(bucket, size, "%s", obj);
	*strrchr(bucket, '/') = 0;
	char aside[PATH_MAX + 8];
	rt_pathf(aside, sizeof(aside), "%s.real", bucket);
	assert_int_equal(rename(bucket, aside), 0);
	assert_int_equal(symlink(f->out, bucket), 0);
}

static void test_symlinks(void **state)
{
	struct fx *f = *state;
	struct hc_store *st = rt_open_ok(f->dir, CFG, false, f->pool);
	set_keys(f, st, 0, NPAGES);
	/* A bucket swapped for a symlink while the store is open: no object
	 * goes through it. */
	struct hc_key k = rt_key(100);
	char bucket[PATH_MAX];
	symlink_bucket(f, &k, "_k", bucket, sizeof(bucket));
	uint64_t p = 0;
	int r;
	rt_put_page(f->pool, 0, &k, 0, f->scratch);
	assert_true(hc_store_set(st, &k, 1, &p, &r) != 0);
	assert_int_equal(count_files(f->out), 0);
	/* A valid object outside, reached through the symlinked bucket:
	 * never served. */
	char obj[PATH_MAX], name[PATH_MAX];
	struct hc_key k0 = rt_key(0);
	rt_obj_path(f->dir, &k0, "_k", obj, sizeof(obj));
	rt_obj_path(f->dir, &k, "_k", name, sizeof(name));
	char cmd[3 * PATH_MAX];
	rt_pathf(cmd, sizeof(cmd), "cp '%s' '%s/%s'", obj, f->out, strrchr(name, '/') + 1);
	assert_int_equal(system(cmd), 0);
	assert_true(hc_store_get(st, &k, 1, &p, &r) == 0);
	hc_store_close(st);
	/* At open: refused, saying why. */
	expect_refused(f->dir, CFG, "symlink");
	/* fsck --repair and gc skip the symlinked bucket: an object-like
	 * file, a corrupt one and an old temp file outside stay. */
	rt_pathf(cmd, sizeof(cmd),
		 "head -c 100 /dev/zero > '%s/%064d_x' && touch -d '2 hours ago' '%s/.tmp.old' "
		 "'%s/%064d_x'",
		 f->out, 0, f->out, f->out, 0);
	assert_int_equal(system(cmd), 0);
	unsigned outside = count_files(f->out);
	struct hc_fsck_report fr = rt_fsck(f->dir, true);
	assert_int_equal(fr.corrupt, 0);
	assert_true(fr.foreign >= 1);
	const char *dirs[] = {f->dir};
	uint64_t pages, bytes;
	assert_int_equal(hc_file_gc(dirs, 1, 0, &pages, &bytes), 0);
	assert_int_equal(count_files(f->out), outside);
	/* Back to a real bucket; an object that is a symlink to a valid
	 * object is never served either. */
	assert_int_equal(unlink(bucket), 0);
	char aside[PATH_MAX + 8];
	rt_pathf(aside, sizeof(aside), "%s.real", bucket);
	assert_int_equal(rename(aside, bucket), 0);
	st = rt_open_ok(f->dir, CFG, false, f->pool);
	rt_pathf(cmd, sizeof(cmd), "%s/%s", f->out, strrchr(name, '/') + 1);
	assert_int_equal(symlink(cmd, name), 0);
	assert_int_equal(hc_store_get(st, &k, 1, &p, &r), 0);
	/* ... and a set replaces the link by a real object. */
	rt_put_page(f->pool, 0, &k, 0, f->scratch);
	assert_int_equal(hc_store_set(st, &k, 1, &p, &r), 0);
	struct stat sb;
	assert_int_equal(lstat(name, &sb), 0);
	assert_true(S_ISREG(sb.st_mode));
	assert_int_equal(good_keys(f, st, 100, 1), 1);
	hc_store_close(st);
	assert_int_equal(count_files(f->out), outside);
}

/* The object file of key id's "_k" component: flip one payload byte. */
static void flip(struct fx *f, uint64_t id)
{
	char obj[PATH_MAX];
	struct hc_key k = rt_key(id);
	rt_obj_path(f->dir, &k, "_k", obj, sizeof(obj));
	int fd = open(obj, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, 10), 1);
	b ^= 1;
	assert_int_equal(pwrite(fd, &b, 1, 10), 1);
	close(fd);
}

static void test_heal_rechecks(void **state)
{
	struct fx *f = *state;
	struct hc_store *st = rt_open_ok(f->dir, CFG, false, f->pool);
	set_keys(f, st, 0, 2);
	hc_store_close(st);
	char json[PATH_MAX + 64];
	rt_pathf(json, sizeof(json), "{\"dirs\": [\"%s\"], " CFG "}", f->dir);
	struct hc_config *cfg;
	assert_int_equal(hc_config_create(json, &cfg), 0);
	void *be;
	assert_int_equal(store_file_ops.open(cfg, &be), 0);
	hc_config_destroy(cfg);
	flip(f, 1);
	struct store_obj objs[2];
	char names[2][HC_NAME_MAX];
	for (unsigned i = 0; i < 2; i++) {
		char path[PATH_MAX];
		struct hc_key k = rt_key(i);
		rt_obj_path(f->dir, &k, "_k", path, sizeof(path));
		rt_pathf(names[i], sizeof(names[i]), "%s", strrchr(path, '/') + 1);
		objs[i] = (struct store_obj){.name = names[i],
					     .route = hc_key_route_hash(names[i])};
	}
	/* Key 0's object is valid (as a good copy published after a bad one
	 * was read would be): kept. Key 1's is bad: removed. */
	assert_int_equal(store_file_ops.remove(be, objs, 2), 0);
	assert_int_equal(objs[0].result, -EEXIST);
	assert_int_equal(objs[1].result, 0);
	store_file_ops.close(be);
	struct hc_key k0 = rt_key(0), k1 = rt_key(1);
	assert_int_equal(rt_objects_present(f->dir, &k0), 2);
	assert_int_equal(rt_objects_present(f->dir, &k1), 1);
	assert_int_equal(rt_count_temps(f->dir), 0);
}

/* Rewrite the trailer of key id's "_k" object with edit applied (and its
 * self-check made right again, as a deliberate writer would). */
static void reseal(struct fx *f, uint64_t id, void (*edit)(struct store_trailer *))
{
	char obj[PATH_MAX];
	struct hc_key k = rt_key(id);
	rt_obj_path(f->dir, &k, "_k", obj, sizeof(obj));
	int fd = open(obj, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	struct stat sb;
	assert_int_equal(fstat(fd, &sb), 0);
	uint8_t block[FORMAT_BLOCK_MIN];
	off_t at = sb.st_size - FORMAT_BLOCK_MIN;
	assert_int_equal(pread(fd, block, sizeof(block), at), sizeof(block));
	struct store_trailer t;
	assert_int_equal(format_trailer_read(block + sizeof(block) - FORMAT_TRAILER_BYTES, &t), 0);
	edit(&t);
	format_trailer_write(block, sizeof(block), &t);
	if (t.version != FORMAT_VERSION) { /* an old writer's trailer */
		struct store_trailer *raw = (struct store_trailer *)(block + sizeof(block) -
								     FORMAT_TRAILER_BYTES);
		raw->version = t.version;
		raw->self_check = XXH3_64bits(raw, offsetof(struct store_trailer, self_check));
	}
	assert_int_equal(pwrite(fd, block, sizeof(block), at), sizeof(block));
	close(fd);
}

static void zero_sum(struct store_trailer *t)
{
	t->checksum = 0;
}

static void old_version(struct store_trailer *t)
{
	t->version = 1;
}

/* A checksum is always computed: 0 is a value like any other, so a
 * non-empty payload sealed with 0 fails its check (read and fsck). */
static void test_zero_checksum(void **state)
{
	struct fx *f = *state;
	struct hc_store *st = rt_open_ok(f->dir, CFG, false, f->pool);
	set_keys(f, st, 0, 2);
	reseal(f, 0, zero_sum);
	reseal(f, 1, old_version);
	struct hc_fsck_report r = rt_fsck(f->dir, false);
	assert_int_equal(r.corrupt, 2);
	assert_int_equal(good_keys(f, st, 0, 2), 0);
	hc_store_close(st);
}

/* A valid object copied or renamed under another page's name is not
 * that page: its trailer's name hash says whose it is. */
static void test_renamed_object(void **state)
{
	struct fx *f = *state;
	struct hc_store *st = rt_open_ok(f->dir, CFG, false, f->pool);
	set_keys(f, st, 0, 2);
	static const char *const comps[] = {"_k", "_v"};
	struct hc_key k0 = rt_key(0), k1 = rt_key(1), k2 = rt_key(2);
	for (unsigned c = 0; c < 2; c++) {
		char from[PATH_MAX], to[PATH_MAX], other[PATH_MAX], cmd[3 * PATH_MAX];
		rt_obj_path(f->dir, &k0, comps[c], from, sizeof(from));
		rt_obj_path(f->dir, &k2, comps[c], to, sizeof(to));
		rt_obj_path(f->dir, &k1, comps[c], other, sizeof(other));
		/* Key 2 was never set: a copy of key 0's objects under its
		 * names. Key 1's objects are renamed over by key 0's. */
		rt_pathf(cmd, sizeof(cmd), "cp '%s' '%s' && cp '%s' '%s'", from, to, from, other);
		assert_int_equal(system(cmd), 0);
	}
	assert_int_equal(good_keys(f, st, 0, 1), 1);
	uint64_t p = 0;
	int res;
	assert_int_equal(hc_store_get(st, &k2, 1, &p, &res), 0);
	assert_int_equal(hc_store_get(st, &k1, 1, &p, &res), 0);
	struct hc_fsck_report r = rt_fsck(f->dir, false);
	assert_int_equal(r.ok, 2);
	assert_int_equal(r.corrupt, 4);
	/* A set of key 1 replaces what sits under its names. */
	set_keys(f, st, 1, 1);
	assert_int_equal(good_keys(f, st, 1, 1), 1);
	hc_store_close(st);
}

#define MANY 64

static void test_fsck_dirs(void **state)
{
	struct fx *f = *state;
	char a[PATH_MAX + 8], b[PATH_MAX + 8], link[PATH_MAX + 8], json_extra[3 * PATH_MAX];
	rt_pathf(a, sizeof(a), "%s/a", f->dir);
	rt_pathf(b, sizeof(b), "%s/b", f->dir);
	rt_pathf(link, sizeof(link), "%s/link", f->dir);
	assert_int_equal(mkdir(a, 0700), 0);
	assert_int_equal(mkdir(b, 0700), 0);
	assert_int_equal(symlink(a, link), 0);
	/* A store on a and b. */
	rt_pathf(json_extra, sizeof(json_extra), "{\"dirs\": [\"%s\", \"%s\"], " CFG "}", a, b);
	struct hc_config *cfg;
	assert_int_equal(hc_config_create(json_extra, &cfg), 0);
	struct hc_store_opts o;
	hc_store_opts_init(&o, sizeof(o));
	o.backend = "file";
	o.config = cfg;
	o.model = RT_MODEL;
	struct hc_store *st;
	assert_int_equal(hc_store_open(&o, &st), 0);
	hc_config_destroy(cfg);
	assert_int_equal(hc_store_register_pool(st, "kv", f->pool, true), 0);
	for (unsigned i = 0; i < MANY; i += NPAGES)
		set_keys(f, st, i, NPAGES);
	struct hc_fsck_report r;
	const char *twice[] = {a, a}, *via_link[] = {a, link}, *swapped[] = {b, a},
		   *right[] = {a, b};
	/* The "same dir twice deleted 200 of 200": refused now. */
	assert_int_equal(hc_file_fsck(twice, 2, true, &r), -EINVAL);
	assert_int_equal(hc_file_fsck(via_link, 2, true, &r), -EINVAL);
	uint64_t pages, bytes;
	assert_int_equal(hc_file_gc(twice, 2, 0, &pages, &bytes), -EINVAL);
	/* Another order: every object misplaced, none removed. */
	assert_int_equal(hc_file_fsck(swapped, 2, true, &r), 0);
	assert_int_equal(r.removed, 0);
	assert_int_equal(r.corrupt, 0);
	assert_int_equal(r.misplaced + r.ok, 2 * MANY);
	assert_true(r.misplaced > 0);
	const char *only_a[] = {a};
	assert_int_equal(hc_file_fsck(only_a, 1, true, &r), 0);
	assert_int_equal(r.removed, 0);
	assert_int_equal(good_keys(f, st, 0, MANY), MANY);
	assert_int_equal(hc_file_fsck(right, 2, false, &r), 0);
	assert_int_equal(r.ok, 2 * MANY);
	assert_int_equal(r.misplaced, 0);
	hc_store_close(st);
}

struct gc_arg {
	const char *dir;
	_Atomic bool stop;
	uint64_t deleted;
};

static void *gc_main(void *p)
{
	struct gc_arg *g = p;
	const char *dirs[] = {g->dir};
	while (!atomic_load(&g->stop)) {
		uint64_t pages = 0, bytes = 0;
		if (hc_file_gc(dirs, 1, 0, &pages, &bytes) == 0)
			g->deleted += pages;
	}
	return NULL;
}

/* fsck beside a gc deleting everything: deleted objects are "gone",
 * never "corrupt" (the issue measured 1,817 reported corrupt). */
static void test_fsck_beside_gc(void **state)
{
	struct fx *f = *state;
	struct hc_store *st = rt_open_ok(f->dir, CFG, false, f->pool);
	uint64_t corrupt = 0, gone = 0, checked = 0;
	for (unsigned round = 0; round < 6; round++) {
		for (unsigned i = 0; i < 400; i += NPAGES)
			set_keys(f, st, round * 1000 + i, NPAGES);
		struct gc_arg g = {.dir = f->dir};
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, gc_main, &g), 0);
		struct hc_fsck_report r = rt_fsck(f->dir, true);
		atomic_store(&g.stop, true);
		pthread_join(t, NULL);
		corrupt += r.corrupt;
		gone += r.gone;
		checked += r.ok + r.gone;
		assert_int_equal(r.removed, 0);
	}
	print_message("fsck beside gc: %llu objects checked or gone, %llu gone, %llu corrupt\n",
		      (unsigned long long)checked, (unsigned long long)gone,
		      (unsigned long long)corrupt);
	assert_int_equal(corrupt, 0);
	hc_store_close(st);
}

int main(void)
{
	rt_skip_without_engine();
	if (geteuid() != 0)
		print_message("not root: the owner checks cannot chown; skipped\n");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_owner_and_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlinks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_heal_rechecks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zero_checksum, setup, teardown),
		cmocka_unit_test_setup_teardown(test_renamed_object, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsck_dirs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsck_beside_gc, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
