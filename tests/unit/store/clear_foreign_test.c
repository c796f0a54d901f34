/* hc_store_clear on the file store and what others planted in it: a
 * bucket that is a symlink to a dir outside the store is never followed
 * (a file there under one of the store's names survives the clear), and a
 * directory or a symlink under an object's name inside a bucket is left
 * alone without stopping the clear, which deletes the real objects. */
#include "store_test.h"

#include <dirent.h>

enum { KV_ID = 1 };
#define NP 4
#define SLOTS 8

/* The bucket dir name ("%02x") of the object of key. */
static void bucket_of(const struct hc_key *key, char out[3])
{
	char name[HC_NAME_MAX];
	assert_true(hc_key_name(key, ST_SUFFIX, "", name, sizeof(name)) > 0);
	hc_key_bucket_hex(hc_key_route_hash(name), out);
}

static void test_planted(void **state)
{
	(void)state;
	char dir[PATH_MAX], out[PATH_MAX], path[PATH_MAX], link[PATH_MAX + 8];
	st_mkdtemp(dir);
	st_mkdtemp(out);
	/* layer_first: one object "<key><suffix>" per page in every mode. */
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_LAYER_FIRST, false, SLOTS);
	struct hc_pool *kv = st_kv_pool(&g);
	struct hc_store *st = st_open_file(dir, false, false, NULL);
	assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
	struct hc_key keys[NP], other[3];
	st_keys(1, NP, 8, keys);
	st_keys(2, 3, 8, other);
	uint64_t pages[NP];
	for (int i = 0; i < NP; i++) {
		pages[i] = (uint64_t)i;
		st_fill(kv, pages[i], KV_ID, (uint64_t)i);
	}
	assert_int_equal(hc_store_set(st, keys, NP, pages, NULL), 0);

	/* A bucket none of the pages uses becomes a symlink to `out`, which
	 * holds a file under a name of this store (other[0]'s). */
	char used[NP][3], victim[3] = "";
	for (int i = 0; i < NP; i++)
		bucket_of(&keys[i], used[i]);
	for (unsigned b = 0; b < 256 && !*victim; b++) {
		char name[3];
		snprintf(name, sizeof(name), "%02x", b);
		bool taken = false;
		for (int i = 0; i < NP; i++)
			taken |= !strcmp(name, used[i]);
		if (!taken)
			memcpy(victim, name, 3);
	}
	snprintf(link, sizeof(link), "%s/%s", dir, victim);
	assert_int_equal(rmdir(link), 0);
	assert_int_equal(symlink(out, link), 0);
	char outside[PATH_MAX + HC_NAME_MAX], objname[HC_NAME_MAX];
	assert_true(hc_key_name(&other[0], ST_SUFFIX, "", objname, sizeof(objname)) > 0);
	snprintf(outside, sizeof(outside), "%s/%s", out, objname);
	int fd = open(outside, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "precious", 8), 8);
	close(fd);

	/* The clear deletes the store's NP objects and nothing through the
	 * symlink. */
	assert_int_equal(hc_store_clear(st), NP);
	assert_int_equal(st_file_size(outside), 8);
	assert_int_equal(hc_store_set(st, keys, NP, pages, NULL), 0);

	/* In the bucket of the first page: a directory and a symlink under
	 * names of this store (other[1]'s and other[2]'s). */
	char planted_dir[PATH_MAX + HC_NAME_MAX + 8], planted_link[PATH_MAX + HC_NAME_MAX + 8];
	assert_true(hc_key_name(&other[1], ST_SUFFIX, "", objname, sizeof(objname)) > 0);
	snprintf(planted_dir, sizeof(planted_dir), "%s/%s/%s", dir, used[0], objname);
	assert_int_equal(mkdir(planted_dir, 0700), 0);
	assert_true(hc_key_name(&other[2], ST_SUFFIX, "", objname, sizeof(objname)) > 0);
	snprintf(planted_link, sizeof(planted_link), "%s/%s/%s", dir, used[0], objname);
	assert_int_equal(symlink(outside, planted_link), 0);

	/* They stop no clear: it deletes the store's NP objects again and
	 * nothing else. */
	assert_int_equal(hc_store_clear(st), NP);
	assert_int_equal(hc_store_exists(st, keys, NP), 0);
	for (int i = 0; i < NP; i++) {
		st_obj_path(dir, &keys[i], ST_SUFFIX, "", path);
		assert_int_equal(st_file_size(path), -1);
	}
	assert_int_equal(st_file_size(outside), 8);
	struct stat sb;
	assert_int_equal(lstat(planted_dir, &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
	assert_int_equal(lstat(planted_link, &sb), 0);
	assert_true(S_ISLNK(sb.st_mode));
	assert_int_equal(lstat(link, &sb), 0);
	assert_true(S_ISLNK(sb.st_mode));
	/* A second clear finds nothing of the store's and still fails not. */
	assert_int_equal(hc_store_clear(st), 0);
	assert_int_equal(st_file_size(outside), 8);

	hc_store_close(st);
	hc_pool_destroy(kv);
	unlink(link); /* before the rm -rf, which must not go through it */
	st_rmrf(dir);
	st_rmrf(out);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_planted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
