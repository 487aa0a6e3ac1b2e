/* SPDX-License-Identifier: MIT */
/*
 * preload.h - internals of libvmmx-preload, the LD_PRELOAD face behind
 * vmmx-run, shared by its files: the table of interposed entry points and
 * their real counterparts (resolve.c), the hooks (hooks.c), the per-device
 * allocators, counters and the exit report (state.c).
 *
 * No CUDA header: the interposer is built (and tested) where there is none,
 * and it only needs the ABI of a few calls, which is stable.  The codes below
 * are CUDA's (driver_types.h and cuda.h); they never change between releases.
 */
#ifndef VMMX_PRELOAD_H
#define VMMX_PRELOAD_H

#include <stddef.h>
#include <stdint.h>

#include "vmmx.h"

#define VMMXP_EXPORT __attribute__((visibility("default")))

typedef int cudaError_t;
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUmemoryPool;
typedef unsigned long long CUmemGenericAllocationHandle;

#define CUDA_OK 0                       /* cudaSuccess, CUDA_SUCCESS */
#define CUDA_EINVAL 1                   /* cudaErrorInvalidValue, CUDA_ERROR_INVALID_VALUE */
#define CUDA_ENOMEM 2                   /* cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY */
#define CUDA_ENOTINIT 3                 /* cudaErrorInitializationError,
					 * CUDA_ERROR_NOT_INITIALIZED: CUDA after fork */
#define CUDA_ENOTFOUND 500              /* CUDA_ERROR_NOT_FOUND */
#define RT_ENOTFOUND 500                /* cudaErrorSymbolNotFound: no such runtime entry point */
#define CU_GET_PROC_ADDRESS_PER_THREAD 2 /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
/* CUmemPool_attribute values the pool hooks answer for (cuda.h, CUDA 11.2 on) */
#define CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT 5
#define CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH 6
#define CU_MEMPOOL_ATTR_USED_MEM_CURRENT 7
#define CU_MEMPOOL_ATTR_USED_MEM_HIGH 8
#define CU_STREAM_LEGACY_ ((void *)0x1)
#define CU_STREAM_PER_THREAD_ ((void *)0x2)

/*
 * Every entry point the interposer takes over (hooked) and the helpers it
 * calls in the real runtime or driver (real only).  Adding a call is one
 * line here, one hook in hooks.c (launch.c for kernel launches) and, for
 * driver calls, one line in resolve.c's cuGetProcAddress map.
 */
#define VMMXP_HOOKS(X)                                                                     \
	X(cudaMalloc)                                                                      \
	X(cudaFree)                                                                        \
	X(cudaMallocAsync)                                                                 \
	X(cudaFreeAsync)                                                                   \
	X(cudaMallocAsync_ptsz)                                                            \
	X(cudaFreeAsync_ptsz)                                                              \
	X(cudaMemGetInfo)                                                                  \
	X(cudaMallocPitch)                                                                 \
	X(cudaMalloc3D)                                                                    \
	X(cudaIpcGetMemHandle)                                                             \
	X(cudaMemset)                                                                      \
	X(cudaMemset_ptds)                                                                 \
	X(cudaMemsetAsync)                                                                 \
	X(cudaMemsetAsync_ptsz)                                                            \
	X(cuMemAlloc_v2)                                                                   \
	X(cuMemFree_v2)                                                                    \
	X(cuMemAllocAsync)                                                                 \
	X(cuMemFreeAsync)                                                                  \
	X(cuMemAllocAsync_ptsz)                                                            \
	X(cuMemFreeAsync_ptsz)                                                             \
	X(cuMemGetInfo_v2)                                                                 \
	X(cuMemAllocPitch_v2)                                                              \
	X(cuIpcGetMemHandle)                                                               \
	X(cuMemsetD8_v2)                                                                   \
	X(cuMemsetD16_v2)                                                                  \
	X(cuMemsetD32_v2)                                                                  \
	X(cuMemsetD8_v2_ptds)                                                              \
	X(cuMemsetD16_v2_ptds)                                                             \
	X(cuMemsetD32_v2_ptds)                                                             \
	X(cuMemsetD8Async)                                                                 \
	X(cuMemsetD16Async)                                                                \
	X(cuMemsetD32Async)                                                                \
	X(cuMemsetD8Async_ptsz)                                                            \
	X(cuMemsetD16Async_ptsz)                                                           \
	X(cuMemsetD32Async_ptsz)                                                           \
	X(cuMemcpy)                                                                        \
	X(cuMemcpy_ptds)                                                                   \
	X(cuMemcpyAsync)                                                                   \
	X(cuMemcpyAsync_ptsz)                                                              \
	X(cuMemcpyHtoD_v2)                                                                 \
	X(cuMemcpyHtoD_v2_ptds)                                                            \
	X(cuMemcpyDtoH_v2)                                                                 \
	X(cuMemcpyDtoH_v2_ptds)                                                            \
	X(cuMemcpyDtoD_v2)                                                                 \
	X(cuMemcpyDtoD_v2_ptds)                                                            \
	X(cuMemcpyHtoDAsync_v2)                                                            \
	X(cuMemcpyHtoDAsync_v2_ptsz)                                                       \
	X(cuMemcpyDtoHAsync_v2)                                                            \
	X(cuMemcpyDtoHAsync_v2_ptsz)                                                       \
	X(cuMemcpyDtoDAsync_v2)                                                            \
	X(cuMemcpyDtoDAsync_v2_ptsz)                                                       \
	X(cuMemcpyPeer)                                                                    \
	X(cuMemcpyPeer_ptds)                                                               \
	X(cuMemcpyPeerAsync)                                                               \
	X(cuMemcpyPeerAsync_ptsz)                                                          \
	X(cuMemcpy2D_v2)                                                                   \
	X(cuMemcpy2D_v2_ptds)                                                              \
	X(cuMemcpy2DUnaligned_v2)                                                          \
	X(cuMemcpy2DUnaligned_v2_ptds)                                                     \
	X(cuMemcpy2DAsync_v2)                                                              \
	X(cuMemcpy2DAsync_v2_ptsz)                                                         \
	X(cudaMemcpy)                                                                      \
	X(cudaMemcpy_ptds)                                                                 \
	X(cudaMemcpyAsync)                                                                 \
	X(cudaMemcpyAsync_ptsz)                                                            \
	X(cudaMemcpyPeer)                                                                  \
	X(cudaMemcpyPeerAsync)                                                             \
	X(cudaMemcpy2D)                                                                    \
	X(cudaMemcpy2D_ptds)                                                               \
	X(cudaMemcpy2DAsync)                                                               \
	X(cudaMemcpy2DAsync_ptsz)                                                          \
	X(cuMemAllocFromPoolAsync)                                                         \
	X(cuMemAllocFromPoolAsync_ptsz)                                                    \
	X(cuDeviceGetDefaultMemPool)                                                       \
	X(cuDeviceGetMemPool)                                                              \
	X(cuMemPoolCreate)                                                                 \
	X(cuMemPoolDestroy)                                                                \
	X(cuMemPoolTrimTo)                                                                 \
	X(cuMemPoolGetAttribute)                                                           \
	X(cuMemCreate)                                                                     \
	X(cuMemRelease)                                                                    \
	X(cuMemMap)                                                                        \
	X(cuGetProcAddress)                                                                \
	X(cuGetProcAddress_v2)                                                             \
	X(cuLaunchKernel)                                                                  \
	X(cuLaunchKernel_ptsz)                                                             \
	X(cuLaunchKernelEx)                                                                \
	X(cuLaunchKernelEx_ptsz)                                                           \
	X(cuLaunchCooperativeKernel)                                                       \
	X(cuLaunchCooperativeKernel_ptsz)                                                  \
	X(cudaLaunchKernel)                                                                \
	X(cudaLaunchKernel_ptsz)                                                           \
	X(cudaLaunchKernelExC)                                                             \
	X(cudaLaunchKernelExC_ptsz)                                                        \
	X(cuGraphLaunch)                                                                   \
	X(cuGraphLaunch_ptsz)                                                              \
	X(cudaGraphLaunch)                                                                 \
	X(cudaGraphLaunch_ptsz)                                                            \
	X(cuGraphInstantiate)                                                              \
	X(cuGraphInstantiate_v2)                                                           \
	X(cuGraphInstantiateWithFlags)                                                     \
	X(cuGraphInstantiateWithParams)                                                    \
	X(cuGraphInstantiateWithParams_ptsz)                                               \
	X(cuGraphExecDestroy)                                                              \
	X(cuGraphExecUpdate)                                                               \
	X(cuGraphExecUpdate_v2)                                                            \
	X(cuGraphExecKernelNodeSetParams)                                                  \
	X(cuGraphExecKernelNodeSetParams_v2)                                               \
	X(cuGraphExecNodeSetParams)                                                        \
	X(cuGraphExecChildGraphNodeSetParams)                                              \
	X(cudaGraphInstantiate)                                                            \
	X(cudaGraphInstantiateWithFlags)                                                   \
	X(cudaGraphInstantiateWithParams)                                                  \
	X(cudaGraphInstantiateWithParams_ptsz)                                             \
	X(cudaGraphExecDestroy)                                                            \
	X(cudaGraphExecUpdate)                                                             \
	X(cudaGraphExecKernelNodeSetParams)                                                \
	X(cudaGraphExecNodeSetParams)                                                      \
	X(cudaGraphExecChildGraphNodeSetParams)                                            \
	X(cuModuleUnload)                                                                  \
	X(cuLibraryUnload)

