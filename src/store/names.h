/* Object names from keys or callers' names, and name checks. (names.c) */
#ifndef HC_SRC_STORE_NAMES_H
#define HC_SRC_STORE_NAMES_H

#include "store/store_types.h"

/* The physical name of object o of the page named by key (or, key NULL,
 * by a caller's name, checked by store_name_check) into out
 * (HC_NAME_MAX bytes). Returns 0, or a negative errno with out "" (a name
 * that does not fit: registration makes that impossible). */
int store_object_name(const struct store_ctx *c, const struct hc_key *key, const char *name,
		      unsigned o, char *out);
/* Check the caller's name of page j of transfer t against pool c (see
 * store.h, Keys). Returns 0 or -EINVAL naming it. */
int store_name_check(const struct store_ctx *c, const char *name, size_t t, size_t j,
		     const char *what);
/* Is name a key's hex (64 lowercase hex digits)? Then *key gets it. */
bool store_name_is_key(const char *name, struct hc_key *key);

#endif
