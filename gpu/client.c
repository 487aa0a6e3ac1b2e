// SPDX-License-Identifier: MIT
/*
 * client.c - the one CUDA client of the tools and the tests (see
 * client.h): the device's primary context, the one kernel set
 * (kernels.cu, embedded when configure found nvcc), launches, device
 * memory.  Beside libvmmx's own backend (vmm/cuda.c), the only other user
 * of the driver in the tree.
 *
 * The driver comes through the one door to it, vmm/cudaload.c, which
 * resolves the versioned names cuda.h maps the API names to.  State is
 * process-wide and unlocked: the tools and the tests call it from their
 * main thread only.  Built without CUDA headers, every call fails and
 * gpu_client_why() says so.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "vmmx.h"
#include "gpu/client.h"

static char why[320];

const char *gpu_client_why(void)
{
	return why;
}

#ifdef VMMX_HAVE_CUDA

#include <stdbool.h>
#include <stddef.h>

#include <cuda.h>

#ifdef VMMX_HAVE_KERNELS
#include "gpu/kernels_fatbin.h"
#endif

static struct gpu_client T;

const struct gpu_client *gpu_client(void)
{
	return T.ctx ? &T : NULL;
}

static const char *cu_name(CUresult r)
{
	static char buf[32];

	return vmm_cuda_error_name(r, buf, sizeof(buf));
}

static int open_fail(int err, const char *what, CUresult r)
{
	snprintf(why, sizeof(why), "%s: %s", what, cu_name(r));
	gpu_client_close();
	return err;
}

int gpu_client_open(int device, int managed)
{
	int count = 0;
	CUresult r;

	gpu_client_close();
	why[0] = '\0';
	if (vmm_cuda_load(VMM_CUDA_CORE | VMM_CUDA_LAUNCH | (managed ? VMM_CUDA_MANAGED : 0),
			  &T.api, why, sizeof(why)))
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
		gpu_client_close();
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
	return (int)r;
}

static int load(const void *image)
{
	CUmodule mod = NULL;
	CUresult r;

	why[0] = '\0';
	if (!T.ctx) {
		snprintf(why, sizeof(why), "gpu_client_load_kernels: gpu_client_open() did not succeed");
		return -1;
	}
	r = T.api->cuCtxSetCurrent(T.ctx);
	if (r != CUDA_SUCCESS)
		return fail("cuCtxSetCurrent", "primary context", r);
	r = T.api->cuModuleLoadData(&mod, image);
	if (r != CUDA_SUCCESS)
		return fail("cuModuleLoadData", "the kernels, built for the NVCC_ARCH given to configure", r);
	if (T.mod)
		(void)T.api->cuModuleUnload(T.mod);
	T.mod = mod;
	return 0;
}

int gpu_client_load_kernels(void)
{
#ifdef VMMX_HAVE_KERNELS
	return load(vmmx_gpu_kernels_fatbin);
#else
	snprintf(why, sizeof(why),
		 "built without nvcc: configure found no nvcc/bin2c, so the GPU kernels "
		 "(gpu/kernels.cu) are not embedded");
	return -1;
#endif
}

int gpu_client_launch_on(const char *kernel, unsigned int grid, unsigned int block, void **args,
		    void *stream)
{
	CUfunction fn;
	CUresult r;

	why[0] = '\0';
	if (!T.mod) {
		snprintf(why, sizeof(why), "gpu_client_launch_on(%s): no module loaded", kernel);
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

int gpu_client_launch(const char *kernel, unsigned int grid, unsigned int block, void **args)
{
	int err = gpu_client_launch_on(kernel, grid, block, args, NULL);
	CUresult r;

	if (err)
		return err;
	/* Faults inside the kernel surface here, not at the launch. */
	r = T.api->cuCtxSynchronize();
	return r == CUDA_SUCCESS ? 0 : fail("cuCtxSynchronize after", kernel, r);
}

int gpu_client_mem_alloc(size_t size, void **p)
{
	CUdeviceptr d;
	CUresult r;

	why[0] = '\0';
	if (!T.ctx) {
		snprintf(why, sizeof(why), "gpu_client_mem_alloc: gpu_client_open() did not succeed");
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

int gpu_client_mem_free(void *p)
{
	CUresult r = T.ctx ? T.api->cuMemFree((CUdeviceptr)(uintptr_t)p) : CUDA_ERROR_INVALID_CONTEXT;

	return r == CUDA_SUCCESS ? 0 : fail("cuMemFree", "device allocation", r);
}

int gpu_client_mem_info(size_t *free_p, size_t *total_p)
{
	CUresult r = T.ctx ? T.api->cuMemGetInfo(free_p, total_p) : CUDA_ERROR_INVALID_CONTEXT;

	return r == CUDA_SUCCESS ? 0 : fail("cuMemGetInfo", "device", r);
}

void gpu_client_close(void)
{
	/* Failures ignored: this is teardown, possibly after a sticky error. */
	if (T.mod)
		(void)T.api->cuModuleUnload(T.mod);
	if (T.ctx)
		(void)T.api->cuDevicePrimaryCtxRelease(T.dev);
	memset(&T, 0, sizeof(T));
}

#else /* !VMMX_HAVE_CUDA */

#define NO_CUDA "built without CUDA headers (configure found no cuda.h)"

const struct gpu_client *gpu_client(void)
{
	return NULL;
}

int gpu_client_open(int device, int managed)
{
	(void)device;
	(void)managed;
	snprintf(why, sizeof(why), NO_CUDA);
	return -VMMX_ENOTSUP;
}

static int no_cuda(void)
{
	snprintf(why, sizeof(why), NO_CUDA);
	return -1;
}

int gpu_client_load_kernels(void)
{
	return no_cuda();
}

int gpu_client_launch(const char *kernel, unsigned int grid, unsigned int block, void **args)
{
	(void)kernel, (void)grid, (void)block, (void)args;
	return no_cuda();
}

int gpu_client_launch_on(const char *kernel, unsigned int grid, unsigned int block, void **args,
			 void *stream)
{
	(void)kernel, (void)grid, (void)block, (void)args, (void)stream;
	return no_cuda();
}

int gpu_client_mem_alloc(size_t size, void **p)
{
	(void)size, (void)p;
	return no_cuda();
}

int gpu_client_mem_free(void *p)
{
	(void)p;
	return no_cuda();
}

int gpu_client_mem_info(size_t *free_p, size_t *total_p)
{
	(void)free_p, (void)total_p;
	return no_cuda();
}

void gpu_client_close(void)
{
}

#endif /* VMMX_HAVE_CUDA */
