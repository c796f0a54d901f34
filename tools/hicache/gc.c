/* hicache gc: delete the oldest pages of a file store or of an
 * s3://bucket/prefix (all objects of a page together) until it holds at most --capacity-gb, as the store's own
 * cleaner does (hc_file_gc(); the store need not be open). */
#include "commands.h"

#include <hicache/hicache.h>
#include <hicache/store.h>

#include <errno.h>
#include <getopt.h>
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

int cmd_gc(int argc, char **argv)
{
	static const struct option opts[] = {
		{"capacity-gb", required_argument, NULL, 'c'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool json = false, have_cap = false;
	double gb = 0;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (!parse_gb(optarg, &gb)) {
				fprintf(stderr, "hicache gc: --capacity-gb '%s' is not a number "
						"in 0..%g\n", optarg, GC_CAPACITY_GB_MAX);
				return 2;
			}
			have_cap = true;
			break;
		case 'j': json = true; break;
		case 'h': return cli_help(stdout, "gc");
		case ':':
			fprintf(stderr, "hicache gc: option '%s' needs a value\n",
				argv[optind - 1]);
			return 2;
		default:
			fprintf(stderr, "hicache gc: unknown option '%s' (see --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (!have_cap) {
		fprintf(stderr, "hicache gc: --capacity-gb is required (see --help)\n");
		return 2;
	}
	if (optind == argc) {
		fprintf(stderr, "hicache gc: no directory given (see --help)\n");
		return 2;
	}
	const char *const *dirs = (const char *const *)&argv[optind];
	size_t ndirs = (size_t)(argc - optind);
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
