// SPDX-License-Identifier: MIT
/*
 * gpu-alloc.c - the baselines' memory and the raw VMM calls of the tools'
 * GPU client on the cuda backend (see gpu.h): cuMemAlloc, cuMemHostAlloc,
 * malloc + cuMemHostRegister, pageable memory under HMM, managed memory
 * plain and advised + prefetched; cuMemAddressReserve, cuMemCreate,
 * cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease one by one, as
 * vmmx-bench's raw figures need them.  Errors as in gpu.c.  Built only with
 * CUDA headers; gpu-none.c stands in otherwise.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "vmmx.h"
#include "tools/gpu-cuda.h"

/* ---- baseline allocations ---- */

CUmemLocation gcu_mem_loc(int host)
{
	CUmemLocation l;

	memset(&l, 0, sizeof(l));
	l.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
	l.id = host ? 0 : gcu.info.ordinal;
	return l;
}

#if CUDA_VERSION >= 13000
/* CUDA 13: cuMemAdvise and cuMemPrefetchAsync take a CUmemLocation. */
CUresult gcu_advise(CUdeviceptr d, size_t n, CUmem_advise a)
{
	return gcu.api->cuMemAdvise(d, n, a, gcu_mem_loc(0));
}

CUresult gcu_prefetch(CUdeviceptr d, size_t n, int host)
{
	return gcu.api->cuMemPrefetchAsync(d, n, gcu_mem_loc(host), 0, NULL);
}
#else
CUresult gcu_advise(CUdeviceptr d, size_t n, CUmem_advise a)
{
	return gcu.api->cuMemAdvise(d, n, a, gcu.dev);
}

CUresult gcu_prefetch(CUdeviceptr d, size_t n, int host)
{
	return gcu.api->cuMemPrefetchAsync(d, n, host ? CU_DEVICE_CPU : gcu.dev, NULL);
}
#endif

static void *map_anon(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		gpu_set_why("mmap(%zu bytes): %s", size, strerror(errno));
		return NULL;
	}
	return p;
}

/* cuMemHostAlloc, mapped for the device. */
static int alloc_host(size_t size, CUdeviceptr *d, void **h)
{
	CUresult r = gcu.api->cuMemHostAlloc(h, size, CU_MEMHOSTALLOC_DEVICEMAP);
	int err;

	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuMemHostAlloc(%zu bytes, DEVICEMAP)", size);
	r = gcu.api->cuMemHostGetDevicePointer(d, *h, 0);
	if (r != CUDA_SUCCESS) {
		err = gcu_fail(r, "cuMemHostGetDevicePointer");
		(void)gcu.api->cuMemFreeHost(*h); /* undoing our own allocation */
		return err;
	}
	return 0;
}

/* Anonymous memory, then cuMemHostRegister, mapped for the device. */
static int alloc_registered(size_t size, CUdeviceptr *d, void **h)
{
	CUresult r;
	int err;

	if (!gcu.info.host_register) {
		gpu_set_why("the device reports no host registration (HOST_REGISTER_SUPPORTED=0)");
		return -VMMX_ENOTSUP;
	}
	*h = map_anon(size);
	if (!*h)
		return -VMMX_ENOMEM;
	r = gcu.api->cuMemHostRegister(*h, size, CU_MEMHOSTREGISTER_DEVICEMAP);
	if (r != CUDA_SUCCESS) {
		err = gcu_fail(r, "cuMemHostRegister(%zu bytes, DEVICEMAP)", size);
		munmap(*h, size);
		return err;
	}
	r = gcu.api->cuMemHostGetDevicePointer(d, *h, 0);
	if (r != CUDA_SUCCESS) {
		err = gcu_fail(r, "cuMemHostGetDevicePointer");
		(void)gcu.api->cuMemHostUnregister(*h); /* undoing our own registration */
		munmap(*h, size);
		return err;
	}
	return 0;
}

