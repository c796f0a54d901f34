/* The offline tools (hc_file_fsck, hc_file_ls, hc_file_gc): check the
 * locations and hand them to the backend that owns them (store/backend.c),
 * through its optional ls, gc and fsck ops. */
#include "store/backend.h"
#include "util/opts.h"
#include "util/util.h"

#include <hicache/store.h>

#include <errno.h>

static int check_args(const char *const *dirs, size_t ndirs, const void *out, const char *what)
{
	if (!dirs || ndirs == 0 || !out)
		return util_fail(-EINVAL, "%s: no directories or NULL output", what);
	for (size_t i = 0; i < ndirs; i++)
		if (!dirs[i] || !*dirs[i])
			return util_fail(-EINVAL, "%s: directory %zu is empty", what, i);
	return 0;
}

/* The backend that owns the locations. */
static int tool_backend(const char *const *dirs, size_t ndirs, const void *out, const char *what,
			const struct store_backend_ops **ops)
{
	int rc = check_args(dirs, ndirs, out, what);
	return rc ? rc : store_backend_by_location(dirs, ndirs, what, ops);
}

/* A backend without the tool (its ops entry NULL). */
static int no_tool(const struct store_backend_ops *ops, const char *what, const char *tool)
{
	return util_fail(-ENOTSUP, "%s: the %s backend has no offline %s", what, ops->name, tool);
}

/* Above this a temp age is a mistake (136 years), not a choice. */
#define FSCK_TEMP_AGE_MAX_S (1ull << 32)

void hc_fsck_opts_init(struct hc_fsck_opts *opts, size_t size)
{
	static const struct hc_fsck_opts d = {
		.struct_size = sizeof(d),
		.repair = false,
		.temp_age_s = 0,
	};
	util_opts_init(opts, size, &d, sizeof(d));
}

int hc_file_fsck_ex(const char *const *dirs, size_t ndirs, const struct hc_fsck_opts *user,
		    struct hc_fsck_report *out)
{
	struct hc_fsck_opts o;
	hc_fsck_opts_init(&o, sizeof(o));
	if (user) {
		int lrc = util_opts_load(&o, sizeof(o), user, "hc_file_fsck_ex: opts");
		if (lrc)
			return lrc;
	}
	if (o.temp_age_s > FSCK_TEMP_AGE_MAX_S)
		return util_fail(-EINVAL, "hc_file_fsck_ex: opts->temp_age_s %llu is above 2^32",
				 (unsigned long long)o.temp_age_s);
	int64_t age_ns = (int64_t)o.temp_age_s * 1000000000ll;
	const struct store_backend_ops *ops;
	int rc = tool_backend(dirs, ndirs, out, "hc_file_fsck", &ops);
	if (rc)
		return rc;
	return ops->fsck ? ops->fsck(dirs, ndirs, o.repair, age_ns, out)
			 : no_tool(ops, "hc_file_fsck", "fsck");
}

int hc_file_fsck(const char *const *dirs, size_t ndirs, bool repair, struct hc_fsck_report *out)
{
	struct hc_fsck_opts o;
	hc_fsck_opts_init(&o, sizeof(o));
	o.repair = repair;
	return hc_file_fsck_ex(dirs, ndirs, &o, out);
}

int hc_file_ls(const char *const *dirs, size_t ndirs, struct hc_ls_report *out)
{
	const struct store_backend_ops *ops;
	int rc = tool_backend(dirs, ndirs, out, "hc_file_ls", &ops);
	if (rc)
		return rc;
	return ops->ls ? ops->ls(dirs, ndirs, out) : no_tool(ops, "hc_file_ls", "ls");
}

int hc_file_gc(const char *const *dirs, size_t ndirs, uint64_t capacity_bytes,
	       uint64_t *removed_pages, uint64_t *removed_bytes)
{
	const struct store_backend_ops *ops;
	int rc = tool_backend(dirs, ndirs, dirs, "hc_file_gc", &ops);
	if (rc)
		return rc;
	if (!ops->gc)
		return no_tool(ops, "hc_file_gc", "gc");
	return ops->gc(dirs, ndirs, capacity_bytes, removed_pages, removed_bytes);
}
