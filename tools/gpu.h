/* SPDX-License-Identifier: MIT */
/*
 * gpu.h - what vmmx-place and vmmx-bench share: the workloads (GPU kernels
 * on the cuda backend, the sim's own copies on the sim backend), the
 * baselines' allocations (cuMemAlloc, cuMemHostAlloc, cuMemHostRegister,
 * malloc for HMM, cuMemAllocManaged with or without advice and prefetch),
 * raw VMM calls (cuMemCreate, cuMemMap, cuMemSetAccess and their inverses)
 * and the option parsers they share (sizes, counts).
 *
 * The CUDA driver is loaded at gpu_open() through vmm/cudaload.h, the door
 * libvmmx and the tests use too, so the tools start and explain themselves
 * on machines without a driver.  gpu_open() retains the device's primary
 * context: the one libvmmx's cuda backend retains too, so kernels launched
 * here see the addresses of libvmmx buffers.  The kernels (gpu/kernels.cu)
 * are embedded as a fatbin when configure found nvcc; built without nvcc or
 * without CUDA headers, gpu_open() still works as far as it can and
 * gpu_kernels_why() says why the GPU workloads are unavailable.
 *
 * Errors are negative -VMMX_E* codes (vmmx.h); gpu_why() holds the detail
 * of the last failure: the driver call and its CUDA error name.
 *
 * Where each part lives: the workloads and the engine in workload.c; the
 * cuda side in gpu.c (context, kernels, timed copies) and gpu-alloc.c
 * (baselines, raw VMM calls), or gpu-none.c without CUDA headers; the
 * error slot, the clock and the formats in util.c.
 *
 * State is process-wide and unlocked: call these from the main thread only.
 * This header includes no CUDA header; the data patterns the kernels and
 * the sim share are gpu/pattern.h's.
 */
#ifndef TOOLS_GPU_H
#define TOOLS_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/pattern.h"

#ifndef __CUDACC__

#include <stdio.h>

struct vmmx_ctx;

/* ---- workloads ---- */

/** enum gpu_workload - what a timed run does over a buffer. */
enum gpu_workload {
	GPU_WL_READ,   /* stream read of 16-byte loads, folded into a per-block result */
	GPU_WL_WRITE,  /* stream write of 16-byte stores (the data pattern) */
	GPU_WL_COPY,   /* first half of the buffer copied onto the second half */
	GPU_WL_GATHER, /* random 16-byte loads over a working set, as many as a stream read */
	GPU_WL_COUNT,
};

/** gpu_workload_name() - "read", "write", "copy" or "gather". */
const char *gpu_workload_name(enum gpu_workload w);

/** gpu_workload_parse() - 0 and *@w set, or -VMMX_EINVAL for an unknown name. */
int gpu_workload_parse(const char *s, enum gpu_workload *w);

/**
 * gpu_workload_bytes() - bytes one run moves over a buffer of @size bytes:
 * read, write and gather: @size (gather: its loads, 16 bytes each); copy:
 * the bytes read plus the bytes written, @size too (half each).
 */
uint64_t gpu_workload_bytes(enum gpu_workload w, uint64_t size);

/**
 * struct gpu_engine - runs workloads on one backend.
 * @ctx: the libvmmx context (its copies are the sim's "kernels").
 * @sim: nonzero on the sim backend: workloads are vmmx_memcpy()s timed
 *       with clock_gettime(), not GPU kernels.
 * @seed: pattern seed for fills, the write workload and checks.
 * (the rest is private: zero it before the first use)
 */
struct gpu_engine {
	struct vmmx_ctx *ctx;
	int sim;
	unsigned int seed;
	unsigned char *scratch; /* sim: destination of reads and gathers */
	unsigned char *pattern; /* sim: the pattern for @seed, source of writes */
	size_t scratch_len, pattern_len;
};

/**
 * gpu_engine_fill() - write the data pattern over @size bytes at @p (the
 * write kernel, or a vmmx_memcpy() of the pattern on sim) and wait.
 */
int gpu_engine_fill(struct gpu_engine *e, void *p, size_t size);

