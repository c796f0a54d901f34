/*
 * Fuzz the object and trailer validation: the input is the bytes of one
 * on-disk object. It goes through the trailer check every backend's get
 * uses (format_trailer_read, then payload length and checksum against the
 * object's size) and, as a file in a scratch store dir, through
 * format_check_fd (the one validator of fsck and the store's healing) and
 * hc_file_fsck, which reads the file as a hostile object of any size.
 * The oracle: the sanitizers; the in-memory check and format_check_fd agree;
 * fsck counts one object, ok only when format_check_fd accepts it.
 */
#define _GNU_SOURCE
#include "store/format.h"
#include "util/util.h"

#include <hicache/hicache.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];
static char obj_path[256];
/* A name with the shape of a page object: 64 hex digits, a suffix. */
static const char name[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
			   "_fuzz_1_0";

static void cleanup(void)
{
	unlink(obj_path);
	char b[128];
	snprintf(b, sizeof(b), "%s/%.*s", dir, 2, obj_path + strlen(dir) + 1);
	rmdir(b);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	hc_log_set_level(HC_LOG_OFF);
	snprintf(dir, sizeof(dir), "/tmp/hc-fuzz-object-XXXXXX");
	if (!mkdtemp(dir))
		abort();
	char bucket[3];
	hc_key_bucket_hex(hc_key_route_hash(name), bucket);
	char b[128];
	snprintf(b, sizeof(b), "%s/%s", dir, bucket);
	if (mkdir(b, 0700))
		abort();
	snprintf(obj_path, sizeof(obj_path), "%s/%s", b, name);
	atexit(cleanup);
	return 0;
}

/* The get-side check of a whole object in memory. */
static bool object_valid(const uint8_t *data, size_t size)
{
	if (size < FORMAT_BLOCK_MIN || size % FORMAT_BLOCK_MIN)
		return false;
	struct store_trailer t;
	if (format_trailer_read(data + size - FORMAT_TRAILER_BYTES, &t))
		return false;
	if (!format_block_of(t.payload_len, size) || t.name_hash != format_name_hash(name))
		return false;
	return util_checksum(data, t.payload_len) == t.checksum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The trailer alone, padded: any short input is a trailer. */
	uint8_t tail[FORMAT_TRAILER_BYTES] = {0};
	memcpy(tail, data, size < sizeof(tail) ? size : sizeof(tail));
	struct store_trailer t;
	if (format_trailer_read(tail, &t) == 0)
		(void)format_block_of(t.payload_len, size);
	bool valid = object_valid(data, size);

	int fd = open(obj_path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		abort();
	size_t off = 0;
	while (off < size) {
		ssize_t n = write(fd, data + off, size - off);
		if (n <= 0)
			abort();
		off += (size_t)n;
	}
	int check = format_check_fd(fd, size, name, &t);
	close(fd);
	if (check != 0 && check != -EBADMSG)
		abort();
	if ((check == 0) != valid)
		abort();
	const char *dirs[1] = {dir};
	struct hc_fsck_report r;
	if (hc_file_fsck(dirs, 1, false, &r) == 0) {
		if (r.ok + r.corrupt + r.foreign > 1)
			abort();
		if (r.ok && check != 0)
			abort();
	}
	return 0;
}
