// SPDX-License-Identifier: MIT
/*
 * cuda.c - the tests' minimal CUDA driver client (see cuda.h): the device's
 * primary context, one module, synchronous launches.
 *
 * The driver comes through the one door to it, vmm/cudaload.c, which
 * resolves the versioned names cuda.h maps the API names to.  State is
 * process-wide and unlocked: the TAP library is used from the main thread
 * only.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/cuda.h"

static char why[256];

const char *tcuda_why(void)
{
	return why;
}

#ifdef VMMX_HAVE_CUDA

#include <stdbool.h>
#include <stddef.h>

#include <cuda.h>

#include "vmm/cudaload.h"

static struct {
	const struct vmm_cuda_api *api; /* NULL until tcuda_open() loads the driver */
	CUdevice dev;
	CUcontext ctx;                  /* retained primary context, NULL when closed */
	CUmodule mod;                   /* loaded module, NULL when none */
} T;

static const char *cu_name(CUresult r)
{
	static char buf[32];

	return vmm_cuda_error_name(r, buf, sizeof(buf));
}

static int open_fail(int err, const char *what, CUresult r)
{
	snprintf(why, sizeof(why), "%s: %s", what, cu_name(r));
	tcuda_close();
	return err;
}

int tcuda_open(int device)
{
	int count = 0;
	CUresult r;

	tcuda_close();
	why[0] = '\0';
	if (vmm_cuda_load(VMM_CUDA_CORE | VMM_CUDA_LAUNCH, &T.api, why, sizeof(why)))
		return -VMMX_ENODRIVER;
	r = T.api->cuInit(0);
	if (r == CUDA_ERROR_NO_DEVICE)
		return open_fail(-VMMX_ENODEV, "no CUDA device: cuInit", r);
	if (r == CUDA_ERROR_STUB_LIBRARY)
		return open_fail(-VMMX_ENODRIVER, "libcuda.so.1 is the toolkit stub: cuInit", r);
	if (r != CUDA_SUCCESS)
		return open_fail(-VMMX_EDRIVER, "cuInit", r);
	r = T.api->cuDeviceGetCount(&count);
	if (r != CUDA_SUCCESS)
		return open_fail(-VMMX_EDRIVER, "cuDeviceGetCount", r);
	if (device < 0 || device >= count) {
		snprintf(why, sizeof(why), "no CUDA device %d (%d visible)", device, count);
		tcuda_close();
		return -VMMX_ENODEV;
	}
	r = T.api->cuDeviceGet(&T.dev, device);
	if (r != CUDA_SUCCESS)
		return open_fail(-VMMX_ENODEV, "cuDeviceGet", r);
	r = T.api->cuDevicePrimaryCtxRetain(&T.ctx, T.dev);
	if (r != CUDA_SUCCESS) {
		T.ctx = NULL;
		return open_fail(-VMMX_EDRIVER, "cuDevicePrimaryCtxRetain", r);
	}
	r = T.api->cuCtxSetCurrent(T.ctx);
	if (r != CUDA_SUCCESS)
		return open_fail(-VMMX_EDRIVER, "cuCtxSetCurrent", r);
	return 0;
}

static int fail(const char *what, const char *arg, CUresult r)
{
	snprintf(why, sizeof(why), "%s(%s): %s", what, arg, cu_name(r));
	diag("%s", why);
	return (int)r;
}

int tcuda_load(const void *image)
{
	CUmodule mod = NULL;
	CUresult r;

	why[0] = '\0';
	if (!T.ctx) {
		snprintf(why, sizeof(why), "tcuda_load: tcuda_open() did not succeed");
		diag("%s", why);
		return -1;
	}
	r = T.api->cuCtxSetCurrent(T.ctx);
	if (r != CUDA_SUCCESS)
		return fail("cuCtxSetCurrent", "primary context", r);
	r = T.api->cuModuleLoadData(&mod, image);
	if (r != CUDA_SUCCESS)
		return fail("cuModuleLoadData", "test kernels", r);
	if (T.mod)
		(void)T.api->cuModuleUnload(T.mod);
	T.mod = mod;
	return 0;
}

