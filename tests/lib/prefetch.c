// SPDX-License-Identifier: MIT
/*
 * prefetch.c - prefetch and advice by address (lib/prefetch.c): a range is
 * found with the lock-free lookup, widened to whole chunks per buffer and
 * moved with its data; ranges over several buffers, after a stream's work,
 * through an allocator's allocation; every refusal with its code and
 * message; advice reaching the buffer's policy (lru promotes a will-need
 * chunk), over two buffers at once.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

static const struct vmmx_loc DEV = { VMMX_LOC_DEVICE, 0 };
static const struct vmmx_loc HOST = { VMMX_LOC_HOST, 0 };

static struct vmmx_buf *make(struct vmmx_ctx *ctx, size_t size, const char *policy)
{
	struct vmmx_buf *buf;

	if (vmmx_buf_create(ctx, size, policy, &buf) || vmmx_buf_resize(buf, size))
		bail("buffer of %zu (%s): %s", size, policy, vmmx_last_error());
	return buf;
}

static struct vmmx_residency where(struct vmmx_buf *buf)
{
	struct vmmx_residency r = { 0, 0 };

	vmmx_buf_residency(buf, 0, vmmx_buf_size(buf), &r);
	return r;
}

static void test_errors(struct vmmx_ctx *ctx, struct vmmx_buf *buf)
{
	char *p = vmmx_buf_ptr(buf);
	struct vmmx_loc bad = { VMMX_LOC_DEVICE, 5 };
	int x;

	is_err(-VMMX_EINVAL, vmmx_prefetch(NULL, p, 1, DEV, NULL), "vmmx_prefetch(NULL ctx)");
	like(vmmx_last_error(), "ctx is NULL", "vmmx_prefetch: the message names ctx");
	is_err(-VMMX_EINVAL, vmmx_prefetch(ctx, NULL, 1, DEV, NULL), "vmmx_prefetch(NULL ptr)");
	is_err(-VMMX_EINVAL, vmmx_prefetch(ctx, p, 1, bad, NULL),
	       "vmmx_prefetch to a device the context cannot use");
	like(vmmx_last_error(), "device:5 is not usable", "vmmx_prefetch: the message names it");
	is_err(-VMMX_ENOENT, vmmx_prefetch(ctx, &x, 4, DEV, NULL),
	       "vmmx_prefetch of memory in no buffer");
	like(vmmx_last_error(), "in no buffer", "vmmx_prefetch: the message says so");
	{
		struct vmmx_buf *half;
		char *h;

		if (vmmx_buf_create(ctx, 16 * MiB, "host", &half) || vmmx_buf_resize(half, 8 * MiB))
			bail("buffer: %s", vmmx_last_error());
		h = vmmx_buf_ptr(half);
		is_err(-VMMX_EFAULT, vmmx_prefetch(ctx, h, 8 * MiB + 1, DEV, NULL),
		       "vmmx_prefetch past the buffer's size");
		like(vmmx_last_error(), "past its buffer's size", "vmmx_prefetch: message says so");
		is_err(-VMMX_EFAULT, vmmx_advise(ctx, h + 9 * MiB, 1, VMMX_ADVISE_HOT),
		       "vmmx_advise past the buffer's size");
		vmmx_buf_destroy(half);
	}
	is_err(-VMMX_EINVAL, vmmx_prefetch(ctx, (char *)UINTPTR_MAX - 8, 64, DEV, NULL),
	       "vmmx_prefetch of a wrapping range");
	is_err(0, vmmx_prefetch(ctx, p, 0, DEV, NULL), "vmmx_prefetch of 0 bytes does nothing");
	is_err(-VMMX_EINVAL, vmmx_advise(ctx, p, 1, 99), "vmmx_advise refuses a bad advice");
	like(vmmx_last_error(), "advice 99", "vmmx_advise: the message names it");
	is_err(-VMMX_EINVAL, vmmx_advise(NULL, p, 1, VMMX_ADVISE_HOT), "vmmx_advise(NULL ctx)");
	is_err(-VMMX_ENOENT, vmmx_advise(ctx, &x, 4, VMMX_ADVISE_HOT),
	       "vmmx_advise of memory in no buffer");
}

static void test_moves(struct vmmx_ctx *ctx)
{
	struct vmmx_buf *a = make(ctx, 8 * MiB, "host"), *b = make(ctx, 8 * MiB, "host");
	char *pa = vmmx_buf_ptr(a);
	struct vmmx_stats s0 = { .size = sizeof(s0) }, s1 = { .size = sizeof(s1) };
	struct vmmx_residency r;
	struct vmmx_stream *st;

	test_errors(ctx, a);
	test_fill(ctx, pa, 0, 8 * MiB, 5);
	test_fill(ctx, vmmx_buf_ptr(b), 0, 8 * MiB, 6);
	is_err(0, vmmx_prefetch(ctx, pa + MiB + 5, 100, DEV, NULL),
	       "vmmx_prefetch of 100 bytes inside a host buffer");
	r = where(a);
	ok(r.device >= 2 * MiB && r.device % (2 * MiB) == 0,
	   "vmmx_prefetch: the range widened to its chunk is on the device");
	is_uint(SIZE_MAX, test_check(ctx, pa, 0, 8 * MiB, 5), "vmmx_prefetch: data moved intact");
	vmmx_stats_get(ctx, &s0);
	is_err(0, vmmx_prefetch(ctx, pa + MiB, MiB, DEV, NULL), "vmmx_prefetch of resident memory");
	vmmx_stats_get(ctx, &s1);
	is_uint(s0.migrations, s1.migrations, "vmmx_prefetch: resident chunks do not move");
	is_err(0, vmmx_prefetch(ctx, pa, 8 * MiB, DEV, NULL), "vmmx_prefetch of a whole buffer");
	is_uint(8 * MiB, where(a).device, "vmmx_prefetch: all of it on the device");
	if (vmmx_stream_create(ctx, &st))
		bail("vmmx_stream_create: %s", vmmx_last_error());
	is_err(0, vmmx_prefetch(ctx, pa, 8 * MiB, HOST, vmmx_stream_handle(st)),
	       "vmmx_prefetch to host after a stream's work");
	is_uint(8 * MiB, where(a).host, "vmmx_prefetch: all of it back in host memory");
	is_uint(SIZE_MAX, test_check(ctx, pa, 0, 8 * MiB, 5), "vmmx_prefetch: intact both ways");
	vmmx_stream_destroy(st);

	/* a range over two buffers, when the backend placed them back to back */
	{
		struct vmmx_buf *lo = a, *hi = b;

		if ((char *)vmmx_buf_ptr(a) == (char *)vmmx_buf_ptr(b) + vmmx_buf_capacity(b)) {
			lo = b;
			hi = a;
		}
		if ((char *)vmmx_buf_ptr(hi) == (char *)vmmx_buf_ptr(lo) + vmmx_buf_capacity(lo)) {
			char *plo = vmmx_buf_ptr(lo);

			vmmx_prefetch(ctx, vmmx_buf_ptr(b), 8 * MiB, HOST, NULL);
			is_err(0, vmmx_prefetch(ctx, plo + 6 * MiB, 4 * MiB, DEV, NULL),
			       "vmmx_prefetch over two buffers");
			{
				struct vmmx_chunk_info ce, cs;

				/* Chunks move whole: the one holding lo's last byte and the
				 * one holding hi's first, whatever their size. */
				ok(!vmmx_lookup(ctx, plo + 8 * MiB - 1, &ce) &&
					   !vmmx_lookup(ctx, vmmx_buf_ptr(hi), &cs) &&
					   ce.loc.kind == VMMX_LOC_DEVICE && cs.loc.kind == VMMX_LOC_DEVICE &&
					   where(lo).device == ce.size && where(hi).device == cs.size,
				   "vmmx_prefetch: each buffer's part moved");
			}
			is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(b), 0, 8 * MiB, 6),
				"vmmx_prefetch: the second buffer's data intact");
		} else {
			/* the walk goes buffer by buffer: the first part moves, the gap stops it */
			is_err(-VMMX_ENOENT, vmmx_prefetch(ctx, pa + 6 * MiB, 4 * MiB, DEV, NULL),
			       "vmmx_prefetch over a buffer's end into no buffer");
			ok(where(a).device >= 2 * MiB,
			   "vmmx_prefetch: the part in the buffer moved before the gap");
			skip("the two buffers are not adjacent here (sim reservations leave gaps)");
		}
	}
	vmmx_buf_destroy(a);
	vmmx_buf_destroy(b);
}

