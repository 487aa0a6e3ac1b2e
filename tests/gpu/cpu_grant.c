// SPDX-License-Identifier: MIT
/*
 * cpu_grant.c - host chunks granted to the GPU only, as vmmx-run
 * --placement launch sends segments back (VMMX_HOST_CPU_ACCESS=placed), and
 * VMMX_ADVISE_CPU.  A 64 MiB device buffer written by a kernel is migrated
 * to host memory, granted to the GPU only: a kernel still reads and
 * increments it there; the driver's memset sets it (the memsets the
 * interposer passes on unchanged); VMMX_ADVISE_CPU then grants the CPU, with
 * the kernel's work still queued; after it the driver copies the chunk to
 * and from pageable memory and the CPU reads it through the buffer's
 * address.  The copy to pageable memory before the grant is not tried: it
 * kills the process in the driver (docs/DRIVER.md).
 *
 * Runs only with VMMX_BACKEND=cuda, GPU kernels built (nvcc), and a device.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/cuda.h"
#include "gpu/pattern.h"
#include "tests/gpu/check.h"

#define MiB ((size_t)1 << 20)
#define SIZE (64 * MiB)
#define SEED 0xc0ffee11u

#ifdef VMMX_HAVE_KERNELS
typedef int (*memset_fn)(unsigned long long, unsigned char, size_t);
typedef int (*dtoh_fn)(void *, unsigned long long, size_t);
typedef int (*htod_fn)(unsigned long long, const void *, size_t);

/* Whether every byte of p[0, n) is @v. */
static int all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}
#endif

int main(void)
{
#ifndef VMMX_HAVE_KERNELS
	skip_without_kernels();
#else
	static const char *const vars[] = { "VMMX_HOST_CPU_ACCESS=placed", NULL };
	const char *be = getenv("VMMX_BACKEND");
	struct vmmx_config cfg;
	struct vmmx_ctx *ctx;
	struct vmmx_buf *buf = NULL, *errs = NULL;
	struct vmmx_loc host = { VMMX_LOC_HOST, 0 }, dev = { VMMX_LOC_DEVICE, 0 };
	unsigned long long n = SIZE / sizeof(unsigned int), errors = ~0ull, *errs_dev;
	unsigned int seed = SEED, *p;
	unsigned char *page = malloc(MiB);
	void *cuda, *args[4];
	memset_fn memset8;
	dtoh_fn dtoh;
	htod_fn htod;

	if (!be || strcmp(be, "cuda"))
		skip_all("needs VMMX_BACKEND=cuda (it is %s)", be ? be : "unset");
	if (tcuda_open(0) || tcuda_load_kernels())
		skip_all("no usable CUDA device: %s", tcuda_why());
	cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	memset8 = cuda ? (memset_fn)dlsym(cuda, "cuMemsetD8_v2") : NULL;
	dtoh = cuda ? (dtoh_fn)dlsym(cuda, "cuMemcpyDtoH_v2") : NULL;
	htod = cuda ? (htod_fn)dlsym(cuda, "cuMemcpyHtoD_v2") : NULL;
	if (!memset8 || !dtoh || !htod || !page)
		skip_all("libcuda.so.1's copies and memsets not found");
	plan(16);

	vmmx_config_init(&cfg);
	cfg.backend = "cuda";
	cfg.vars = vars;
	cfg.flags = VMMX_CONFIG_NO_ENV;
	if (vmmx_ctx_create(&cfg, &ctx))
		bail("vmmx_ctx_create: %s", vmmx_last_error());
	if (vmmx_buf_create(ctx, SIZE, "device", &buf) || vmmx_buf_resize(buf, SIZE) ||
	    vmmx_buf_create(ctx, 2 * MiB, "device", &errs) || vmmx_buf_resize(errs, 2 * MiB))
		bail("buffers: %s", vmmx_last_error());
	p = vmmx_buf_ptr(buf);
	errs_dev = vmmx_buf_ptr(errs);
	args[0] = &p;
	args[1] = &n;
	args[2] = &seed;
	args[3] = &errs_dev;
	is_int(0, tcuda_launch("fill_u32", GRID, BLOCK, args), "fill_u32 over 64 MiB of device memory");
	is_err(0, vmmx_buf_migrate(buf, 0, SIZE, host, NULL), "migrated to host memory");
	ok(vmmx_memcpy(ctx, page, p, 16) == -VMMX_EFAULT,
	   "... granted to the GPU only: vmmx_memcpy to pageable memory refuses it");
	is_err(0, run_counted(ctx, errs_dev, "check_inc_u32", args, &errors),
	       "a kernel reads and increments it there");
	is_uint(0, errors, "... every element as fill_u32 wrote it");
	is_int(0, memset8((unsigned long long)(uintptr_t)p, 0x5a, MiB),
	       "cuMemsetD8 sets its first MiB, granted to the GPU only");
	/* A kernel queued, then the grant: nothing it uses is unmapped. */
	is_int(0, tcuda_launch_on("fill_u32", GRID, BLOCK, args, NULL), "a kernel queued over it");
	is_err(0, vmmx_buf_advise(buf, 0, SIZE, VMMX_ADVISE_CPU), "VMMX_ADVISE_CPU with it queued");
	is_err(0, vmmx_sync(ctx), "the kernel completes");
	is_int(0, dtoh(page, (unsigned long long)(uintptr_t)p, MiB),
	       "cuMemcpyDtoH of it to pageable memory, after the grant");
	ok(count_bad((const unsigned int *)page, 0, MiB / 4, SEED, 0, "the copy") == 0,
	   "... the data the queued kernel wrote");
	memset(page, 0xa5, MiB);
	is_int(0, htod((unsigned long long)(uintptr_t)p, page, MiB),
	       "cuMemcpyHtoD from pageable memory into it");
	ok(all_bytes((const unsigned char *)p, MiB, 0xa5), "the CPU reads it through the buffer's address");
	is_err(0, vmmx_buf_migrate(buf, 0, SIZE, dev, NULL), "back to the device");
	is_err(0, vmmx_memcpy(ctx, page, p, MiB), "... and read back");
	ok(all_bytes(page, MiB, 0xa5), "... the bytes written from pageable memory");
	vmmx_buf_destroy(errs);
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	free(page);
	tcuda_close();
	return tap_done();
#endif
}
