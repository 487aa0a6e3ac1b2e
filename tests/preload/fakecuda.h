/* SPDX-License-Identifier: MIT */
/* fakecuda.h - the test stand-in for the CUDA runtime and driver (fakecuda.c). */
#ifndef VMMX_TESTS_FAKECUDA_H
#define VMMX_TESTS_FAKECUDA_H

#include <stddef.h>

enum fake_call {
	FAKE_cudaMalloc, FAKE_cudaFree, FAKE_cudaMallocAsync, FAKE_cudaFreeAsync,
	FAKE_cudaMemGetInfo, FAKE_cudaMallocPitch, FAKE_cudaMalloc3D, FAKE_cudaIpcGetMemHandle,
	FAKE_cudaGetDevice, FAKE_cuMemAlloc_v1, FAKE_cuMemAlloc, FAKE_cuMemFree,
	FAKE_cuMemAllocAsync, FAKE_cuMemFreeAsync, FAKE_cuMemGetInfo, FAKE_cuMemAllocPitch,
	FAKE_cuIpcGetMemHandle, FAKE_cuCtxGetDevice, FAKE_cuGetProcAddress, FAKE_NCALLS
};

struct fake_extent {
	size_t width, height, depth;
};

struct fake_pitched {
	void *ptr;
	size_t pitch, xsize, ysize;
};

unsigned long fake_calls(enum fake_call c);
int fake_is_real(const void *p);
void *fake_real_alloc(void);

int cudaGetDevice(int *d);
int cudaSetDevice(int d);
int cuCtxGetDevice(int *d);
int cudaMalloc(void **p, size_t n);
int cudaFree(void *p);
int cudaMallocAsync(void **p, size_t n, void *s);
int cudaFreeAsync(void *p, void *s);
int cudaMallocAsync_ptsz(void **p, size_t n, void *s);
int cudaFreeAsync_ptsz(void *p, void *s);
int cudaMemGetInfo(size_t *f, size_t *t);
int cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h);
int cudaMalloc3D(void *pp, struct fake_extent e);
int cudaIpcGetMemHandle(void *h, void *p);
int cuMemAlloc(unsigned int *p, unsigned int n);
int cuMemAlloc_v2(unsigned long long *p, size_t n);
int cuMemFree_v2(unsigned long long p);
int cuMemAllocAsync(unsigned long long *p, size_t n, void *s);
int cuMemFreeAsync(unsigned long long p, void *s);
int cuMemAllocAsync_ptsz(unsigned long long *p, size_t n, void *s);
int cuMemFreeAsync_ptsz(unsigned long long p, void *s);
int cuMemGetInfo_v2(size_t *f, size_t *t);
int cuMemAllocPitch_v2(unsigned long long *p, size_t *pitch, size_t w, size_t h, unsigned int e);
int cuIpcGetMemHandle(void *h, unsigned long long p);
int cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags);
int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status);

#endif