#define VMMXP_HELPERS(X)                                                                   \
	X(cudaGetDevice)                                                                   \
	X(cuCtxGetDevice)                                                                  \
	X(cuFuncGetParamInfo)                                                              \
	X(cuKernelGetParamInfo)                                                            \
	X(cuFuncGetName)                                                                   \
	X(cuKernelGetName)                                                                 \
	X(cudaGetFuncBySymbol)                                                             \
	X(cuGraphGetNodes)                                                                 \
	X(cuGraphNodeGetType)                                                              \
	X(cuGraphKernelNodeGetParams_v2)                                                   \
	X(cuGraphChildGraphNodeGetGraph)                                                   \
	X(cuEventCreate)                                                                   \
	X(cuEventRecord)                                                                   \
	X(cuEventQuery)                                                                    \
	X(cuEventSynchronize)                                                              \
	X(cuEventElapsedTime)                                                              \
	X(cuStreamWaitEvent)                                                               \
	X(cuStreamIsCapturing)                                                             \
	X(cuThreadExchangeStreamCaptureMode)                                               \
	X(cuStreamSynchronize)

#define VMMXP_ENUM(f) VMMXP_FN_##f,
enum vmmxp_fn { VMMXP_HOOKS(VMMXP_ENUM) VMMXP_FN_NHOOKS, VMMXP_HELPERS(VMMXP_ENUM) VMMXP_FN_COUNT };
#undef VMMXP_ENUM

/* cudaMalloc3D's arguments (driver_types.h) */
struct vmmxp_pitched_ptr {
	void *ptr;
	size_t pitch, xsize, ysize;
};

struct vmmxp_extent {
	size_t width, height, depth;
};

/* hooks.c and resolve.c: the interposed entry points, with CUDA's ABI */
VMMXP_EXPORT cudaError_t cudaMalloc(void **ptr, size_t size);
VMMXP_EXPORT cudaError_t cudaFree(void *ptr);
VMMXP_EXPORT cudaError_t cudaMallocAsync(void **ptr, size_t size, void *stream);
VMMXP_EXPORT cudaError_t cudaFreeAsync(void *ptr, void *stream);
VMMXP_EXPORT cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, void *stream);
VMMXP_EXPORT cudaError_t cudaFreeAsync_ptsz(void *ptr, void *stream);
VMMXP_EXPORT cudaError_t cudaMemGetInfo(size_t *free_p, size_t *total_p);
VMMXP_EXPORT cudaError_t cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height);
VMMXP_EXPORT cudaError_t cudaMalloc3D(struct vmmxp_pitched_ptr *pp, struct vmmxp_extent ext);
VMMXP_EXPORT cudaError_t cudaIpcGetMemHandle(void *handle, void *ptr);
VMMXP_EXPORT cudaError_t cudaMemset(void *ptr, int value, size_t count);
VMMXP_EXPORT cudaError_t cudaMemset_ptds(void *ptr, int value, size_t count);
VMMXP_EXPORT cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, void *stream);
VMMXP_EXPORT cudaError_t cudaMemsetAsync_ptsz(void *ptr, int value, size_t count, void *stream);
VMMXP_EXPORT cudaError_t cudaGetDevice(int *device);
VMMXP_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size);
VMMXP_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr);
VMMXP_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, void *stream);
VMMXP_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, void *stream);
VMMXP_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, void *stream);
VMMXP_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, void *stream);
VMMXP_EXPORT CUresult cuMemGetInfo_v2(size_t *free_p, size_t *total_p);
VMMXP_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
					size_t height, unsigned int elem);
VMMXP_EXPORT CUresult cuIpcGetMemHandle(void *handle, CUdeviceptr dptr);
VMMXP_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dptr, unsigned char value, size_t n);
VMMXP_EXPORT CUresult cuMemsetD16_v2(CUdeviceptr dptr, unsigned short value, size_t n);
VMMXP_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dptr, unsigned int value, size_t n);
VMMXP_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dptr, unsigned char value, size_t n);
VMMXP_EXPORT CUresult cuMemsetD16_v2_ptds(CUdeviceptr dptr, unsigned short value, size_t n);
VMMXP_EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr dptr, unsigned int value, size_t n);
VMMXP_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dptr, unsigned char value, size_t n, void *stream);
VMMXP_EXPORT CUresult cuMemsetD16Async(CUdeviceptr dptr, unsigned short value, size_t n,
				       void *stream);
VMMXP_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dptr, unsigned int value, size_t n,
				       void *stream);
VMMXP_EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr dptr, unsigned char value, size_t n,
					   void *stream);
VMMXP_EXPORT CUresult cuMemsetD16Async_ptsz(CUdeviceptr dptr, unsigned short value, size_t n,
					    void *stream);
VMMXP_EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr dptr, unsigned int value, size_t n,
					    void *stream);
