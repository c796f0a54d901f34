/*
 * The reference for page keys: Python's hashlib computing the same chain,
 * written from the specification (SGLang's chained page hash, include/hicache/key.h), not from the C.
 * Tokens go to it as decimal text, so it does its own little-endian
 * encoding, and it computes the namespace seed itself.
 */
#ifndef HC_TEST_KEY_PYREF_H
#define HC_TEST_KEY_PYREF_H

#include <hicache/key.h>

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* argv: page_size extra salt prior mode. A string argument is "-" when
 * absent, else "x" followed by its hex (so "" is "x"). mode "S": derive the
 * namespace seed from extra and salt (prior must be absent); "N": no seed.
 * page_size 0 prints only the seed. */
static const char pyref_script[] =
	"import sys, hashlib\n"
	"a = sys.argv[1:]\n"
	"ps = int(a[0])\n"
	"def opt(x): return None if x == '-' else bytes.fromhex(x[1:])\n"
	"extra, salt, prior, mode = opt(a[1]), opt(a[2]), opt(a[3]), a[4]\n"
	"toks = [int(t) for t in sys.stdin.read().split()]\n"
	"if mode == 'S':\n"
	"    h = hashlib.sha256(b'sglang-cache-namespace-v1')\n"
	"    for v in (extra, salt):\n"
	"        h.update(b'\\x00' if v is None else\n"
	"                 b'\\x01' + len(v).to_bytes(8, 'little') + v)\n"
	"    prior = h.digest()\n"
	"if ps == 0:\n"
	"    print(prior.hex())\n"
	"    sys.exit(0)\n"
	"for i in range(len(toks) // ps):\n"
	"    h = hashlib.sha256()\n"
	"    if prior is not None:\n"
	"        h.update(prior)\n"
	"    for t in toks[i * ps:(i + 1) * ps]:\n"
	"        h.update(t.to_bytes(4, 'little'))\n"
	"    prior = h.digest()\n"
	"    print(prior.hex())\n";

static char *pyref_arg(const void *bytes, size_t len, bool present)
{
	char *s = malloc(2 * len + 2);
	if (!s)
		abort();
	if (!present) {
		memcpy(s, "-", 2);
		return s;
	}
	s[0] = 'x';
	for (size_t i = 0; i < len; i++)
		snprintf(s + 1 + 2 * i, 3, "%02x", ((const unsigned char *)bytes)[i]);
	s[1 + 2 * len] = '\0';
	return s;
}

/*
 * Run the reference. Returns the number of 64-digit lines stored in hex
 * (at most max), or -1 if Python could not be run or failed.
 */
static long pyref_run(uint32_t page_size, const char *extra, const char *salt,
		      const struct hc_key *prior, bool seed, const uint32_t *tok, size_t ntok,
		      char (*hex)[HC_KEY_HEX_LEN + 1], size_t max)
{
	char ps[16];
	char *a_extra = pyref_arg(extra, extra ? strlen(extra) : 0, extra != NULL);
	char *a_salt = pyref_arg(salt, salt ? strlen(salt) : 0, salt != NULL);
	char *a_prior = pyref_arg(prior ? prior->bytes : NULL, HC_KEY_BYTES, prior != NULL);
	int to_py[2], from_py[2];
	long nlines = 0;
	bool bad = false;
	int status;
	pid_t pid;

	snprintf(ps, sizeof(ps), "%u", page_size);
	if (pipe(to_py) || pipe(from_py))
		abort();
	/* posix_spawn, not fork: forking a sanitised process copies its huge
	 * shadow mappings, which made each run take most of a second. */
	posix_spawn_file_actions_t fa;
	char *argv[] = {(char *)PYTHON3, (char *)"-c", (char *)pyref_script,       ps,  a_extra,
			a_salt,          a_prior,      (char *)(seed ? "S" : "N"), NULL};
	extern char **environ;
	if (posix_spawn_file_actions_init(&fa) ||
	    posix_spawn_file_actions_adddup2(&fa, to_py[0], 0) ||
	    posix_spawn_file_actions_adddup2(&fa, from_py[1], 1) ||
	    posix_spawn_file_actions_addclose(&fa, to_py[1]) ||
	    posix_spawn_file_actions_addclose(&fa, from_py[0]) ||
	    posix_spawn(&pid, PYTHON3, &fa, NULL, argv, environ))
		abort();
	posix_spawn_file_actions_destroy(&fa);
	close(to_py[0]);
	close(from_py[1]);
	/* The script reads all of stdin before it prints, so writing everything
	 * first cannot deadlock. */
	FILE *w = fdopen(to_py[1], "w");
	for (size_t i = 0; i < ntok; i++)
		fprintf(w, "%u%c", tok[i], i % 16 == 15 ? '\n' : ' ');
	fclose(w);
	FILE *r = fdopen(from_py[0], "r");
	char line[256];
	while (fgets(line, sizeof(line), r)) {
		size_t len = strcspn(line, "\n");
		/* Read on after a bad line: a blocked writer would never exit. */
		if (bad || len != HC_KEY_HEX_LEN || (size_t)nlines >= max) {
			bad = true;
			continue;
		}
		memcpy(hex[nlines], line, HC_KEY_HEX_LEN);
		hex[nlines][HC_KEY_HEX_LEN] = '\0';
		nlines++;
	}
	fclose(r);
	waitpid(pid, &status, 0);
	free(a_extra);
	free(a_salt);
	free(a_prior);
	if (bad || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	return nlines;
}

#endif
