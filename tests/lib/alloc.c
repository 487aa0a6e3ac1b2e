// SPDX-License-Identifier: MIT
/*
 * alloc.c - the framework allocator (lib/alloc.c): bad input with its error
 * code and message, many sizes with their data intact, reuse after free
 * without driver calls, the small/large/huge segment classes, splitting and
 * merging, stream ordering (sim streams held so that their work stays
 * pending: a block freed on one stream is never handed to another before
 * the event recorded at the free completes), cross-stream frees, fallback
 * to host memory and the reclaim of idle segments, out of memory, fault
 * injection on every driver op the allocator reaches, 8 threads checking a
 * data pattern on every free, the process-wide entry points for PyTorch and
 * CuPy, and every counter back to zero after empty_cache and destroy.
 * Timings of cached alloc+free pairs are printed as diagnostics.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static struct vmm_counts counts(struct vmmx_ctx *ctx)
{
	struct vmm_counts c;

	vmm_counts(vmmx__ctx_vmm(ctx), &c);
	return c;
}

static void *xmalloc(struct vmmx_alloc *a, size_t size, void *stream)
{
	void *p;
	int err = vmmx_alloc_malloc(a, size, stream, &p);

	if (err)
		bail("vmmx_alloc_malloc(%zu): %s: %s", size, vmmx_strerror(err), vmmx_last_error());
	return p;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void test_bad_input(struct vmmx_ctx *ctx)
{
	struct vmmx_alloc *a, *b = (struct vmmx_alloc *)1;
	struct vmmx_alloc_stats st = { .size = 4 };
	const char *bad_vars[] = { "POLICY=host", NULL };
	void *p = (void *)1;
	int x;

	is_err(-VMMX_EINVAL, vmmx_alloc_create(NULL, NULL, &b), "vmmx_alloc_create(NULL ctx)");
	like(vmmx_last_error(), "ctx is NULL", "vmmx_alloc_create: the message names ctx");
	ok(b == (struct vmmx_alloc *)1, "vmmx_alloc_create: output untouched on failure");
	is_err(-VMMX_ENOENT, vmmx_alloc_create(ctx, "nosuchpolicy", &b),
	       "vmmx_alloc_create refuses an unknown policy at once");
	like(vmmx_last_error(), "nosuchpolicy", "vmmx_alloc_create: the message names the policy");
	if (vmmx_alloc_create(ctx, NULL, &a))
		bail("vmmx_alloc_create: %s", vmmx_last_error());
	is_err(-VMMX_EINVAL, vmmx_alloc_malloc(NULL, 1, NULL, &p),
	       "vmmx_alloc_malloc(NULL allocator)");
	like(vmmx_last_error(), "allocator is NULL",
	     "vmmx_alloc_malloc: message names the allocator");
	is_err(-VMMX_EINVAL, vmmx_alloc_malloc(a, 1, NULL, NULL), "vmmx_alloc_malloc(NULL ptr_p)");
	like(vmmx_last_error(), "ptr_p is NULL", "vmmx_alloc_malloc: message names ptr_p");
	is_err(-VMMX_ENOMEM, vmmx_alloc_malloc(a, SIZE_MAX - 4, NULL, &p),
	       "vmmx_alloc_malloc(SIZE_MAX - 4) is out of memory");
	like(vmmx_last_error(), "more than any device", "vmmx_alloc_malloc: message says why");
	ok(p == (void *)1, "vmmx_alloc_malloc: output untouched on failure");
	is_err(0, vmmx_alloc_malloc(a, 0, NULL, &p), "vmmx_alloc_malloc(0) succeeds");
	ok(p == NULL, "vmmx_alloc_malloc(0) gives NULL");
	is_err(0, vmmx_alloc_free(a, NULL, NULL), "vmmx_alloc_free(NULL) is a no-op");
	is_err(-VMMX_EINVAL, vmmx_alloc_free(a, &x, NULL), "vmmx_alloc_free of a foreign pointer");
	like(vmmx_last_error(), "not an address this allocator returned",
	     "vmmx_alloc_free: message says the address is not ours");
	p = xmalloc(a, 100, NULL);
	is_err(0, vmmx_alloc_free(a, p, NULL), "vmmx_alloc_free of a live block");
	is_err(-VMMX_EINVAL, vmmx_alloc_free(a, p, NULL), "vmmx_alloc_free twice is refused");
	like(vmmx_last_error(), "freed already", "vmmx_alloc_free: message mentions a double free");
	is_err(-VMMX_EINVAL, vmmx_alloc_free(NULL, p, NULL), "vmmx_alloc_free(NULL allocator)");
	is_err(-VMMX_EINVAL, vmmx_alloc_stats(a, &st), "vmmx_alloc_stats refuses a tiny size");
	like(vmmx_last_error(), "too small", "vmmx_alloc_stats: message says the size is small");
	is_err(-VMMX_EINVAL, vmmx_alloc_stats(a, NULL), "vmmx_alloc_stats(NULL)");
	is_err(-VMMX_EINVAL, vmmx_alloc_empty_cache(NULL), "vmmx_alloc_empty_cache(NULL)");
	ok(vmmx_alloc_ctx(a) == ctx, "vmmx_alloc_ctx gives the context");
	ok(vmmx_alloc_ctx(NULL) == NULL, "vmmx_alloc_ctx(NULL) is NULL");
	is_err(-VMMX_ENODEV, vmmx_alloc_global(-1, &b), "vmmx_alloc_global(-1)");
	like(vmmx_last_error(), "device -1", "vmmx_alloc_global: message names the device");
	is_err(-VMMX_EINVAL, vmmx_alloc_global(0, NULL), "vmmx_alloc_global(NULL a_p)");
	is_err(-VMMX_EINVAL, vmmx_alloc_global_config(bad_vars),
	       "vmmx_alloc_global_config refuses an entry without VMMX_");
	like(vmmx_last_error(), "POLICY=host", "vmmx_alloc_global_config: message quotes it");
	ok(vmmx_torch_alloc(-1, 0, NULL) == NULL, "vmmx_torch_alloc(-1) is NULL");
	like(vmmx_last_error(), "negative size", "vmmx_torch_alloc: message says negative size");
	vmmx_alloc_destroy(a);
	vmmx_alloc_destroy(NULL);
	ok(1, "vmmx_alloc_destroy(NULL) is a no-op");
}

/* Sizes at every class boundary, and some odd ones. */
static const size_t sizes[] = {
	1, 511, 512, 513, 4096, 100000, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 << 20,
	(10 << 20) - 1, 10 << 20, (10 << 20) + 1, 33 << 20, 7, 1000, 777777, 5 << 20,
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void test_sizes(struct vmmx_ctx *ctx, struct vmmx_alloc *a)
{
	void *p[NSIZES];
	size_t bad_align = 0, bad_data = 0;
	struct vmmx_alloc_stats st;
	uint64_t req = 0;

	for (size_t i = 0; i < NSIZES; i++) {
		p[i] = xmalloc(a, sizes[i], NULL);
		req += sizes[i];
		bad_align += (uintptr_t)p[i] % 512 != 0;
		if (test_fill(ctx, p[i], 0, sizes[i], (uint32_t)i + 1))
			bail("test_fill: %s", vmmx_last_error());
	}
	for (size_t i = 0; i < NSIZES; i++)
		bad_data += test_check(ctx, p[i], 0, sizes[i], (uint32_t)i + 1) != SIZE_MAX;
	is_uint(0, bad_align, "vmmx_alloc_malloc: every block is 512-byte aligned");
	is_uint(0, bad_data, "vmmx_alloc_malloc: %zu blocks of every class hold their own data",
		NSIZES);
	st = stats(a);
	is_uint(NSIZES, st.active_blocks, "vmmx_alloc_stats: active_blocks counts them");
	is_uint(req, st.requested_bytes, "vmmx_alloc_stats: requested_bytes adds up");
	ok(st.allocated_bytes >= req && st.reserved_bytes >= st.allocated_bytes,
	   "vmmx_alloc_stats: requested <= allocated <= reserved");
	is_uint(st.reserved_bytes, st.device_reserved + st.host_reserved,
		"vmmx_alloc_stats: reserved bytes split by location");
	is_uint(st.allocated_bytes, st.device_allocated + st.host_allocated,
		"vmmx_alloc_stats: allocated bytes split by location");
	for (size_t i = 0; i < NSIZES; i++)
		if (vmmx_alloc_free(a, p[i], NULL))
			bail("vmmx_alloc_free: %s", vmmx_last_error());
	st = stats(a);
	is_uint(0, st.active_blocks, "vmmx_alloc_free: no block left");
	is_uint(0, st.allocated_bytes, "vmmx_alloc_free: allocated_bytes back to 0");
	ok(st.reserved_bytes > 0, "vmmx_alloc_free: segments stay cached");
}

static void test_reuse(struct vmmx_ctx *ctx, struct vmmx_alloc *a)
{
	struct vmmx_stats s0 = { .size = sizeof(s0) }, s1 = { .size = sizeof(s1) };
	struct vmmx_alloc_stats a0, a1;
	void *p, *q, *r[4];
	double t0, t1;
	int n = 200000;

	vmmx_alloc_empty_cache(a);
	a0 = stats(a);
	is_uint(0, a0.segments, "vmmx_alloc_empty_cache: no segment left");
	is_uint(0, a0.reserved_bytes, "vmmx_alloc_empty_cache: reserved_bytes 0");

	p = xmalloc(a, 1000, NULL);
	a1 = stats(a);
	is_uint(1, a1.segments, "a small request makes one segment");
	is_uint(2 * MiB, a1.reserved_bytes, "the small pool's segments are 2 MiB");
	vmmx_alloc_free(a, p, NULL);
	vmmx_stats_get(ctx, &s0);
	q = xmalloc(a, 1000, NULL);
	vmmx_stats_get(ctx, &s1);
	ok(p == q, "vmmx_alloc_malloc: a freed block is reused at once on its stream");
	is_uint(0, s1.driver_calls[VMMX_OP_CREATE] + s1.driver_calls[VMMX_OP_MAP] +
			   s1.driver_calls[VMMX_OP_RESERVE] - s0.driver_calls[VMMX_OP_CREATE] -
			   s0.driver_calls[VMMX_OP_MAP] - s0.driver_calls[VMMX_OP_RESERVE],
		"vmmx_alloc_malloc: reuse makes no driver call");
	is_uint(a1.cache_hits + 1, stats(a).cache_hits, "vmmx_alloc_stats: reuse is a cache hit");
	vmmx_alloc_free(a, q, NULL);

	/* four 512 KiB blocks fill one small segment; freed, they merge back */
	for (int i = 0; i < 4; i++)
		r[i] = xmalloc(a, 512 << 10, NULL);
	is_uint(1, stats(a).segments, "four 512 KiB blocks split one 2 MiB segment");
	for (int i = 0; i < 4; i++)
		vmmx_alloc_free(a, r[(i * 3) % 4], NULL);
	p = xmalloc(a, 1 << 20, NULL);
	ok(p == r[0] || p == (char *)r[0] + (1 << 20) || p < (void *)r[0] ||
		   stats(a).segments == 1,
	   "freed neighbours merge: a 1 MiB block fits in the same segment");
	is_uint(1, stats(a).segments, "merging keeps one segment");
	vmmx_alloc_free(a, p, NULL);

	p = xmalloc(a, 2 * MiB, NULL);
	is_uint(2 * MiB + 20 * MiB, stats(a).reserved_bytes,
		"a 2 MiB request makes a 20 MiB large-pool segment");
	q = xmalloc(a, 3 * MiB, NULL);
	ok((char *)q == (char *)p + 2 * MiB, "large-pool blocks split the segment in order");
	vmmx_alloc_free(a, p, NULL);
	vmmx_alloc_free(a, q, NULL);

	p = xmalloc(a, 64 * MiB, NULL);
	a1 = stats(a);
	is_uint(2 * MiB + 20 * MiB + 64 * MiB, a1.reserved_bytes,
		"a 64 MiB request gets a segment of its own");
	vmmx_alloc_free(a, p, NULL);
	q = xmalloc(a, 60 * MiB, NULL);
	ok(p == q, "a huge segment serves a request that wastes at most 1/8 of it");
	vmmx_alloc_free(a, q, NULL);
	q = xmalloc(a, 16 * MiB, NULL);
	ok(p != q, "a huge segment is never split for a much smaller request");
	is_uint(a1.segments + 1, stats(a).segments, "... which gets its own segment");
	vmmx_alloc_free(a, q, NULL);

	/* speed of a cached pair, and of a mixed pattern */
	p = xmalloc(a, 4096, NULL);
	vmmx_alloc_free(a, p, NULL);
	t0 = now_ns();
	for (int i = 0; i < n; i++) {
		vmmx_alloc_malloc(a, 4096, NULL, &p);
		vmmx_alloc_free(a, p, NULL);
	}
	t1 = now_ns();
	diag("cached alloc+free pair (4 KiB): %.0f ns", (t1 - t0) / n);
	{
		static const size_t mix[] = { 512,      8192,     65536, 1 << 20,
					      3 << 20,  12 << 20, 256,   40000 };
		void *live[8];

		for (int k = 0; k < 8; k++)
			live[k] = xmalloc(a, mix[k], NULL);
		for (int k = 0; k < 8; k++)
			vmmx_alloc_free(a, live[k], NULL);
		t0 = now_ns();
		for (int i = 0; i < n / 8; i++) {
			for (int k = 0; k < 8; k++)
				vmmx_alloc_malloc(a, mix[(k + i) % 8], NULL, &live[k]);
			for (int k = 7; k >= 0; k--)
				vmmx_alloc_free(a, live[k], NULL);
		}
		t1 = now_ns();
		diag("mixed sizes 256 B - 12 MiB, 8 live: %.0f ns per alloc+free", (t1 - t0) / n);
	}
	ok(1, "timings printed");
}

static void test_streams(struct vmmx_ctx *ctx, struct vmmx_alloc *a)
{
	struct vmmx_stream *s1, *s2;
	void *h1, *h2, *p1, *p2, *p3, *p4, *p5;
	struct vmm *v = vmmx__ctx_vmm(ctx);
	struct vmmx_alloc_stats st;

	if (!test_on_sim()) {
		skip("stream holds are a sim hook");
		return;
	}
	if (vmmx_stream_create(ctx, &s1) || vmmx_stream_create(ctx, &s2))
		bail("vmmx_stream_create: %s", vmmx_last_error());
	h1 = vmmx_stream_handle(s1);
	h2 = vmmx_stream_handle(s2);
	vmmx_alloc_empty_cache(a);

	/* S1's work stays pending: what S1 frees must not go to S2 */
	vmm_sim_stream_hold(v, (vmm_stream_t)(uintptr_t)h1, true);
	p1 = xmalloc(a, 64 * MiB, h1);
	vmmx_alloc_free(a, p1, h1);
	st = stats(a);
	p2 = xmalloc(a, 64 * MiB, h2);
	ok(p2 != p1, "a block freed on S1 is not handed to S2 while S1's work is pending");
	ok(stats(a).stream_waits > st.stream_waits, "vmmx_alloc_stats: counted as a stream wait");
	p3 = xmalloc(a, 64 * MiB, h1);
	ok(p3 == p1, "... but S1 itself reuses it at once");
	vmmx_alloc_free(a, p3, h1);
	p4 = xmalloc(a, 64 * MiB, h2);
	ok(p4 != p1, "still not S2's while S1 is held");
	vmmx_alloc_free(a, p4, h2);
	/* S1's work completes: the idle segment may move to S2 */
	vmm_sim_stream_hold(v, (vmm_stream_t)(uintptr_t)h1, false);
	st = stats(a);
	p4 = xmalloc(a, 64 * MiB, h2); /* S2's own cached one */
	p5 = xmalloc(a, 64 * MiB, h2);
	ok(p5 == p1, "once S1's event completed, its idle segment serves S2");
	is_uint(st.stream_reuses + 1, stats(a).stream_reuses, "vmmx_alloc_stats: stream_reuses");
	vmmx_alloc_free(a, p2, h2);
	vmmx_alloc_free(a, p4, h2);
	vmmx_alloc_free(a, p5, h2);

	/* freed on another stream than its own: pending until that stream's event */
	vmm_sim_stream_hold(v, (vmm_stream_t)(uintptr_t)h2, true);
	p1 = xmalloc(a, 4096, h1);
	vmmx_alloc_free(a, p1, h2);
	is_uint(1, stats(a).cross_stream_frees, "vmmx_alloc_stats: a free on another stream");
	p2 = xmalloc(a, 4096, h1);
	ok(p2 != p1, "a block freed on S2 waits for S2's event before S1 reuses it");
	vmmx_alloc_free(a, p2, h1);
	vmm_sim_stream_hold(v, (vmm_stream_t)(uintptr_t)h2, false);
	p3 = xmalloc(a, 4096, h1);
	p4 = xmalloc(a, 4096, h1);
	ok(p3 == p1 || p4 == p1, "after S2's event the block is S1's again");
	vmmx_alloc_free(a, p3, h1);
	vmmx_alloc_free(a, p4, h1);

	/* empty_cache completes pending frees and gives every idle segment back */
	vmm_sim_stream_hold(v, (vmm_stream_t)(uintptr_t)h2, true);
	p1 = xmalloc(a, 4096, h1);
	vmmx_alloc_free(a, p1, h2);
	is_err(0, vmmx_alloc_empty_cache(a), "vmmx_alloc_empty_cache with a pending free");
	st = stats(a);
	is_uint(0, st.segments, "vmmx_alloc_empty_cache: the pending block's segment went too");
	vmm_sim_stream_hold(v, (vmm_stream_t)(uintptr_t)h2, false);
	vmmx_stream_destroy(s1);
	vmmx_stream_destroy(s2);
}

static struct vmmx_residency residency_of(struct vmmx_ctx *ctx, const void *p, size_t len)
{
	struct vmmx_residency r = { 0, 0 };
	struct vmmx_chunk_info ci;

	if (vmmx_lookup(ctx, p, &ci) ||
	    vmmx_buf_residency(ci.buf, (size_t)((const char *)p - (const char *)vmmx_buf_ptr(ci.buf)),
			       len, &r))
		bail("residency of %p: %s", p, vmmx_last_error());
	return r;
}

static void test_fallback(void)
{
	const char *vars[] = { "VMMX_DEVICE_LIMIT=96MiB", "VMMX_HOST_LIMIT=128MiB",
			       "VMMX_CACHE_LIMIT=0", NULL };
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmm_counts c0 = counts(ctx);
	struct vmmx_alloc_stats st;
	struct vmmx_alloc *a;
	void *p[8];
	int err, n = 0;

	if (vmmx_alloc_create(ctx, "device-first", &a))
		bail("vmmx_alloc_create: %s", vmmx_last_error());
	p[0] = xmalloc(a, 40 * MiB, NULL);
	p[1] = xmalloc(a, 40 * MiB, NULL);
	p[2] = xmalloc(a, 40 * MiB, NULL);
	st = stats(a);
	ok(st.fallback_segments >= 1, "device-first: the segment past the device limit falls back");
	/* 96 MiB on the device: the third segment would be 16 MiB there, 24 MiB in host memory */
	for (int i = 0; i < 3; i++) {
		struct vmmx_residency r = residency_of(ctx, p[i], 40 * MiB);

		ok(i < 2 ? r.device == 40 * MiB && !r.host : !r.device && r.host == 40 * MiB,
		   "segment %d lies in one location (device %zu, host %zu bytes)", i, r.device,
		   r.host);
	}
	ok(st.host_reserved >= 24 * MiB, "vmmx_alloc_stats: host_reserved shows the spill");
	ok(st.host_allocated > 0 && st.device_allocated > 0,
	   "vmmx_alloc_stats: allocated bytes on both sides");
	/* an idle device segment of the wrong size: given back so a new one fits on the device */
	vmmx_alloc_free(a, p[0], NULL);
	p[0] = xmalloc(a, 20 * MiB + 1, NULL);
	st = stats(a);
	ok(st.reclaims >= 1, "a new segment that would not fit on the device reclaims idle ones");
	ok(st.fallback_segments == 1, "... so it is placed on the device, no new fallback");
	/* fill to the host limit: out of memory, with the reason */
	for (n = 3; n < 8; n++) {
		err = vmmx_alloc_malloc(a, 40 * MiB, NULL, &p[n]);
		if (err)
			break;
	}
	is_err(-VMMX_ENOMEM, err, "vmmx_alloc_malloc past both limits is out of memory");
	like(vmmx_last_error(), "limit", "vmmx_alloc_malloc: the message gives the limit");
	ok(stats(a).failures >= 1, "vmmx_alloc_stats: failures counted");
	for (int i = 0; i < n; i++)
		vmmx_alloc_free(a, p[i], NULL);
	vmmx_alloc_destroy(a);
	vmmx_ctx_trim(ctx, 0);
	{
		struct vmm_counts c = counts(ctx);

		is_int(c0.reservations, c.reservations, "after destroy: no reservation left");
		is_int(c0.handles, c.handles, "after destroy and trim: no handle left");
		is_int(c0.mapped_bytes, c.mapped_bytes, "after destroy: nothing mapped");
		is_int(c0.events, c.events, "after destroy: no event left");
	}
	vmmx_ctx_destroy(ctx);
}

/* Every driver op the allocator reaches fails once; nothing leaks, the next call works. */
static void test_faults(void)
{
	static const int ops[] = { VMMX_OP_RESERVE, VMMX_OP_CREATE, VMMX_OP_MAP,
				   VMMX_OP_SET_ACCESS };
	struct vmmx_ctx *ctx = test_ctx(NULL);
	struct vmm *v = vmmx__ctx_vmm(ctx);
	struct vmmx_alloc *a;
	struct vmm_counts c0;
	void *p, *q;
	int err;

	if (vmmx_alloc_create(ctx, NULL, &a))
		bail("vmmx_alloc_create: %s", vmmx_last_error());
	c0 = counts(ctx);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct vmmx_alloc_stats st0 = stats(a), st;
		struct vmm_counts c;

		vmm_fault_arm(v, (enum vmmx_op)ops[i], 1, 0);
		p = (void *)1;
		err = vmmx_alloc_malloc(a, 12 * MiB, NULL, &p);
		vmm_fault_disarm_all(v);
		is_err(-VMMX_EFAULTINJ, err, "vmmx_alloc_malloc fails when %s fails",
		       vmm_op_name((enum vmmx_op)ops[i]));
		ok(p == (void *)1, "... and leaves its output alone");
		st = stats(a);
		ok(st.segments == st0.segments && st.reserved_bytes == st0.reserved_bytes &&
			   st.failures == st0.failures + 1,
		   "... with no segment made and the failure counted");
		vmmx_ctx_trim(ctx, 0);
		c = counts(ctx);
		ok(c.reservations == c0.reservations && c.handles == c0.handles &&
			   c.mapped_bytes == c0.mapped_bytes,
		   "... and no reservation, handle or mapping leaked");
		err = vmmx_alloc_malloc(a, 12 * MiB, NULL, &p);
		is_err(0, err, "the next allocation works");
		if (!err)
			vmmx_alloc_free(a, p, NULL);
		vmmx_alloc_empty_cache(a);
		vmmx_ctx_trim(ctx, 0);
	}
	/* the event of a cross-stream free fails: the block waits for empty_cache */
	if (test_on_sim()) {
		struct vmmx_stream *s;

		if (vmmx_stream_create(ctx, &s))
			bail("vmmx_stream_create: %s", vmmx_last_error());
		p = xmalloc(a, 4096, NULL);
		vmm_fault_arm(v, (enum vmmx_op)VMM_OP_EVENT, 1, 0);
		err = vmmx_alloc_free(a, p, vmmx_stream_handle(s));
		vmm_fault_disarm_all(v);
		is_err(-VMMX_EFAULTINJ, err,
		       "vmmx_alloc_free on another stream fails when the event record fails");
		q = xmalloc(a, 4096, NULL);
		ok(q != p, "... and the block is not reused");
		vmmx_alloc_free(a, q, NULL);
		is_err(0, vmmx_alloc_empty_cache(a), "vmmx_alloc_empty_cache then completes it");
		is_uint(0, stats(a).segments, "... and gives its segment back");
		vmm_fault_arm(v, VMMX_OP_SYNC, 1, 0);
		p = xmalloc(a, 4096, NULL);
		vmmx_alloc_free(a, p, NULL);
		is_err(-VMMX_EFAULTINJ, vmmx_alloc_empty_cache(a),
		       "vmmx_alloc_empty_cache fails when the device sync fails");
		is_uint(1, stats(a).segments, "... and releases nothing");
		vmm_fault_disarm_all(v);
		vmmx_stream_destroy(s);
	} else {
		skip("event fault check runs on sim");
		skip("event fault check runs on sim");
		skip("event fault check runs on sim");
		skip("event fault check runs on sim");
		skip("event fault check runs on sim");
		skip("event fault check runs on sim");
	}
	vmmx_alloc_destroy(a);
	vmmx_ctx_trim(ctx, 0);
	{
		struct vmm_counts c = counts(ctx);

		ok(c.reservations == c0.reservations && c.handles == c0.handles &&
			   c.mapped_bytes == c0.mapped_bytes && c.events == c0.events,
		   "fault run: every counter back after destroy");
	}
	vmmx_ctx_destroy(ctx);
}

