/* hc_file_fsck_ex's options: hc_fsck_opts_init's defaults, a struct that
 * was never initialised or asks for an absurd temp age is refused naming
 * it, a caller's older (shorter) struct gets the default age, and NULL is
 * the defaults. The age's effect on real temp files is in
 * tests/integration/cli_store.sh. */
#include <hicache/hicache.h>
#include <hicache/store.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[] = "/tmp/hc_fsck_opts_XXXXXX";

static void test_fsck_opts(void **state)
{
	(void)state;
	const char *dirs[] = {dir};
	struct hc_fsck_report r;
	struct hc_fsck_opts o;

	memset(&o, 0xa5, sizeof(o));
	hc_fsck_opts_init(&o, sizeof(o));
	assert_int_equal(o.struct_size, sizeof(o));
	assert_false(o.repair);
	assert_int_equal(o.temp_age_s, 0);

	assert_int_equal(hc_file_fsck_ex(dirs, 1, NULL, &r), 0);
	assert_int_equal(r.ok + r.corrupt + r.orphaned_temp, 0);
	o.repair = true;
	o.temp_age_s = 1;
	assert_int_equal(hc_file_fsck_ex(dirs, 1, &o, &r), 0);

	o.temp_age_s = (1ull << 32) + 1;
	assert_int_equal(hc_file_fsck_ex(dirs, 1, &o, &r), -EINVAL);
	assert_non_null(strstr(hc_last_error(), "temp_age_s"));
	o.temp_age_s = 1ull << 32;
	assert_int_equal(hc_file_fsck_ex(dirs, 1, &o, &r), 0);

	struct hc_fsck_opts junk;
	memset(&junk, 0, sizeof(junk)); /* struct_size 0: not initialised */
	assert_int_equal(hc_file_fsck_ex(dirs, 1, &junk, &r), -EINVAL);
	assert_non_null(strstr(hc_last_error(), "hc_file_fsck_ex: opts"));

	/* An older caller's struct ends before temp_age_s: the age past it is
	 * not read (the bytes there are junk), the default applies. */
	memset(&o, 0xff, sizeof(o));
	hc_fsck_opts_init(&o, offsetof(struct hc_fsck_opts, temp_age_s));
	assert_int_equal(o.struct_size, offsetof(struct hc_fsck_opts, temp_age_s));
	o.temp_age_s = UINT64_MAX;
	assert_int_equal(hc_file_fsck_ex(dirs, 1, &o, &r), 0);

	/* The rest of the arguments as hc_file_fsck checks them. */
	hc_fsck_opts_init(&o, sizeof(o));
	assert_int_equal(hc_file_fsck_ex(dirs, 0, &o, &r), -EINVAL);
	assert_int_equal(hc_file_fsck_ex(dirs, 1, &o, NULL), -EINVAL);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fsck_opts),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(dir);
	return rc;
}