/**
 * gpu_engine_run() - one run of @w over @size bytes at @p, timed.
 * @ws: gather's working set in bytes (the first @ws bytes); 0: @size.
 * @sec: out: seconds, from device events around the kernel (cuda) or
 *       clock_gettime() around the copies (sim).
 *
 * On sim: read copies the buffer to host scratch, write copies the pattern
 * in, copy is a vmmx_memcpy() of the first half onto the second, gather
 * copies random 64 KiB pieces of the working set out, as many bytes as a
 * read.  @size must be a multiple of 64 KiB.
 */
int gpu_engine_run(struct gpu_engine *e, enum gpu_workload w, void *p, size_t size, size_t ws,
		   double *sec);

/**
 * gpu_engine_verify() - check the data that @w left at @p: the pattern
 * everywhere (read, write, gather) or in the second half (copy).
 * @bad: out: mismatching 16-byte elements.
 */
int gpu_engine_verify(struct gpu_engine *e, enum gpu_workload w, void *p, size_t size,
		      uint64_t *bad);

/** gpu_engine_fini() - free the engine's scratch memory. */
void gpu_engine_fini(struct gpu_engine *e);

/**
 * struct gpu_timing - a measured series: warm-up runs, then @runs timed runs.
 * @cold: seconds of the first warm-up run (NAN without warm-up): what a
 *        first touch costs (managed memory migrating on faults, ...).
 * @best: the fastest timed run.
 * @median: the median timed run: the figure the tools report.
 */
struct gpu_timing {
	double cold, best, median;
	unsigned int runs;
};

/** gpu_median() - median of @n values (sorts @v). */
double gpu_median(double *v, size_t n);

/* ---- the driver ---- */

/** struct gpu_dev - the device gpu_open() opened. */
struct gpu_dev {
	int ordinal;
	char name[96];
	int sm_count;
	int cc_major, cc_minor;
	int pageable_access;	/* PAGEABLE_MEMORY_ACCESS: kernels may touch malloc'd memory */
	int managed;		/* MANAGED_MEMORY */
	int concurrent_managed; /* CONCURRENT_MANAGED_ACCESS */
	int host_register;	/* HOST_REGISTER_SUPPORTED */
	int vmm;		/* VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
	size_t granularity;	/* minimum cuMemCreate granularity of device memory */
};

/**
 * gpu_open() - load libcuda.so.1, cuInit, retain @ordinal's primary context,
 * make it current, and load the embedded kernels.
 *
 * Return: 0 (the kernels may still be unavailable: gpu_kernels_why());
 * -VMMX_ENOTSUP when built without CUDA headers; -VMMX_ENODRIVER;
 * -VMMX_ENODEV; -VMMX_EDRIVER.  gpu_why() says why.
 */
int gpu_open(int ordinal);

/** gpu_close() - unload, release the context; safe to call twice. */
void gpu_close(void);

/** gpu_why() - detail of the last failure; "" when none. */
const char *gpu_why(void);

/** gpu_dev() - the open device, or NULL. */
const struct gpu_dev *gpu_dev(void);

/** gpu_kernels_why() - NULL when the GPU workloads can run, else why not. */
const char *gpu_kernels_why(void);

/** gpu_mem_info() - free and total device memory (cuMemGetInfo). */
int gpu_mem_info(uint64_t *free_p, uint64_t *total_p);

/** gpu_sync() - cuCtxSynchronize. */
int gpu_sync(void);

/** gpu_memcpy() - cuMemcpy (unified addresses) and wait for it. */
int gpu_memcpy(void *dst, const void *src, size_t n);

/**
 * gpu_memcpy_timed() - cuMemcpy (unified addresses) between two device
 * events on the default stream, waited for.
 * @sec: out: seconds between the events.
 */
int gpu_memcpy_timed(void *dst, const void *src, size_t n, double *sec);

/**
 * gpu_prefetch() - cuMemPrefetchAsync of managed memory to host memory
 * (@to_host) or to the device, between two device events, waited for.
 * @sec: out (may be NULL): seconds between the events.
 */
int gpu_prefetch(void *p, size_t n, int to_host, double *sec);

/** gpu_fill(), gpu_run(), gpu_verify() - the cuda side of the engine. */
int gpu_fill(void *p, size_t size, unsigned int seed);
int gpu_run(enum gpu_workload w, void *p, size_t size, size_t ws, unsigned int seed, double *sec);
int gpu_check(const void *p, size_t size, uint64_t first, unsigned int seed, uint64_t *bad);

