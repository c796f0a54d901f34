/* Library threads start with every signal blocked (see thread.h). */
#include "util/thread.h"

#include <errno.h>
#include <signal.h>

int util_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	if (!thread || !fn)
		return -EINVAL;
	sigset_t all, old;
	sigfillset(&all);
	/* A new thread inherits its creator's mask: block everything around
	 * the create so that no signal can arrive in the window before the
	 * child could block it itself. */
	int rc = pthread_sigmask(SIG_SETMASK, &all, &old);
	if (rc)
		return -rc;
	rc = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -rc;
}