/* copy.c: the copies, watched under --placement launch (types of cuda.h, by their ABI) */
struct vmmxp_memcpy2d {         /* CUDA_MEMCPY2D */
	size_t src_x, src_y;
	int src_type;           /* CUmemorytype: 1 host, 2 device, 3 array, 4 unified */
	const void *src_host;
	CUdeviceptr src_device;
	void *src_array;
	size_t src_pitch;
	size_t dst_x, dst_y;
	int dst_type;
	void *dst_host;
	CUdeviceptr dst_device;
	void *dst_array;
	size_t dst_pitch;
	size_t width, height;
};

VMMXP_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n);
VMMXP_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);
VMMXP_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream);
VMMXP_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream);
VMMXP_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
VMMXP_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n);
VMMXP_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n);
VMMXP_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n);
VMMXP_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n);
VMMXP_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);
VMMXP_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *stream);
VMMXP_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n,
						void *stream);
VMMXP_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *stream);
VMMXP_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, void *stream);
VMMXP_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream);
VMMXP_EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n,
						void *stream);
VMMXP_EXPORT CUresult cuMemcpyPeer(CUdeviceptr dst, void *dctx, CUdeviceptr src, void *sctx, size_t n);
VMMXP_EXPORT CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, void *dctx, CUdeviceptr src, void *sctx,
					size_t n);
VMMXP_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, void *dctx, CUdeviceptr src, void *sctx,
					size_t n, void *stream);
VMMXP_EXPORT CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, void *dctx, CUdeviceptr src,
					     void *sctx, size_t n, void *stream);
VMMXP_EXPORT CUresult cuMemcpy2D_v2(const struct vmmxp_memcpy2d *p);
VMMXP_EXPORT CUresult cuMemcpy2D_v2_ptds(const struct vmmxp_memcpy2d *p);
VMMXP_EXPORT CUresult cuMemcpy2DUnaligned_v2(const struct vmmxp_memcpy2d *p);
VMMXP_EXPORT CUresult cuMemcpy2DUnaligned_v2_ptds(const struct vmmxp_memcpy2d *p);
VMMXP_EXPORT CUresult cuMemcpy2DAsync_v2(const struct vmmxp_memcpy2d *p, void *stream);
VMMXP_EXPORT CUresult cuMemcpy2DAsync_v2_ptsz(const struct vmmxp_memcpy2d *p, void *stream);
VMMXP_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind);
VMMXP_EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, int kind);
VMMXP_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind,
					 void *stream);
VMMXP_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, int kind,
					      void *stream);
VMMXP_EXPORT cudaError_t cudaMemcpyPeer(void *dst, int ddev, const void *src, int sdev, size_t n);
VMMXP_EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int ddev, const void *src, int sdev,
					     size_t n, void *stream);
VMMXP_EXPORT cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
				      size_t width, size_t height, int kind);
VMMXP_EXPORT cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src,
					   size_t spitch, size_t width, size_t height, int kind);
VMMXP_EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
					   size_t spitch, size_t width, size_t height, int kind,
					   void *stream);
VMMXP_EXPORT cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src,
						size_t spitch, size_t width, size_t height,
						int kind, void *stream);

/*
 * vmmxp_use_begin() / vmmxp_use_end() - around the real call of a copy or
 * memset on @stream that reads or writes [@a, @a + @alen) and [@b, @b +
 * @blen) (a length 0: no such range): under --placement launch the
 * segments they lie in are not moved while the call is passed on, and the
 * call becomes their last use (copy.c).  vmmxp_use_begin() returns what
 * vmmxp_use_end() takes.
 * Context: a program thread, in a hook; may wait for the mover.
 */
struct vmmxp_use {
	int entered;            /* the thread's copy depth was raised */
	int held;               /* placement holds segments for the call */
	int refused;            /* not to be passed on: the CPU grant it needs failed */
	void *stream;           /* CUstream */
};
struct vmmxp_use vmmxp_use_begin(uintptr_t a, size_t alen, uintptr_t b, size_t blen, void *stream);
void vmmxp_use_end(struct vmmxp_use u);
/* VMMX_RUN_PLACEMENT=launch: the copy hooks are handed out (resolve.c); read once. */
int vmmxp_copy_on(void);
/* Whether @fn is one of the copy hooks. */
int vmmxp_fn_is_copy(int fn);
/* Copies passed on with host memory at both ends, the CPU granted both first. */
uint64_t vmmxp_copy_both_host(void);

VMMXP_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
					      void *stream);
VMMXP_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size,
						   CUmemoryPool pool, void *stream);
VMMXP_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, int device);
VMMXP_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, int device);
VMMXP_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props);
VMMXP_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool);
VMMXP_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep);
VMMXP_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void *value);
VMMXP_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
				  const void *prop, unsigned long long flags);
VMMXP_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
VMMXP_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			       CUmemGenericAllocationHandle handle, unsigned long long flags);
VMMXP_EXPORT CUresult cuCtxGetDevice(int *device);
VMMXP_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
				       unsigned long long flags);
VMMXP_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
					  unsigned long long flags, int *status);

/* launch.c: kernel launches (types of cuda.h and driver_types.h, by their ABI) */
typedef void *CUfunction;
typedef void *CUstream;

/* dim3 */
struct vmmxp_dim3 {
	unsigned int x, y, z;
};

/* CUlaunchConfig: the stream is the only member read */
struct vmmxp_cu_config {
	unsigned int grid[3], block[3], shared;
	CUstream stream;
	void *attrs;
	unsigned int nattrs;
};

/* cudaLaunchConfig_t: likewise */
struct vmmxp_rt_config {
	struct vmmxp_dim3 grid, block;
	size_t shared;
	CUstream stream;
	void *attrs;
	unsigned int nattrs;
};

VMMXP_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
				     unsigned int gz, unsigned int bx, unsigned int by,
				     unsigned int bz, unsigned int shared, CUstream stream,
				     void **params, void **extra);
VMMXP_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
					  unsigned int gz, unsigned int bx, unsigned int by,
					  unsigned int bz, unsigned int shared, CUstream stream,
					  void **params, void **extra);
VMMXP_EXPORT CUresult cuLaunchKernelEx(const struct vmmxp_cu_config *config, CUfunction f,
				       void **params, void **extra);
VMMXP_EXPORT CUresult cuLaunchKernelEx_ptsz(const struct vmmxp_cu_config *config, CUfunction f,
					    void **params, void **extra);
VMMXP_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
						unsigned int gz, unsigned int bx, unsigned int by,
						unsigned int bz, unsigned int shared,
						CUstream stream, void **params);
VMMXP_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx,
						     unsigned int gy, unsigned int gz,
						     unsigned int bx, unsigned int by,
						     unsigned int bz, unsigned int shared,
						     CUstream stream, void **params);
VMMXP_EXPORT cudaError_t cudaLaunchKernel(const void *func, struct vmmxp_dim3 grid,
					  struct vmmxp_dim3 block, void **args, size_t shared,
					  CUstream stream);
VMMXP_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, struct vmmxp_dim3 grid,
					       struct vmmxp_dim3 block, void **args,
					       size_t shared, CUstream stream);
VMMXP_EXPORT cudaError_t cudaLaunchKernelExC(const struct vmmxp_rt_config *config,
					     const void *func, void **args);
