/* The cleaner's lease: flock on <base dir>/.hicache-cleaner.lock, taken
 * non-blocking at the start of every round and dropped at its end, so two
 * cleaners never scan and delete in one dir at once (each round of one
 * sees the other's deletions done). flock, not a POSIX record lock: it
 * belongs to the open file description, so two stores of one process
 * exclude each other too, and closing another fd of the file in the same
 * process does not drop it. On NFS, Linux sends flock to the server as a
 * whole-file lock (NLM for v3, the protocol's own for v4), so it holds
 * across hosts; docs/FORMAT.md says what happens where locks do not work. */
#define _GNU_SOURCE
#include "store/backend/file/file_lease.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static int open_lock_file(int dirfd, bool shared_group)
{
	mode_t mode = shared_group ? 0660 : 0600;
	int fd = openat(dirfd, FILE_LEASE_NAME,
			O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);
	if (fd >= 0) {
		/* Made here: the mode asked for, whatever the umask (a failure
		 * leaves it lockable by this user, as the umask made it). */
		(void)fchmod(fd, mode);
		return fd;
	}
	if (errno != EEXIST)
		return -errno;
	fd = openat(dirfd, FILE_LEASE_NAME, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == EACCES) /* another user's: flock needs only a read fd locally */
		fd = openat(dirfd, FILE_LEASE_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

int file_lease_open(struct file_lease *l, const int *dirfds, char *const *dirs, size_t n,
		    bool shared_group)
{
	l->n = 0;
	l->warned = false;
	l->fds = malloc((n ? n : 1) * sizeof(*l->fds));
	l->held = calloc(n ? n : 1, sizeof(*l->held));
	if (!l->fds || !l->held) {
		free(l->fds);
		free(l->held);
		l->fds = NULL;
		l->held = NULL;
		return -ENOMEM;
	}
	l->n = n;
	for (size_t i = 0; i < n; i++) {
		l->fds[i] = open_lock_file(dirfds[i], shared_group);
		if (l->fds[i] < 0)
			log_warn(
				"file store: cannot open the cleaner's lock file '%s/%s' (%s): this "
				"store's cleaner works on that dir without the lease (another "
				"cleaner may work there at once)",
				dirs[i], FILE_LEASE_NAME, hc_strerror(l->fds[i]));
	}
	return 0;
}

enum file_lease_state file_lease_take(struct file_lease *l, char *const *dirs)
{
	bool unlocked = false;
	for (size_t i = 0; i < l->n; i++) {
		if (l->fds[i] < 0) {
			unlocked = true;
			continue;
		}
		int rc;
		do
			rc = flock(l->fds[i], LOCK_EX | LOCK_NB) ? errno : 0;
		while (rc == EINTR);
		if (!rc) {
			l->held[i] = true;
			continue;
		}
		if (rc == EWOULDBLOCK) {
			file_lease_drop(l);
			return LEASE_BUSY;
		}
		/* Any other error is a file system that cannot lock (ENOLCK: NFS
		 * without a lock manager; EOPNOTSUPP, ENOSYS: some FUSE and
		 * cluster file systems). Cleaning without the lease is safe, only
		 * not exclusive: deletions of one page by two cleaners are
		 * idempotent. */
		unlocked = true;
		if (!l->warned) {
			log_warn("file store: the file system of '%s' cannot lock the cleaner's "
				 "lease (%s): this store's cleaner works without it (another "
				 "cleaner may work there at once)",
				 dirs[i], hc_strerror(-rc));
			l->warned = true;
		}
	}
	return unlocked ? LEASE_UNLOCKED : LEASE_HELD;
}

void file_lease_drop(struct file_lease *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->held[i]) {
			flock(l->fds[i], LOCK_UN);
			l->held[i] = false;
		}
}

void file_lease_close(struct file_lease *l)
{
	if (!l->fds)
		return;
	file_lease_drop(l);
	for (size_t i = 0; i < l->n; i++)
		if (l->fds[i] >= 0)
			close(l->fds[i]);
	free(l->fds);
	free(l->held);
	l->fds = NULL;
	l->held = NULL;
	l->n = 0;
}
