/* Library identity and error text. */
#define _GNU_SOURCE
#include <hicache/common.h>

#include <string.h>

#define HC_STR2(x) #x
#define HC_STR(x) HC_STR2(x)

const char *hc_version(void)
{
	return HC_STR(HC_VERSION_MAJOR) "." HC_STR(HC_VERSION_MINOR) "." HC_STR(HC_VERSION_PATCH);
}

const char *hc_strerror(int rc)
{
	if (rc == 0)
		return "Success";
	if (rc < 0)
		rc = -rc;
	/* strerrordesc_np is static text and thread-safe, unlike strerror. */
	const char *s = strerrordesc_np(rc);
	return s ? s : "Unknown error";
}
