/* SPDX-License-Identifier: MIT */
/*
 * cuda.h - the tests' use of the one GPU client (gpu/client.h): the same
 * calls, which also print a failure's CUDA error name with diag(), and load
 * the one kernel set (gpu/kernels.cu) the tools use too.
 *
 * It dlopens libcuda.so.1 by itself, as libvmmx does, so that test binaries
 * start on machines without a driver and skip cleanly.  Built without CUDA
 * headers (VMMX_HAVE_CUDA unset), every function fails and tcuda_why() says
 * so.  This header includes no CUDA header: tests that use it need no CUDA
 * include path.
 *
 * One module and one context at a time, in process-wide state: call it from
 * the test's main thread only.  tcuda_open() retains the device's primary
 * context, the one libvmmx's cuda backend uses too, so kernels see the
 * buffers' addresses.
 */
#ifndef TAP_CUDA_H
#define TAP_CUDA_H

#include <stddef.h>

/**
 * tcuda_open() - load the driver, cuInit, retain @device's primary context and
 * make it current on the calling thread.
 * Return: 0; -VMMX_ENOTSUP when built without CUDA; -VMMX_ENODRIVER when
 * libcuda.so.1 cannot be loaded (or is the toolkit stub); -VMMX_ENODEV when
 * there is no such device; -VMMX_EDRIVER for other driver failures.  Never
 * crashes without a driver; tcuda_why() holds the detail.
 */
int tcuda_open(int device);

/**
 * tcuda_load_kernels() - load the kernels (gpu_client_load_kernels()),
 * replacing the module loaded before.
 * Return: 0, or the nonzero CUresult (-1 when tcuda_open() did not succeed
 * or the kernels are not built); the reason is printed with diag().
 */
int tcuda_load_kernels(void);

/**
 * tcuda_launch() - run kernel @kernel of the loaded module on @grid blocks of
 * @block threads, with @args as for cuLaunchKernel, on the default stream,
 * and wait for it (cuCtxSynchronize).
 * Return: 0, or the nonzero CUresult of the call that failed (-1 when no
 * module is loaded); the CUDA error name is printed with diag().  A launch
 * that faults leaves the context unusable (a sticky error).
 */
int tcuda_launch(const char *kernel, unsigned int grid, unsigned int block, void **args);

/**
 * tcuda_launch_on() - as tcuda_launch(), but on @stream (a CUstream, for
 * example vmmx_stream_handle(); NULL is the default stream) and without
 * waiting: the kernel may still run when this returns.  Wait with the
 * stream's owner (vmmx_stream_sync(), vmmx_buf_migrate_on()).
 * Return: 0, or the nonzero CUresult of the call that failed (-1 when no
 * module is loaded); the CUDA error name is printed with diag().  Faults
 * inside the kernel surface at the wait, not here.
 */
int tcuda_launch_on(const char *kernel, unsigned int grid, unsigned int block, void **args,
		    void *stream);

/**
 * tcuda_mem_alloc() - cuMemAlloc in the primary context, as the CUDA runtime
 * and libraries allocate outside libvmmx.
 * Return: 0 with *@p set, or the nonzero CUresult (-1 without a context);
 * tcuda_why() names it.
 */
int tcuda_mem_alloc(size_t size, void **p);
/** tcuda_mem_free() - cuMemFree; 0 or the CUresult. */
int tcuda_mem_free(void *p);
/** tcuda_mem_info() - cuMemGetInfo; 0 or the CUresult. */
int tcuda_mem_info(size_t *free_p, size_t *total_p);

/** tcuda_close() - unload the module, release the context; safe to call twice. */
void tcuda_close(void);

/** tcuda_why() - why the last tcuda_* call failed; "" when it did not. */
const char *tcuda_why(void);

#endif /* TAP_CUDA_H */
