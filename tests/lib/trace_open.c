// SPDX-License-Identifier: MIT
/*
 * trace_open.c - what VMMX_TRACE may name, and that tracing never blocks
 * (lib/trace.c):
 *  - a FIFO with no reader is refused at vmmx_ctx_create, at once, with a
 *    message saying so (it used to block vmmx_ctx_create forever);
 *  - a FIFO with a reader is traced to; a reader with no room left drops
 *    records instead of blocking grows; a reader that goes away raises no
 *    SIGPIPE in the process;
 *  - a socket or a directory is refused with a message naming the path;
 *    /dev/null is accepted.
 * Every step runs under a watchdog (alarm): a hang fails the test.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/json.h"
#include "tests/tap/vmmx_test.h"

static char dir[] = "/tmp/vmmx-trace-open-XXXXXX";
static char fifo[128], var[200];

static int ctx_with(const char *path, struct vmmx_ctx **ctx_p)
{
	const char *vars[] = { var, "VMMX_CHUNK_MAX=2MiB", NULL };

	snprintf(var, sizeof(var), "VMMX_TRACE=%s", path);
	*ctx_p = NULL;
	return test_ctx_try(vars, ctx_p);
}

static void fifo_no_reader(void)
{
	struct vmmx_ctx *ctx;

	alarm(20);
	is_err(-VMMX_ECONFIG, ctx_with(fifo, &ctx), "a FIFO with no reader is refused, without blocking");
	like(vmmx_last_error(), fifo, "the message names the path");
	like(vmmx_last_error(), "a FIFO that no process has open for reading", "and says there is no reader");
	alarm(0);
	if (ctx)
		vmmx_ctx_destroy(ctx);
}

static void fifo_reader(void)
{
	static char text[1 << 16];
	struct vmmx_ctx *ctx;
	struct vmmx_buf *buf;
	const char *err;
	struct json *j;
	sigset_t pending;
	char *nl;
	ssize_t n;
	int rd, cap;

	alarm(20);
	rd = open(fifo, O_RDONLY | O_NONBLOCK);
	if (rd < 0)
		bail("open %s for reading: %s", fifo, strerror(errno));
	/* the smallest pipe: a dozen records fill it */
	cap = fcntl(rd, F_SETPIPE_SZ, 4096);
	if (cap < 0 || cap > 8192)
		bail("F_SETPIPE_SZ: %s", cap < 0 ? strerror(errno) : "pipe still large");
	is_err(0, ctx_with(fifo, &ctx), "a FIFO with a reader is accepted");
	if (!ctx)
		bail("vmmx_ctx_create: %s", vmmx_last_error());
	if (vmmx_buf_create(ctx, 128 * MiB, "host", &buf))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	is_err(0, vmmx_buf_resize(buf, 2 * MiB), "a grow of one chunk");
	n = read(rd, text, sizeof(text) - 1);
	text[n > 0 ? n : 0] = '\0';
	nl = strchr(text, '\n');
	if (nl)
		*nl = '\0';
	j = json_parse(text, &err);
	ok(j && json_get(j, "chosen") && !strcmp(json_str(json_get(j, "chosen")), "host"),
	   "the reader gets the placement record (%s)", j ? "parsed" : err);
	json_free(j);

	/* 48 records for a pipe of about ten: the grow must not wait for the reader */
	is_err(0, vmmx_buf_resize(buf, 98 * MiB), "a grow of 48 chunks with the reader not reading");
	n = read(rd, text, sizeof(text) - 1);
	ok(n > 0 && n <= cap, "what the pipe held came, the rest was dropped (%zd bytes)", n);
	alarm(0);

	/* the reader goes away: writes fail with EPIPE, and SIGPIPE must not kill us */
	close(rd);
	is_err(0, vmmx_buf_resize(buf, 128 * MiB), "a grow after the reader closed the FIFO");
	sigpending(&pending);
	ok(sigismember(&pending, SIGPIPE) == 0, "no SIGPIPE raised or left pending");
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
}

static void others(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vmmx_ctx *ctx;
	int s;

	alarm(20);
	is_err(-VMMX_ECONFIG, ctx_with(dir, &ctx), "a directory is refused");
	like(vmmx_last_error(), "cannot open", "the message says it cannot be opened");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", dir);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) || listen(s, 1))
		bail("socket: %s", strerror(errno));
	is_err(-VMMX_ECONFIG, ctx_with(sa.sun_path, &ctx), "a listening socket is refused");
	like(vmmx_last_error(), sa.sun_path, "the message names the path");
	close(s);
	unlink(sa.sun_path);
	is_err(0, ctx_with("/dev/null", &ctx), "/dev/null is accepted");
	if (ctx)
		vmmx_ctx_destroy(ctx);
	alarm(0);
}

int main(void)
{
	plan(3 + 6 + 6);
	if (!mkdtemp(dir))
		bail("mkdtemp: %s", strerror(errno));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	if (mkfifo(fifo, 0600))
		bail("mkfifo: %s", strerror(errno));
	fifo_no_reader();
	fifo_reader();
	others();
	unlink(fifo);
	rmdir(dir);
	return tap_done();
}
