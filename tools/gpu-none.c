// SPDX-License-Identifier: MIT
/*
 * gpu-none.c - the tools' GPU client where configure found no CUDA
 * headers: every call says so (gpu_why()) and fails with -VMMX_ENOTSUP,
 * so that the tools still build and run on the sim backend.  Stands in for
 * gpu.c and gpu-alloc.c (tools/local.mk picks one or the other).
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>

#include "vmmx.h"
#include "tools/gpu.h"

#define NO_CUDA "built without CUDA headers (configure found no cuda.h)"

int gpu_open(int ordinal)
{
	gpu_set_why(NO_CUDA);
	return -VMMX_ENOTSUP;
}

void gpu_close(void)
{
}

const struct gpu_dev *gpu_dev(void)
{
	return NULL;
}

const char *gpu_kernels_why(void)
{
	return NO_CUDA;
}

static int no_cuda(void)
{
	gpu_set_why(NO_CUDA);
	return -VMMX_ENOTSUP;
}

int gpu_mem_info(uint64_t *free_p, uint64_t *total_p)
{
	return no_cuda();
}

int gpu_sync(void)
{
	return no_cuda();
}

int gpu_memcpy(void *dst, const void *src, size_t n)
{
	return no_cuda();
}

int gpu_fill(void *p, size_t size, unsigned int seed)
{
	return no_cuda();
}

int gpu_run(enum gpu_workload w, void *p, size_t size, size_t ws, unsigned int seed, double *sec)
{
	return no_cuda();
}

int gpu_check(const void *p, size_t size, uint64_t first, unsigned int seed, uint64_t *bad)
{
	return no_cuda();
}

int gpu_memcpy_timed(void *dst, const void *src, size_t n, double *sec)
{
	return no_cuda();
}

int gpu_prefetch(void *p, size_t n, int to_host, double *sec)
{
	return no_cuda();
}

int gpu_alloc(enum gpu_alloc kind, size_t size, struct gpu_mem *m)
{
	return no_cuda();
}

int gpu_mem_settle(struct gpu_mem *m)
{
	return no_cuda();
}

int gpu_free(struct gpu_mem *m)
{
	return 0;
}

int gpu_va_reserve(size_t size, void **va_p)
{
	return no_cuda();
}

int gpu_va_free(void *va, size_t size)
{
	return no_cuda();
}

int gpu_vmm_create(int host, size_t size, uint64_t *handle_p)
{
	return no_cuda();
}

int gpu_vmm_release(uint64_t handle)
{
	return no_cuda();
}

int gpu_vmm_map(void *va, size_t size, uint64_t handle)
{
	return no_cuda();
}

int gpu_vmm_unmap(void *va, size_t size)
{
	return no_cuda();
}

int gpu_vmm_set_access(void *va, size_t size, int host)
{
	return no_cuda();
}
