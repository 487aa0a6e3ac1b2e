/* SPDX-License-Identifier: MIT */
/*
 * gpu-cuda.h - what the cuda side of the tools' GPU client shares between
 * its files: the state (the primary context, the kernels, the events) in
 * gpu.c and the baselines' allocations and raw VMM calls in gpu-alloc.c.
 * Not for the tools themselves: they use gpu.h.  Single-threaded.
 */
#ifndef TOOLS_GPU_CUDA_H
#define TOOLS_GPU_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "vmm/cudaload.h"
#include "tools/gpu.h"

/* Threads per block: a multiple of the warp; blocks per SM from the occupancy API. */
#define BLOCK 256

enum kfn { K_READ, K_WRITE, K_COPY, K_GATHER, K_CHECK, K_COUNT };

struct gpu_cuda {
	const struct vmm_cuda_api *api; /* NULL until gpu_open() loads the driver */
	CUdevice dev;
	CUcontext ctx; /* the client's retained primary context, NULL when closed */
	CUmodule mod;  /* the one kernel set, the client's (gpu/client.c); NULL when unusable */
	CUfunction fn[K_COUNT];
	unsigned int grid[K_COUNT]; /* SMs x resident blocks of BLOCK threads */
	CUevent ev[2];		    /* NULL when not created */
	CUdeviceptr out;	    /* per-block results of read and gather */
	CUdeviceptr bad;	    /* mismatch counter of check */
	struct gpu_dev info;
	char kwhy[256]; /* why the kernels are unavailable; "" when they are */
};

/* The one GPU client's state (gpu.c). */
extern struct gpu_cuda gcu;

static inline CUdeviceptr dp(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

/* The name of @r ("CUDA_ERROR_OUT_OF_MEMORY"), in a static buffer. */
const char *gcu_name(CUresult r);
/* The detail of a failed call into gpu_why(), and its -VMMX_E* code. */
int gcu_fail(CUresult r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 0 when the GPU is open, else -VMMX_ENODEV with the reason set. */
int gcu_need_open(void);
/* Make the primary context current (a library call may have left another): 0 or -VMMX_E*. */
int gcu_enter(void);

/* gpu-alloc.c: a location on the device (@host 0) or the host; advise and prefetch. */
CUmemLocation gcu_mem_loc(int host);
CUresult gcu_advise(CUdeviceptr d, size_t n, CUmem_advise a);
CUresult gcu_prefetch(CUdeviceptr d, size_t n, int host);

#endif /* TOOLS_GPU_CUDA_H */
