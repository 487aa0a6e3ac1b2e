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
 * Memsets: the driver refuses one that runs from one host allocation into
 * another, or between device and host memory; an allocation that spilled
 * is such a range.  Each memset hook runs the real call once per stretch
 * the driver takes (vmmxp_split()), with the same value, element size and
 * stream; memory libvmmx does not map gets the one real call unchanged.
 * The 2D memsets are not split (no framework uses them on pool memory);
 * the driver refuses a straddling one cleanly.
 *
 * Stream-ordered pools: cuMemAllocFromPoolAsync on a device's default pool
 * (the one cuMemAllocAsync uses; XLA's cuda_async allocator asks for it)
 * is served like cuMemAllocAsync, on the pool's device and the call's
 * stream, and freed by cuMemFreeAsync; the pool's usage attributes add
 * libvmmx's figures and cuMemPoolTrimTo on it also gives libvmmx's idle
 * memory back.  A pool the program made itself (cuMemPoolCreate) has
 * properties libvmmx does not keep (IPC export types, access from other
 * devices, a location of its choosing): its allocations pass through to
 * the driver untouched, counted for the report.
 *
 * The program's own VMM calls (cuMemCreate, cuMemMap, cuMemRelease: XLA's
 * VMM allocator, PyTorch's expandable segments) pass through untouched and
 * are counted for the report; libvmmx's own calls are not counted.
 *
 * Errors: out of room everywhere the policy allows is the out-of-memory
 * code of each API (cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY),
 * and so is any other libvmmx failure of an allocation: programs and
 * frameworks know how to handle that one.  The exception is a forked child
 * allocating on the parent's allocator (-VMMX_ENODRIVER): CUDA cannot be
 * used after fork, and the answer is the driver's own for that case
 * (cudaErrorInitializationError, CUDA_ERROR_NOT_INITIALIZED), never one of
 * the parent's addresses.  A free of an address inside an allocation, or
 * freed twice, is cudaErrorInvalidValue, as the runtime says.
 */
#include "config.h"

#include <string.h>

#include "preload/preload.h"

/* cudaMallocPitch rows are aligned like the runtime's (cudaDevAttrTexturePitchAlignment is 32 or 128; 512 is safe). */
#define PITCH_ALIGN ((size_t)512)
/* What the helpers below return for "call the real function" (CUDA's codes are >= 0). */
#define PASS (-1)
#define MAX_POOL_DEVICES 64

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
	if (err == -VMMX_EINVAL)
		return CUDA_EINVAL;
	return err == -VMMX_ENODRIVER ? CUDA_ENOTINIT : CUDA_ENOMEM;
}

/* ---- runtime ---- */

static cudaError_t rt_malloc(void **ptr, size_t size, void *stream, enum vmmxp_kind kind,
			     unsigned int flags)
{
	int dev, err;

	if (!ptr || rt_device(&dev) != CUDA_OK)
		return PASS;
	err = vmmxp_malloc(dev, size, stream, kind, flags, ptr);
	return err == VMMXP_PASS ? PASS : err ? code_of(err) : CUDA_OK;
}

VMMXP_EXPORT cudaError_t cudaMalloc(void **ptr, size_t size)
{
	cudaError_t r = rt_malloc(ptr, size, NULL, VMMXP_RT_MALLOC, VMMXP_ASKS_AGAIN);

	return r != PASS ? r : VMMXP_REAL(cudaMalloc)(ptr, size);
}

VMMXP_EXPORT cudaError_t cudaFree(void *ptr)
{
	int err = vmmxp_free(ptr, NULL, 1);

	if (err == VMMXP_PASS)
		return VMMXP_REAL(cudaFree)(ptr);
	return err ? CUDA_EINVAL : CUDA_OK;
}

/* cudaMallocAsync and its _ptsz twin (@ptsz: stream 0 is the per-thread stream). */
static cudaError_t rt_malloc_async(void **ptr, size_t size, void *stream, int ptsz)
{
	cudaError_t r = rt_malloc(ptr, size, stream_of(stream, ptsz), VMMXP_RT_MALLOC_ASYNC, 0);

	if (r != PASS)
		return r;
	return (ptsz ? VMMXP_REAL(cudaMallocAsync_ptsz) : VMMXP_REAL(cudaMallocAsync))(ptr, size,
										   stream);
}

