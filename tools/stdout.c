// SPDX-License-Identifier: MIT
/*
 * stdout.c - the tools' check of standard output at exit
 * (tool_close_stdout_at_exit, declared in stdout.h) and their --version
 * line (tool_print_version): libc alone, so that
 * vmmx-demo, which links nothing but libvmmx, shares it.  State: one
 * process-wide name, set once from main().
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stdout.h"

static const char *close_prog;

/*
 * The atexit handler of tool_close_stdout_at_exit().  What fclose() flushes
 * is the end of the output (and, redirected to a file, all of it): its
 * failure, or an earlier write's (ferror), is the tool's.  A stdout that
 * was closed before (EBADF) with nothing left to write is no failure.
 */
static void close_stdout(void)
{
	int pending = __fpending(stdout) != 0, failed = ferror(stdout), closed;

	errno = 0;
	closed = fclose(stdout);
	if (!closed && !failed)
		return;
	if (closed && !failed && errno == EBADF && !pending)
		return;
	if (closed && errno)
		fprintf(stderr, "%s: write error on standard output: %s\n", close_prog,
			strerror(errno));
	else
		fprintf(stderr, "%s: write error on standard output\n", close_prog);
	_exit(1);
}

void tool_close_stdout_at_exit(const char *prog)
{
	close_prog = prog;
	if (atexit(close_stdout)) {
		fprintf(stderr, "%s: atexit failed\n", prog);
		exit(1);
	}
}

void tool_print_version(const char *prog)
{
	printf("%s (libvmmx) %s\n", prog, PACKAGE_VERSION);
}
