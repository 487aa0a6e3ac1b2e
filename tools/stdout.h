/* SPDX-License-Identifier: MIT */
/* stdout.h - what every tool writes alike: the check of standard output at
 * exit, and --version (stdout.c). */
#ifndef TOOLS_STDOUT_H
#define TOOLS_STDOUT_H

/**
 * tool_close_stdout_at_exit() - check standard output when the tool exits,
 * as coreutils' close_stdout does: a tool whose results could not be
 * written (a full disk, >/dev/full, a closed pipe with SIGPIPE ignored)
 * must not exit 0.  Registers an atexit handler that flushes and closes
 * stdout; on a failure it prints "PROG: write error on standard output:
 * REASON" and ends the process with status 1.  Call once, first thing in
 * main(), so that the handler runs last.
 */
void tool_close_stdout_at_exit(const char *prog);

/**
 * tool_print_version() - --version: "PROG (libvmmx) VERSION" on standard
 * output, the version this tool was built with.
 */
void tool_print_version(const char *prog);

#endif /* TOOLS_STDOUT_H */