VMMXP_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const struct vmmxp_rt_config *config,
						  const void *func, void **args);
/* graph launches: watched as one launch when the executable graph was read (graph.c) */
VMMXP_EXPORT CUresult cuGraphLaunch(void *exec, CUstream stream);
VMMXP_EXPORT CUresult cuGraphLaunch_ptsz(void *exec, CUstream stream);
VMMXP_EXPORT cudaError_t cudaGraphLaunch(void *exec, CUstream stream);
VMMXP_EXPORT cudaError_t cudaGraphLaunch_ptsz(void *exec, CUstream stream);
/* unloads: a function's address may be another's after them (the layout cache is emptied) */
VMMXP_EXPORT CUresult cuModuleUnload(void *module);
VMMXP_EXPORT CUresult cuLibraryUnload(void *library);
/*
 * graph.c: instantiation reads a graph's kernel nodes; destruction and
 * changes in place forget what was read.  Handles by their ABI: CUgraph,
 * CUgraphExec, CUgraphNode are pointers, and the runtime's cudaGraph_t and
 * cudaGraphExec_t are the same handles as the driver's.  The first instantiate
 * of each API and cudaGraphExecUpdate changed their arguments between
 * releases (CUDA 11's take 5 and 4): their hooks take and pass on the most
 * integer-class arguments any release gives, which the real call of a
 * release with fewer ignores.
 */
typedef void *CUgraph;
typedef void *CUgraphExec;
typedef void *CUgraphNode;

/* CUDA_KERNEL_NODE_PARAMS_v2 (cuda.h, CUDA 12.0 on) */
struct vmmxp_kernel_node_params {
	CUfunction func;        /* NULL: kern is the kernel */
	unsigned int grid[3], block[3], shared;
	void **params;          /* kernelParams */
	void **extra;
	void *kern;             /* a CUkernel */
	void *ctx;
};

/* CUgraphNodeType values read (cuda.h) */
#define CU_GRAPH_NODE_KERNEL 0
#define CU_GRAPH_NODE_MEMCPY 1
#define CU_GRAPH_NODE_MEMSET 2
#define CU_GRAPH_NODE_GRAPH 4

VMMXP_EXPORT CUresult cuGraphInstantiate(CUgraphExec *exec, CUgraph graph, CUgraphNode *err,
					 char *log, size_t log_size);
VMMXP_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *exec, CUgraph graph, CUgraphNode *err,
					    char *log, size_t log_size);
VMMXP_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
						  unsigned long long flags);
VMMXP_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph graph,
						   void *params);
VMMXP_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *exec, CUgraph graph,
							void *params);
VMMXP_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec);
VMMXP_EXPORT CUresult cuGraphExecUpdate(CUgraphExec exec, CUgraph graph, CUgraphNode *err,
					int *result);
VMMXP_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph graph, void *info);
VMMXP_EXPORT CUresult cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
						     const void *params);
VMMXP_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
							const void *params);
VMMXP_EXPORT CUresult cuGraphExecNodeSetParams(CUgraphExec exec, CUgraphNode node, void *params);
VMMXP_EXPORT CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec exec, CUgraphNode node,
							 CUgraph child);
VMMXP_EXPORT cudaError_t cudaGraphInstantiate(CUgraphExec *exec, CUgraph graph, uintptr_t a3,
					      uintptr_t a4, uintptr_t a5);
VMMXP_EXPORT cudaError_t cudaGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
						       unsigned long long flags);
VMMXP_EXPORT cudaError_t cudaGraphInstantiateWithParams(CUgraphExec *exec, CUgraph graph,
							void *params);
VMMXP_EXPORT cudaError_t cudaGraphInstantiateWithParams_ptsz(CUgraphExec *exec, CUgraph graph,
							     void *params);
VMMXP_EXPORT cudaError_t cudaGraphExecDestroy(CUgraphExec exec);
VMMXP_EXPORT cudaError_t cudaGraphExecUpdate(CUgraphExec exec, CUgraph graph, uintptr_t a3,
					     uintptr_t a4);
VMMXP_EXPORT cudaError_t cudaGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
							  const void *params);
VMMXP_EXPORT cudaError_t cudaGraphExecNodeSetParams(CUgraphExec exec, CUgraphNode node,
						    void *params);
VMMXP_EXPORT cudaError_t cudaGraphExecChildGraphNodeSetParams(CUgraphExec exec, CUgraphNode node,
							      CUgraph child);
/* graph.c's helpers, called only */
VMMXP_EXPORT CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode *nodes, size_t *n);
VMMXP_EXPORT CUresult cuGraphNodeGetType(CUgraphNode node, int *type);
VMMXP_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node,
						    struct vmmxp_kernel_node_params *params);
VMMXP_EXPORT CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph *child);
/* helpers, called only (CUDA 12.3 and 12.4 on; absent from older drivers) */
VMMXP_EXPORT CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t *offset, size_t *size);
VMMXP_EXPORT CUresult cuKernelGetParamInfo(void *kernel, size_t index, size_t *offset,
					   size_t *size);
VMMXP_EXPORT CUresult cuFuncGetName(const char **name, CUfunction f);
VMMXP_EXPORT CUresult cuKernelGetName(const char **name, void *kernel);
VMMXP_EXPORT cudaError_t cudaGetFuncBySymbol(CUfunction *f, const void *symbol);
/* helpers of --placement launch: last-use events (events are never destroyed: a ring) */
VMMXP_EXPORT CUresult cuEventCreate(void **event, unsigned int flags);
VMMXP_EXPORT CUresult cuEventRecord(void *event, CUstream stream);
VMMXP_EXPORT CUresult cuEventQuery(void *event);
VMMXP_EXPORT CUresult cuEventSynchronize(void *event);
VMMXP_EXPORT CUresult cuEventElapsedTime(float *ms, void *start, void *end);
/* A third stream's last use of a segment joined to the stream that uses it next. */
VMMXP_EXPORT CUresult cuStreamWaitEvent(CUstream stream, void *event, unsigned int flags);
/* A launch on a stream being captured into a graph is not placed (nothing runs yet). */
VMMXP_EXPORT CUresult cuStreamIsCapturing(CUstream stream, int *status);
/* VMMX_RUN_PLACE_CHECK: each placed launch waited for, its error reported. */
VMMXP_EXPORT CUresult cuStreamSynchronize(CUstream stream);
/* VMMX_RUN_CACHE_FIRST: no request refused while the thread's capture mode is not global. */
VMMXP_EXPORT CUresult cuThreadExchangeStreamCaptureMode(int *mode);

/* resolve.c */

/* The lookups that can hand back a hook, counted for the report. */
enum vmmxp_path {
	VMMXP_PATH_DLSYM,       /* dlsym() on the driver's or the runtime's handle */
	VMMXP_PATH_DLVSYM,      /* dlvsym() likewise */
	VMMXP_PATH_PROC,        /* cuGetProcAddress(), both ABIs */
	VMMXP_NPATHS
};