/* Anonymous memory the device reaches as is (HMM or ATS). */
static int alloc_pageable(size_t size, CUdeviceptr *d, void **h)
{
	if (!gcu.info.pageable_access) {
		gpu_set_why("the device reports no pageable memory access "
			"(PAGEABLE_MEMORY_ACCESS=0: no HMM or ATS; HMM needs a kernel with "
			"CONFIG_DEVICE_PRIVATE), so a kernel touching malloc'd memory would "
			"fault");
		return -VMMX_ENOTSUP;
	}
	*h = map_anon(size);
	if (!*h)
		return -VMMX_ENOMEM;
	*d = dp(*h);
	return 0;
}

/*
 * cuMemAllocManaged within the managed-memory rule; for
 * GPU_ALLOC_MANAGED_PREFETCH advised to prefer and be accessed by the device.
 */
static int alloc_managed(enum gpu_alloc kind, size_t size, CUdeviceptr *d, void **h)
{
	uint64_t fr, tot;
	char msg[256];
	CUresult r;
	int err;

	if (!gcu.info.managed) {
		gpu_set_why("the device reports no managed memory (MANAGED_MEMORY=0)");
		return -VMMX_ENOTSUP;
	}
	err = gpu_mem_info(&fr, &tot);
	if (err)
		return err;
	if (gpu_managed_refusal(size, fr, msg, sizeof(msg))) {
		gpu_set_why("%s", msg);
		return -VMMX_ERANGE;
	}
	r = gcu.api->cuMemAllocManaged(d, size, CU_MEM_ATTACH_GLOBAL);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuMemAllocManaged(%zu bytes)", size);
	*h = (void *)(uintptr_t)*d;
	if (kind != GPU_ALLOC_MANAGED_PREFETCH)
		return 0;
	r = gcu_advise(*d, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION);
	if (r == CUDA_SUCCESS)
		r = gcu_advise(*d, size, CU_MEM_ADVISE_SET_ACCESSED_BY);
	if (r != CUDA_SUCCESS) {
		err = gcu_fail(r, "cuMemAdvise(preferred location / accessed by device %d)",
			      gcu.info.ordinal);
		(void)gcu.api->cuMemFree(*d); /* undoing our own allocation */
		return err;
	}
	return 0;
}

int gpu_alloc(enum gpu_alloc kind, size_t size, struct gpu_mem *m)
{
	CUdeviceptr d = 0;
	void *h = NULL;
	CUresult r;
	int err = gcu_enter();

	if (err)
		return err;
	switch (kind) {
	case GPU_ALLOC_DEVICE:
		r = gcu.api->cuMemAlloc(&d, size);
		err = r == CUDA_SUCCESS ? 0 : gcu_fail(r, "cuMemAlloc(%zu bytes)", size);
		break;
	case GPU_ALLOC_HOST:
		err = alloc_host(size, &d, &h);
		break;
	case GPU_ALLOC_REGISTERED:
		err = alloc_registered(size, &d, &h);
		break;
	case GPU_ALLOC_PAGEABLE:
		err = alloc_pageable(size, &d, &h);
		break;
	case GPU_ALLOC_MANAGED:
	case GPU_ALLOC_MANAGED_PREFETCH:
		err = alloc_managed(kind, size, &d, &h);
		break;
	default:
		gpu_set_why("unknown allocation kind %d", (int)kind);
		return -VMMX_EINVAL;
	}
	if (err)
		return err;
	m->kind = kind;
	m->dptr = (void *)(uintptr_t)d;
	m->hptr = h;
	m->size = size;
	return 0;
}

int gpu_mem_settle(struct gpu_mem *m)
{
	CUresult r;
	int err;

	if (m->kind != GPU_ALLOC_MANAGED && m->kind != GPU_ALLOC_MANAGED_PREFETCH)
		return 0;
	err = gcu_enter();
	if (err)
		return err;
	r = gcu_prefetch(dp(m->dptr), m->size, m->kind == GPU_ALLOC_MANAGED);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuMemPrefetchAsync(%zu bytes to %s)", m->size,
			       m->kind == GPU_ALLOC_MANAGED ? "host" : "the device");
	r = gcu.api->cuCtxSynchronize();
	return r == CUDA_SUCCESS ? 0 : gcu_fail(r, "cuCtxSynchronize after cuMemPrefetchAsync");
}

