// SPDX-License-Identifier: MIT
/*
 * room.c - vmmx_ctx_room(): under a device limit the room is the limit less
 * what buffers hold, shrinks as they grow and comes back when they shrink
 * or are destroyed (cached chunks count as room); @want caps the answer;
 * host memory has its own limit; on sim with a small device, the device's
 * free memory less the headroom bounds it, and a grow of exactly the room
 * stays on the device while one byte more spills; bad arguments with their
 * code and message; in a forked child the call fails naming the parent.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

static const struct vmmx_loc dev0 = { VMMX_LOC_DEVICE, 0 };
static const struct vmmx_loc host = { VMMX_LOC_HOST, 0 };

static size_t room(struct vmmx_ctx *ctx, struct vmmx_loc loc, size_t want)
{
	size_t r;
	int err = vmmx_ctx_room(ctx, loc, want, &r);

	if (err)
		bail("vmmx_ctx_room: %s: %s", vmmx_strerror(err), vmmx_last_error());
	return r;
}

static struct vmmx_buf *xbuf(struct vmmx_ctx *ctx, const char *policy, size_t size)
{
	struct vmmx_buf *b;

	if (vmmx_buf_create(ctx, 256 * MiB, policy, &b) || vmmx_buf_resize(b, size))
		bail("buffer of %zu bytes: %s", size, vmmx_last_error());
	return b;
}

/* A device limit: the room follows what buffers hold. */
static void test_limit(void)
{
	const char *vars[] = { "VMMX_DEVICE_LIMIT=64MiB", "VMMX_HOST_LIMIT=96MiB",
			       "VMMX_DEVICE_HEADROOM=0", "VMMX_CHUNK_MAX=2MiB", NULL };
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *a, *b;

	is_uint(64 * MiB, room(ctx, dev0, SIZE_MAX), "vmmx_ctx_room: the device limit, at first");
	is_uint(10 * MiB, room(ctx, dev0, 10 * MiB), "vmmx_ctx_room: capped at want");
	is_uint(0, room(ctx, dev0, 0), "vmmx_ctx_room: 0 of 0 bytes");
	is_uint(96 * MiB, room(ctx, host, SIZE_MAX), "vmmx_ctx_room: the host limit");
	a = xbuf(ctx, "device", 16 * MiB);
	is_uint(48 * MiB, room(ctx, dev0, SIZE_MAX), "a 16 MiB buffer leaves 48 MiB");
	is_uint(96 * MiB, room(ctx, host, SIZE_MAX), "... and host memory untouched");
	if (vmmx_buf_resize(a, 40 * MiB))
		bail("resize: %s", vmmx_last_error());
	is_uint(24 * MiB, room(ctx, dev0, SIZE_MAX), "grown to 40 MiB: 24 MiB left");
	b = xbuf(ctx, "device", 24 * MiB);
	is_uint(0, room(ctx, dev0, SIZE_MAX), "a second buffer of 24 MiB: no room left");
	is_uint(0, room(ctx, dev0, 1), "... not even for one byte");
	{
		struct vmmx_buf *h = xbuf(ctx, "host", 32 * MiB);

		is_uint(64 * MiB, room(ctx, host, SIZE_MAX),
			"a 32 MiB host buffer: 64 MiB left there");
		vmmx_buf_destroy(h);
	}
	if (vmmx_buf_resize(a, 8 * MiB))
		bail("resize: %s", vmmx_last_error());
	is_uint(32 * MiB, room(ctx, dev0, SIZE_MAX), "shrunk to 8 MiB: 32 MiB back");
	vmmx_buf_destroy(b);
	is_uint(56 * MiB, room(ctx, dev0, SIZE_MAX),
		"the second buffer destroyed: its 24 MiB back");
	vmmx_buf_destroy(a);
	is_uint(64 * MiB, room(ctx, dev0, SIZE_MAX), "both destroyed: the whole limit again");
	vmmx_ctx_trim(ctx, 0);
	is_uint(64 * MiB, room(ctx, dev0, SIZE_MAX), "... and after the cache is given back");
	vmmx_ctx_destroy(ctx);
}

