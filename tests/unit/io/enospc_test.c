/*
 * io engines on a full file system: on a small tmpfs (buffered) and a small
 * journal-less ext4 on a loop device (buffered and O_DIRECT), batches are
 * written until the space runs out. Pages fail with -ENOSPC and nothing
 * else, no temp file remains, pages written before read back intact, and
 * the file system can be unmounted while the engine is still alive (no
 * file is held open in an io_uring slot). Skipped when mounting is not
 * permitted. Both engines.
 */
#include "io_test.h"

#include <sys/mount.h>

#define PAGE (256 * 1024)
#define BATCH 12
#define MAX_BATCHES 40
#define DEPTH 8

static char *g_base;    /* scratch dir holding the mount point and image */
static char g_mnt[512]; /* mount point while mounted, else "" */

enum fs_kind { FS_TMPFS, FS_EXT4 };

/* 0 mounted, 1 not permitted / not available here. */
static int fs_mount(enum fs_kind fs)
{
	snprintf(g_mnt, sizeof(g_mnt), "%s/mnt", g_base);
	if (mkdir(g_mnt, 0700) && errno != EEXIST)
		fail_msg("mkdir %s: %s", g_mnt, strerror(errno));
	if (fs == FS_TMPFS) {
		if (mount("hicache-io-test", g_mnt, "tmpfs", 0, "size=4m,mode=0700") == 0)
			return 0;
	} else {
		char cmd[2048];
		snprintf(cmd, sizeof(cmd),
			 "rm -f '%s/img' && truncate -s 16M '%s/img' && "
			 "mkfs.ext4 -q -F -O ^has_journal '%s/img' && mount -o loop '%s/img' '%s'",
			 g_base, g_base, g_base, g_base, g_mnt);
		strcat(cmd, " >/dev/null 2>&1");
		if (system(cmd) == 0)
			return 0;
	}
	g_mnt[0] = '\0';
	return 1;
}

static void fs_umount(bool must_succeed)
{
	if (!g_mnt[0])
		return;
	/* io_uring drops its file references from a kernel worker after the
	 * completion is posted, so EBUSY can outlive the last op briefly; a file
	 * held in a slot would stay busy for the whole two seconds. */
	int rc = umount2(g_mnt, 0);
	for (int i = 0; rc && errno == EBUSY && i < 100; i++) {
		usleep(20 * 1000);
		rc = umount2(g_mnt, 0);
	}
	if (rc && must_succeed)
		fail_msg("umount %s with the engine alive: %s (a file still open?)", g_mnt,
			 strerror(errno));
	if (rc)
		umount2(g_mnt, MNT_DETACH);
	g_mnt[0] = '\0';
}

static int teardown(void **state)
{
	(void)state;
	fs_umount(false);
	return 0;
}