static cudaError_t rt_free_async(void *ptr, void *stream, int ptsz)
{
	int err = vmmxp_free(ptr, stream_of(stream, ptsz), 0);

	if (err == VMMXP_PASS)
		return (ptsz ? VMMXP_REAL(cudaFreeAsync_ptsz) : VMMXP_REAL(cudaFreeAsync))(ptr, stream);
	return err ? CUDA_EINVAL : CUDA_OK;
}

VMMXP_EXPORT cudaError_t cudaMallocAsync(void **ptr, size_t size, void *stream)
{
	return rt_malloc_async(ptr, size, stream, 0);
}

VMMXP_EXPORT cudaError_t cudaFreeAsync(void *ptr, void *stream)
{
	return rt_free_async(ptr, stream, 0);
}

VMMXP_EXPORT cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, void *stream)
{
	return rt_malloc_async(ptr, size, stream, 1);
}

VMMXP_EXPORT cudaError_t cudaFreeAsync_ptsz(void *ptr, void *stream)
{
	return rt_free_async(ptr, stream, 1);
}

/* cudaMemGetInfo and cuMemGetInfo, on the device @device_of names. */
static int meminfo(int (*device_of)(int *), size_t *free_p, size_t *total_p)
{
	int dev, err;

	if (!free_p || !total_p || device_of(&dev) != CUDA_OK)
		return PASS;
	err = vmmxp_meminfo(dev, free_p, total_p);
	return err == VMMXP_PASS ? PASS : err ? CUDA_EINVAL : CUDA_OK;
}

VMMXP_EXPORT cudaError_t cudaMemGetInfo(size_t *free_p, size_t *total_p)
{
	cudaError_t r = meminfo(rt_device, free_p, total_p);

	return r != PASS ? r : VMMXP_REAL(cudaMemGetInfo)(free_p, total_p);
}

VMMXP_EXPORT cudaError_t cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height)
{
	size_t p = (width + PITCH_ALIGN - 1) & ~(PITCH_ALIGN - 1);
	cudaError_t r = PASS;

	/* Bad arguments get the real call's own error. */
	if (pitch && p >= width && (!height || p <= SIZE_MAX / height))
		r = rt_malloc(ptr, p * height, NULL, VMMXP_RT_MALLOC, 0);
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
		r = rt_malloc(&ptr, p * rows, NULL, VMMXP_RT_MALLOC, 0);
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

/* ---- memsets, both APIs ---- */

struct mset {
	enum vmmxp_fn fn;       /* the real function that runs each piece */
	unsigned int elem;      /* bytes per element: 1, 2 or 4 */
	int async;              /* takes a stream */
	unsigned int value;
	void *stream;
};

typedef cudaError_t rt_set_fn(void *, int, size_t);
typedef cudaError_t rt_set_async_fn(void *, int, size_t, void *);
typedef CUresult d8_fn(CUdeviceptr, unsigned char, size_t);
typedef CUresult d16_fn(CUdeviceptr, unsigned short, size_t);
typedef CUresult d32_fn(CUdeviceptr, unsigned int, size_t);
typedef CUresult d8_async_fn(CUdeviceptr, unsigned char, size_t, void *);
typedef CUresult d16_async_fn(CUdeviceptr, unsigned short, size_t, void *);
typedef CUresult d32_async_fn(CUdeviceptr, unsigned int, size_t, void *);

/* The real call of @m on @n elements at @p. */
static int mset_call(const struct mset *m, uintptr_t p, size_t n)
{
	void *real = vmmxp_real(m->fn);
	int rt = vmmxp_fn_name(m->fn)[2] == 'd';

	if (!real)
		return CUDA_ENOTFOUND; /* cudaErrorSymbolNotFound, CUDA_ERROR_NOT_FOUND */
	if (rt)
		return m->async ? ((rt_set_async_fn *)real)((void *)p, (int)m->value, n, m->stream) :
				  ((rt_set_fn *)real)((void *)p, (int)m->value, n);
	switch (m->elem) {
	case 1:
		return m->async ? ((d8_async_fn *)real)(p, (unsigned char)m->value, n, m->stream) :
				  ((d8_fn *)real)(p, (unsigned char)m->value, n);
	case 2:
		return m->async ? ((d16_async_fn *)real)(p, (unsigned short)m->value, n, m->stream) :
				  ((d16_fn *)real)(p, (unsigned short)m->value, n);
	default:
		return m->async ? ((d32_async_fn *)real)(p, m->value, n, m->stream) :
				  ((d32_fn *)real)(p, m->value, n);
	}
}

static int mset_piece(void *arg, uintptr_t p, size_t len)
{
	const struct mset *m = arg;

	return mset_call(m, p, len / m->elem);
}

/*
 * A memset: in pieces the driver takes (vmmxp_split()), and under
 * --placement launch a use of the segment it writes (copy.c).  A _ptsz or
 * _ptds call's stream 0 is the per-thread default stream.
 */
static int mset(enum vmmxp_fn fn, unsigned int elem, int async, uintptr_t p, unsigned int value,
		size_t n, void *stream)
{
	struct mset m = { fn, elem, async, value, stream };
	struct vmmxp_use u;
	void *on = stream;
	int r;

	/* A count whose bytes overflow is the real call's to refuse. */
	if (n > SIZE_MAX / elem)
		return mset_call(&m, p, n);
	if (!on && vmmxp_copy_on() && strstr(vmmxp_fn_name(fn), "_pt"))
		on = CU_STREAM_PER_THREAD_;
	u = vmmxp_use_begin(p, n * elem, 0, 0, on);
	r = vmmxp_split((const void *)p, n * elem, elem, mset_piece, &m);
	vmmxp_use_end(u);
	return r;
}

VMMXP_EXPORT cudaError_t cudaMemset(void *ptr, int value, size_t count)
{
	return mset(VMMXP_FN_cudaMemset, 1, 0, (uintptr_t)ptr, (unsigned int)value, count, NULL);
}

VMMXP_EXPORT cudaError_t cudaMemset_ptds(void *ptr, int value, size_t count)
{
	return mset(VMMXP_FN_cudaMemset_ptds, 1, 0, (uintptr_t)ptr, (unsigned int)value, count, NULL);
}

VMMXP_EXPORT cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, void *stream)
{
	return mset(VMMXP_FN_cudaMemsetAsync, 1, 1, (uintptr_t)ptr, (unsigned int)value, count, stream);
}

