/* The S3 backend as the store core and the tools see it: its ops table,
 * the top of the backend's files (s3.c has the design and the file map).
 * Here and not in s3.c, which s3_list.c builds on: the table names
 * s3_list.c's ls, gc and remove_matching. */
#include "store/backend/s3/s3.h"
#include "store/backend/s3/s3_list.h"

static size_t s3_alignment(void *p)
{
	(void)p;
	return 1;
}

static const char *s3_engine(void *p)
{
	(void)p;
	return "curl";
}

const struct store_backend_ops store_s3_ops = {
	.name = "s3",
	.open = s3_open,
	.close = s3_close,
	.alignment = s3_alignment,
	.engine = s3_engine,
	.put = s3_put,
	.get = s3_get,
	.exists = s3_exists,
	.remove = s3_remove,
	.erase = s3_delete,
	.remove_matching = s3_remove_matching,
	.url_scheme = "s3://",
	.ls = s3_tool_ls_at,
	.gc = s3_tool_gc_at,
};