static void test_alloc(struct vmmx_ctx *ctx)
{
	struct vmmx_alloc_stats st = { .size = sizeof(st) };
	struct vmmx_alloc *al;
	void *p;

	if (vmmx_alloc_create(ctx, "host", &al) || vmmx_alloc_malloc(al, 12 * MiB, NULL, &p))
		bail("allocator: %s", vmmx_last_error());
	test_fill(ctx, p, 0, 12 * MiB, 9);
	vmmx_alloc_stats(al, &st);
	is_uint(12 * MiB, st.host_allocated, "a host-policy allocation lives in host memory");
	is_err(0, vmmx_prefetch(ctx, p, 12 * MiB, DEV, NULL), "vmmx_prefetch of an allocation");
	vmmx_alloc_stats(al, &st);
	is_uint(12 * MiB, st.device_allocated, "vmmx_alloc_stats follows the move");
	is_uint(SIZE_MAX, test_check(ctx, p, 0, 12 * MiB, 9), "the allocation's data moved intact");
	vmmx_alloc_free(al, p, NULL);
	vmmx_alloc_destroy(al);
}

static void test_advise(void)
{
	const char *vars[] = { "VMMX_DEVICE_LIMIT=8MiB", "VMMX_CHUNK_MAX=2MiB", NULL };
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_stats s0 = { .size = sizeof(s0) }, s1 = { .size = sizeof(s1) };
	struct vmmx_buf *a, *b;
	char *pa;

	a = make(ctx, 8 * MiB, "lru");
	b = make(ctx, 4 * MiB, "lru"); /* evicts two of a's chunks */
	pa = vmmx_buf_ptr(a);
	ok(where(a).host == 4 * MiB, "lru: the second buffer spilled the first one's oldest chunks");
	vmmx_stats_get(ctx, &s0);
	is_err(0, vmmx_advise(ctx, pa, 8 * MiB, VMMX_ADVISE_WILL_NEED),
	       "vmmx_advise WILL_NEED over a partly spilled buffer");
	vmmx_stats_get(ctx, &s1);
	ok(s1.promotions > s0.promotions, "vmmx_advise: lru promoted chunks of the range");
	ok(where(a).device > 4 * MiB, "vmmx_advise: more of the range is on the device");
	is_err(0, vmmx_advise(ctx, pa, 8 * MiB, VMMX_ADVISE_COLD), "vmmx_advise COLD");
	vmmx_buf_destroy(a);
	vmmx_buf_destroy(b);
	vmmx_ctx_destroy(ctx);
}

int main(void)
{
	struct vmmx_ctx *ctx;

	plan_lazy();
	ctx = test_ctx(NULL);
	test_moves(ctx);
	test_alloc(ctx);
	vmmx_ctx_destroy(ctx);
	test_advise();
	return tap_done();
}
