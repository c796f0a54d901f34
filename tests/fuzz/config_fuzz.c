/*
 * Fuzz the config parser: JSON text and the environment. The input is
 * JSON text, then optionally a NUL byte and environment lines: each line's
 * first byte picks one of the config's environment variables, the rest of
 * the line is its value. hc_config_create reads both (environment first,
 * then JSON over it); every key is then read back as text.
 */
#define _GNU_SOURCE
#include <hicache/hicache.h>

#include <stdlib.h>
#include <string.h>

#define MAX_ENV 64

static char *env_names[MAX_ENV];
static size_t n_env;

static void collect(const char *key, enum hc_config_type type, const char *env, const char *value,
		    enum hc_config_source source, const char *doc, void *arg)
{
	(void)key, (void)type, (void)value, (void)source, (void)doc, (void)arg;
	if (env && *env && n_env < MAX_ENV)
		env_names[n_env++] = strdup(env);
}

static void visit(const char *key, enum hc_config_type type, const char *env, const char *value,
		  enum hc_config_source source, const char *doc, void *arg)
{
	(void)type, (void)env, (void)source, (void)doc;
	size_t *sum = arg;
	*sum += strlen(key) + (value ? strlen(value) : 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	hc_log_set_level(HC_LOG_OFF);
	struct hc_config *cfg = NULL;
	if (hc_config_create(NULL, &cfg))
		abort();
	hc_config_foreach(cfg, collect, NULL);
	hc_config_destroy(cfg);
	for (size_t i = 0; i < n_env; i++)
		unsetenv(env_names[i]);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	size_t json_len = strlen(text);
	/* '@' reads a file: not this target's input. */
	if (text[0] == '@')
		text[0] = ' ';
	bool set[MAX_ENV] = {false};
	char *p = json_len < size ? text + json_len + 1 : NULL;
	while (p && p < text + size && n_env) {
		char *nl = memchr(p, '\n', (size_t)(text + size - p));
		if (nl)
			*nl = '\0';
		size_t idx = (unsigned char)p[0] % n_env;
		if (p[0] && strlen(p + 1) < 4096) {
			setenv(env_names[idx], p + 1, 1);
			set[idx] = true;
		}
		p = nl ? nl + 1 : NULL;
	}
	struct hc_config *cfg = NULL;
	if (hc_config_create(text, &cfg) == 0) {
		size_t sum = 0;
		hc_config_foreach(cfg, visit, &sum);
		hc_config_destroy(cfg);
	}
	for (size_t i = 0; i < n_env; i++)
		if (set[i])
			unsetenv(env_names[i]);
	free(text);
	return 0;
}
