/* libFuzzer target: S3 response handling on the real request path. A local
 * server thread (tests/unit/s3/fake_http.h) answers every request with the
 * input's bytes (status line, headers, body, as they come) and closes; the
 * backend, opened once, runs a GET, a HEAD and a PUT of a small object
 * against it. Any crash, leak or undefined behaviour is a finding; a GET
 * that reports success must have filled the object with bytes that were in
 * the input. */
#include "../unit/s3/fake_s3.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LEN 64

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fh_server srv;
static void *be;
static pthread_mutex_t input_lock = PTHREAD_MUTEX_INITIALIZER;
static const uint8_t *input; /* under input_lock: the server copies it */
static size_t input_len;

static void respond(void *arg, const char *method, const char *target, struct fh_reply *out)
{
	(void)arg;
	pthread_mutex_lock(&input_lock);
	if (!input && !strcmp(method, "HEAD") && !strcmp(target, "/fake"))
		fh_reply_fmt(out, FH_KEEP, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	else
		fh_reply_raw(out, input ? (const void *)input : "", input ? input_len : 0,
			     FH_CLOSE);
	pthread_mutex_unlock(&input_lock);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	hc_log_set_level(HC_LOG_OFF);
	if (fh_start(&srv, respond, NULL) ||
	    fs3_open(&srv, "\"retries\": 0, \"timeout_ms\": 1000, \"max_inflight\": 2", &be))
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pthread_mutex_lock(&input_lock);
	input = data;
	input_len = size;
	pthread_mutex_unlock(&input_lock);
	char buf[LEN];
	memset(buf, 0, sizeof(buf));
	int rc = fs3_get(be, "obj", buf, LEN);
	if (rc > 0)
		abort();
	/* A hit holds exactly LEN bytes the server sent. */
	if (rc == 0 && size < LEN)
		abort();
	/* Present, missing, or of the wrong size (-EBADMSG: a miss to every
	 * caller, logged apart). */
	rc = fs3_exists(be, "obj", LEN);
	if (rc != 0 && rc != -ENOENT && rc != -EBADMSG)
		abort();
	if (fs3_put(be, "obj", buf, LEN) > 0)
		abort();
	/* The server thread may still hold the reply: let it go before the
	 * input does. */
	pthread_mutex_lock(&input_lock);
	input = NULL;
	pthread_mutex_unlock(&input_lock);
	return 0;
}
