// SPDX-License-Identifier: MIT
/*
 * kept_range_kernel.c - kernels that read a buffer's kept range while the
 * buffer shrinks, and while a policy evicts its chunks, must neither fault
 * nor read wrong data.
 *
 *  1. Shrinks.  A device buffer of two handles (256 + 256 MiB) is filled;
 *     kernels reading [0, 192 MiB) are queued on a stream, and meanwhile the
 *     buffer shrinks to 224 MiB (the first handle is cut, the second lies
 *     past the size) and grows back to 512 MiB, ROUNDS times.  Before, the
 *     shrink replaced the cut handle, unmapping the bytes the kernels read
 *     (an illegal address: the context is lost).
 *  2. Evictions.  Under VMMX_DEVICE_LIMIT=1GiB an lru buffer of 512 MiB in
 *     64 MiB chunks is filled; kernels reading all of it are queued, and
 *     another lru buffer grows to 768 MiB: lru evicts chunks of the first.
 *     A move the library starts waits for the device first, so the queued
 *     kernels finish before any chunk moves.
 *
 * Each part then waits for the stream (no fault) and reads the mismatch
 * counter (zero), and checks the data once more with a kernel.
 *
 * Runs only with VMMX_BACKEND=cuda, GPU kernels built (nvcc), and a device.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/cuda.h"
#include "gpu/pattern.h"
#include "tests/gpu/check.h"

#define MiB ((size_t)1 << 20)
#define ROUNDS 8
#define QUEUED 64 /* kernels queued per round: each reads 192 MiB or 512 MiB */
#define SEED 0x6b657074u

#ifdef VMMX_HAVE_KERNELS

static struct vmmx_ctx *mkctx(int device, const char *const *vars)
{
	struct vmmx_config cfg;
	struct vmmx_ctx *ctx = NULL;

	vmmx_config_init(&cfg);
	cfg.backend = "cuda";
	cfg.device = device;
	cfg.vars = vars;
	if (vmmx_ctx_create(&cfg, &ctx))
		bail("vmmx_ctx_create: %s", vmmx_last_error());
	return ctx;
}

/* Queue @count check_u32 kernels over @n elements of @p on @stream. */
static int queue_checks(unsigned int *p, unsigned long long n, unsigned long long *errs_dev,
			void *stream, int count)
{
	unsigned long long first = 0;
	unsigned int seed = SEED;
	void *args[] = { &p, &n, &first, &seed, &errs_dev };

	for (int i = 0; i < count; i++)
		if (tcuda_launch_on("check_u32", GRID, BLOCK, args, stream))
			return -1;
	return 0;
}

static void shrinks(int device)
{
	static const char *const vars[] = { "VMMX_CHUNK_SIZE=2MiB", NULL };
	struct vmmx_ctx *ctx = mkctx(device, vars);
	struct vmmx_buf *buf = NULL, *errs = NULL;
	struct vmmx_stream *s = NULL;
	unsigned long long n = 512 * MiB / 4, kept = 192 * MiB / 4, errors = ~0ull, *errs_dev;
	unsigned int *p, seed = SEED;
	void *fill_args[] = { &p, &n, &seed };
	int err = 0, r;

	if (vmmx_buf_create(ctx, 2 * MiB, "device", &errs) || vmmx_buf_resize(errs, 2 * MiB) ||
	    vmmx_buf_create(ctx, 512 * MiB, "device", &buf) || vmmx_buf_resize(buf, 256 * MiB) ||
	    vmmx_buf_resize(buf, 512 * MiB) || vmmx_stream_create(ctx, &s))
		bail("setup: %s", vmmx_last_error());
	p = vmmx_buf_ptr(buf);
	errs_dev = vmmx_buf_ptr(errs);
	is_int(0, tcuda_launch("fill_u32", GRID, BLOCK, fill_args), "shrinks: fill_u32 over 512 MiB");
	vmmx_memset(ctx, errs_dev, 0, sizeof(*errs_dev));
	for (r = 0; r < ROUNDS && !err; r++) {
		if (queue_checks(p, kept, errs_dev, vmmx_stream_handle(s), QUEUED))
			bail("launch: %s", tcuda_why());
		err = vmmx_buf_resize(buf, 224 * MiB);
		if (!err)
			err = vmmx_buf_resize(buf, 512 * MiB);
	}
	is_err(0, err, "shrinks: %d shrinks to 224 MiB and grows back while kernels read [0, 192 MiB)",
	       r);
	is_err(0, vmmx_stream_sync(s), "shrinks: the queued kernels finished without a fault");
	is_err(0, vmmx_memcpy(ctx, &errors, errs_dev, sizeof(errors)), "shrinks: read the counter");
	is_uint(0, errors, "shrinks: every element they read was right");
	is_err(0, vmmx_buf_resize(buf, 224 * MiB), "shrinks: shrink once more");
	is_err(0, vmmx_buf_trim(buf), "shrinks: vmmx_buf_trim with nothing queued");
	is_err(0, run_counted(ctx, errs_dev, "check_u32",
			      (void *[]){ &p, &kept, &(unsigned long long){ 0 }, &seed, &errs_dev },
			      &errors),
	       "shrinks: check_u32 after the trim");
	is_uint(0, errors, "shrinks: the kept range is intact after the trim");
	vmmx_stream_destroy(s);
	vmmx_buf_destroy(buf);
	vmmx_buf_destroy(errs);
	vmmx_ctx_destroy(ctx);
}

