/* SPDX-License-Identifier: MIT */
/*
 * cudaload.h - the one door to the CUDA driver library: libcuda.so.1 is
 * dlopen()ed in one place (vmm/cudaload.c), once per copy of that unit, and
 * its entry points are resolved into one table that the cuda backend
 * (vmm/cuda.c) and the one GPU client of the tools and the tests
 * (gpu/client.c) share.  Not installed; compiled only with the CUDA headers (VMMX_HAVE_CUDA)
 * and includes <cuda.h>.
 *
 * Versioned names: every entry point is listed under its API name, and the
 * list is expanded with that name as a macro argument, which the
 * preprocessor expands before substituting it (it is not an operand of # or
 * ## there).  So cuMemGetInfo becomes cuMemGetInfo_v2 (and the _ptds/_ptsz
 * names under CUDA_API_PER_THREAD_DEFAULT_STREAM) everywhere at once: the
 * member of struct vmm_cuda_api, its type (__typeof__ of cuda.h's own
 * declaration) and the string given to dlsym.  Every caller therefore calls
 * exactly the ABI that the compiled-against header describes.
 *
 * Groups: each entry point belongs to one group, and a user asks for the
 * groups it needs.  A driver older than the headers may lack a newer name
 * (cuMemPrefetchAsync_v2 came with CUDA 13): that only refuses the users
 * that need its group, so libvmmx does not fail for want of a call only the
 * tools make.
 */
#ifndef VMM_CUDALOAD_H
#define VMM_CUDALOAD_H

#include <stddef.h>

#include <cuda.h>

/* Groups of entry points: pass an OR of them to vmm_cuda_load(). */
#define VMM_CUDA_CORE	 1u /* what libvmmx's cuda backend calls */
#define VMM_CUDA_LAUNCH	 2u /* modules, launches, event timing, cuMemAlloc: tests, tools and
			     * the cuda backend's checksum kernel (asked for at its first use) */
#define VMM_CUDA_MANAGED 4u /* managed and pinned host allocations, prefetch: tools */

/*
 * Every entry point, once: X(group, name).  To call a new one, add it here
 * under the group of the code that needs it.
 */