#define THREADS 8
#define OPS 1500

struct worker {
	pthread_t th;
	struct vmmx_ctx *ctx;
	struct vmmx_alloc *a;
	void *stream;
	unsigned seed;
	int id;
	unsigned long bad, fails;
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	void *live[16] = { 0 };
	size_t sz[16] = { 0 };
	uint32_t seed[16] = { 0 };

	for (int i = 0; i < OPS; i++) {
		int k = rand_r(&w->seed) % 16;

		if (live[k]) {
			if (test_check(w->ctx, live[k], 0, sz[k], seed[k]) != SIZE_MAX)
				w->bad++;
			if (vmmx_alloc_free(w->a, live[k], w->stream))
				w->fails++;
			live[k] = NULL;
			continue;
		}
		switch (rand_r(&w->seed) % 4) {
		case 0:
			sz[k] = 1 + rand_r(&w->seed) % 4096;
			break;
		case 1:
			sz[k] = 1 + rand_r(&w->seed) % (1 << 20);
			break;
		case 2:
			sz[k] = (1 << 20) + rand_r(&w->seed) % (9 << 20);
			break;
		default:
			sz[k] = (10 << 20) + rand_r(&w->seed) % (6 << 20);
			break;
		}
		/* test_check reads the whole block: keep big ones short */
		if (sz[k] > 64 * 1024 && rand_r(&w->seed) % 2)
			sz[k] = 64 * 1024;
		if (vmmx_alloc_malloc(w->a, sz[k], w->stream, &live[k])) {
			w->fails++;
			live[k] = NULL;
			continue;
		}
		seed[k] = (uint32_t)(w->id * 100000 + i);
		if (test_fill(w->ctx, live[k], 0, sz[k], seed[k]))
			w->fails++;
	}
	for (int k = 0; k < 16; k++) {
		if (!live[k])
			continue;
		if (test_check(w->ctx, live[k], 0, sz[k], seed[k]) != SIZE_MAX)
			w->bad++;
		if (vmmx_alloc_free(w->a, live[k], w->stream))
			w->fails++;
	}
	return NULL;
}