VMMXP_EXPORT void *dlsym(void *handle, const char *name);
VMMXP_EXPORT void *dlvsym(void *handle, const char *name, const char *version);
uint64_t vmmxp_lookups(enum vmmxp_path path);
void *vmmxp_real(enum vmmxp_fn fn);
void vmmxp_depth(int d);
void *vmmxp_hook(enum vmmxp_fn fn);
const char *vmmxp_fn_name(enum vmmxp_fn fn);
#define VMMXP_REAL(f) ((__typeof__(&f))vmmxp_real(VMMXP_FN_##f))

/* state.c: what the hooks call */

/* Kinds of allocation and free, as counted for the report. */
enum vmmxp_kind {
	VMMXP_RT_MALLOC,        /* cudaMalloc, cudaMallocPitch, cudaMalloc3D */
	VMMXP_RT_MALLOC_ASYNC,  /* cudaMallocAsync */
	VMMXP_DRV_MALLOC,       /* cuMemAlloc, cuMemAllocPitch */
	VMMXP_DRV_MALLOC_ASYNC, /* cuMemAllocAsync */
	VMMXP_DRV_MALLOC_POOL,  /* cuMemAllocFromPoolAsync on a device's default pool */
	VMMXP_NKINDS
};

/* What passes through untouched, counted for the report (vmmxp_count()). */
enum vmmxp_counter {
	VMMXP_N_VMM_CREATE,       /* the program's own cuMemCreate calls */
	VMMXP_N_VMM_CREATE_BYTES, /* ... their bytes */
	VMMXP_N_VMM_MAP,          /* its cuMemMap calls */
	VMMXP_N_VMM_MAP_BYTES,    /* ... their bytes */
	VMMXP_N_VMM_RELEASE,      /* its cuMemRelease calls */
	VMMXP_N_POOL_CREATE,      /* pools it made with cuMemPoolCreate */
	VMMXP_N_POOL_ALLOC,       /* cuMemAllocFromPoolAsync on those pools */
	VMMXP_N_POOL_ALLOC_BYTES, /* ... their bytes */
	VMMXP_NCOUNTERS
};

void vmmxp_count(enum vmmxp_counter c, uint64_t n);

/* Results of vmmxp_malloc() and vmmxp_free() beside 0 and -VMMX_E*. */
#define VMMXP_PASS 1            /* not ours: call the real function */

/*
 * vmmxp_busy() (resolve.c): the thread is inside libvmmx (or the report),
 * having said so with vmmxp_depth(1); hooks and the dlsym and
 * cuGetProcAddress substitutions step aside, so libvmmx's own driver calls
 * reach the driver.
 */
int vmmxp_busy(void);
/*
 * vmmxp_malloc()'s @flags: VMMXP_ASKS_AGAIN, a plain cudaMalloc or cuMemAlloc,
 * the calls caching allocators (PyTorch's, CuPy's) ask again with the same
 * size after freeing their cache: the ones VMMX_RUN_CACHE_FIRST may refuse
 * once.
 */
#define VMMXP_ASKS_AGAIN 1u
int vmmxp_malloc(int device, size_t size, void *stream, enum vmmxp_kind kind, unsigned int flags,
		 void **ptr_p);
int vmmxp_free(const void *ptr, void *stream, int sync);
int vmmxp_meminfo(int device, size_t *free_p, size_t *total_p);
/* A default pool's usage attribute (CU_MEMPOOL_ATTR_*_MEM_*) of libvmmx on @device. */
int vmmxp_pool_usage(int device, int attr, uint64_t *value);
/* Give the idle memory of @device's allocator back (cuMemPoolTrimTo on its default pool). */
void vmmxp_trim(int device);
int vmmxp_owned(const void *ptr);
void vmmxp_refuse(const char *call, const void *ptr, const char *why);

/*
 * vmmxp_split() - run a call that sets a range in pieces the driver takes.
 * The driver refuses a memset that runs from one host allocation into
 * another, or between device and host memory (CUDA_ERROR_INVALID_VALUE):
 * @fn is called for each stretch of [@ptr, @ptr + @len) that lies in one
 * host chunk or in consecutive chunks of one GPU, in address order, with
 * @arg.  A range libvmmx does not map, or a thread inside libvmmx, gets one
 * call with the whole range.  @align: the element size; a misaligned @ptr
 * is the driver's to refuse, whole.
 *
 * Return: 0, or the first nonzero result of @fn (the rest is not run).
 */
typedef int vmmxp_piece_fn(void *arg, uintptr_t ptr, size_t len);
int vmmxp_split(const void *ptr, size_t len, size_t align, vmmxp_piece_fn *fn, void *arg);

/*
 * A thread's small state read at every launch or call the interposer
 * passes on: the initial-exec model reads it at a fixed offset from the
 * thread pointer, where the default model of a shared object asks
 * __tls_get_addr() each time (6% of a watched launch, measured on the
 * sim).  The library is preloaded, so its TLS is laid out at start; a
 * later dlopen() of it takes these few words from glibc's static surplus.
 */
#define VMMXP_TLS __thread __attribute__((tls_model("initial-exec")))

/* The most devices the interposer serves (state.c's allocators). */
#define VMMXP_MAX_DEVICES 64

/* The contexts of the allocators made so far, up to @max in @ctx; returns how many. */
int vmmxp_ctxs(struct vmmx_ctx **ctx, int max);
/* The allocators made so far and their devices, up to @max; returns how many. */
int vmmxp_allocs(struct vmmx_alloc **a, int *dev, int max);

/* ---- sleep and wake from outside (control.c) ---- */

/* VMMX_RUN_CONTROL set (vmmx-run --control); read once. */
int vmmxp_control_on(void);
/*
 * vmmxp_control_start() - open the control socket and start its thread,
 * once per process; a failure is printed and leaves control off.
 * Context: the first allocation (state.c), any thread.
 */
void vmmxp_control_start(void);
/*
 * vmmxp_gate_enter() / vmmxp_gate_leave() - around the allocation and free
 * hooks' work on an allocator: waits while the memory is asleep or a sleep
 * or wake runs.  No-ops without --control.
 * Context: a program thread, marked inside libvmmx, holding no lock of ours.
 */
void vmmxp_gate_enter(void);
void vmmxp_gate_leave(void);
/*
 * vmmxp_control_track() - one allocation more (@delta 1) or less (-1) in
 * segment @buf, the segments a sleep puts to sleep.
 * Return: 0; -VMMX_ENOMEM (the allocation is then not counted).
 * Context: inside the gate; takes the table's mutex.
 */
int vmmxp_control_track(struct vmmx_buf *buf, int delta);
/* A forked child's locks afresh, control off (atfork, state.c). */
void vmmxp_control_after_fork(void);

/* ---- kernel launches (launch.c) ---- */

/*
 * vmmxp_launch_on() (resolve.c) - whether launches are watched:
 * VMMX_RUN_LAUNCHES=1 (vmmx-run --launches), a launch trace asked for
 * (VMMX_RUN_LAUNCH_TRACE, vmmx-run --trace) or placement by launches
 * (VMMX_RUN_PLACEMENT=launch).  Read once.  Off, the launch
 * hooks call the real entry point at once and the lookups hand back the
 * real address.
 */
int vmmxp_launch_on(void);
/*
 * Whether every launch is to be read from the first: --launches
 * (resolve.c).  A trace alone (--trace) records what is read: under
 * --placement launch, from the first spill on, so that a traced run
 * places as an untraced one does.  Read once.
 */
