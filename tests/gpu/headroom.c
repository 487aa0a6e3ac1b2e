// SPDX-License-Identifier: MIT
/*
 * headroom.c - with default settings a device-first buffer that outgrows the
 * GPU leaves room for the CUDA runtime and libraries: after the spill,
 * cuMemAlloc of a library's workspace (as cuBLAS, cuDNN or NCCL make) and a
 * module loaded then (as lazy loading does at a library's first launch)
 * still succeed, and a kernel runs on that memory.  With VMMX_HEADROOM=0 the
 * same spill leaves almost nothing, which is why the default exists.
 *
 * Runs only with VMMX_BACKEND=cuda, GPU kernels built (nvcc), a device, and
 * VMMX_TEST_FILL_GPU=1: it fills the whole GPU, so nothing else may use it
 * meanwhile (not even the rest of a parallel `make check`).  Run it alone:
 *   VMMX_BACKEND=cuda VMMX_TEST_FILL_GPU=1 tests/gpu/headroom
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/cuda.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
/* A library's allocation after the spill: cuBLAS on Hopper asks 32 MiB of
 * workspace per handle and stream; 256 MiB covers several, and a module. */
#define WORKSPACE (256 * MiB)

#ifdef VMMX_HAVE_KERNELS
static struct vmmx_ctx *mkctx(const char *headroom)
{
	const char *vars[2] = { headroom, NULL };
	struct vmmx_config cfg;
	struct vmmx_ctx *ctx;

	vmmx_config_init(&cfg);
	cfg.backend = "cuda";
	cfg.vars = headroom ? vars : NULL;
	cfg.flags = VMMX_CONFIG_NO_ENV;
	if (vmmx_ctx_create(&cfg, &ctx))
		bail("vmmx_ctx_create: %s", vmmx_last_error());
	return ctx;
}

/* Spill a device-first buffer 1 GiB past the free memory; returns the free
 * memory the driver reports afterwards. */
static size_t spill(struct vmmx_ctx *ctx, struct vmmx_buf **buf_p, const char *what)
{
	struct vmmx_residency r;
	size_t fr = 0, tot = 0, want;

	tcuda_mem_info(&fr, &tot);
	want = (fr & ~(2 * MiB - 1)) + GiB;
	is_err(0, vmmx_buf_create(ctx, want, "device-first", buf_p), "%s: vmmx_buf_create", what);
	is_err(0, vmmx_buf_resize(*buf_p, want), "%s: vmmx_buf_resize to %zu MiB, 1 GiB past the free memory",
	       what, want / MiB);
	vmmx_buf_residency(*buf_p, 0, want, &r);
	ok(r.host >= GiB, "%s: the buffer spilled (%zu MiB on host)", what, r.host / MiB);
	tcuda_mem_info(&fr, &tot);
	diag("%s: %zu MiB of %zu MiB free after the spill", what, fr / MiB, tot / MiB);
	return fr;
}
#endif

int main(void)
{
	const char *be = getenv("VMMX_BACKEND");

	if (!be || strcmp(be, "cuda"))
		skip_all("needs VMMX_BACKEND=cuda (it is %s)", be ? be : "unset");
	if (!getenv("VMMX_TEST_FILL_GPU") || strcmp(getenv("VMMX_TEST_FILL_GPU"), "1"))
		skip_all("fills the whole GPU: run it alone with VMMX_TEST_FILL_GPU=1");
#ifndef VMMX_HAVE_KERNELS
	skip_all("GPU kernels not built: configure found no nvcc");
#else
	struct vmmx_ctx *ctx;
	struct vmmx_ctx_info ci = { .size = sizeof(ci) };
	struct vmmx_buf *buf = NULL;
	unsigned long long n = WORKSPACE / sizeof(unsigned int);
	unsigned int seed = 0x4ead5eed;
	void *ws = NULL, *args[3];
	size_t fr;

	if (tcuda_open(0))
		skip_all("no usable CUDA device: %s", tcuda_why());
	plan(12);

	ctx = mkctx(NULL);
	vmmx_ctx_query(ctx, &ci);
	is_uint(GiB, ci.device_headroom, "vmmx_ctx_query: the default headroom is 1 GiB on a large GPU");
	fr = spill(ctx, &buf, "default settings");
	ok(fr >= GiB - 64 * MiB, "default settings: about the 1 GiB headroom is left free (%zu MiB)",
	   fr / MiB);
	/* What a library does at its first call: load its kernels, allocate a workspace. */
	is_int(0, tcuda_load_kernels(), "after the spill, a module loads");
	is_int(0, tcuda_mem_alloc(WORKSPACE, &ws), "after the spill, cuMemAlloc of 256 MiB succeeds (%s)",
	       tcuda_why());
	args[0] = &ws;
	args[1] = &n;
	args[2] = &seed;
	is_int(0, ws ? tcuda_launch("fill_u32", 1024, 256, args) : -1,
	       "a kernel writes the workspace");
	if (ws)
		tcuda_mem_free(ws);
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);

	ctx = mkctx("VMMX_HEADROOM=0");
	fr = spill(ctx, &buf, "VMMX_HEADROOM=0");
	ws = NULL;
	ok(tcuda_mem_alloc(WORKSPACE, &ws) != 0,
	   "VMMX_HEADROOM=0: the same cuMemAlloc fails (%zu MiB were free): %s", fr / MiB,
	   tcuda_why());
	if (ws)
		tcuda_mem_free(ws);
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	tcuda_close();
	return tap_done();
#endif
}