VMMXP_EXPORT cudaError_t cudaMemsetAsync_ptsz(void *ptr, int value, size_t count, void *stream)
{
	return mset(VMMXP_FN_cudaMemsetAsync_ptsz, 1, 1, (uintptr_t)ptr, (unsigned int)value, count,
		    stream);
}

/* cuMemsetD{8,16,32}: _v2 and _v2_ptds, and the Async calls with their _ptsz twins. */
#define DRV_MEMSET(name, type, elem)                                                       \
	VMMXP_EXPORT CUresult name(CUdeviceptr dptr, type value, size_t n)                 \
	{                                                                                  \
		return mset(VMMXP_FN_##name, elem, 0, (uintptr_t)dptr, value, n, NULL);    \
	}
#define DRV_MEMSET_ASYNC(name, type, elem)                                                 \
	VMMXP_EXPORT CUresult name(CUdeviceptr dptr, type value, size_t n, void *stream)   \
	{                                                                                  \
		return mset(VMMXP_FN_##name, elem, 1, (uintptr_t)dptr, value, n, stream);  \
	}
DRV_MEMSET(cuMemsetD8_v2, unsigned char, 1)
DRV_MEMSET(cuMemsetD16_v2, unsigned short, 2)
DRV_MEMSET(cuMemsetD32_v2, unsigned int, 4)
DRV_MEMSET(cuMemsetD8_v2_ptds, unsigned char, 1)
DRV_MEMSET(cuMemsetD16_v2_ptds, unsigned short, 2)
DRV_MEMSET(cuMemsetD32_v2_ptds, unsigned int, 4)
DRV_MEMSET_ASYNC(cuMemsetD8Async, unsigned char, 1)
DRV_MEMSET_ASYNC(cuMemsetD16Async, unsigned short, 2)
DRV_MEMSET_ASYNC(cuMemsetD32Async, unsigned int, 4)
DRV_MEMSET_ASYNC(cuMemsetD8Async_ptsz, unsigned char, 1)
DRV_MEMSET_ASYNC(cuMemsetD16Async_ptsz, unsigned short, 2)
DRV_MEMSET_ASYNC(cuMemsetD32Async_ptsz, unsigned int, 4)
#undef DRV_MEMSET
#undef DRV_MEMSET_ASYNC

/* ---- driver ---- */

static CUresult drv_malloc(CUdeviceptr *dptr, size_t size, void *stream, enum vmmxp_kind kind,
			   unsigned int flags)
{
	void *p = NULL;
	int dev, err;

	if (!dptr || drv_device(&dev) != CUDA_OK)
		return PASS;
	/* cuMemAlloc refuses 0 bytes; so does the real call we hand it to. */
	if (!size)
		return PASS;
	err = vmmxp_malloc(dev, size, stream, kind, flags, &p);
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
	CUresult r = drv_malloc(dptr, size, NULL, VMMXP_DRV_MALLOC, VMMXP_ASKS_AGAIN);

	return r != PASS ? r : VMMXP_REAL(cuMemAlloc_v2)(dptr, size);
}

VMMXP_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	CUresult r = drv_free(dptr, NULL, 1);

	return r != PASS ? r : VMMXP_REAL(cuMemFree_v2)(dptr);
}

/* cuMemAllocAsync and its _ptsz twin. */
static CUresult drv_malloc_async(CUdeviceptr *dptr, size_t size, void *stream, int ptsz)
{
	CUresult r = drv_malloc(dptr, size, stream_of(stream, ptsz), VMMXP_DRV_MALLOC_ASYNC, 0);

	if (r != PASS)
		return r;
	return (ptsz ? VMMXP_REAL(cuMemAllocAsync_ptsz) : VMMXP_REAL(cuMemAllocAsync))(dptr, size,
										   stream);
}

static CUresult drv_free_async(CUdeviceptr dptr, void *stream, int ptsz)
{
	CUresult r = drv_free(dptr, stream_of(stream, ptsz), 0);

	if (r != PASS)
		return r;
	return (ptsz ? VMMXP_REAL(cuMemFreeAsync_ptsz) : VMMXP_REAL(cuMemFreeAsync))(dptr, stream);
}

VMMXP_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, void *stream)
{
	return drv_malloc_async(dptr, size, stream, 0);
}

