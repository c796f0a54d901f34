/* hicache fsck: check every object of a file store offline (size, trailer,
 * checksum, placement) and, with --repair, remove corrupt objects and
 * orphaned temp files. Uses hc_file_fsck(); the store need not be open.
 *
 * Exit status is 1 whenever a corrupt object was found, even when --repair
 * removed it: the caller learns that data was lost (the pages are misses
 * now), and a second run tells whether the store is clean. Orphaned temp
 * files are what a crashed writer leaves; they do not fail the check. */
#include "commands.h"

#include <hicache/hicache.h>
#include <hicache/store.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>

static void fsck_usage(FILE *out)
{
	fprintf(out,
		"usage: hicache fsck [--repair] [--json] DIR...\n"
		"\n"
		"Checks every object under the file store base dirs DIR... (give all of a\n"
		"store's dirs, in its configured order: placement is checked too) and prints\n"
		"the counts: ok objects (and their bytes), corrupt objects, orphaned temp files\n"
		"(a writer died), foreign files (not a store object) and removed files.\n"
		"Each corrupt object is named on stderr.\n"
		"\n"
		"options:\n"
		"  -r, --repair   remove corrupt objects and orphaned temp files (temp files\n"
		"                 younger than 60 s whose writer is alive are left alone)\n"
		"  -j, --json     print one JSON object\n"
		"  -h, --help     print this help and exit\n"
		"\n"
		"exit status: 0 clean, 1 a corrupt object was found (even if --repair removed\n"
		"it; run again to confirm the store is clean) or the check failed, 2 bad usage\n");
}

static void fsck_print(const struct hc_fsck_report *r, size_t ndirs, bool repair, bool json)
{
	if (json) {
		printf("{\"dirs\": %zu, \"repair\": %s, \"ok\": %llu, \"bytes\": %llu, "
		       "\"corrupt\": %llu, \"orphaned_temp\": %llu, \"foreign\": %llu, "
		       "\"removed\": %llu}\n",
		       ndirs, repair ? "true" : "false", (unsigned long long)r->ok,
		       (unsigned long long)r->bytes, (unsigned long long)r->corrupt,
		       (unsigned long long)r->orphaned_temp, (unsigned long long)r->foreign,
		       (unsigned long long)r->removed);
		return;
	}
	printf("ok             %llu objects, %llu bytes\n", (unsigned long long)r->ok,
	       (unsigned long long)r->bytes);
	printf("corrupt        %llu\n", (unsigned long long)r->corrupt);
	printf("orphaned temp  %llu\n", (unsigned long long)r->orphaned_temp);
	printf("foreign        %llu\n", (unsigned long long)r->foreign);
	printf("removed        %llu%s\n", (unsigned long long)r->removed,
	       repair ? "" : " (no --repair)");
}

int cmd_fsck(int argc, char **argv)
{
	static const struct option opts[] = {
		{"repair", no_argument, NULL, 'r'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool repair = false, json = false;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "rjh", opts, NULL)) != -1) {
		switch (c) {
		case 'r': repair = true; break;
		case 'j': json = true; break;
		case 'h': fsck_usage(stdout); return 0;
		default:
			fprintf(stderr, "hicache fsck: unknown option '%s' (see --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind == argc) {
		fprintf(stderr, "hicache fsck: no directory given (see --help)\n");
		return 2;
	}
	const char *const *dirs = (const char *const *)&argv[optind];
	size_t ndirs = (size_t)(argc - optind);
	struct hc_fsck_report r;
	int rc = hc_file_fsck(dirs, ndirs, repair, &r);
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
