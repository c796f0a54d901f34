/* hicache fsck: check every object of a file store offline (size, trailer,
 * checksum, placement) and, with --repair, remove corrupt objects and
 * orphaned temp files (by age, --temp-age). Uses hc_file_fsck_ex(); the store need not
 * be open, and it is safe beside live writers, cleaners and gc. Misplaced
 * objects (dirs in another order or number) are reported, never removed.
 *
 * Exit status is 1 whenever a corrupt object was found, even when --repair
 * removed it: the caller learns that data was lost (the pages are misses
 * now), and a second run tells whether the store is clean. Orphaned temp
 * files are what a crashed writer leaves; they do not fail the check. */
#include "cli_opts.h"
#include "commands.h"

#include <hicache/hicache.h>
#include <hicache/store.h>

#include <errno.h>
#include <stdio.h>

static void fsck_print(const struct hc_fsck_report *r, size_t ndirs, bool repair, bool json)
{
	if (json) {
		printf("{\"dirs\": %zu, \"repair\": %s, \"ok\": %llu, \"bytes\": %llu, "
		       "\"corrupt\": %llu, \"orphaned_temp\": %llu, \"foreign\": %llu, "
		       "\"removed\": %llu, \"misplaced\": %llu, \"gone\": %llu}\n",
		       ndirs, repair ? "true" : "false", (unsigned long long)r->ok,
		       (unsigned long long)r->bytes, (unsigned long long)r->corrupt,
		       (unsigned long long)r->orphaned_temp, (unsigned long long)r->foreign,
		       (unsigned long long)r->removed, (unsigned long long)r->misplaced,
		       (unsigned long long)r->gone);
		return;
	}
	printf("ok             %llu objects, %llu bytes\n", (unsigned long long)r->ok,
	       (unsigned long long)r->bytes);
	printf("corrupt        %llu\n", (unsigned long long)r->corrupt);
	printf("orphaned temp  %llu\n", (unsigned long long)r->orphaned_temp);
	printf("foreign        %llu\n", (unsigned long long)r->foreign);
	printf("misplaced      %llu (never removed)\n", (unsigned long long)r->misplaced);
	printf("gone           %llu (deleted while checked)\n", (unsigned long long)r->gone);
	printf("removed        %llu%s\n", (unsigned long long)r->removed,
	       repair ? "" : " (no --repair)");
}

int cmd_fsck(int argc, char **argv)
{
	bool repair = false, json = false;
	uint64_t temp_age_s = 0;
	int first;
	const struct cli_opt opts[] = {
		CLI_OPT_FLAG("repair", 'r', &repair),
		CLI_OPT_FLAG("json", 'j', &json),
		CLI_OPT_U64("temp-age", 0, &temp_age_s, 1, 1ull << 32,
			    "a number of seconds in 1..4294967296"),
		CLI_OPT_HELP("help", 'h'),
	};
	int prc = cli_opts_parse("fsck", opts, CLI_OPTS_COUNT(opts), NULL, argc, argv, &first);
	if (prc == CLI_OPTS_HELP)
		return cli_help(stdout, "fsck");
	if (prc)
		return prc;
	if (first == argc) {
		fprintf(stderr, "hicache fsck: no directory given (see --help)\n");
		return 2;
	}
	const char *const *dirs = (const char *const *)&argv[first];
	size_t ndirs = (size_t)(argc - first);
	struct hc_fsck_report r;
	struct hc_fsck_opts fo;
	hc_fsck_opts_init(&fo, sizeof(fo));
	fo.repair = repair;
	fo.temp_age_s = temp_age_s;
	int rc = hc_file_fsck_ex(dirs, ndirs, &fo, &r);
	if (rc) {
		cli_report("fsck", rc);
		return 1;
	}
	fsck_print(&r, ndirs, repair, json);
	if (fflush(stdout)) {
		cli_report("fsck: writing stdout", -EIO);
		return 1;
	}
	return r.corrupt ? 1 : 0;
}