#define VMM_CUDA_FNS(X)                                                                            \
	X(VMM_CUDA_CORE, cuGetErrorName)                                                           \
	X(VMM_CUDA_CORE, cuGetErrorString)                                                         \
	X(VMM_CUDA_CORE, cuInit)                                                                   \
	X(VMM_CUDA_CORE, cuDriverGetVersion)                                                       \
	X(VMM_CUDA_CORE, cuDeviceGetCount)                                                         \
	X(VMM_CUDA_CORE, cuDeviceGet)                                                              \
	X(VMM_CUDA_CORE, cuDeviceGetName)                                                          \
	X(VMM_CUDA_CORE, cuDeviceTotalMem)                                                         \
	X(VMM_CUDA_CORE, cuDeviceGetAttribute)                                                     \
	X(VMM_CUDA_CORE, cuDeviceCanAccessPeer)                                                    \
	X(VMM_CUDA_CORE, cuDevicePrimaryCtxRetain)                                                 \
	X(VMM_CUDA_CORE, cuDevicePrimaryCtxRelease)                                                \
	X(VMM_CUDA_CORE, cuCtxGetCurrent)                                                          \
	X(VMM_CUDA_CORE, cuCtxSetCurrent)                                                          \
	X(VMM_CUDA_CORE, cuCtxPushCurrent)                                                         \
	X(VMM_CUDA_CORE, cuCtxPopCurrent)                                                          \
	X(VMM_CUDA_CORE, cuCtxSynchronize)                                                         \
	X(VMM_CUDA_CORE, cuStreamSynchronize)                                                      \
	X(VMM_CUDA_CORE, cuStreamCreate)                                                           \
	X(VMM_CUDA_CORE, cuStreamDestroy)                                                          \
	X(VMM_CUDA_CORE, cuMemGetInfo)                                                             \
	X(VMM_CUDA_CORE, cuMemGetAllocationGranularity)                                            \
	X(VMM_CUDA_CORE, cuMemAddressReserve)                                                      \
	X(VMM_CUDA_CORE, cuMemAddressFree)                                                         \
	X(VMM_CUDA_CORE, cuMemCreate)                                                              \
	X(VMM_CUDA_CORE, cuMemRelease)                                                             \
	X(VMM_CUDA_CORE, cuMemMap)                                                                 \
	X(VMM_CUDA_CORE, cuMemUnmap)                                                               \
	X(VMM_CUDA_CORE, cuMemSetAccess)                                                           \
	X(VMM_CUDA_CORE, cuMemcpy)                                                                 \
	X(VMM_CUDA_CORE, cuMemcpyAsync)                                                            \
	X(VMM_CUDA_CORE, cuMemsetD8)                                                               \
	X(VMM_CUDA_CORE, cuMemHostRegister)                                                        \
	X(VMM_CUDA_CORE, cuMemHostGetDevicePointer)                                                \
	X(VMM_CUDA_CORE, cuMemHostUnregister)                                                      \
	X(VMM_CUDA_CORE, cuPointerGetAttributes)                                                   \
	X(VMM_CUDA_CORE, cuEventCreate)                                                            \
	X(VMM_CUDA_CORE, cuEventDestroy)                                                           \
	X(VMM_CUDA_CORE, cuEventRecord)                                                            \
	X(VMM_CUDA_CORE, cuEventQuery)                                                             \
	X(VMM_CUDA_CORE, cuEventSynchronize)                                                       \
	X(VMM_CUDA_LAUNCH, cuModuleLoadData)                                                       \
	X(VMM_CUDA_LAUNCH, cuModuleUnload)                                                         \
	X(VMM_CUDA_LAUNCH, cuModuleGetFunction)                                                    \
	X(VMM_CUDA_LAUNCH, cuLaunchKernel)                                                         \
	X(VMM_CUDA_LAUNCH, cuOccupancyMaxActiveBlocksPerMultiprocessor)                            \
	X(VMM_CUDA_LAUNCH, cuEventElapsedTime)                                                     \
	X(VMM_CUDA_LAUNCH, cuMemAlloc)                                                             \
	X(VMM_CUDA_LAUNCH, cuMemFree)                                                              \
	X(VMM_CUDA_LAUNCH, cuMemsetD32Async)                                                       \
	X(VMM_CUDA_LAUNCH, cuCtxGetStreamPriorityRange)                                            \
	X(VMM_CUDA_LAUNCH, cuStreamCreateWithPriority)                                             \
	X(VMM_CUDA_MANAGED, cuMemHostAlloc)                                                        \
	X(VMM_CUDA_MANAGED, cuMemFreeHost)                                                         \
	X(VMM_CUDA_MANAGED, cuMemAllocManaged)                                                     \
	X(VMM_CUDA_MANAGED, cuMemAdvise)                                                           \
	X(VMM_CUDA_MANAGED, cuMemPrefetchAsync)                                                    \
	X(VMM_CUDA_MANAGED, cuMemsetD32)

#define VMM_CUDA_DECL(group, f) __typeof__(f) *f;
/**
 * struct vmm_cuda_api - the driver's entry points, one pointer each, named
 * by their versioned names (cuMemAlloc_v2, ...).  A pointer outside the
 * groups that vmm_cuda_load() was asked for may be NULL.
 */
struct vmm_cuda_api {
	VMM_CUDA_FNS(VMM_CUDA_DECL)
};
#undef VMM_CUDA_DECL

/**
 * vmm_cuda_load() - load libcuda.so.1 and resolve its entry points, once.
 * @groups: an OR of VMM_CUDA_CORE, VMM_CUDA_LAUNCH, VMM_CUDA_MANAGED: the
 *          entry points the caller needs.
 * @api_p: out: the table, valid for the life of the process.
 * @why: out: on failure, why (dlerror()'s text, or the missing symbol).
 * @len: size of @why.
 *
 * The library is opened with RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE at the
 * first call and never closed: cuInit starts driver threads and registers
 * handlers that outlive any one user.  Nothing here calls cuInit.
 *
 * Return: 0; -VMMX_ENODRIVER when the library cannot be loaded or lacks an
 * entry point of @groups (the driver is older than the headers).
 *
 * Context: any thread; the first call takes a process-wide once-lock and
 * may block in dlopen().  Calls no driver function.
 */
int vmm_cuda_load(unsigned int groups, const struct vmm_cuda_api **api_p, char *why, size_t len);

/**
 * vmm_cuda_error_name() - the CUDA error name of @r ("CUDA_ERROR_OUT_OF_MEMORY"),
 * or "CUresult N" when the driver is not loaded or does not know @r.
 * @buf, @len: room for the fallback text; the return value may point there.
 *
 * Context: any thread.
 */
const char *vmm_cuda_error_name(CUresult r, char *buf, size_t len);

#endif /* VMM_CUDALOAD_H */
