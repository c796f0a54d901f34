/* hicache gc: delete the oldest pages of a file store or of an
 * s3://bucket/prefix (all objects of a page together) until it holds at most --capacity-gb, as the store's own
 * cleaner does (hc_file_gc(); the store need not be open). */
#include "cli_opts.h"
#include "commands.h"

#include <hicache/hicache.h>
#include <hicache/store.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Far above any disk, and exactly representable as a u64 after * 1e9. */
#define GC_CAPACITY_GB_MAX 1e9

static bool parse_gb(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !isfinite(v) || v < 0 || v > GC_CAPACITY_GB_MAX)
		return false;
	*out = v;
	return true;
}

static int parse_gb_opt(const char *arg, void *dst)
{
	return parse_gb(arg, dst) ? 0 : 1;
}

int cmd_gc(int argc, char **argv)
{
	bool json = false, have_cap = false;
	double gb = 0;
	char want[64];
	int first;
	snprintf(want, sizeof(want), "a number in 0..%g", GC_CAPACITY_GB_MAX);
	const struct cli_opt opts[] = {
		CLI_OPT_CUSTOM("capacity-gb", 'c', &gb, parse_gb_opt, want, .seen = &have_cap),
		CLI_OPT_FLAG("json", 'j', &json),
		CLI_OPT_HELP("help", 'h'),
	};
	int prc = cli_opts_parse("gc", opts, CLI_OPTS_COUNT(opts), NULL, argc, argv, &first);
	if (prc == CLI_OPTS_HELP)
		return cli_help(stdout, "gc");
	if (prc)
		return prc;
	if (!have_cap) {
		fprintf(stderr, "hicache gc: --capacity-gb is required (see --help)\n");
		return 2;
	}
	if (first == argc) {
		fprintf(stderr, "hicache gc: no directory given (see --help)\n");
		return 2;
	}
	const char *const *dirs = (const char *const *)&argv[first];
	size_t ndirs = (size_t)(argc - first);
	uint64_t cap = (uint64_t)llround(gb * 1e9), pages = 0, bytes = 0;
	struct hc_ls_report left;
	int rc = hc_file_gc(dirs, ndirs, cap, &pages, &bytes);
	if (rc) {
		cli_report("gc", rc);
		return 1;
	}
	/* What is left, from a fresh scan: writers may have added pages. */
	rc = hc_file_ls(dirs, ndirs, &left);
	if (rc) {
		cli_report("gc: scanning what is left", rc);
		return 1;
	}
	if (json)
		printf("{\"capacity_bytes\": %llu, \"removed_pages\": %llu, "
		       "\"removed_bytes\": %llu, \"pages_left\": %llu, \"bytes_left\": %llu}\n",
		       (unsigned long long)cap, (unsigned long long)pages,
		       (unsigned long long)bytes, (unsigned long long)left.pages,
		       (unsigned long long)left.bytes);
	else
		printf("removed  %llu pages, %llu bytes\nleft     %llu pages, %llu bytes "
		       "(cap %llu)\n",
		       (unsigned long long)pages, (unsigned long long)bytes,
		       (unsigned long long)left.pages, (unsigned long long)left.bytes,
		       (unsigned long long)cap);
	if (fflush(stdout)) {
		cli_report("gc: writing stdout", -EIO);
		return 1;
	}
	return 0;
}