static void test_threads(void)
{
	const char *vars[] = { "VMMX_DEVICE_LIMIT=512MiB", NULL };
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_stream *s[2];
	struct worker w[THREADS];
	struct vmmx_alloc *a;
	struct vmmx_alloc_stats st;
	unsigned long bad = 0, fails = 0;

	if (vmmx_alloc_create(ctx, NULL, &a) || vmmx_stream_create(ctx, &s[0]) ||
	    vmmx_stream_create(ctx, &s[1]))
		bail("setup: %s", vmmx_last_error());
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .ctx = ctx, .a = a, .seed = 1234u + (unsigned)i, .id = i };
		/* two threads per stream, two on the default stream */
		w[i].stream = i < 2 ? NULL : vmmx_stream_handle(s[i % 2]);
		pthread_create(&w[i].th, NULL, worker, &w[i]);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(w[i].th, NULL);
		bad += w[i].bad;
		fails += w[i].fails;
	}
	is_uint(0, fails, "8 threads: every allocation and free succeeded");
	is_uint(0, bad, "8 threads: every block held its own pattern until freed");
	st = stats(a);
	is_uint(0, st.active_blocks, "8 threads: no block left live");
	is_uint(st.allocs, st.frees, "8 threads: as many frees as allocations");
	diag("8 threads: %llu allocations, %llu cache hits, %llu segments made",
	     (unsigned long long)st.allocs, (unsigned long long)st.cache_hits,
	     (unsigned long long)st.segment_allocs);
	vmmx_alloc_destroy(a);
	vmmx_stream_destroy(s[0]);
	vmmx_stream_destroy(s[1]);
	vmmx_ctx_destroy(ctx);
}

