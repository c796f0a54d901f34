/* Size-tagged option structs (issue 15 item 16): util_opts_init and
 * util_opts_load on a struct that grew (v1 -> v2 -> v3 as three library
 * versions would see it): an older caller's fields are taken, later ones
 * keep their defaults; a newer caller's unknown fields must be zero. */
#include "test_util.h"
#include "util/opts.h"
#include "util/util.h"

#include <errno.h>
#include <stddef.h>

struct v1 {
	size_t struct_size;
	uint32_t a;
	uint64_t b;
};
struct v2 { /* this library's */
	size_t struct_size;
	uint32_t a;
	uint64_t b;
	const char *c;
	double d;
};
struct v3 {
	size_t struct_size;
	uint32_t a;
	uint64_t b;
	const char *c;
	double d;
	uint64_t e;
};

static const struct v2 defaults = {.struct_size = sizeof(defaults),
				   .a = 7,
				   .b = 8,
				   .c = "dflt",
				   .d = 2.5};

static void init_any_size(void **state)
{
	(void)state;
	struct v1 o1;
	memset(&o1, 0xee, sizeof(o1));
	util_opts_init(&o1, sizeof(o1), &defaults, sizeof(defaults));
	assert_int_equal(o1.struct_size, sizeof(o1));
	assert_int_equal(o1.a, 7);
	assert_int_equal(o1.b, 8);

	struct v3 o3;
	memset(&o3, 0xee, sizeof(o3));
	util_opts_init(&o3, sizeof(o3), &defaults, sizeof(defaults));
	assert_int_equal(o3.struct_size, sizeof(o3));
	assert_string_equal(o3.c, "dflt");
	assert_int_equal(o3.e, 0); /* not ours: zero, "not used" */

	/* Too small for struct_size: untouched. */
	size_t tiny = 3;
	util_opts_init(&tiny, 4, &defaults, sizeof(defaults));
	assert_int_equal(tiny, 3);
	util_opts_init(NULL, sizeof(o1), &defaults, sizeof(defaults));
}

static void load_older(void **state)
{
	(void)state;
	struct v1 u;
	util_opts_init(&u, sizeof(u), &defaults, sizeof(defaults));
	u.a = 1;
	u.b = 2;
	struct v2 o = defaults;
	assert_int_equal(util_opts_load(&o, sizeof(o), &u, "t: opts"), 0);
	assert_int_equal(o.struct_size, sizeof(o));
	assert_int_equal(o.a, 1);
	assert_int_equal(o.b, 2);
	assert_string_equal(o.c, "dflt");
	assert_true(o.d == 2.5);

	/* Only struct_size: every default. */
	size_t only = sizeof(size_t);
	o = defaults;
	assert_int_equal(util_opts_load(&o, sizeof(o), &only, "t: opts"), 0);
	assert_int_equal(o.a, 7);
}

static void load_newer(void **state)
{
	(void)state;
	struct v3 u;
	util_opts_init(&u, sizeof(u), &defaults, sizeof(defaults));
	u.a = 3;
	u.d = 9.0;
	struct v2 o = defaults;
	assert_int_equal(util_opts_load(&o, sizeof(o), &u, "t: opts"), 0);
	assert_int_equal(o.a, 3);
	assert_true(o.d == 9.0);
	/* A field this library does not know, set: refused, named. */
	u.e = 1;
	assert_int_equal(util_opts_load(&o, sizeof(o), &u, "t: opts"), -EINVAL);
	assert_non_null(strstr(hc_last_error(), "does not know"));
	assert_non_null(strstr(hc_last_error(), "t: opts"));
}

static void load_bad(void **state)
{
	(void)state;
	struct v2 o = defaults;
	assert_int_equal(util_opts_load(&o, sizeof(o), NULL, "t: opts"), -EINVAL);
	size_t bad[] = {0, 7, UTIL_OPTS_SIZE_MAX + 1, (size_t)-1};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct v3 u = {.struct_size = bad[i]};
		assert_int_equal(util_opts_load(&o, sizeof(o), &u, "t: opts"), -EINVAL);
		assert_non_null(strstr(hc_last_error(), "struct_size"));
	}
	assert_int_equal(o.a, 7); /* a refused load leaves the defaults */
}

static void store_back(void **state)
{
	(void)state;
	struct v1 u;
	util_opts_init(&u, sizeof(u), &defaults, sizeof(defaults));
	struct v2 o = defaults;
	o.a = 11;
	o.b = 12;
	o.c = "out";
	util_opts_store(&u, &o, sizeof(o));
	assert_int_equal(u.struct_size, sizeof(u));
	assert_int_equal(u.a, 11);
	assert_int_equal(u.b, 12);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(init_any_size), cmocka_unit_test(load_older),
		cmocka_unit_test(load_newer),    cmocka_unit_test(load_bad),
		cmocka_unit_test(store_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
