/* Size-tagged option structs (see opts.h). */
#include "util/opts.h"

#include "util/util.h"

#include <errno.h>
#include <string.h>

void util_opts_init(void *opts, size_t size, const void *defaults, size_t ours_size)
{
	if (!opts || size < sizeof(size_t))
		return;
	size_t take = size < ours_size ? size : ours_size;
	memcpy(opts, defaults, take);
	if (size > ours_size)
		memset((char *)opts + ours_size, 0, size - ours_size);
	memcpy(opts, &size, sizeof(size));
}

int util_opts_load(void *out, size_t ours_size, const void *user, const char *what)
{
	if (!user)
		return util_fail(-EINVAL, "%s: NULL", what);
	size_t size;
	memcpy(&size, user, sizeof(size));
	if (size < sizeof(size_t) || size > UTIL_OPTS_SIZE_MAX)
		return util_fail(-EINVAL,
				 "%s: struct_size is %zu; initialise the struct with its "
				 "*_init(&opts, sizeof(opts)) first",
				 what, size);
	if (size > ours_size) {
		const unsigned char *tail = (const unsigned char *)user + ours_size;
		for (size_t i = 0; i < size - ours_size; i++)
			if (tail[i])
				return util_fail(-EINVAL,
						 "%s: struct_size is %zu and sets fields this "
						 "library (%zu bytes) does not know",
						 what, size, ours_size);
	}
	size_t take = size < ours_size ? size : ours_size;
	memcpy((char *)out + sizeof(size_t), (const char *)user + sizeof(size_t),
	       take - sizeof(size_t));
	memcpy(out, &ours_size, sizeof(ours_size));
	return 0;
}

void util_opts_store(void *user, const void *ours, size_t ours_size)
{
	size_t size;
	memcpy(&size, user, sizeof(size));
	size_t take = size < ours_size ? size : ours_size;
	if (take > sizeof(size_t))
		memcpy((char *)user + sizeof(size_t), (const char *)ours + sizeof(size_t),
		       take - sizeof(size_t));
}