VMMXP_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, void *stream)
{
	return drv_free_async(dptr, stream, 0);
}

VMMXP_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, void *stream)
{
	return drv_malloc_async(dptr, size, stream, 1);
}

VMMXP_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, void *stream)
{
	return drv_free_async(dptr, stream, 1);
}

VMMXP_EXPORT CUresult cuMemGetInfo_v2(size_t *free_p, size_t *total_p)
{
	CUresult r = meminfo(drv_device, free_p, total_p);

	return r != PASS ? r : VMMXP_REAL(cuMemGetInfo_v2)(free_p, total_p);
}

VMMXP_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
					size_t height, unsigned int elem)
{
	size_t p = (width + PITCH_ALIGN - 1) & ~(PITCH_ALIGN - 1);
	CUresult r = PASS;

	/* The driver's own checks (element size 4, 8 or 16, nonzero extents) stay the driver's. */
	if (pitch && width && height && (elem == 4 || elem == 8 || elem == 16) && p >= width &&
	    p <= SIZE_MAX / height)
		r = drv_malloc(dptr, p * height, NULL, VMMXP_DRV_MALLOC, 0);
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

/* ---- stream-ordered pools ---- */

/* The driver's default pool of each device, as seen (atomic; NULL: not seen yet). */
static CUmemoryPool default_pools[MAX_POOL_DEVICES];

static void note_default(CUmemoryPool pool, int device)
{
	if (pool && device >= 0 && device < MAX_POOL_DEVICES)
		__atomic_store_n(&default_pools[device], pool, __ATOMIC_RELEASE);
}

/* The device whose default pool @pool is, or -1 (a pool of the program's). */
static int default_pool_device(CUmemoryPool pool)
{
	CUresult (*get)(CUmemoryPool *, int) = VMMXP_REAL(cuDeviceGetDefaultMemPool);
	CUmemoryPool p = NULL;
	int dev;

	for (int d = 0; d < MAX_POOL_DEVICES; d++)
		if (pool && __atomic_load_n(&default_pools[d], __ATOMIC_ACQUIRE) == pool)
			return d;
	/* Not asked for through us (cudart's own table, say): the current device's? */
	if (!pool || !get || drv_device(&dev) != CUDA_OK || get(&p, dev) != CUDA_OK)
		return -1;
	note_default(p, dev);
	return p == pool ? dev : -1;
}

VMMXP_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, int device)
{
	CUresult r = VMMXP_REAL(cuDeviceGetDefaultMemPool)(pool, device);

	if (r == CUDA_OK && !vmmxp_busy())
		note_default(*pool, device);
	return r;
}