int gpu_free(struct gpu_mem *m)
{
	CUresult r = CUDA_SUCCESS;
	int err;

	if (!m->dptr && !m->hptr)
		return 0;
	err = gcu_enter();
	if (err)
		return err;
	switch (m->kind) {
	case GPU_ALLOC_DEVICE:
	case GPU_ALLOC_MANAGED:
	case GPU_ALLOC_MANAGED_PREFETCH:
		r = gcu.api->cuMemFree(dp(m->dptr));
		break;
	case GPU_ALLOC_HOST:
		r = gcu.api->cuMemFreeHost(m->hptr);
		break;
	case GPU_ALLOC_REGISTERED:
		r = gcu.api->cuMemHostUnregister(m->hptr);
		munmap(m->hptr, m->size);
		break;
	case GPU_ALLOC_PAGEABLE:
		munmap(m->hptr, m->size);
		break;
	default:
		break;
	}
	memset(m, 0, sizeof(*m));
	return r == CUDA_SUCCESS ? 0 : gcu_fail(r, "freeing a baseline buffer");
}

/* ---- raw VMM calls ---- */

int gpu_va_reserve(size_t size, void **va_p)
{
	CUdeviceptr d = 0;
	CUresult r;
	int err = gcu_enter();

	if (err)
		return err;
	r = gcu.api->cuMemAddressReserve(&d, size, gcu.info.granularity, 0, 0);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuMemAddressReserve(%zu bytes)", size);
	*va_p = (void *)(uintptr_t)d;
	return 0;
}

int gpu_va_free(void *va, size_t size)
{
	CUresult r = gcu.api->cuMemAddressFree(dp(va), size);

	return r == CUDA_SUCCESS ? 0 : gcu_fail(r, "cuMemAddressFree(%p, %zu bytes)", va, size);
}

int gpu_vmm_create(int host, size_t size, uint64_t *handle_p)
{
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp prop;
	CUresult r;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location = gcu_mem_loc(host);
	r = gcu.api->cuMemCreate(&h, size, &prop, 0);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuMemCreate(%s, %zu bytes)", host ? "host" : "device", size);
	*handle_p = (uint64_t)h;
	return 0;
}

int gpu_vmm_release(uint64_t handle)
{
	CUresult r = gcu.api->cuMemRelease((CUmemGenericAllocationHandle)handle);

	return r == CUDA_SUCCESS ? 0 : gcu_fail(r, "cuMemRelease");
}

int gpu_vmm_map(void *va, size_t size, uint64_t handle)
{
	CUresult r = gcu.api->cuMemMap(dp(va), size, 0, (CUmemGenericAllocationHandle)handle, 0);

	return r == CUDA_SUCCESS ? 0 : gcu_fail(r, "cuMemMap(%p, %zu bytes)", va, size);
}

int gpu_vmm_unmap(void *va, size_t size)
{
	CUresult r = gcu.api->cuMemUnmap(dp(va), size);

	return r == CUDA_SUCCESS ? 0 : gcu_fail(r, "cuMemUnmap(%p, %zu bytes)", va, size);
}

int gpu_vmm_set_access(void *va, size_t size, int host)
{
	CUmemAccessDesc d[2];
	CUresult r;

	memset(d, 0, sizeof(d));
	d[0].location = gcu_mem_loc(0);
	d[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	d[1].location = gcu_mem_loc(1);
	d[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	r = gcu.api->cuMemSetAccess(dp(va), size, d, host ? 2 : 1);
	return r == CUDA_SUCCESS ? 0 : gcu_fail(r, "cuMemSetAccess(%p, %zu bytes)", va, size);
}
