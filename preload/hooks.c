// SPDX-License-Identifier: MIT
/*
 * hooks.c - the interposed CUDA runtime and driver calls.  Each one finds the
 * calling thread's device, asks state.c, and either answers from libvmmx or
 * calls the real function (not ours, the interposer disabled, or the thread
 * already inside libvmmx).
 *
 * Devices: the runtime's calls use the runtime's current device
 * (cudaGetDevice), the driver's the current context's (cuCtxGetDevice);
 * when that fails (no context), the real call runs and returns the error
 * the program would have had.
 *
 * Streams: CU_STREAM_LEGACY (0x1) is the legacy default stream, NULL to the
 * allocator; a _ptsz entry point's stream 0 is the per-thread default stream
 * (CU_STREAM_PER_THREAD, 0x2).
 *
 * Errors: out of room everywhere the policy allows is the out-of-memory
 * code of each API (cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY),
 * and so is any other libvmmx failure of an allocation: programs and
 * frameworks know how to handle that one.  A free of an address inside an
 * allocation, or freed twice, is cudaErrorInvalidValue, as the runtime says.
 */
#include "config.h"

#include "preload/preload.h"

/* cudaMallocPitch rows are aligned like the runtime's (cudaDevAttrTexturePitchAlignment is 32 or 128; 512 is safe). */
#define PITCH_ALIGN ((size_t)512)
/* What the helpers below return for "call the real function" (CUDA's codes are >= 0). */
#define PASS (-1)

static int rt_device(int *dev)
{
	cudaError_t (*get)(int *) = VMMXP_REAL(cudaGetDevice);

	*dev = 0;
	return get ? get(dev) : CUDA_OK;
}

static int drv_device(int *dev)
{
	CUresult (*get)(int *) = VMMXP_REAL(cuCtxGetDevice);

	return get ? get(dev) : CUDA_EINVAL;
}

static void *stream_of(void *s, int ptsz)
{
	if (s == CU_STREAM_LEGACY_)
		return NULL;
	if (!s && ptsz)
		return CU_STREAM_PER_THREAD_;
	return s;
}

static int code_of(int err)
{
	return err == -VMMX_EINVAL ? CUDA_EINVAL : CUDA_ENOMEM;
}

/* ---- runtime ---- */

static cudaError_t rt_malloc(void **ptr, size_t size, void *stream, enum vmmxp_kind kind)
{
	int dev, err;

	if (!ptr || rt_device(&dev) != CUDA_OK)
		return PASS;
	err = vmmxp_malloc(dev, size, stream, kind, ptr);
	return err == VMMXP_PASS ? PASS : err ? code_of(err) : CUDA_OK;
}

VMMXP_EXPORT cudaError_t cudaMalloc(void **ptr, size_t size)
{
	cudaError_t r = rt_malloc(ptr, size, NULL, VMMXP_RT_MALLOC);

	return r != PASS ? r : VMMXP_REAL(cudaMalloc)(ptr, size);
}

VMMXP_EXPORT cudaError_t cudaFree(void *ptr)
{
	int err = vmmxp_free(ptr, NULL, 1);

	if (err == VMMXP_PASS)
		return VMMXP_REAL(cudaFree)(ptr);
	return err ? CUDA_EINVAL : CUDA_OK;
}

VMMXP_EXPORT cudaError_t cudaMallocAsync(void **ptr, size_t size, void *stream)
{
	cudaError_t r = rt_malloc(ptr, size, stream_of(stream, 0), VMMXP_RT_MALLOC_ASYNC);

	return r != PASS ? r : VMMXP_REAL(cudaMallocAsync)(ptr, size, stream);
}

VMMXP_EXPORT cudaError_t cudaFreeAsync(void *ptr, void *stream)
{
	int err = vmmxp_free(ptr, stream_of(stream, 0), 0);

	if (err == VMMXP_PASS)
		return VMMXP_REAL(cudaFreeAsync)(ptr, stream);
	return err ? CUDA_EINVAL : CUDA_OK;
}