/* The current pool is the default one unless the program set another (cuDeviceSetMemPool). */
VMMXP_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, int device)
{
	CUresult (*get_default)(CUmemoryPool *, int) = VMMXP_REAL(cuDeviceGetDefaultMemPool);
	CUresult r = VMMXP_REAL(cuDeviceGetMemPool)(pool, device);
	CUmemoryPool def = NULL;

	if (r == CUDA_OK && !vmmxp_busy() && get_default && get_default(&def, device) == CUDA_OK)
		note_default(def, device);
	return r;
}

static CUresult pool_alloc(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, void *stream,
			   int ptsz)
{
	int dev = vmmxp_busy() ? -1 : default_pool_device(pool);
	void *p = NULL;
	int err;

	if (dev >= 0 && dptr && size) {
		err = vmmxp_malloc(dev, size, stream_of(stream, ptsz), VMMXP_DRV_MALLOC_POOL, 0, &p);
		if (!err) {
			*dptr = (CUdeviceptr)(uintptr_t)p;
			return CUDA_OK;
		}
		if (err != VMMXP_PASS)
			return code_of(err);
	} else if (dev < 0 && !vmmxp_busy()) {
		vmmxp_count(VMMXP_N_POOL_ALLOC, 1);
		vmmxp_count(VMMXP_N_POOL_ALLOC_BYTES, size);
	}
	return (ptsz ? VMMXP_REAL(cuMemAllocFromPoolAsync_ptsz) :
		       VMMXP_REAL(cuMemAllocFromPoolAsync))(dptr, size, pool, stream);
}

VMMXP_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
					      void *stream)
{
	return pool_alloc(dptr, size, pool, stream, 0);
}

VMMXP_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size,
						   CUmemoryPool pool, void *stream)
{
	return pool_alloc(dptr, size, pool, stream, 1);
}

VMMXP_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props)
{
	CUresult r = VMMXP_REAL(cuMemPoolCreate)(pool, props);

	if (r == CUDA_OK && !vmmxp_busy())
		vmmxp_count(VMMXP_N_POOL_CREATE, 1);
	return r;
}

VMMXP_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	return VMMXP_REAL(cuMemPoolDestroy)(pool);
}

/* Trimming more than asked is allowed: the pool keeps "at least" nothing it must. */
VMMXP_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
	CUresult r = VMMXP_REAL(cuMemPoolTrimTo)(pool, keep);
	int dev = vmmxp_busy() ? -1 : default_pool_device(pool);

	if (r == CUDA_OK && dev >= 0)
		vmmxp_trim(dev);
	return r;
}

/*
 * The usage attributes of a default pool: the driver's figures (memory the
 * program took from the pool before or around the interposer) plus
 * libvmmx's.  Every other attribute is the driver's.
 */
VMMXP_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void *value)
{
	CUresult r = VMMXP_REAL(cuMemPoolGetAttribute)(pool, attr, value);
	uint64_t ours = 0, *v = value;
	int dev;

	if (r != CUDA_OK || !value || attr < CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT ||
	    attr > CU_MEMPOOL_ATTR_USED_MEM_HIGH || vmmxp_busy())
		return r;
	dev = default_pool_device(pool);
	if (dev >= 0 && !vmmxp_pool_usage(dev, attr, &ours))
		*v += ours;
	return r;
}

/* ---- the program's own VMM calls: passed through, counted ---- */

VMMXP_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
				  const void *prop, unsigned long long flags)
{
	CUresult r = VMMXP_REAL(cuMemCreate)(handle, size, prop, flags);

	if (r == CUDA_OK && !vmmxp_busy()) {
		vmmxp_count(VMMXP_N_VMM_CREATE, 1);
		vmmxp_count(VMMXP_N_VMM_CREATE_BYTES, size);
	}
	return r;
}

VMMXP_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	CUresult r = VMMXP_REAL(cuMemRelease)(handle);

	if (r == CUDA_OK && !vmmxp_busy())
		vmmxp_count(VMMXP_N_VMM_RELEASE, 1);
	return r;
}

VMMXP_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			       CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	CUresult r = VMMXP_REAL(cuMemMap)(ptr, size, offset, handle, flags);

	if (r == CUDA_OK && !vmmxp_busy()) {
		vmmxp_count(VMMXP_N_VMM_MAP, 1);
		vmmxp_count(VMMXP_N_VMM_MAP_BYTES, size);
	}
	return r;
}
