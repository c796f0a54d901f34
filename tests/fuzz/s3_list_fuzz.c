/* libFuzzer target: the S3 backend's ListObjectsV2 parser (what ls, gc and
 * clear act on) over hostile listing bodies, with the key checks that
 * keep gc inside its prefix and the LastModified parser. Byte 0 picks the
 * mode (page objects or every object); the rest is the XML body. */
#include "store/backend/s3/s3_conf.h"
#include "store/backend/s3/s3_list.h"

#include <hicache/log.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	hc_log_set_level(HC_LOG_OFF);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	/* Exactly the bytes given: no terminating NUL to lean on. */
	char *xml = malloc(size - 1 ? size - 1 : 1);
	if (!xml)
		return 0;
	memcpy(xml, data + 1, size - 1);
	struct s3_listing l;
	memset(&l, 0, sizeof(l));
	l.any_name = data[0] & 1;
	char *token = NULL;
	uint64_t foreign = 0;
	(void)s3_parse_list("p/", xml, size - 1, &l, &token, &foreign);
	for (size_t i = 0; i < l.n; i++) {
		/* What the parser took is under the prefix, without dot segments,
		 * and its page part lies within the name. */
		if (s3_key_has_dot_segment(l.objs[i].name) || strlen(l.objs[i].name) < 1 ||
		    (!l.any_name && l.objs[i].page_len > strlen(l.objs[i].name)))
			abort();
	}
	free(token);
	s3_listing_free(&l);
	free(xml);

	/* The same bytes as a timestamp and as an endpoint to redact. */
	char *s = malloc(size);
	if (s) {
		memcpy(s, data + 1, size - 1);
		s[size - 1] = '\0';
		(void)s3_parse_time(s);
		char out[256];
		s3_redact(s, out, sizeof(out));
		if (strchr(s, '@') == NULL && strlen(s) < sizeof(out) && strstr(out, "***@"))
			abort();
		free(s);
	}
	return 0;
}
