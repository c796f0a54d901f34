/*
 * A full file system: on a small loop-mounted ext4, write pages until sets
 * fail. Failures are -ENOSPC per page (returned and in the results), pages
 * stored before stay readable and correct, failed pages are misses, no temp
 * file and no fd is left, fsck is clean, and once space is freed (gc) sets
 * work again. Direct and buffered I/O, zero-copy (two objects per page) and
 * bounce. Skipped (77) when this process may not mount a loop fs.
 */
#include "robust_test.h"

#define TOKENS 256 /* 128 KiB pages: two 68 KiB objects, or one 132 KiB */
#define FS_MB 24
#define BATCH 8
#define MAX_BATCHES 1000 /* far more than FS_MB holds */

struct fx {
	struct rt_mount m;
	char dir[PATH_MAX + 16];
	struct hc_pool *pool;
	struct hc_store *st;
	void *scratch;
	bool direct, bounce;
};

static int setup(void **state, bool direct, bool bounce)
{
	struct fx *f = calloc(1, sizeof(*f));
	*state = f;
	if (rt_mount_ext4(&f->m, FS_MB))
		fail_msg("mount failed although the probe in main() worked");
	rt_pathf(f->dir, sizeof(f->dir), "%s/store", f->m.mnt);
	f->pool = rt_pool(TOKENS, 2 * BATCH);
	f->scratch = malloc(hc_pool_page_bytes(f->pool));
	f->direct = direct;
	f->bounce = bounce;
	return 0;
}

static int setup_direct_zc(void **state)
{
	return setup(state, true, false);
}

static int setup_direct_bounce(void **state)
{
	return setup(state, true, true);
}

static int setup_buffered_zc(void **state)
{
	return setup(state, false, false);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	hc_store_close(f->st);
	hc_pool_destroy(f->pool);
	rt_umount(&f->m);
	if (f->m.mounted)
		print_message("could not unmount %s\n", f->m.mnt);
	free(f->scratch);
	free(f);
	return 0;
}