VMMXP_EXPORT cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, void *stream)
{
	cudaError_t r = rt_malloc(ptr, size, stream_of(stream, 1), VMMXP_RT_MALLOC_ASYNC);

	return r != PASS ? r : VMMXP_REAL(cudaMallocAsync_ptsz)(ptr, size, stream);
}

VMMXP_EXPORT cudaError_t cudaFreeAsync_ptsz(void *ptr, void *stream)
{
	int err = vmmxp_free(ptr, stream_of(stream, 1), 0);

	if (err == VMMXP_PASS)
		return VMMXP_REAL(cudaFreeAsync_ptsz)(ptr, stream);
	return err ? CUDA_EINVAL : CUDA_OK;
}

VMMXP_EXPORT cudaError_t cudaMemGetInfo(size_t *free_p, size_t *total_p)
{
	int dev, err;

	if (free_p && total_p && rt_device(&dev) == CUDA_OK) {
		err = vmmxp_meminfo(dev, free_p, total_p);
		if (err != VMMXP_PASS)
			return err ? CUDA_EINVAL : CUDA_OK;
	}
	return VMMXP_REAL(cudaMemGetInfo)(free_p, total_p);
}

VMMXP_EXPORT cudaError_t cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height)
{
	size_t p = (width + PITCH_ALIGN - 1) & ~(PITCH_ALIGN - 1);
	cudaError_t r = PASS;

	/* Bad arguments get the real call's own error. */
	if (pitch && p >= width && (!height || p <= SIZE_MAX / height))
		r = rt_malloc(ptr, p * height, NULL, VMMXP_RT_MALLOC);
	if (r == PASS)
		return VMMXP_REAL(cudaMallocPitch)(ptr, pitch, width, height);
	if (r == CUDA_OK)
		*pitch = p;
	return r;
}

VMMXP_EXPORT cudaError_t cudaMalloc3D(struct vmmxp_pitched_ptr *pp, struct vmmxp_extent ext)
{
	size_t p = (ext.width + PITCH_ALIGN - 1) & ~(PITCH_ALIGN - 1);
	size_t rows = ext.height * ext.depth;
	cudaError_t r = PASS;
	void *ptr = NULL;

	if (pp && p >= ext.width && (!ext.depth || rows / ext.depth == ext.height) &&
	    (!rows || p <= SIZE_MAX / rows))
		r = rt_malloc(&ptr, p * rows, NULL, VMMXP_RT_MALLOC);
	if (r == PASS)
		return VMMXP_REAL(cudaMalloc3D)(pp, ext);
	if (r == CUDA_OK)
		*pp = (struct vmmxp_pitched_ptr){ ptr, p, ext.width, ext.height };
	return r;
}

/*
 * IPC exports a cuMemAlloc allocation by handle; libvmmx memory is mapped
 * VMM chunks, which the driver cannot export that way (a VMM export needs a
 * shareable handle type chosen at cuMemCreate).  The driver's own answer for
 * an address that is not a cuMemAlloc allocation is an invalid value.
 */
VMMXP_EXPORT cudaError_t cudaIpcGetMemHandle(void *handle, void *ptr)
{
	if (vmmxp_owned(ptr)) {
		vmmxp_refuse("cudaIpcGetMemHandle", ptr,
			     "the memory comes from libvmmx (CUDA VMM chunks), which CUDA IPC "
			     "cannot export; returned cudaErrorInvalidValue");
		return CUDA_EINVAL;
	}
	return VMMXP_REAL(cudaIpcGetMemHandle)(handle, ptr);
}

/* ---- driver ---- */