static void evictions(int device)
{
	static const char *const vars[] = { "VMMX_DEVICE_LIMIT=1GiB", "VMMX_HEADROOM=0",
					    "VMMX_CHUNK_SIZE=2MiB", NULL };
	struct vmmx_ctx *ctx = mkctx(device, vars);
	struct vmmx_buf *a = NULL, *b = NULL, *errs = NULL;
	struct vmmx_stream *s = NULL;
	struct vmmx_stats st0 = { .size = sizeof(st0) }, st1 = { .size = sizeof(st1) };
	struct vmmx_residency res = { 0, 0 };
	unsigned long long n = 512 * MiB / 4, errors = ~0ull, *errs_dev;
	unsigned int *p, seed = SEED;
	void *fill_args[] = { &p, &n, &seed };
	int err;

	if (vmmx_buf_create(ctx, 2 * MiB, "device", &errs) || vmmx_buf_resize(errs, 2 * MiB) ||
	    vmmx_buf_create(ctx, 512 * MiB, "lru:chunk=64MiB", &a) ||
	    vmmx_buf_resize(a, 512 * MiB) ||
	    vmmx_buf_create(ctx, 768 * MiB, "lru:chunk=64MiB", &b) || vmmx_stream_create(ctx, &s))
		bail("setup: %s", vmmx_last_error());
	p = vmmx_buf_ptr(a);
	errs_dev = vmmx_buf_ptr(errs);
	is_int(0, tcuda_launch("fill_u32", GRID, BLOCK, fill_args),
	       "evictions: fill_u32 over 512 MiB of lru chunks");
	vmmx_memset(ctx, errs_dev, 0, sizeof(*errs_dev));
	vmmx_stats_get(ctx, &st0);
	if (queue_checks(p, n, errs_dev, vmmx_stream_handle(s), 4 * QUEUED))
		bail("launch: %s", tcuda_why());
	err = vmmx_buf_resize(b, 768 * MiB);
	vmmx_stats_get(ctx, &st1);
	is_err(0, err, "evictions: another lru buffer grows to 768 MiB while kernels read the first");
	if (vmmx_buf_residency(a, 0, 512 * MiB, &res))
		res.host = 0;
	ok(st1.evictions > st0.evictions && res.host,
	   "evictions: lru evicted %llu chunks of the first buffer (%zu MiB now in host memory)",
	   (unsigned long long)(st1.evictions - st0.evictions), res.host / MiB);
	is_err(0, vmmx_stream_sync(s), "evictions: the queued kernels finished without a fault");
	is_err(0, vmmx_memcpy(ctx, &errors, errs_dev, sizeof(errors)), "evictions: read the counter");
	is_uint(0, errors, "evictions: every element they read was right");
	is_err(0, run_counted(ctx, errs_dev, "check_u32",
			      (void *[]){ &p, &n, &(unsigned long long){ 0 }, &seed, &errs_dev },
			      &errors),
	       "evictions: check_u32 over the first buffer, partly in host memory");
	is_uint(0, errors, "evictions: its data survived the evictions");
	vmmx_stream_destroy(s);
	vmmx_buf_destroy(b);
	vmmx_buf_destroy(a);
	vmmx_buf_destroy(errs);
	vmmx_ctx_destroy(ctx);
}
#endif

int main(void)
{
#ifndef VMMX_HAVE_KERNELS
	skip_without_kernels();
#else
	const char *be = getenv("VMMX_BACKEND"), *dev_env = getenv("VMMX_DEVICE");
	int device = dev_env ? atoi(dev_env) : 0;

	if (!be || strcmp(be, "cuda"))
		skip_all("needs VMMX_BACKEND=cuda (it is %s)", be ? be : "unset");
	if (tcuda_open(device))
		skip_all("no usable CUDA device %d: %s", device, tcuda_why());
	plan(1 + 9 + 8);
	if (!is_int(0, tcuda_load_kernels(), "tcuda_load_kernels: the kernels"))
		bail("cannot load the test kernels: %s", tcuda_why());
	shrinks(device);
	evictions(device);
	tcuda_close();
	return tap_done();
#endif
}
