// SPDX-License-Identifier: MIT
/*
 * trace.c - VMMX_TRACE: one JSON object per placement decision, appended
 * to a file, so experiments can replay what the policy chose and why.
 *
 * Each record is formatted in full, then written with one write() to a
 * descriptor opened with O_APPEND, so records from several threads (and
 * several processes) never interleave.  A failed write is dropped on
 * purpose: tracing never fails an allocation.
 *
 * Tracing never blocks either.  VMMX_TRACE may name a regular file (made
 * if missing), a character device (/dev/null, a terminal) or a FIFO that a
 * reader has open already; anything else is refused at vmmx_ctx_create.
 * The descriptor is opened with O_NONBLOCK: opening a FIFO for writing
 * otherwise waits for a reader, forever if none comes (vmmx_ctx_create
 * hung); with it, a FIFO without a reader is refused at once (ENXIO).
 * Writes stay non-blocking: a record the reader has no room for is dropped
 * whole (a record is shorter than PIPE_BUF, so a pipe takes it all or
 * nothing).  A reader that goes away makes writes fail with EPIPE, and
 * SIGPIPE, which would kill the process, is blocked around the write and
 * taken back if the write raised it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal/obj.h"
#include "vmm/fdwrite.h"

int vmmx__trace_open(struct vmmx_ctx *ctx)
{
	const char *path = ctx->conf.trace;
	const char *what;
	struct stat st;
	int fd, e;

	if (!path[0])
		return 0;
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
	if (fd < 0) {
		e = errno;
		if (e == ENXIO && !stat(path, &st) && S_ISFIFO(st.st_mode))
			return vmmx__fail(&ctx->conf.log, -VMMX_ECONFIG,
					  "VMMX_TRACE=\"%s\": a FIFO that no process has open for reading: start the reader first (libvmmx does not wait for one)",
					  path);
		return vmmx__fail(&ctx->conf.log, -VMMX_ECONFIG, "VMMX_TRACE=\"%s\": cannot open: %s",
				  path, strerror(e));
	}
	if (fstat(fd, &st)) {
		e = errno;
		close(fd);
		return vmmx__fail(&ctx->conf.log, -VMMX_ECONFIG, "VMMX_TRACE=\"%s\": fstat: %s",
				  path, strerror(e));
	}
	if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) {
		what = S_ISSOCK(st.st_mode) ? "a socket" : S_ISBLK(st.st_mode) ? "a block device"
										  : "not a file";
		close(fd);
		return vmmx__fail(&ctx->conf.log, -VMMX_ECONFIG,
				  "VMMX_TRACE=\"%s\": %s; expected a regular file, a character device or a FIFO with a reader",
				  path, what);
	}
	ctx->trace_fd = fd;
	return 0;
}

void vmmx__trace_close(struct vmmx_ctx *ctx)
{
	if (ctx->trace_fd >= 0)
		close(ctx->trace_fd);
	ctx->trace_fd = -1;
}

void vmmx__trace_place(struct vmmx_ctx *ctx, const struct vmmx__trace_rec *rec)
{
	char line[1536], pref[32], chosen[32], tried[700], spec[300];
	struct timespec ts;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	vmmx__json_escape(tried, sizeof(tried), rec->tried);
	vmmx__json_escape(spec, sizeof(spec), rec->buf->policy->spec);
	n = snprintf(line, sizeof(line),
		     "{\"time\":%lld.%06ld,\"pid\":%d,\"buf\":\"%p\",\"buf_id\":%llu,\"policy\":\"%s\","
		     "\"chunk\":%zu,\"offset\":%zu,\"size\":%zu,\"preferred\":\"%s\",\"chosen\":\"%s\","
		     "\"fallback\":%s,\"reason\":\"%s\",\"cache_hit\":%s,\"refused\":\"%s\"}\n",
		     (long long)ts.tv_sec, ts.tv_nsec / 1000, (int)getpid(), (void *)rec->buf->base,
		     (unsigned long long)rec->buf->id, spec, rec->chunk, rec->off, rec->size,
		     vmmx_loc_name(rec->preferred, pref, sizeof(pref)),
		     vmmx_loc_name(rec->chosen, chosen, sizeof(chosen)),
		     rec->why != VMMX__WHY_OK ? "true" : "false", vmmx__why_name(rec->why),
		     rec->cache_hit ? "true" : "false", tried);
	if (n > 0 && (size_t)n < sizeof(line))
		vmm_write_quiet(ctx->trace_fd, line, (size_t)n);
}
