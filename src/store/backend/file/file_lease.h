/* The cleaner's lease on a file store's base dirs (internal): at most one
 * cleaner works on a base dir at a time, across processes and hosts. */
#ifndef HC_SRC_STORE_FILE_LEASE_H
#define HC_SRC_STORE_FILE_LEASE_H

#include <stdbool.h>
#include <stddef.h>

/* The lock file inside every base dir (next to the buckets, never in one,
 * so scans never see it). */
#define FILE_LEASE_NAME ".hicache-cleaner.lock"

struct file_lease {
	size_t n;
	int *fds;   /* the lock file of each base dir, or -1 (cannot lock there) */
	bool *held; /* flock held now */
	bool warned;
};

enum file_lease_state {
	LEASE_HELD,     /* every base dir locked by this cleaner */
	LEASE_UNLOCKED, /* held where the file system can lock; some dir cannot */
	LEASE_BUSY,     /* another cleaner holds a base dir: skip this round */
};

/* Open (creating it when missing, mode 0600, 0660 with shared_group) the
 * lock file in each base dir (dirfds[i], named dirs[i] in messages). A dir
 * where it cannot be opened is warned about and left unlocked; never
 * fails but for memory (-ENOMEM). */
int file_lease_open(struct file_lease *l, const int *dirfds, char *const *dirs, size_t n,
		    bool shared_group);
/* Take the lease, non-blocking: flock(LOCK_EX|LOCK_NB) on every lock file.
 * LEASE_BUSY drops what it took. */
enum file_lease_state file_lease_take(struct file_lease *l, char *const *dirs);
void file_lease_drop(struct file_lease *l);
void file_lease_close(struct file_lease *l);

#endif