static void test_global(void)
{
	const char *vars[] = { "VMMX_DEVICE_LIMIT=256MiB", NULL };
	const char *late[] = { "VMMX_DEVICE_LIMIT=1GiB", NULL };
	struct vmmx_alloc *a, *b;
	struct vmmx_alloc_stats st = { .size = sizeof(st) };
	struct vmmx_ctx_info info = { .size = sizeof(info) };
	void *p, *q;
	int err;

	is_err(0, vmmx_alloc_global_config(vars), "vmmx_alloc_global_config before first use");
	err = vmmx_alloc_global(0, &a);
	is_err(0, err, "vmmx_alloc_global(0) makes the process-wide allocator");
	if (err)
		bail("vmmx_alloc_global: %s", vmmx_last_error());
	is_err(0, vmmx_alloc_global(0, &b), "vmmx_alloc_global(0) again");
	ok(a == b, "vmmx_alloc_global: one allocator per device");
	vmmx_ctx_query(vmmx_alloc_ctx(a), &info);
	is_uint(256 * MiB, info.device_limit, "vmmx_alloc_global: its context took the settings");
	is_err(-VMMX_EBUSY, vmmx_alloc_global_config(late),
	       "vmmx_alloc_global_config after first use is refused");
	like(vmmx_last_error(), "exists already", "vmmx_alloc_global_config: message says why");
	p = vmmx_torch_alloc(3000, 0, NULL);
	ok(p != NULL, "vmmx_torch_alloc gives memory");
	ok(vmmx_torch_alloc(0, 0, NULL) == NULL, "vmmx_torch_alloc(0) is NULL");
	q = vmmx_cupy_malloc(NULL, 5000, 0);
	ok(q != NULL && q != p, "vmmx_cupy_malloc gives other memory");
	vmmx_alloc_stats(a, &st);
	is_uint(2, st.active_blocks, "both live in the process-wide allocator of device 0");
	vmmx_torch_free(p, 3000, 0, NULL);
	vmmx_cupy_free(NULL, q, 0);
	vmmx_alloc_stats(a, &st);
	is_uint(0, st.active_blocks, "vmmx_torch_free and vmmx_cupy_free give them back");
	ok(vmmx_torch_alloc(100, 99, NULL) == NULL, "vmmx_torch_alloc on device 99 fails");
}

int main(void)
{
	struct vmmx_ctx *ctx;
	struct vmmx_alloc *a;
	struct vmm_counts c0, c;

	plan_lazy();
	ctx = test_ctx(NULL);
	c0 = counts(ctx);
	test_bad_input(ctx);
	if (vmmx_alloc_create(ctx, NULL, &a))
		bail("vmmx_alloc_create: %s", vmmx_last_error());
	test_sizes(ctx, a);
	test_reuse(ctx, a);
	test_streams(ctx, a);
	vmmx_alloc_destroy(a);
	vmmx_ctx_trim(ctx, 0);
	c = counts(ctx);
	is_int(c0.reservations, c.reservations, "vmmx_alloc_destroy: reservations back to zero");
	is_int(c0.handles, c.handles, "vmmx_alloc_destroy + trim: handles back to zero");
	is_int(c0.mapped_bytes, c.mapped_bytes, "vmmx_alloc_destroy: mapped bytes back to zero");
	is_int(c0.events, c.events, "vmmx_alloc_destroy: events back to zero");
	vmmx_ctx_destroy(ctx);
	test_fallback();
	test_faults();
	test_threads();
	test_global();
	return tap_done();
}
