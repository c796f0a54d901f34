/* hicache ls: what a file store holds (pages, objects, bytes) and the age
 * of its oldest and newest objects, from a scan of its directories or a
 * listing of an s3://bucket/prefix (hc_file_ls(); the store need not be
 * open). */
#include "cli_opts.h"
#include "commands.h"

#include <hicache/hicache.h>
#include <hicache/store.h>

#include <errno.h>
#include <stdio.h>
#include <time.h>

/* "YYYY-MM-DDTHH:MM:SSZ", or "" for 0 (an empty store). */
static void iso_utc(int64_t ns, char out[32])
{
	struct tm tm;
	time_t sec = (time_t)(ns / 1000000000);

	out[0] = '\0';
	if (ns && gmtime_r(&sec, &tm))
		strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void ls_print(const struct hc_ls_report *r, bool json)
{
	char oldest[32], newest[32];

	iso_utc(r->oldest_ns, oldest);
	iso_utc(r->newest_ns, newest);
	if (json) {
		printf("{\"pages\": %llu, \"objects\": %llu, \"bytes\": %llu, ",
		       (unsigned long long)r->pages, (unsigned long long)r->objects,
		       (unsigned long long)r->bytes);
		printf(oldest[0] ? "\"oldest\": \"%s\", " : "\"oldest\": null, ", oldest);
		printf(newest[0] ? "\"newest\": \"%s\", " : "\"newest\": null, ", newest);
		printf("\"oldest_ns\": %lld, \"newest_ns\": %lld}\n", (long long)r->oldest_ns,
		       (long long)r->newest_ns);
		return;
	}
	printf("pages    %llu\n", (unsigned long long)r->pages);
	printf("objects  %llu\n", (unsigned long long)r->objects);
	printf("bytes    %llu\n", (unsigned long long)r->bytes);
	printf("oldest   %s\n", oldest[0] ? oldest : "-");
	printf("newest   %s\n", newest[0] ? newest : "-");
}

int cmd_ls(int argc, char **argv)
{
	bool json = false;
	int first;
	const struct cli_opt opts[] = {
		CLI_OPT_FLAG("json", 'j', &json),
		CLI_OPT_HELP("help", 'h'),
	};
	int prc = cli_opts_parse("ls", opts, CLI_OPTS_COUNT(opts), NULL, argc, argv, &first);
	if (prc == CLI_OPTS_HELP)
		return cli_help(stdout, "ls");
	if (prc)
		return prc;
	if (first == argc) {
		fprintf(stderr, "hicache ls: no directory given (see --help)\n");
		return 2;
	}
	struct hc_ls_report r;
	int rc = hc_file_ls((const char *const *)&argv[first], (size_t)(argc - first), &r);
	if (rc) {
		cli_report("ls", rc);
		return 1;
	}
	ls_print(&r, json);
	if (fflush(stdout)) {
		cli_report("ls: writing stdout", -EIO);
		return 1;
	}
	return 0;
}