int vmmxp_launches_asked(void);
/* Whether @fn is one of the launch hooks (graph instantiation and changes among them). */
int vmmxp_fn_is_launch(int fn);

/* The most chunks of one launch placed (and kept by the watch, distinct). */
#define VMMXP_PLACE_MAX 256

/* The launch entry points, counted apart (each with its _ptsz form). */
enum vmmxp_launch_api {
	VMMXP_LAUNCH_CU,        /* cuLaunchKernel */
	VMMXP_LAUNCH_CU_EX,     /* cuLaunchKernelEx */
	VMMXP_LAUNCH_CU_COOP,   /* cuLaunchCooperativeKernel */
	VMMXP_LAUNCH_RT,        /* cudaLaunchKernel */
	VMMXP_LAUNCH_RT_EX,     /* cudaLaunchKernelExC */
	VMMXP_NLAUNCH_APIS
};

/* What the launches named, for the report. */
struct vmmxp_launch_stats {
	uint64_t launches[VMMXP_NLAUNCH_APIS]; /* watched, per entry point */
	uint64_t unread;           /* launches whose parameter layout the driver did not give */
	uint64_t uncached;         /* launches whose layout found no room in the cache */
	uint64_t named;            /* distinct libvmmx chunks named, summed over launches */
	uint64_t named_host;       /* ... of them in host memory at launch */
	uint64_t named_pairs;      /* ... of them only by words read as two 32-bit integers */
	uint64_t spilled_launches; /* launches that named at least one chunk in host memory */
	uint64_t graphs;           /* graph launches watched (cuGraphLaunch, cudaGraphLaunch) */
	uint64_t graphs_unread;    /* ... not read: an executable graph not read at instantiation */
	uint64_t graphs_read;      /* executable graphs read at instantiation (graph.c) */
	uint64_t graphs_failed;    /* ... not read: the driver refused a call, or no room */
	uint64_t graphs_forgotten; /* ... forgotten when changed in place */
	uint64_t kernel_nodes;     /* kernel nodes read, summed over the graphs read */
	uint64_t kernel_nodes_unread; /* ... of them without a parameter layout */
	uint64_t copy_nodes;       /* memcpy and memset nodes, not read */
	uint64_t segs_dropped;     /* segments past the most one graph keeps */
	uint64_t captured;         /* launches into a graph being captured: not placed */
};

struct vmmxp_launch_stats vmmxp_launch_stats(void);

/*
 * What one launch named (launch.c): the contexts it was looked up on, the
 * first VMMXP_PLACE_MAX distinct chunks (each with its context and the
 * address that named it first), all counted (@total), those in host memory
 * apart (@host).
 */
struct vmmxp_named {
	struct vmmx_ctx *ctx[VMMXP_MAX_DEVICES];
	int nctx;
	struct vmmx_chunk_info chunk[VMMXP_PLACE_MAX];
	struct vmmx_ctx *chunk_ctx[VMMXP_PLACE_MAX];
	uint64_t word[VMMXP_PLACE_MAX];
	/*
	 * Where each word lay: the index of the parameter and the word's byte
	 * offset in the launch's parameter block; a packed "extra" buffer's word
	 * has its offset in the buffer and parameter -1; a word not read from
	 * parameters (a copy's, a graph launch's segment bases) has both -1.
	 * For the trace: which argument named a chunk.
	 */
	int32_t param[VMMXP_PLACE_MAX], off[VMMXP_PLACE_MAX];
	/*
	 * What every word that named the chunk reads as (vmmxp_word_kind()):
	 * VMMXP_WORD_PAIR, two 32-bit integers (held and waited for, never
	 * placed by them); VMMXP_WORD_UNSURE, maybe no pointer; 0, a pointer.
	 */
	unsigned char kind[VMMXP_PLACE_MAX];
	size_t n, total, host;
	size_t pairs;           /* ... of total, named only by such words */
	size_t shared;          /* the launch's dynamic shared memory, bytes (0 for a graph) */
};

/* What a parameter word that names memory reads as (vmmxp_word_kind()); a pair is unsure too. */
#define VMMXP_WORD_PAIR 1u
#define VMMXP_WORD_UNSURE 2u
/*
 * vmmxp_word_kind() - what the parameter word @w, which names memory whose
 * allocation (libvmmx buffer) begins at @seg, reads as: 0 when @w is the
 * allocation's base, or reads as a pointer; else VMMXP_WORD_UNSURE, and
 * VMMXP_WORD_PAIR with it when @w reads better as two 32-bit integers
 * than as a pointer.  The CUDA driver hands out device addresses from a
 * few GiB up (0x302000000 on the H200), so the high half of a real
 * pointer is a small number too, and a pair such as { 3, 4 } (two sizes
 * of an index calculator, PyTorch's OffsetCalculator) is the address
 * 0x400000003, inside whatever allocation spans 16 GiB.
 *  - A pair: the low half within 64 KiB of zero (a small int, or a small
 *    negative one).  A pointer inside an allocation lies that close above
 *    or below a 4 GiB boundary once in 32768.
 *  - Unsure: a pair, an odd address, or the low half within 1 MiB of zero
 *    (one in 2048): the stale slots of by-value structs (PyTorch's
 *    concatenation metadata: 0x500038c00) and packed descriptors (cuBLAS's,
 *    odd words).  Such a word names memory as a pointer does, but does not
 *    end a segment's idleness (place.c, vmmxp_place_allocated()).
 */
unsigned int vmmxp_word_kind(uint64_t w, const void *seg);
/* Empty @nm, on the contexts of the allocators made so far. */
void vmmxp_named_start(struct vmmxp_named *nm);
/* The chunk that maps the address @w, if any, added to @nm (once). */
void vmmxp_name_word(struct vmmxp_named *nm, uint64_t w);
/* The chunk at the segment base @base added to @nm (once), named by words of @kind (a graph's). */
void vmmxp_name_seg(struct vmmxp_named *nm, uint64_t base, unsigned int kind);
/* The chunks of @from added to @nm, each once, with no new lookup. */
void vmmxp_named_merge(struct vmmxp_named *nm, const struct vmmxp_named *from);
/*
 * vmmxp_name_params() - the chunks the parameters of a launch of @f (a
 * CUfunction or a CUkernel) name, added to @nm: @params (an array of
 * pointers to each, read with @f's cached layout) or the packed buffer of
 * @extra.
 * Return: the number of parameters read; -1 when @f's layout is unknown.
 * Context: inside libvmmx (vmmxp_depth()).
 */
int vmmxp_name_params(struct vmmxp_named *nm, CUfunction f, void **params, void **extra);
/*
 * vmmxp_launch_named() - the rest of a watched launch, whose chunks are in
 * @nm: counted, fed to the cycle learner as a launch of @key (its handle,
 * low bits told apart by kind: a kernel's 0 or 1, a graph's 3), traced with
 * @api, @kernel and @nparams, and placed (--placement launch).
 * Return: 1 when the placement lock is held: the caller passes the launch
 * on, then calls vmmxp_place_done(); else 0.
 * Context: inside libvmmx (vmmxp_depth()); may block (placement).
 */