/* ---- baseline allocations ---- */

/** enum gpu_alloc - how a baseline buffer is allocated. */
enum gpu_alloc {
	GPU_ALLOC_DEVICE,	    /* cuMemAlloc */
	GPU_ALLOC_HOST,		    /* cuMemHostAlloc(DEVICEMAP) */
	GPU_ALLOC_REGISTERED,	    /* mmap + cuMemHostRegister(DEVICEMAP) */
	GPU_ALLOC_PAGEABLE,	    /* mmap, used as is (HMM/ATS only) */
	GPU_ALLOC_MANAGED,	    /* cuMemAllocManaged, pages start in host memory */
	GPU_ALLOC_MANAGED_PREFETCH, /* ... advised to the device and prefetched there */
	GPU_ALLOC_COUNT,
};

/** struct gpu_mem - a baseline buffer. */
struct gpu_mem {
	enum gpu_alloc kind;
	void *dptr; /* address for kernels */
	void *hptr; /* host address (NULL for device memory) */
	size_t size;
};

/**
 * gpu_managed_refusal() - the rule for managed memory: refuse @size when it
 * is larger than the device's free memory less a margin (GPU_MANAGED_MARGIN),
 * because oversubscribed managed memory can hang the GPU.
 * @why: out: the reason, when refused.
 * Return: 1 refused, 0 allowed.
 */
#define GPU_MANAGED_MARGIN (512ull << 20)
int gpu_managed_refusal(uint64_t size, uint64_t free_bytes, char *why, size_t len);

/**
 * gpu_alloc() - allocate a baseline buffer.
 *
 * Managed kinds apply gpu_managed_refusal() to the free memory reported by
 * the driver now, and fail with -VMMX_ERANGE when it refuses.  PAGEABLE
 * fails with -VMMX_ENOTSUP unless the device reports pageable memory access.
 *
 * Return: 0; -VMMX_ENOTSUP; -VMMX_ERANGE; -VMMX_ENOMEM; -VMMX_EDRIVER.
 */
int gpu_alloc(enum gpu_alloc kind, size_t size, struct gpu_mem *m);

/**
 * gpu_mem_settle() - put a freshly filled baseline where its runs start:
 * plain managed memory is prefetched to host memory (as if the CPU had
 * written it), prefetched managed memory to the device; others: nothing.
 */
int gpu_mem_settle(struct gpu_mem *m);

/** gpu_free() - free a baseline buffer (NULL dptr: nothing). */
int gpu_free(struct gpu_mem *m);

/* ---- raw VMM calls (vmmx-bench's baselines) ---- */

int gpu_va_reserve(size_t size, void **va_p);
int gpu_va_free(void *va, size_t size);
/** gpu_vmm_create() - cuMemCreate of a DEVICE handle, or a HOST one when @host. */
int gpu_vmm_create(int host, size_t size, uint64_t *handle_p);
int gpu_vmm_release(uint64_t handle);
int gpu_vmm_map(void *va, size_t size, uint64_t handle);
int gpu_vmm_unmap(void *va, size_t size);
/** gpu_vmm_set_access() - grant the device, and the CPU too when @host (as libvmmx does). */
int gpu_vmm_set_access(void *va, size_t size, int host);

/* ---- helpers ---- */

/** gpu_now() - CLOCK_MONOTONIC in seconds. */
double gpu_now(void);

/** tool_fmt_size() - rep_fmt_size(): "2 MiB", "1.50 GiB", "512 B"; returns @buf. */
const char *tool_fmt_size(uint64_t b, char *buf, size_t len);

/** gpu_copy_half() - the copy workload moves the first half onto the second: whole elements of each. */
static inline uint64_t gpu_copy_half(uint64_t size)
{
	return size / 2 / 16 * 16;
}

/** gpu_set_why() - the detail gpu_why() returns, as printf (util.c). */
void gpu_set_why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** tool_gbps() - @bytes moved in @sec seconds, in GB/s (10^9 bytes). */
double tool_gbps(uint64_t bytes, double sec);

#endif /* !__CUDACC__ */

#endif /* TOOLS_GPU_H */