static void fill(enum io_engine_kind kind, enum fs_kind fs, bool direct)
{
	struct io_engine *e = io_t_engine(kind, DEPTH, 4);
	if (!e)
		return;
	if (fs_mount(fs)) {
		io_engine_destroy(e);
		if (fs == FS_TMPFS)
			skip(); /* mounting is not permitted here */
		print_message("no loop-mounted ext4 here: that part skipped\n");
		return;
	}
	int dfd = open(g_mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	if (direct && !io_t_direct_ok(dfd)) {
		print_message("O_DIRECT unsupported on this fs: skipped\n");
		close(dfd);
		fs_umount(true);
		io_engine_destroy(e);
		return;
	}
	int fds = io_t_fd_count();
	size_t max = (size_t)BATCH * MAX_BATCHES;
	unsigned char *src = io_t_aligned(PAGE + 4096);
	unsigned char *dst = io_t_aligned(PAGE);
	char(*names)[32] = calloc(max, sizeof(*names));
	bool *ok = calloc(max, sizeof(*ok));
	char tmps[BATCH][32];
	struct iovec iov[BATCH][2];
	struct io_write_req w[BATCH];
	unsigned enospc = 0, published = 0, batches;
	for (batches = 0; batches < MAX_BATCHES; batches++) {
		for (unsigned j = 0; j < BATCH; j++) {
			size_t i = batches * BATCH + j;
			snprintf(names[i], sizeof(names[i]), "page-%04zu", i);
			snprintf(tmps[j], sizeof(tmps[j]), "tmp-%02u", j);
			/* One buffer, a different window per page: distinct contents. */
			unsigned char *p = src + (i % 8) * 512;
			iov[j][0] = (struct iovec){p, 8192};
			iov[j][1] = (struct iovec){p + 8192, PAGE - 8192 - 4096};
			w[j] = (struct io_write_req){.dirfd = dfd,
						     .tmp_name = tmps[j],
						     .final_name = names[i],
						     .iov = iov[j],
						     .iovcnt = 2,
						     .len = PAGE - 4096,
						     .direct = direct};
		}
		if (batches == 0)
			io_t_fill(src, PAGE + 4096, 99);
		assert_int_equal(io_write_batch(e, w, BATCH), 0);
		unsigned failed = 0;
		for (unsigned j = 0; j < BATCH; j++) {
			if (w[j].result == 0) {
				ok[batches * BATCH + j] = true;
				published++;
				continue;
			}
			if (w[j].result != -ENOSPC)
				fail_msg("%s on %s%s: page %u: %s, expected ENOSPC",
					 io_engine_kind_name(kind),
					 fs == FS_TMPFS ? "tmpfs" : "ext4",
					 direct ? " (O_DIRECT)" : "", batches * BATCH + j,
					 strerror(-w[j].result));
			failed++;
		}
		assert_int_equal(io_t_count_prefix(dfd, "tmp-"), 0);
		enospc += failed;
		if (failed == BATCH)
			break; /* full: every page of a batch failed */
	}
	assert_true(batches < MAX_BATCHES);
	assert_true(published > 0);
	assert_true(enospc >= BATCH);
	assert_int_equal(io_t_fd_count(), fds);
	assert_int_equal(io_t_open_slots(), 0);
	assert_int_equal(io_t_count_prefix(dfd, "page-"), published);

	/* Everything published before the disk filled up reads back. */
	for (size_t i = 0; i < (size_t)(batches + 1) * BATCH; i++) {
		if (!ok[i])
			continue;
		struct iovec riov = {dst, PAGE - 4096};
		struct io_read_req r = {.dirfd = dfd,
					.name = names[i],
					.iov = &riov,
					.iovcnt = 1,
					.len = PAGE - 4096,
					.direct = direct};
		assert_int_equal(io_read_batch(e, &r, 1), 0);
		assert_int_equal(r.result, 0);
		assert_memory_equal(dst, src + (i % 8) * 512, PAGE - 4096);
	}
	close(dfd);
	/* With the engine alive: nothing may hold a file of this fs open. */
	fs_umount(true);
	free(src);
	free(dst);
	free(names);
	free(ok);
	io_engine_destroy(e);
}

static void test_tmpfs(void **state)
{
	(void)state;
	for (size_t k = 0; k < IO_T_NKINDS; k++)
		fill(io_t_kinds[k], FS_TMPFS, false);
}

static void test_ext4(void **state)
{
	(void)state;
	for (size_t k = 0; k < IO_T_NKINDS; k++) {
		fill(io_t_kinds[k], FS_EXT4, false);
		fill(io_t_kinds[k], FS_EXT4, true);
	}
}

int main(void)
{
	if (geteuid() != 0) {
		printf("not root: cannot mount a small file system; skipped\n");
		return TEST_SKIP_CODE;
	}
	g_base = io_t_mkdtemp(NULL);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_tmpfs, teardown),
		cmocka_unit_test_teardown(test_ext4, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	io_t_rmtree(g_base, -1);
	return rc;
}
