/*
 * One page file written with plain system calls: O_EXCL create of the temp
 * name, the whole image, close, rename onto the final name. The thread
 * engine writes every page this way, and the file backend's synchronous
 * retries (a taken temp name, an invalid file to replace) call it too, so
 * there is one such sequence, with the fault points the tests sweep. The
 * io_uring engine's linked chain (io_uring_write.c) is the other way.
 */
#define _GNU_SOURCE
#include "io/io.h"
#include "io/io_stream.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void io_unlink_tmp(int dirfd, const char *name)
{
	/* ENOENT/ENOTDIR: there is no temp file (the open failed on the path). */
	if (unlinkat(dirfd, name, 0) && errno != ENOENT && errno != ENOTDIR)
		log_warn("io: clean-up unlink of %s: %s", name, strerrordesc_np(errno));
}

int io_write_file(const struct io_write_req *q, struct iovec *scratch)
{
	int fd;
	do
		fd = io_openat_beneath(q->dirfd, q->tmp_name,
				       O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC |
					       (q->direct ? O_DIRECT : 0),
				       q->mode ? q->mode : 0600);
	while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		int rc = -errno;
		/* The temp name, not the final name, was taken: -EBUSY keeps
		 * -EEXIST unambiguous, and that file (another writer's) stays.
		 * Other failures may have created the file (O_DIRECT refused
		 * after the create): it is ours. */
		if (rc == -EEXIST)
			return -EBUSY;
		io_unlink_tmp(q->dirfd, q->tmp_name);
		return rc;
	}
	int rc = 0;
	const struct iovec *iov = q->iov;
	int cnt = (int)q->iovcnt;
	size_t done = 0;
	while (done < q->len) {
		ssize_t k = HC_FAULT_SYS(HC_FAULT_WRITE, EIO, pwritev(fd, iov, cnt, (off_t)done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = k < 0 ? -errno : -EIO;
			break;
		}
		done += (size_t)k;
		if (done < q->len) {
			cnt = (int)io_iov_advance(q->iov, q->iovcnt, done, scratch);
			iov = scratch;
		}
	}
	/* EINTR from close still closes the fd on Linux; only a real error
	 * (e.g. EIO from write-back) means the data may not be there. */
	if (close(fd) && errno != EINTR && rc == 0)
		rc = -errno;
	if (rc == 0) {
		int r;
		do
			r = HC_FAULT_SYS(HC_FAULT_RENAME, EIO,
					 renameat2(q->dirfd, q->tmp_name, q->dirfd, q->final_name,
						   q->noreplace ? RENAME_NOREPLACE : 0));
		while (r && errno == EINTR);
		if (r)
			rc = -errno;
	}
	if (rc)
		io_unlink_tmp(q->dirfd, q->tmp_name);
	return rc;
}
