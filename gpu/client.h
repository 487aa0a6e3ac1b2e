/* SPDX-License-Identifier: MIT */
/*
 * client.h - the one CUDA client of the tools and the tests: the device's
 * primary context, the one kernel set (gpu/kernels.cu, patterns in
 * gpu/pattern.h), launches on buffers that libvmmx maps, and device memory
 * outside libvmmx.  A noinst library (libvmmx_gpu.la) that vmmx-place,
 * vmmx-bench (tools/gpu.c) and the tests' TAP library (tests/tap/cuda.c)
 * link; libvmmx itself has its own backend, vmm/cuda.c.
 *
 * It dlopens libcuda.so.1 through vmm/cudaload.h, as libvmmx does, so that
 * its users start on machines without a driver and explain themselves.
 * Built without CUDA headers (VMMX_HAVE_CUDA unset), every function fails
 * and gpu_client_why() says so.  This header includes a CUDA header only
 * where there is one, for struct gpu_client.
 *
 * One module and one context at a time, in process-wide state: call it from
 * the main thread only.  gpu_client_open() retains the device's primary
 * context, the one libvmmx's cuda backend uses too, so kernels see the
 * buffers' addresses.
 */
#ifndef GPU_CLIENT_H
#define GPU_CLIENT_H

#include <stddef.h>

/**
 * gpu_client_open() - load the driver (with the managed-memory and prefetch
 * entry points too when @managed), cuInit, retain @device's primary context
 * and make it current on the calling thread.
 * Return: 0; -VMMX_ENOTSUP when built without CUDA; -VMMX_ENODRIVER when
 * libcuda.so.1 cannot be loaded (or is the toolkit stub); -VMMX_ENODEV when
 * there is no such device; -VMMX_EDRIVER for other driver failures.  Never
 * crashes without a driver; gpu_client_why() holds the detail.
 */
int gpu_client_open(int device, int managed);

/**
 * gpu_client_load_kernels() - load the one kernel set (gpu/kernels.cu,
 * embedded when configure found nvcc) with cuModuleLoadData, replacing the
 * module loaded before.
 * Return: 0, or the nonzero CUresult (-1 when gpu_client_open() did not
 * succeed, or when built without nvcc); gpu_client_why() says why.
 */
int gpu_client_load_kernels(void);

/**
 * gpu_client_launch() - run kernel @kernel of the loaded module on @grid blocks of
 * @block threads, with @args as for cuLaunchKernel, on the default stream,
 * and wait for it (cuCtxSynchronize).
 * Return: 0, or the nonzero CUresult of the call that failed (-1 when no
 * module is loaded); gpu_client_why() names the CUDA error.  A launch
 * that faults leaves the context unusable (a sticky error).
 */
int gpu_client_launch(const char *kernel, unsigned int grid, unsigned int block, void **args);

/**
 * gpu_client_launch_on() - as gpu_client_launch(), but on @stream (a CUstream, for
 * example vmmx_stream_handle(); NULL is the default stream) and without
 * waiting: the kernel may still run when this returns.  Wait with the
 * stream's owner (vmmx_stream_sync(), vmmx_buf_migrate_on()).
 * Return: 0, or the nonzero CUresult of the call that failed (-1 when no
 * module is loaded); gpu_client_why() names the CUDA error.  Faults
 * inside the kernel surface at the wait, not here.
 */
int gpu_client_launch_on(const char *kernel, unsigned int grid, unsigned int block, void **args,
		    void *stream);

/**
 * gpu_client_mem_alloc() - cuMemAlloc in the primary context, as the CUDA runtime
 * and libraries allocate outside libvmmx.
 * Return: 0 with *@p set, or the nonzero CUresult (-1 without a context);
 * gpu_client_why() names it.
 */
int gpu_client_mem_alloc(size_t size, void **p);
/** gpu_client_mem_free() - cuMemFree; 0 or the CUresult. */
int gpu_client_mem_free(void *p);
/** gpu_client_mem_info() - cuMemGetInfo; 0 or the CUresult. */
int gpu_client_mem_info(size_t *free_p, size_t *total_p);

/** gpu_client_close() - unload the module, release the context; safe to call twice. */
void gpu_client_close(void);

/** gpu_client_why() - why the last gpu_client_* call failed; "" when it did not. */
const char *gpu_client_why(void);

#ifdef VMMX_HAVE_CUDA
#include <cuda.h>

#include "vmm/cudaload.h"

/** struct gpu_client - the open client, for users that call the driver beyond it. */
struct gpu_client {
	const struct vmm_cuda_api *api; /* NULL until gpu_client_open() loads the driver */
	CUdevice dev;
	CUcontext ctx; /* retained primary context, NULL when closed */
	CUmodule mod;  /* the kernels, NULL when not loaded */
};
#else
struct gpu_client;
#endif

/** gpu_client() - the open client's state; NULL when not open. */
const struct gpu_client *gpu_client(void);

#endif /* GPU_CLIENT_H */
