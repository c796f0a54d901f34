/*
 * Size-tagged option structs. Every public options struct starts with
 * size_t struct_size, the sizeof the caller was compiled with, and grows
 * only at its end: a caller built against an older header passes a
 * shorter struct, one built against a newer header a longer one.
 *
 * Rules for a struct's author: new fields go after the last one, and a
 * new field never starts inside the tail padding of the struct it extends
 * (an older caller's padding bytes are not defined); a struct's fields
 * are taken whole, so an older size always ends on a field boundary.
 */
#ifndef HC_SRC_UTIL_OPTS_H
#define HC_SRC_UTIL_OPTS_H

#include <stddef.h>

/* A struct_size above this is taken for an uninitialised struct. */
#define UTIL_OPTS_SIZE_MAX 4096

/* The *_opts_init of a struct of ours_size bytes whose defaults are in
 * defaults, for a caller's struct of size bytes: the fields the caller has
 * get their defaults, bytes past ours are zeroed (fields of a newer
 * library: zero means "not used"), and struct_size is set to size. A size
 * too small to hold struct_size leaves the struct alone. */
void util_opts_init(void *opts, size_t size, const void *defaults, size_t ours_size);

/* Copy a caller's struct (any size its struct_size says, older or newer)
 * onto out, which holds our defaults (ours_size bytes): the fields the
 * caller has replace the defaults, later fields keep them, and
 * out->struct_size becomes ours_size. Returns 0, or -EINVAL with
 * hc_last_error naming what (for the message: "hc_cache_open: opts"):
 * user NULL, a struct_size too small to be one or above
 * UTIL_OPTS_SIZE_MAX (not initialised: call the *_opts_init), or a newer
 * caller's struct that sets fields this library does not know. */
int util_opts_load(void *out, size_t ours_size, const void *user, const char *what);

/* Write back the fields a caller has of a struct that also returns values
 * (in and out, like hc_exists_query): the first min(its size, ours) bytes,
 * struct_size excepted. */
void util_opts_store(void *user, const void *ours, size_t ours_size);

#endif