int tcuda_launch_on(const char *kernel, unsigned int grid, unsigned int block, void **args,
		    void *stream)
{
	CUfunction fn;
	CUresult r;

	why[0] = '\0';
	if (!T.mod) {
		snprintf(why, sizeof(why), "tcuda_launch_on(%s): no module loaded", kernel);
		diag("%s", why);
		return -1;
	}
	r = T.api->cuCtxSetCurrent(T.ctx);
	if (r != CUDA_SUCCESS)
		return fail("cuCtxSetCurrent", "primary context", r);
	r = T.api->cuModuleGetFunction(&fn, T.mod, kernel);
	if (r != CUDA_SUCCESS)
		return fail("cuModuleGetFunction", kernel, r);
	/* No synchronisation: the stream's owner waits. */
	r = T.api->cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, (CUstream)stream, args, NULL);
	if (r != CUDA_SUCCESS)
		return fail("cuLaunchKernel", kernel, r);
	return 0;
}

int tcuda_launch(const char *kernel, unsigned int grid, unsigned int block, void **args)
{
	int err = tcuda_launch_on(kernel, grid, block, args, NULL);
	CUresult r;

	if (err)
		return err;
	/* Faults inside the kernel surface here, not at the launch. */
	r = T.api->cuCtxSynchronize();
	return r == CUDA_SUCCESS ? 0 : fail("cuCtxSynchronize after", kernel, r);
}

int tcuda_mem_alloc(size_t size, void **p)
{
	CUdeviceptr d;
	CUresult r;

	why[0] = '\0';
	if (!T.ctx) {
		snprintf(why, sizeof(why), "tcuda_mem_alloc: tcuda_open() did not succeed");
		return -1;
	}
	r = T.api->cuCtxSetCurrent(T.ctx);
	if (r == CUDA_SUCCESS)
		r = T.api->cuMemAlloc(&d, size);
	if (r != CUDA_SUCCESS) {
		snprintf(why, sizeof(why), "cuMemAlloc(%zu): %s", size, cu_name(r));
		return (int)r;
	}
	*p = (void *)(uintptr_t)d;
	return 0;
}

int tcuda_mem_free(void *p)
{
	CUresult r = T.ctx ? T.api->cuMemFree((CUdeviceptr)(uintptr_t)p) : CUDA_ERROR_INVALID_CONTEXT;

	return r == CUDA_SUCCESS ? 0 : fail("cuMemFree", "test allocation", r);
}

int tcuda_mem_info(size_t *free_p, size_t *total_p)
{
	CUresult r = T.ctx ? T.api->cuMemGetInfo(free_p, total_p) : CUDA_ERROR_INVALID_CONTEXT;

	return r == CUDA_SUCCESS ? 0 : fail("cuMemGetInfo", "device", r);
}

void tcuda_close(void)
{
	/* Failures ignored: this is teardown, possibly after a sticky error. */
	if (T.mod)
		(void)T.api->cuModuleUnload(T.mod);
	if (T.ctx)
		(void)T.api->cuDevicePrimaryCtxRelease(T.dev);
	memset(&T, 0, sizeof(T));
}

#else /* !VMMX_HAVE_CUDA */

int tcuda_mem_alloc(size_t size, void **p)
{
	snprintf(why, sizeof(why), "built without CUDA");
	return -1;
}

int tcuda_mem_free(void *p)
{
	return -1;
}

int tcuda_mem_info(size_t *free_p, size_t *total_p)
{
	return -1;
}

int tcuda_open(int device)
{
	snprintf(why, sizeof(why), "built without CUDA headers (configure found no cuda.h)");
	return -VMMX_ENOTSUP;
}

int tcuda_load(const void *image)
{
	snprintf(why, sizeof(why), "built without CUDA");
	diag("tcuda_load: %s", why);
	return -1;
}

int tcuda_launch(const char *kernel, unsigned int grid, unsigned int block, void **args)
{
	snprintf(why, sizeof(why), "built without CUDA");
	diag("tcuda_launch(%s): %s", kernel, why);
	return -1;
}

int tcuda_launch_on(const char *kernel, unsigned int grid, unsigned int block, void **args,
		    void *stream)
{
	snprintf(why, sizeof(why), "built without CUDA");
	diag("tcuda_launch_on(%s): %s", kernel, why);
	return -1;
}

void tcuda_close(void)
{
}

#endif /* VMMX_HAVE_CUDA */