int vmmxp_launch_named(const char *api, const char *kernel, int nparams, uint64_t key,
		       CUstream stream, const struct vmmxp_named *nm);
/*
 * vmmxp_capturing() - whether @stream is capturing into a graph: its work
 * is recorded, not run, and placement's moves, waits and events have no
 * place in a capture.  A driver without the call, or refusing it: no.
 */
int vmmxp_capturing(CUstream stream);

/* ---- executable graphs (graph.c) ---- */

/*
 * vmmxp_graph_watch() - a launch of @exec on @stream through @api: watched
 * as one launch naming the segments its kernel nodes named at instantiation
 * when @exec was read, counted as not read otherwise.
 * Return: as vmmxp_launch_named().
 * Context: a program thread, launches watched.
 */
int vmmxp_graph_watch(const char *api, CUgraphExec exec, CUstream stream);
/* The graph counters of @st. */
void vmmxp_graph_stats(struct vmmxp_launch_stats *st);
/* A forked child's table lock afresh. */
void vmmxp_graph_after_fork(void);

/* ---- the launch cycle (cycle.c) ---- */

struct vmmxp_cycle_stats {
	uint64_t learned;       /* cycles confirmed */
	uint64_t proposed;      /* cycles proposed (a launch's kernel and key came round,
				 * and the launches before it repeat) */
	uint64_t rejected;      /* ... dropped before they were confirmed */
	uint64_t refused;       /* proposals refused by verification (the launches before it
				 * did not repeat) */
	uint64_t dropped;       /* confirmed cycles dropped: too many launches not the expected ones */
	uint64_t last_len;      /* launches in the last cycle confirmed */
	uint64_t in_cycle;      /* launches that fell where a known cycle expected them */
};

/*
 * vmmxp_cycle_note() - one launch: its @kernel and the @n places it named
 * (@segs: an address in each segment named, the one the launch named it
 * by), their segments each of @sizes bytes, in parameter order; segs[@key]
 * is the one that identifies it (its key), or with @key >= @n the one in
 * the largest segment does.
 * Return: its position in the known cycle, or -1 when none is known (or
 * the launch is not one the cycle expects).
 * Context: any thread; takes the cycle's mutex.
 */
long vmmxp_cycle_note(uint64_t kernel, const uint64_t *segs, const size_t *sizes, size_t n,
		      size_t key);
/*
 * The known cycle's length in launches; 0 while none is known.  Each cycle
 * proposed has a new *@generation_p (may be NULL): positions of two
 * generations are unrelated.
 */
uint64_t vmmxp_cycle_len(uint64_t *generation_p);
/* Whether the cycle of generation @gen is the one known now, and confirmed. */
int vmmxp_cycle_confirmed(uint64_t gen);
/* A forked child's locks afresh (the threads that held them are not there). */
void vmmxp_cycle_after_fork(void);
void vmmxp_place_after_fork(void);

/* ---- --placement launch (place.c) ---- */

struct vmmxp_place_stats {
	uint64_t promoted, promoted_bytes;  /* segments brought to the device */
	uint64_t ahead;                     /* ... of them ahead of their launch (the cycle known) */
	uint64_t on_demand;                 /* ... for the launch about to be passed on */
	uint64_t evicted, evicted_bytes;    /* segments sent back to host memory for room */
	uint64_t evicted_next_use;          /* ... chosen by next use, a cycle being known */
	uint64_t evicted_lru;               /* ... chosen as the least recently named */
	uint64_t no_room;                   /* segments left in host memory: no victim */
	uint64_t in_place;                  /* ... read once, the device full of sooner needs */
	uint64_t too_large;                 /* ... too large to make room for (see place.c) */
	uint64_t idle_tracked;              /* allocations too large to move, tracked from then (place.c) */
	uint64_t idle_named;                /* ... of them named since */
	uint64_t idle_again;                /* ... idle again: two whole cycles did not name them */
	uint64_t idle_unsure;               /* namings of idle ones by unsure words only: still idle */
	uint64_t settled;                   /* launches passed as before a spill, the cycle settled */
	uint64_t idle_sent;                 /* ... sent back, unnamed a cycle after their allocation */
	uint64_t failed;                    /* moves that failed (each chunk stays where it was) */
	uint64_t waits;                     /* moves that waited for a last use still running */
	uint64_t device_syncs;              /* ... for the whole device (no event to wait on) */
	uint64_t in_ns, out_ns, wait_ns;    /* time in moves to the device, back, and in waits */
	uint64_t swaps;                     /* send backs made with their bring-in (vmmx_swap()) */
	uint64_t queued;                    /* moves ahead queued for the mover threads */
	uint64_t cancelled;                 /* ... of them not begun when their launch came */
	uint64_t movers;                    /* mover threads started */
	uint64_t busy_most;                 /* most moves ahead under way at once */
	uint64_t mover_waits, mover_wait_ns; /* launches that waited for the mover, and how long */
	uint64_t copies;                    /* copies and memsets held as uses of segments */
	uint64_t joins;                     /* last uses on a third stream joined (cuStreamWaitEvent) */
	uint64_t spread_chosen;             /* kept sets chosen (VMMX_RUN_PLACE_SPREAD) */
	uint64_t spread_kept, spread_kept_bytes; /* ... the last: segments kept, their bytes, */
	uint64_t spread_segments, spread_bytes;  /* ... of the cycle's that may move */
	uint64_t spread_gaps;               /* ... places of the pass its plan did not hold */
	uint64_t spread_refused;            /* passes spread_choose() chose nothing for */
	const char *spread_why;             /* ... the last one's reason (a static string) */
	uint64_t trials;                    /* trials of moving against reading in place decided */
	uint64_t trial_in_place;            /* ... of them for reading in place */
	uint64_t trial_unmeasured;          /* ... not timed (moving kept) */
	uint64_t trial_cut;                 /* trials cut short: their cycle went */
	uint64_t trial_settled;             /* passes settled or measured again: host memory made */
	uint64_t trial_in_place_now;        /* 1: reading in place is in force now */
	uint64_t trial_len;                 /* the last decided: its cycle's launches, */
	uint64_t trial_moving_ns;           /* ... a cycle's time moving, */
	uint64_t trial_in_place_ns;         /* ... and reading in place */
	uint64_t tiled;                     /* launches placed taken for tiled (their namings weigh more) */
	uint64_t parked;                    /* sends back that parked (VMMX_RUN_PLACE_PARK) */
	uint64_t unparked, unpark_ns;       /* parked segments mapped in place for a launch or copy */
	uint64_t park_stopped;              /* why parking stopped: 1 a launch the watch could not
					     * read whole (vmmxp_place_unseen), 2 frozen (below) */
	uint64_t pointed;                   /* segments never moved again: copied data points into them */
	uint64_t frozen;                    /* 1: nothing moves any more: a copy's addresses
					     * could not all be marked (vmmxp_place_pointed) */
};

/*
 * vmmxp_trace_move() - one move of --placement launch in the launch trace,
 * when one is kept: {"time":..,"pid":..,"event":"move","to":"device" or
 * "host","base":"0x..","size":N,"ns":N,"ok":true or false,"by":"launch" or
 * "mover"}: the segment at @base, @size of its bytes moved in @ns
 * nanoseconds (@err: it failed), on the launching thread or a mover
 * (@mover).  Context: any thread (one write() a record).
 */