static void test_fill(void **state)
{
	struct fx *f = *state;
	const char *extra = f->direct ? "\"l3_cleaner_interval_s\": 0"
				      : "\"l3_cleaner_interval_s\": 0, \"use_direct_io\": false";
	int fds_before = rt_count_fds();
	f->st = rt_open_ok(f->dir, extra, f->bounce, f->pool);
	assert_int_equal(hc_store_direct_io(f->st), f->direct);
	struct hc_store_pool_info info;
	assert_int_equal(hc_store_pool_info(f->st, "kv", &info), 0);
	assert_int_equal(info.zero_copy, !f->bounce);

	/* ok[id]: the page of key id was stored. */
	static bool ok[MAX_BATCHES * BATCH];
	memset(ok, 0, sizeof(ok));
	uint64_t stored = 0, failed = 0;
	unsigned batches = 0, after_full = 0;
	struct hc_key keys[BATCH];
	uint64_t pages[BATCH];
	int res[BATCH];
	/* Fill, then keep trying a few batches past the first failure. */
	while (batches < MAX_BATCHES && after_full < 4) {
		for (unsigned i = 0; i < BATCH; i++) {
			keys[i] = rt_key(batches * BATCH + i);
			pages[i] = i;
			rt_put_page(f->pool, i, &keys[i], 0, f->scratch);
		}
		int rc = hc_store_set(f->st, keys, BATCH, pages, res);
		int first = 0;
		for (unsigned i = 0; i < BATCH; i++) {
			if (res[i] == 0) {
				ok[batches * BATCH + i] = true;
				stored++;
				continue;
			}
			if (res[i] != -ENOSPC)
				fail_msg("batch %u page %u: result %d (%s), expected -ENOSPC",
					 batches, i, res[i], strerror(-res[i]));
			failed++;
			if (!first)
				first = res[i];
		}
		assert_int_equal(rc, first);
		if (first)
			after_full++;
		batches++;
		/* No temp file survives a failed page. */
		if (first)
			assert_int_equal(rt_count_temps(f->dir), 0);
	}
	print_message("%s %s: %llu pages stored, %llu failed in %u batches, fs %.1f%% used\n",
		      f->direct ? "direct" : "buffered", f->bounce ? "bounce" : "zero-copy",
		      (unsigned long long)stored, (unsigned long long)failed, batches,
		      rt_fs_used_pct(f->m.mnt));
	assert_true(batches < MAX_BATCHES); /* it did fill up */
	assert_true(failed > 0);
	/* The fs holds about FS_MB MiB; most of it went to pages. */
	size_t block = hc_store_object_block(f->st);
	size_t obj = info.zero_copy ? 2 * (hc_pool_page_bytes(f->pool) / 2 + block)
				    : hc_pool_page_bytes(f->pool) + block;
	assert_true(stored * obj > (uint64_t)FS_MB * 1048576 / 2);

	struct hc_store_stats s;
	assert_int_equal(hc_store_stats(f->st, NULL, &s), 0);
	assert_int_equal(s.pages_written, stored);
	assert_int_equal(s.failures, failed);

	/* Everything stored reads back; every failed page is a miss. */
	uint64_t hits = 0;
	for (unsigned b = 0; b < batches; b++) {
		for (unsigned i = 0; i < BATCH; i++) {
			keys[i] = rt_key(b * BATCH + i);
			pages[i] = BATCH + i;
		}
		hc_store_get(f->st, keys, BATCH, pages, res);
		for (unsigned i = 0; i < BATCH; i++) {
			if (ok[b * BATCH + i]) {
				if (res[i] != 0 ||
				    !rt_page_ok(f->pool, pages[i], &keys[i], f->scratch))
					fail_msg("stored page %u/%u: result %d or wrong content", b,
						 i, res[i]);
				hits++;
			} else if (res[i] != -ENOENT) {
				fail_msg("failed page %u/%u: result %d, expected a miss", b, i,
					 res[i]);
			}
		}
	}
	assert_int_equal(hits, stored);
	assert_int_equal(hc_store_stats(f->st, NULL, &s), 0);
	assert_int_equal(s.corrupt, 0);

	assert_int_equal(rt_count_temps(f->dir), 0);
	struct hc_fsck_report r = rt_fsck(f->dir, false);
	assert_int_equal(r.corrupt, 0);
	assert_int_equal(r.orphaned_temp, 0);
	struct hc_ls_report ls = rt_ls(f->dir);
	assert_int_equal(r.ok, ls.objects);
	assert_true(ls.pages >= stored); /* failed pages may have left a whole object */

	/* Free half the space: sets work again. */
	const char *dirs[] = {f->dir};
	uint64_t rm_pages = 0, rm_bytes = 0;
	assert_int_equal(hc_file_gc(dirs, 1, ls.bytes / 2, &rm_pages, &rm_bytes), 0);
	assert_true(rm_pages > 0);
	for (unsigned i = 0; i < BATCH; i++) {
		keys[i] = rt_key(99000000 + i);
		pages[i] = i;
		rt_put_page(f->pool, i, &keys[i], 0, f->scratch);
	}
	assert_int_equal(hc_store_set(f->st, keys, BATCH, pages, res), 0);
	for (unsigned i = 0; i < BATCH; i++)
		pages[i] = BATCH + i;
	assert_int_equal(hc_store_get(f->st, keys, BATCH, pages, res), BATCH);
	for (unsigned i = 0; i < BATCH; i++)
		assert_true(rt_page_ok(f->pool, pages[i], &keys[i], f->scratch));

	hc_store_close(f->st);
	f->st = NULL;
	int fds_after = rt_count_fds();
	if (fds_after != fds_before)
		rt_dump_fds();
	assert_int_equal(fds_after, fds_before);
	r = rt_fsck(f->dir, false);
	assert_int_equal(r.corrupt, 0);
	assert_int_equal(r.orphaned_temp, 0);
}

int main(void)
{
	rt_skip_without_engine();
	struct rt_mount probe;
	if (rt_mount_ext4(&probe, 8)) {
		fprintf(stderr, "skipped: cannot mount a loop file system here\n");
		return TEST_SKIP_CODE;
	}
	rt_umount(&probe);
	const struct CMUnitTest tests[] = {
		{"fill_direct_zero_copy", test_fill, setup_direct_zc, teardown, NULL},
		{"fill_direct_bounce", test_fill, setup_direct_bounce, teardown, NULL},
		{"fill_buffered_zero_copy", test_fill, setup_buffered_zc, teardown, NULL},
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