static CUresult drv_malloc(CUdeviceptr *dptr, size_t size, void *stream, enum vmmxp_kind kind)
{
	void *p = NULL;
	int dev, err;

	if (!dptr || drv_device(&dev) != CUDA_OK)
		return PASS;
	/* cuMemAlloc refuses 0 bytes; so does the real call we hand it to. */
	if (!size)
		return PASS;
	err = vmmxp_malloc(dev, size, stream, kind, &p);
	if (err == VMMXP_PASS)
		return PASS;
	if (err)
		return code_of(err);
	*dptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_OK;
}

static CUresult drv_free(CUdeviceptr dptr, void *stream, int sync)
{
	int err = vmmxp_free((const void *)(uintptr_t)dptr, stream, sync);

	return err == VMMXP_PASS ? PASS : err ? CUDA_EINVAL : CUDA_OK;
}

VMMXP_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
	CUresult r = drv_malloc(dptr, size, NULL, VMMXP_DRV_MALLOC);

	return r != PASS ? r : VMMXP_REAL(cuMemAlloc_v2)(dptr, size);
}

VMMXP_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	CUresult r = drv_free(dptr, NULL, 1);

	return r != PASS ? r : VMMXP_REAL(cuMemFree_v2)(dptr);
}

VMMXP_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, void *stream)
{
	CUresult r = drv_malloc(dptr, size, stream_of(stream, 0), VMMXP_DRV_MALLOC_ASYNC);

	return r != PASS ? r : VMMXP_REAL(cuMemAllocAsync)(dptr, size, stream);
}

VMMXP_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, void *stream)
{
	CUresult r = drv_free(dptr, stream_of(stream, 0), 0);

	return r != PASS ? r : VMMXP_REAL(cuMemFreeAsync)(dptr, stream);
}

VMMXP_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, void *stream)
{
	CUresult r = drv_malloc(dptr, size, stream_of(stream, 1), VMMXP_DRV_MALLOC_ASYNC);

	return r != PASS ? r : VMMXP_REAL(cuMemAllocAsync_ptsz)(dptr, size, stream);
}

VMMXP_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, void *stream)
{
	CUresult r = drv_free(dptr, stream_of(stream, 1), 0);

	return r != PASS ? r : VMMXP_REAL(cuMemFreeAsync_ptsz)(dptr, stream);
}

VMMXP_EXPORT CUresult cuMemGetInfo_v2(size_t *free_p, size_t *total_p)
{
	int dev, err;

	if (free_p && total_p && drv_device(&dev) == CUDA_OK) {
		err = vmmxp_meminfo(dev, free_p, total_p);
		if (err != VMMXP_PASS)
			return err ? CUDA_EINVAL : CUDA_OK;
	}
	return VMMXP_REAL(cuMemGetInfo_v2)(free_p, total_p);
}

VMMXP_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
					size_t height, unsigned int elem)
{
	size_t p = (width + PITCH_ALIGN - 1) & ~(PITCH_ALIGN - 1);
	CUresult r = PASS;

	/* The driver's own checks (element size 4, 8 or 16, nonzero extents) stay the driver's. */
	if (pitch && width && height && (elem == 4 || elem == 8 || elem == 16) && p >= width &&
	    p <= SIZE_MAX / height)
		r = drv_malloc(dptr, p * height, NULL, VMMXP_DRV_MALLOC);
	if (r == PASS)
		return VMMXP_REAL(cuMemAllocPitch_v2)(dptr, pitch, width, height, elem);
	if (r == CUDA_OK)
		*pitch = p;
	return r;
}

VMMXP_EXPORT CUresult cuIpcGetMemHandle(void *handle, CUdeviceptr dptr)
{
	const void *ptr = (const void *)(uintptr_t)dptr;

	if (vmmxp_owned(ptr)) {
		vmmxp_refuse("cuIpcGetMemHandle", ptr,
			     "the memory comes from libvmmx (CUDA VMM chunks), which CUDA IPC "
			     "cannot export; returned CUDA_ERROR_INVALID_VALUE");
		return CUDA_EINVAL;
	}
	return VMMXP_REAL(cuIpcGetMemHandle)(handle, dptr);
}
