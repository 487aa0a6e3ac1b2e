// SPDX-License-Identifier: MIT
/*
 * alloc_badstream.c - vmmx_alloc_free() on a stream the driver refuses (a
 * destroyed stream's handle, a made-up one): -VMMX_EINVAL naming the
 * address and the stream, and nothing taken: the block stays allocated, its
 * data intact, counted live, and a free on the right stream then works and
 * makes it reusable at once.  Before, the block was taken first and parked
 * with no event, so the caller's pointer was gone (a second free: "freed
 * already") although the call had failed.  The sim refuses streams it did
 * not make; on cuda a dead CUstream is undefined behaviour, so this runs on
 * sim only.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

static struct vmmx_alloc_stats stats(struct vmmx_alloc *a)
{
	struct vmmx_alloc_stats st = { .size = sizeof(st) };

	if (vmmx_alloc_stats(a, &st))
		bail("vmmx_alloc_stats: %s", vmmx_last_error());
	return st;
}

static void refused(struct vmmx_ctx *ctx, struct vmmx_alloc *a, void *p, void *stream,
		    const char *what)
{
	struct vmmx_alloc_stats st0 = stats(a), st;
	char want[96];
	int err;

	err = vmmx_alloc_free(a, p, stream);
	is_err(-VMMX_EINVAL, err, "vmmx_alloc_free on %s: -VMMX_EINVAL", what);
	snprintf(want, sizeof(want), "vmmx_alloc_free(%p, stream %p)", p, stream);
	ok(strstr(vmmx_last_error(), want) && strstr(vmmx_last_error(), "unknown stream") &&
		   strstr(vmmx_last_error(), "the memory stays allocated"),
	   "... the message names the address, the stream and why: %s", vmmx_last_error());
	st = stats(a);
	ok(st.active_blocks == st0.active_blocks && st.allocated_bytes == st0.allocated_bytes &&
		   st.frees == st0.frees && st.cross_stream_frees == st0.cross_stream_frees,
	   "... the block is still live (%llu blocks, %llu bytes, %llu frees)",
	   (unsigned long long)st.active_blocks, (unsigned long long)st.allocated_bytes,
	   (unsigned long long)st.frees);
	is_uint(SIZE_MAX, test_check(ctx, p, 0, MiB, 11), "... and its data is intact");
}

int main(void)
{
	static const char *const vars[] = { "VMMX_CHUNK_MAX=2MiB", NULL };
	struct vmmx_ctx *ctx;
	struct vmmx_alloc *a;
	struct vmmx_stream *s;
	struct vmm_counts c0, c;
	void *p, *q, *dead;

	if (!test_on_sim())
		skip_all("the sim refuses unknown streams; on cuda a dead stream is undefined");
	plan(12);
	ctx = test_ctx(vars);
	vmm_counts(vmmx__ctx_vmm(ctx), &c0);
	if (vmmx_alloc_create(ctx, NULL, &a) || vmmx_alloc_malloc(a, MiB, NULL, &p) ||
	    test_fill(ctx, p, 0, MiB, 11) || vmmx_stream_create(ctx, &s))
		bail("setup: %s", vmmx_last_error());
	dead = vmmx_stream_handle(s);
	vmmx_stream_destroy(s);

	refused(ctx, a, p, dead, "a destroyed stream");
	refused(ctx, a, p, (void *)(uintptr_t)0x7777, "a made-up stream");

	is_err(0, vmmx_alloc_free(a, p, NULL), "then the free on its own stream succeeds");
	is_uint(0, stats(a).active_blocks, "... and the block is no longer live");
	if (vmmx_alloc_malloc(a, MiB, NULL, &q))
		bail("vmmx_alloc_malloc: %s", vmmx_last_error());
	ok(q == p, "... and it is reused at once on that stream");
	vmmx_alloc_free(a, q, NULL);
	vmmx_alloc_destroy(a);
	vmmx_ctx_trim(ctx, 0);
	vmm_counts(vmmx__ctx_vmm(ctx), &c);
	ok(c.events == c0.events && c.reservations == c0.reservations && c.handles == c0.handles,
	   "no event, reservation or handle leaked (events %lld)", (long long)c.events);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
