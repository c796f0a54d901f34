/* store_object_name checks what it writes (issue 15 item 9): a name that
 * cannot be made gives an error and an empty name, never the name of the
 * page named before into the same buffer (which would move this page's
 * bytes under that page's name). Registration refuses a pool that could
 * produce such a name, so transfers never meet one. */
#include "store_test.h"

#include "store/names.h"

static void fill_ctx(struct store_ctx *c, const char *suffix, const char *component)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "kv");
	snprintf(c->suffix, sizeof(c->suffix), "%s", suffix);
	c->nobj = 1;
	snprintf(c->obj[0].component, sizeof(c->obj[0].component), "%s", component);
}

static void name_checked(void **state)
{
	(void)state;
	struct store_ctx c;
	struct hc_key key;
	memset(&key, 0xab, sizeof(key));
	char out[HC_NAME_MAX];

	fill_ctx(&c, "_m_0_1", "_k");
	assert_int_equal(store_object_name(&c, &key, NULL, 0, out), 0);
	assert_int_equal(strlen(out), HC_KEY_HEX_LEN + strlen("_m_0_1_k"));
	assert_int_equal(store_object_name(&c, NULL, "p0", 0, out), 0);
	assert_string_equal(out, "p0_m_0_1_k");

	/* A component hc_key_name refuses: an error, and no stale name. */
	fill_ctx(&c, "_m_0_1", "_a/b");
	assert_int_equal(store_object_name(&c, &key, NULL, 0, out), -EINVAL);
	assert_string_equal(out, "");

	/* Longer than NAME_MAX: by key and by a caller's name. */
	char longsuffix[HC_SUFFIX_MAX];
	memset(longsuffix, 'x', sizeof(longsuffix) - 1);
	longsuffix[0] = '_';
	longsuffix[sizeof(longsuffix) - 1] = '\0';
	char longcomp[COMPONENT_MAX];
	memset(longcomp, 'y', sizeof(longcomp) - 1);
	longcomp[0] = '_';
	longcomp[sizeof(longcomp) - 1] = '\0';
	fill_ctx(&c, longsuffix, longcomp);
	char name[HC_STORE_NAME_MAX + 1];
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	snprintf(out, sizeof(out), "previous");
	assert_true(store_object_name(&c, NULL, name, 0, out) < 0);
	assert_string_equal(out, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(name_checked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
