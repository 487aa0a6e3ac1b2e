// SPDX-License-Identifier: MIT
/*
 * fdwrite.h - one write() for a trace line, shared by libvmmx's placement
 * trace (lib/trace.c) and vmmx-run's launch trace (preload/launch.c),
 * which write to the same kind of file (VMMX_TRACE, perhaps a FIFO).
 *
 * A header of static inline code because the interposer links only
 * libvmmx's public symbols; it sits with the driver layer's headers, under
 * every layer of lib/ (docs/DESIGN.md).
 */
#ifndef VMMX_VMM_FDWRITE_H
#define VMMX_VMM_FDWRITE_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

/*
 * One write(), never blocking, never raising SIGPIPE (a FIFO whose reader
 * left): the signal is blocked in this thread around it, and if the write
 * raised it (EPIPE) and it was not pending before, it is taken back.  A
 * failed write is dropped: a trace never fails its caller.
 */
static inline void vmm_write_quiet(int fd, const char *line, size_t n)
{
	static const struct timespec now = { 0, 0 };
	sigset_t pipe_set, old, pending;
	int was_pending;
	ssize_t w;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	if (pthread_sigmask(SIG_BLOCK, &pipe_set, &old))
		return;
	sigpending(&pending);
	was_pending = sigismember(&pending, SIGPIPE) == 1;
	w = write(fd, line, n);
	if (w < 0 && errno == EPIPE && !was_pending)
		while (sigtimedwait(&pipe_set, NULL, &now) < 0 && errno == EINTR)
			;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

#endif /* VMMX_VMM_FDWRITE_H */