/* sim, a 256 MiB device: its free memory less the headroom is the room. */
static void test_headroom(void)
{
	const char *vars[] = { "VMMX_SIM_DEVICE_MEM=256MiB", "VMMX_DEVICE_HEADROOM=64MiB",
			       "VMMX_CHUNK_MAX=2MiB", "VMMX_CACHE_LIMIT=0", NULL };
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_residency r;
	struct vmmx_buf *a, *b;
	size_t left;

	is_uint(192 * MiB, room(ctx, dev0, SIZE_MAX), "vmmx_ctx_room: free memory less headroom");
	a = xbuf(ctx, "device-first", 100 * MiB);
	left = room(ctx, dev0, SIZE_MAX);
	is_uint(92 * MiB, left, "a 100 MiB buffer: 92 MiB of room left");
	/* the room is what a grow gets: exactly that much stays on the device, more spills */
	b = xbuf(ctx, "device-first", left);
	if (vmmx_buf_residency(b, 0, left, &r))
		bail("residency: %s", vmmx_last_error());
	is_uint(left, r.device, "a buffer of exactly the room lies wholly on the device");
	if (vmmx_buf_resize(b, left + 2 * MiB) || vmmx_buf_residency(b, 0, left + 2 * MiB, &r))
		bail("resize: %s", vmmx_last_error());
	is_uint(2 * MiB, r.host, "... and 2 MiB more go to host memory (device-first)");
	is_uint(0, room(ctx, dev0, SIZE_MAX), "no room on the device now");
	vmmx_buf_destroy(b);
	vmmx_buf_destroy(a);
	is_uint(192 * MiB, room(ctx, dev0, SIZE_MAX), "both destroyed: the room is back");
	vmmx_ctx_destroy(ctx);
}

static void test_errors(void)
{
	struct vmmx_ctx *ctx = test_ctx(NULL);
	size_t r = 12345;

	is_err(-VMMX_EINVAL, vmmx_ctx_room(NULL, dev0, 1, &r), "vmmx_ctx_room(NULL ctx)");
	is_string("vmmx_ctx_room: ctx is NULL", vmmx_last_error(), "... says which argument");
	is_err(-VMMX_EINVAL, vmmx_ctx_room(ctx, dev0, 1, NULL), "vmmx_ctx_room(NULL room_p)");
	is_string("vmmx_ctx_room: room_p is NULL", vmmx_last_error(), "... says which argument");
	is_err(-VMMX_EINVAL, vmmx_ctx_room(ctx, (struct vmmx_loc){ VMMX_LOC_DEVICE, 99 }, 1, &r),
	       "vmmx_ctx_room on a device the context does not have");
	like(vmmx_last_error(), "location device:99 is not usable by this context",
	     "... naming the location");
	is_err(-VMMX_EINVAL, vmmx_ctx_room(ctx, (struct vmmx_loc){ VMMX_LOC_NONE, 0 }, 1, &r),
	       "vmmx_ctx_room on no location");
	like(vmmx_last_error(), "is not usable by this context", "... with the same message");
	is_uint(12345, r, "vmmx_ctx_room: the output is left alone on failure");
	vmmx_ctx_destroy(ctx);
}

static void test_fork(void)
{
	struct vmmx_ctx *ctx = test_ctx(NULL);
	int parent = (int)getpid();
	int status;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		bail("fork failed");
	if (!pid) {
		char want[64];
		size_t r = 7;

		snprintf(want, sizeof(want), "context created in process %d", parent);
		test_expect(vmmx_ctx_room(ctx, dev0, 1, &r) == -VMMX_ENODRIVER,
			    "vmmx_ctx_room fails in the child");
		test_expect(strstr(vmmx_last_error(), want) != NULL, want);
		test_expect(r == 7, "vmmx_ctx_room writes nothing in the child");
		_exit(test_child_fails > 100 ? 100 : test_child_fails);
	}
	status = test_wait_child(pid, 30);
	ok(status >= 0 && WIFEXITED(status) && !WEXITSTATUS(status),
	   "fork: vmmx_ctx_room on the parent's context fails in the child (status %#x)", status);
	vmmx_ctx_destroy(ctx);
}

int main(void)
{
	plan_lazy();
	test_limit();
	if (test_on_sim())
		test_headroom();
	else
		skip("the device's size is the sim's (VMMX_SIM_DEVICE_MEM)");
	test_errors();
	test_fork();
	return tap_done();
}
