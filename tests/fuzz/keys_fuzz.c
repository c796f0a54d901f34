/*
 * Fuzz `hicache keys` input: the bytes are its stdin. The first byte picks
 * the page size (1..64) and whether a model, TP rank and salt are given,
 * so the suffix and seed paths are covered too. stdout goes to /dev/null,
 * and so does stderr while the command runs (it reports every bad token
 * there) unless HC_FUZZ_KEYS_STDERR is set: set it to see a sanitizer's
 * report when re-running a crash input.
 * The CLI's own main is not linked: cli_report and cli_help are given
 * here with the same contract (a message on stderr; help not reached).
 */
// HC_FUZZ_SOURCES: tools/hicache/keys.c tools/hicache/cli_opts.c
#define _GNU_SOURCE
#include "commands.h"

#include <hicache/hicache.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void cli_report(const char *what, int rc)
{
	(void)what;
	(void)rc;
}

int cli_help(FILE *out, const char *command)
{
	(void)out;
	(void)command;
	return 0;
}

static int in_fd = -1, null_fd = -1, err_fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	hc_log_set_level(HC_LOG_OFF);
	in_fd = memfd_create("keys-fuzz-stdin", MFD_CLOEXEC);
	null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (in_fd < 0 || null_fd < 0 || dup2(null_fd, STDOUT_FILENO) < 0)
		abort();
	if (!getenv("HC_FUZZ_KEYS_STDERR") &&
	    (err_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3)) < 0)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	uint8_t mode = data[0];
	data++;
	size--;
	if (ftruncate(in_fd, 0) || pwrite(in_fd, data, size, 0) != (ssize_t)size)
		abort();
	if (dup2(in_fd, STDIN_FILENO) < 0 || lseek(STDIN_FILENO, 0, SEEK_SET) != 0)
		abort();
	char page[8];
	snprintf(page, sizeof(page), "%u", 1u + (mode & 63u));
	char *argv[12];
	int argc = 0;
	argv[argc++] = "keys";
	argv[argc++] = "--page-size";
	argv[argc++] = page;
	if (mode & 64) {
		argv[argc++] = "--model";
		argv[argc++] = "fuzz/model";
		argv[argc++] = "--tp-rank";
		argv[argc++] = "1";
		argv[argc++] = "--tp-size";
		argv[argc++] = "2";
	}
	if (mode & 128) {
		argv[argc++] = "--salt";
		argv[argc++] = "s";
	}
	argv[argc] = NULL;
	if (err_fd >= 0)
		dup2(null_fd, STDERR_FILENO);
	(void)cmd_keys(argc, argv);
	fflush(stdout);
	fflush(stderr);
	if (err_fd >= 0)
		dup2(err_fd, STDERR_FILENO);
	return 0;
}
