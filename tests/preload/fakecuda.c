// SPDX-License-Identifier: MIT
/*
 * fakecuda.c - a stand-in for libcudart and libcuda in the interposer's
 * tests: it exports every call libvmmx-preload takes over (and the helpers it
 * calls), counts each call, and makes "real" allocations from a sentinel
 * arena, so a test can tell memory that reached the real driver from memory
 * libvmmx served.  cuGetProcAddress answers from a table like the driver's
 * (cuMemAlloc at 3020 and later is cuMemAlloc_v2).  Device: a thread's
 * current one (cudaSetDevice), shared by both APIs.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "tests/preload/fakecuda.h"

#define ARENA_SLOTS 64
#define ARENA_SLOT 4096

static unsigned char arena[ARENA_SLOTS][ARENA_SLOT] __attribute__((aligned(4096)));
static int used[ARENA_SLOTS];
static __thread int cur_dev;
static unsigned long calls[FAKE_NCALLS];

#define CALL(c) __atomic_fetch_add(&calls[c], 1, __ATOMIC_RELAXED)

unsigned long fake_calls(enum fake_call c)
{
	return __atomic_load_n(&calls[c], __ATOMIC_RELAXED);
}

int fake_is_real(const void *p)
{
	return (const unsigned char *)p >= &arena[0][0] &&
	       (const unsigned char *)p < &arena[0][0] + sizeof(arena);
}

void *fake_real_alloc(void)
{
	for (int i = 0; i < ARENA_SLOTS; i++)
		if (!__atomic_exchange_n(&used[i], 1, __ATOMIC_ACQ_REL))
			return arena[i];
	return NULL;
}

static int real_free(const void *p)
{
	if (!fake_is_real(p))
		return 1;
	__atomic_store_n(&used[((const unsigned char *)p - &arena[0][0]) / ARENA_SLOT], 0,
			 __ATOMIC_RELEASE);
	return 0;
}

int cudaGetDevice(int *d) { CALL(FAKE_cudaGetDevice); *d = cur_dev; return 0; }
int cudaSetDevice(int d) { cur_dev = d; return 0; }
int cuCtxGetDevice(int *d) { CALL(FAKE_cuCtxGetDevice); *d = cur_dev; return 0; }

int cudaMalloc(void **p, size_t n) { CALL(FAKE_cudaMalloc); (void)n; *p = fake_real_alloc(); return *p ? 0 : 2; }
int cudaFree(void *p) { CALL(FAKE_cudaFree); return p ? real_free(p) : 0; }
int cudaMallocAsync(void **p, size_t n, void *s) { CALL(FAKE_cudaMallocAsync); (void)s; return cudaMalloc(p, n); }
int cudaFreeAsync(void *p, void *s) { CALL(FAKE_cudaFreeAsync); (void)s; return real_free(p); }
int cudaMallocAsync_ptsz(void **p, size_t n, void *s) { return cudaMallocAsync(p, n, s); }
int cudaFreeAsync_ptsz(void *p, void *s) { return cudaFreeAsync(p, s); }
int cudaMemGetInfo(size_t *f, size_t *t) { CALL(FAKE_cudaMemGetInfo); *f = 1; *t = 2; return 0; }
int cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h) { CALL(FAKE_cudaMallocPitch); *pitch = w; (void)h; *p = fake_real_alloc(); return 0; }
int cudaMalloc3D(void *pp, struct fake_extent e) { CALL(FAKE_cudaMalloc3D); (void)pp; (void)e; return 2; }
int cudaIpcGetMemHandle(void *h, void *p) { CALL(FAKE_cudaIpcGetMemHandle); memset(h, 7, 64); (void)p; return 0; }

int cuMemAlloc(unsigned int *p, unsigned int n) { CALL(FAKE_cuMemAlloc_v1); (void)n; *p = 0; return 2; }
int cuMemAlloc_v2(unsigned long long *p, size_t n) { CALL(FAKE_cuMemAlloc); (void)n; *p = (uintptr_t)fake_real_alloc(); return *p ? 0 : 2; }
int cuMemFree_v2(unsigned long long p) { CALL(FAKE_cuMemFree); return real_free((void *)(uintptr_t)p); }
int cuMemAllocAsync(unsigned long long *p, size_t n, void *s) { CALL(FAKE_cuMemAllocAsync); (void)s; (void)n; *p = (uintptr_t)fake_real_alloc(); return 0; }
int cuMemFreeAsync(unsigned long long p, void *s) { CALL(FAKE_cuMemFreeAsync); (void)s; return real_free((void *)(uintptr_t)p); }
int cuMemAllocAsync_ptsz(unsigned long long *p, size_t n, void *s) { return cuMemAllocAsync(p, n, s); }
int cuMemFreeAsync_ptsz(unsigned long long p, void *s) { return cuMemFreeAsync(p, s); }
int cuMemGetInfo_v2(size_t *f, size_t *t) { CALL(FAKE_cuMemGetInfo); *f = 1; *t = 2; return 0; }
int cuMemAllocPitch_v2(unsigned long long *p, size_t *pitch, size_t w, size_t h, unsigned int e) { CALL(FAKE_cuMemAllocPitch); (void)h; (void)e; *pitch = w; *p = (uintptr_t)fake_real_alloc(); return 0; }
int cuIpcGetMemHandle(void *h, unsigned long long p) { CALL(FAKE_cuIpcGetMemHandle); memset(h, 7, 64); (void)p; return 0; }

struct proc {
	const char *name;
	int v2_from;            /* cudaVersion from which the _v2 entry is returned, 0: none */
	void *fn, *fn_v2, *fn_ptsz;
};

static const struct proc procs[] = {
	{ "cuMemAlloc", 3020, (void *)cuMemAlloc, (void *)cuMemAlloc_v2, NULL },
	{ "cuMemFree", 3020, NULL, (void *)cuMemFree_v2, NULL },
	{ "cuMemGetInfo", 3020, NULL, (void *)cuMemGetInfo_v2, NULL },
	{ "cuMemAllocPitch", 3020, NULL, (void *)cuMemAllocPitch_v2, NULL },
	{ "cuMemAllocAsync", 0, (void *)cuMemAllocAsync, NULL, (void *)cuMemAllocAsync_ptsz },
	{ "cuMemFreeAsync", 0, (void *)cuMemFreeAsync, NULL, (void *)cuMemFreeAsync_ptsz },
	{ "cuIpcGetMemHandle", 0, (void *)cuIpcGetMemHandle, NULL, NULL },
	{ "cuCtxGetDevice", 0, (void *)cuCtxGetDevice, NULL, NULL },
	{ "cuGetProcAddress", 12000, (void *)cuGetProcAddress, (void *)cuGetProcAddress_v2, NULL },
};

int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status)
{
	CALL(FAKE_cuGetProcAddress);
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		const struct proc *p = &procs[i];

		if (strcmp(sym, p->name))
			continue;
		*pfn = p->v2_from && ver >= p->v2_from ? p->fn_v2 :
		       (flags & 2) && p->fn_ptsz    ? p->fn_ptsz :
						      p->fn;
		if (status)
			*status = *pfn ? 0 : 1;
		return *pfn ? 0 : 500;
	}
	*pfn = NULL;
	if (status)
		*status = 1;
	return 500;
}

int cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags)
{
	return cuGetProcAddress_v2(sym, pfn, ver, flags, NULL);
}
