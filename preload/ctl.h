/* SPDX-License-Identifier: MIT */
/*
 * ctl.h - what vmmx-run --ctl (the client, tools/vmmx-run.c) and the
 * interposer's control socket (preload/control.c) must agree on: where a
 * process's socket lies by default, the tag its memory sleeps under, and
 * how long a request line may be.  The protocol itself is in control.c's
 * top comment and docs/PRELOAD.md.
 */
#ifndef VMMX_PRELOAD_CTL_H
#define VMMX_PRELOAD_CTL_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

/* The tag the interposer gives its segments for the time they sleep. */
#define VMMXP_CTL_TAG "vmmx-run"
/* The longest request line, its newline included. */
#define VMMXP_CTL_LINE 256
/* The longest answer: status's first line and one line per device (64 devices fit). */
#define VMMXP_CTL_REPLY 16384
/* sizeof(((struct sockaddr_un *)0)->sun_path) on Linux, without <sys/un.h> here. */
#define VMMXP_CTL_PATH_MAX 108
/* ... in messages: the bytes a path may have */
#define VMMXP_CTL_PATH_MAX_S "107"

/*
 * The directory of the default sockets: $XDG_RUNTIME_DIR (per user, mode
 * 0700, made by the login manager) when it is an absolute path we may
 * write to, else /tmp.
 */
static inline const char *vmmxp_ctl_dir(void)
{
	const char *d = getenv("XDG_RUNTIME_DIR");

	return d && d[0] == '/' && !access(d, W_OK | X_OK) ? d : "/tmp";
}

/* The default socket of process @pid in @dir: @dir/vmmx-run-PID.sock; 0, or -1 when too long. */
static inline int vmmxp_ctl_path(const char *dir, pid_t pid, char *path, size_t len)
{
	int n = snprintf(path, len, "%s/vmmx-run-%d.sock", dir, (int)pid);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

#endif /* VMMX_PRELOAD_CTL_H */