void vmmxp_trace_move(const void *base, size_t size, int to_device, uint64_t ns, int err,
		      int mover);
/*
 * vmmxp_trace_wait() - a wait of --placement launch, in the launch trace
 * when one is kept: {"time":..,"pid":..,"event":"wait","for":@what,
 * "base":"0x..","ns":N,"by":"launch" or "mover" (@mover)}: @what is
 * "mover" (a launch waits for a move of the segment at @base under way),
 * "pieces" (for a move above the piece at @base), "device" (a move of
 * @base waits for the whole device) or "event" (for the last use of
 * @base, not yet done when asked).  The time is the record's, at the
 * wait's end.
 */
void vmmxp_trace_wait(const char *what, const void *base, uint64_t ns, int mover);
/*
 * vmmxp_trace_check() - VMMX_RUN_PLACE_CHECK's record, after the launch it
 * waited for: {"time":..,"pid":..,"event":"check","err":N} (@err: the
 * driver's code for the wait, 0 when the launch ran).
 */
void vmmxp_trace_check(int err);

/* VMMX_RUN_PLACEMENT=launch (vmmx-run --placement launch); read once. */
int vmmxp_place_on(void);
/*
 * vmmxp_place_unseen() - a launch is about to be passed on whose memory
 * the watch could not name whole (its parameter layout unknown, more
 * chunks than it keeps, a graph not read whole): under VMMX_RUN_PLACE_PARK,
 * parking stops for good and every parked segment is mapped in place
 * before this returns (place.c).  Cheap when nothing parks.
 */
void vmmxp_place_unseen(void);
/*
 * vmmxp_place_pointed() - host data about to be copied to the device holds
 * addresses in the @n chunks (@chunk, each on @ctx; a caller with more
 * calls again for the rest): the segments of those chunks never move nor
 * park from now on (a kernel may reach them through the copy at any time,
 * unnamed); before this returns, a move of one under way is done and one
 * parked is mapped in place.  When one cannot be marked (the table full,
 * or a piece of a segment moved in pieces, whose pieces above a kernel may
 * read too), nothing moves or parks any more (place.c).
 * Context: inside libvmmx (vmmxp_depth()); may block (the movers).
 */
void vmmxp_place_pointed(const struct vmmx_chunk_info *chunk, struct vmmx_ctx *const *ctx,
			 size_t n);
/*
 * vmmxp_place_quiet() - whether a launch may be passed on unread: launch
 * placement alone reads launches (no --launches, no --trace) and none of
 * the program's memory was seen in host memory yet, looked at on the first
 * call and every SPILL_CHECK-th (place.c).  Before memory spills nothing
 * moves, so a program that fits on the device pays a few atomics a launch.
 * A segment first named after such launches has no known last use: its
 * first move waits for the whole device.  Graphs are read at instantiation
 * all the same.
 * Return: 1: the caller passes the launch on, then calls
 * vmmxp_place_quiet_done() (the spill waits for the launches in between);
 * 0: read the launch.
 * Context: any thread; lock-free but for the look.
 */
int vmmxp_place_quiet(void);
void vmmxp_place_quiet_done(void);
/* The launches vmmxp_place_quiet() let pass unread. */
uint64_t vmmxp_place_quiet_count(void);
/*
 * vmmxp_place_launch() - place the segments of the @n chunks one launch
 * names (@chunk, each of context @ctx[i]) before it is passed on.
 * @kind[i]: what the words that named chunk i read as (vmmxp_word_kind()).
 * VMMXP_WORD_PAIR: only as two 32-bit integers: its segment is held as
 * this launch's (not moved under it, mapped in place if parked, its last
 * use recorded) but neither brought in nor counted as named for
 * placement.  VMMXP_WORD_UNSURE alone: named, unless the segment is idle
 * (vmmxp_place_allocated()): then held as by a pair, and still idle.
 * @shared: the launch's dynamic shared memory in bytes (a kernel with 32
 * KiB or more works on tiles it reads again: its namings weigh more when
 * reading in place, see place.c's TILED_SHARED).  @capturing, asked only
 * when something may move, says whether @stream is capturing into a graph
 * (nothing is placed then).
 * Return: 1: the placement lock is held; the caller passes the launch on,
 * then calls vmmxp_place_done(); 0: nothing to do after it.
 * Context: the thread inside libvmmx (vmmxp_depth()); may block (waits for
 * the device, copies); calls the driver.
 */
int vmmxp_place_launch(const struct vmmx_chunk_info *chunk, struct vmmx_ctx *const *ctx,
		       const unsigned char *kind, size_t n, long at, CUstream stream, size_t shared,
		       int (*capturing)(CUstream));
void vmmxp_place_done(void);
/*
 * vmmxp_place_use() - a copy or memset naming the @n chunks (@chunk, each
 * of context @ctx[i]) is about to be passed on to @stream: their segments
 * are held (never moved, by the mover or a launch) until
 * vmmxp_place_use_done() has recorded the call as their last use.
 * @capturing as for vmmxp_place_launch().  Return: 1 when held (call
 * vmmxp_place_use_done() after the real call), 0 when nothing needs doing.
 * Context: the thread inside libvmmx (vmmxp_depth()); may wait for the mover.
 */
int vmmxp_place_use(const struct vmmx_chunk_info *chunk, struct vmmx_ctx *const *ctx, size_t n,
		    CUstream stream, int (*capturing)(CUstream));
void vmmxp_place_use_done(CUstream stream);
/*
 * vmmxp_place_hold() - the program's allocation, free or trim is about to
 * call the allocator, which may destroy buffers: the placement looks none
 * up until vmmxp_place_hold_done() (a move under way in libvmmx goes on:
 * libvmmx holds its buffer, and a destroy waits for it).  Takes the
 * placement's lock: not from inside the placement.
 */
void vmmxp_place_hold(void);
void vmmxp_place_hold_done(void);
/*
 * vmmxp_place_allocated() - the program's allocation at @ptr on @ctx was
 * just made: one too large to move (more than a quarter of the device) is
 * tracked, and may be sent back, mapped, once a cycle passed without a
 * launch, copy or memset naming it (place.c).  Context: between
 * vmmxp_place_hold() and vmmxp_place_hold_done().
 */
void vmmxp_place_allocated(struct vmmx_ctx *ctx, void *ptr);
/*
 * vmmxp_place_idle_held() - whether a segment of @ctx tracked from its
 * allocation and named by nothing since holds @size bytes or more on the
 * device: memory the program took and does not use, as a caching
 * allocator's cached block (VMMX_RUN_CACHE_FIRST, state.c).  Context:
 * between vmmxp_place_hold() and vmmxp_place_hold_done().
 */
int vmmxp_place_idle_held(struct vmmx_ctx *ctx, size_t size);
struct vmmxp_place_stats vmmxp_place_stats(void);
struct vmmxp_cycle_stats vmmxp_cycle_stats(void);
const char *vmmxp_launch_api_name(enum vmmxp_launch_api api);

#endif /* VMMX_PRELOAD_H */
