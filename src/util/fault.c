/* Test-only fault injection (see fault.h). */
#include "util/fault.h"

#include <stdlib.h>

_Atomic int util_fault_armed;
static _Atomic uint64_t fault_seen[HC_FAULT_KINDS];
static _Atomic uint64_t fault_nth;
static _Atomic int fault_kind;
static _Atomic bool fault_done;

static const char *const fault_names[HC_FAULT_KINDS] = {"alloc", "open", "write", "read", "rename"};

void util_fault_arm(enum util_fault_kind kind, uint64_t nth)
{
	atomic_store(&util_fault_armed, 0);
	for (int k = 0; k < HC_FAULT_KINDS; k++)
		atomic_store(&fault_seen[k], 0);
	atomic_store(&fault_kind, (int)kind);
	atomic_store(&fault_nth, nth);
	atomic_store(&fault_done, false);
	atomic_store(&util_fault_armed, 1);
}

void util_fault_disarm(void)
{
	atomic_store(&util_fault_armed, 0);
}

uint64_t util_fault_seen(enum util_fault_kind kind)
{
	return kind < HC_FAULT_KINDS ? atomic_load(&fault_seen[kind]) : 0;
}

bool util_fault_fired(void)
{
	return atomic_load(&fault_done);
}

const char *util_fault_kind_name(enum util_fault_kind kind)
{
	return kind < HC_FAULT_KINDS ? fault_names[kind] : "?";
}

bool util_fault_hit_slow(enum util_fault_kind kind)
{
	if (kind >= HC_FAULT_KINDS)
		return false;
	uint64_t n = atomic_fetch_add(&fault_seen[kind], 1) + 1;
	if ((int)kind != atomic_load(&fault_kind) || n != atomic_load(&fault_nth))
		return false;
	atomic_store(&fault_done, true);
	return true;
}

void *util_fault_malloc(size_t size)
{
	if (util_fault_hit(HC_FAULT_ALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return malloc(size);
}

void *util_fault_calloc(size_t n, size_t size)
{
	if (util_fault_hit(HC_FAULT_ALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return calloc(n, size);
}

void *util_fault_realloc(void *p, size_t size)
{
	if (util_fault_hit(HC_FAULT_ALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, size);
}
