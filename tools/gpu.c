// SPDX-License-Identifier: MIT
/*
 * gpu.c - the tools' use of the GPU (see gpu.h): the device's primary
 * context, the embedded kernels, the baselines' allocations and raw VMM
 * calls; the sim backend's stand-in workloads; small output helpers.
 *
 * The driver comes through the one door to it, vmm/cudaload.c, which
 * resolves the versioned names cuda.h maps the API names to (cuMemAlloc ->
 * cuMemAlloc_v2, cuMemPrefetchAsync -> cuMemPrefetchAsync_v2 on CUDA 13), so
 * every call goes to exactly the ABI the compiled-against header describes.
 *
 * Every CUresult is checked; a failure sets the detail (call, arguments,
 * CUDA error name) that gpu_why() returns and becomes a -VMMX_E* code.
 * Every function frees what it allocated on its failure paths.  State is
 * process-wide and unlocked: the tools are single-threaded.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmmx.h"
#include "tools/gpu.h"
#include "tools/report.h"

static char why[320];

__attribute__((format(printf, 1, 2))) static void set_why(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
}

const char *gpu_why(void)
{
	return why;
}

/* ---- helpers ---- */

double gpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double gpu_median(double *v, size_t n)
{
	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

const char *tool_fmt_size(uint64_t b, char *buf, size_t len)
{
	return rep_fmt_size(b, buf, len);
}

void tool_ctx_error(const char *prog, int err)
{
	const char *b = getenv("VMMX_BACKEND");

	fprintf(stderr, "%s: cannot open a libvmmx context: %s: %s\n", prog, vmmx_strerror(err),
		vmmx_last_error());
	if (!b || strcmp(b, "sim"))
		fprintf(stderr,
			"%s: with no usable GPU, VMMX_BACKEND=sim runs the same flow on the "
			"simulated backend (not GPU figures)\n",
			prog);
}

double tool_gbps(uint64_t bytes, double sec)
{
	return (double)bytes / sec / 1e9;
}

/* ---- workloads ---- */

static const char *const wl_names[GPU_WL_COUNT] = {
    [GPU_WL_READ] = "read",
    [GPU_WL_WRITE] = "write",
    [GPU_WL_COPY] = "copy",
    [GPU_WL_GATHER] = "gather",
};

const char *gpu_workload_name(enum gpu_workload w)
{
	return (unsigned)w < GPU_WL_COUNT ? wl_names[w] : "?";
}

int gpu_workload_parse(const char *s, enum gpu_workload *w)
{
	for (int i = 0; i < GPU_WL_COUNT; i++) {
		if (s && !strcmp(s, wl_names[i])) {
			*w = (enum gpu_workload)i;
			return 0;
		}
	}
	return -VMMX_EINVAL;
}

/* Copy moves the first half onto the second: whole elements of each half. */
static uint64_t copy_half(uint64_t size)
{
	return size / 2 / 16 * 16;
}

uint64_t gpu_workload_bytes(enum gpu_workload w, uint64_t size)
{
	switch (w) {
	case GPU_WL_COPY:
		return 2 * copy_half(size);
	default:
		return size / 16 * 16;
	}
}

int gpu_managed_refusal(uint64_t size, uint64_t free_bytes, char *buf, size_t len)
{
	char a[32], b[32], c[32];

	if (free_bytes >= GPU_MANAGED_MARGIN && size <= free_bytes - GPU_MANAGED_MARGIN)
		return 0;
	snprintf(buf, len,
		 "managed memory of %s is more than the device's free memory (%s) less "
		 "a margin of %s; oversubscribed managed memory can hang the GPU",
		 tool_fmt_size(size, a, sizeof(a)), tool_fmt_size(free_bytes, b, sizeof(b)),
		 tool_fmt_size(GPU_MANAGED_MARGIN, c, sizeof(c)));
	return 1;
}

/* ---- the sim's stand-in workloads ---- */

#define SIM_PIECE (64u << 10) /* gather's unit on sim: one driver copy each */

static int grow_scratch(unsigned char **p, size_t *len, size_t want)
{
	unsigned char *n;

	if (*len >= want)
		return 0;
	n = realloc(*p, want);
	if (!n) {
		set_why("out of memory for %zu bytes of scratch", want);
		return -VMMX_ENOMEM;
	}
	*p = n;
	*len = want;
	return 0;
}

static void pattern_bytes(unsigned char *dst, uint64_t first, size_t n_elems, unsigned int seed)
{
	for (size_t i = 0; i < n_elems; i++) {
		unsigned int v[4];

		gpu_pattern(first + i, seed, v);
		memcpy(dst + 16 * i, v, 16);
	}
}

static int sim_pattern(struct gpu_engine *e, size_t size)
{
	size_t have = e->pattern_len;
	int err = grow_scratch(&e->pattern, &e->pattern_len, size);

	if (err)
		return err;
	if (have < size || !have)
		pattern_bytes(e->pattern, 0, e->pattern_len / 16, e->seed);
	return 0;
}

static int vfail(const char *what, int err)
{
	set_why("%s: %s: %s", what, vmmx_strerror(err), vmmx_last_error());
	return err;
}

static int sim_run(struct gpu_engine *e, enum gpu_workload w, void *p, size_t size, size_t ws,
		   double *sec)
{
	unsigned char *b = p;
	double t0;
	int err = 0;

	if (size % SIM_PIECE || ws % SIM_PIECE) {
		set_why("sim workloads need sizes in multiples of 64 KiB");
		return -VMMX_EINVAL;
	}
	if (w == GPU_WL_WRITE)
		err = sim_pattern(e, size);
	else if (w != GPU_WL_COPY)
		err = grow_scratch(&e->scratch, &e->scratch_len, size);
	if (err)
		return err;
	t0 = gpu_now();
	switch (w) {
	case GPU_WL_READ:
		err = vmmx_memcpy(e->ctx, e->scratch, b, size);
		break;
	case GPU_WL_WRITE:
		err = vmmx_memcpy(e->ctx, b, e->pattern, size);
		break;
	case GPU_WL_COPY:
		err = vmmx_memcpy(e->ctx, b + copy_half(size), b, copy_half(size));
		break;
	case GPU_WL_GATHER: {
		uint64_t pieces = ws / SIM_PIECE;

		for (size_t k = 0; k < size / SIM_PIECE && !err; k++) {
			uint64_t j =
			    (uint64_t)(((unsigned __int128)gpu_mix64(k ^ e->seed) * pieces) >> 64);

			err = vmmx_memcpy(e->ctx, e->scratch + k * SIM_PIECE, b + j * SIM_PIECE,
					  SIM_PIECE);
		}
		break;
	}
	default:
		set_why("unknown workload %d", (int)w);
		return -VMMX_EINVAL;
	}
	*sec = gpu_now() - t0;
	return err ? vfail("vmmx_memcpy", err) : 0;
}

static int sim_check(struct gpu_engine *e, const void *p, size_t size, uint64_t first,
		     uint64_t *bad)
{
	unsigned char want[16];
	uint64_t nbad = 0;
	int err = grow_scratch(&e->scratch, &e->scratch_len, size);

	if (err)
		return err;
	err = vmmx_memcpy(e->ctx, e->scratch, p, size);
	if (err)
		return vfail("vmmx_memcpy", err);
	for (size_t i = 0; i < size / 16; i++) {
		pattern_bytes(want, first + i, 1, e->seed);
		nbad += memcmp(e->scratch + 16 * i, want, 16) != 0;
	}
	*bad = nbad;
	return 0;
}

/* ---- the engine: kernels on cuda, copies on sim ---- */

int gpu_engine_fill(struct gpu_engine *e, void *p, size_t size)
{
	int err;

	if (!e->sim)
		return gpu_fill(p, size, e->seed);
	err = sim_pattern(e, size);
	if (!err) {
		err = vmmx_memcpy(e->ctx, p, e->pattern, size);
		if (err)
			return vfail("vmmx_memcpy", err);
	}
	return err;
}

int gpu_engine_run(struct gpu_engine *e, enum gpu_workload w, void *p, size_t size, size_t ws,
		   double *sec)
{
	if (!ws || ws > size)
		ws = size;
	if (e->sim)
		return sim_run(e, w, p, size, ws, sec);
	return gpu_run(w, p, size, ws, e->seed, sec);
}

int gpu_engine_verify(struct gpu_engine *e, enum gpu_workload w, void *p, size_t size,
		      uint64_t *bad)
{
	unsigned char *b = p;

	/* After a copy the second half holds what the first half held. */
	if (w == GPU_WL_COPY) {
		b += copy_half(size);
		size = copy_half(size);
	}
	if (e->sim)
		return sim_check(e, b, size, 0, bad);
	return gpu_check(b, size, 0, e->seed, bad);
}

void gpu_engine_fini(struct gpu_engine *e)
{
	free(e->scratch);
	free(e->pattern);
	e->scratch = e->pattern = NULL;
	e->scratch_len = e->pattern_len = 0;
}

#ifdef VMMX_HAVE_CUDA

#include <stddef.h>
#include <sys/mman.h>

#include <cuda.h>

#include "vmm/cudaload.h"

#ifdef VMMX_HAVE_KERNELS
#include "kernels_fatbin.h"
#endif

/* Threads per block: a multiple of the warp; blocks per SM from the occupancy API. */
#define BLOCK 256

enum kfn { K_READ, K_WRITE, K_COPY, K_GATHER, K_CHECK, K_COUNT };
static const char *const kfn_names[K_COUNT] = {
    [K_READ] = "vmmx_tool_read",     [K_WRITE] = "vmmx_tool_write", [K_COPY] = "vmmx_tool_copy",
    [K_GATHER] = "vmmx_tool_gather", [K_CHECK] = "vmmx_tool_check",
};

static struct {
	const struct vmm_cuda_api *api; /* NULL until gpu_open() loads the driver */
	CUdevice dev;
	CUcontext ctx; /* retained primary context, NULL when closed */
	CUmodule mod;  /* the tools' kernels, NULL when unavailable */
	CUfunction fn[K_COUNT];
	unsigned int grid[K_COUNT]; /* SMs x resident blocks of BLOCK threads */
	CUevent ev[2];		    /* NULL when not created */
	CUdeviceptr out;	    /* per-block results of read and gather */
	CUdeviceptr bad;	    /* mismatch counter of check */
	struct gpu_dev info;
	char kwhy[256]; /* why the kernels are unavailable; "" when they are */
} G;
static const char *cu_name(CUresult r)
{
	static char buf[32];

	return vmm_cuda_error_name(r, buf, sizeof(buf));
}

__attribute__((format(printf, 2, 3))) static int cu_fail(CUresult r, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	set_why("%s: %s", what, cu_name(r));
	switch (r) {
	case CUDA_ERROR_OUT_OF_MEMORY:
		return -VMMX_ENOMEM;
	case CUDA_ERROR_INVALID_VALUE:
		return -VMMX_EINVAL;
	case CUDA_ERROR_NOT_SUPPORTED:
		return -VMMX_ENOTSUP;
	case CUDA_ERROR_NO_DEVICE:
	case CUDA_ERROR_INVALID_DEVICE:
		return -VMMX_ENODEV;
	default:
		return -VMMX_EDRIVER;
	}
}

static inline CUdeviceptr dp(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

static int need_open(void)
{
	if (G.ctx)
		return 0;
	set_why("the GPU is not open");
	return -VMMX_ENODEV;
}

/* The primary context is libvmmx's too; a library call may have left another current. */
static int enter(void)
{
	CUresult r;
	int err = need_open();

	if (err)
		return err;
	r = G.api->cuCtxSetCurrent(G.ctx);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuCtxSetCurrent(primary context)");
}

static int attr(CUdevice_attribute a, const char *name, int *v)
{
	CUresult r = G.api->cuDeviceGetAttribute(v, a, G.dev);

	if (r != CUDA_SUCCESS) {
		*v = 0;
		return cu_fail(r, "cuDeviceGetAttribute(%s)", name);
	}
	return 0;
}

static void load_kernels(void)
{
#ifdef VMMX_HAVE_KERNELS
	CUresult r;

	r = G.api->cuModuleLoadData(&G.mod, vmmx_tool_kernels_fatbin);
	if (r != CUDA_SUCCESS) {
		G.mod = NULL;
		snprintf(G.kwhy, sizeof(G.kwhy),
			 "cuModuleLoadData(tool kernels): %s (built for %s)", cu_name(r),
			 "the NVCC_ARCH given to configure");
		return;
	}
	for (int k = 0; k < K_COUNT; k++) {
		int per_sm = 0;

		r = G.api->cuModuleGetFunction(&G.fn[k], G.mod, kfn_names[k]);
		if (r != CUDA_SUCCESS) {
			snprintf(G.kwhy, sizeof(G.kwhy), "cuModuleGetFunction(%s): %s",
				 kfn_names[k], cu_name(r));
			goto err_mod;
		}
		r = G.api->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, G.fn[k], BLOCK, 0);
		if (r != CUDA_SUCCESS) {
			snprintf(G.kwhy, sizeof(G.kwhy),
				 "cuOccupancyMaxActiveBlocksPerMultiprocessor(%s): %s",
				 kfn_names[k], cu_name(r));
			goto err_mod;
		}
		/* One full wave of resident blocks: a second, partial wave would idle SMs. */
		G.grid[k] = (unsigned int)((per_sm > 0 ? per_sm : 1) *
					   (G.info.sm_count > 0 ? G.info.sm_count : 1));
	}
	r = G.api->cuMemAlloc(&G.out, (size_t)G.grid[K_READ] * 4 > (size_t)G.grid[K_GATHER] * 4
					 ? (size_t)G.grid[K_READ] * 4
					 : (size_t)G.grid[K_GATHER] * 4);
	if (r != CUDA_SUCCESS) {
		G.out = 0;
		snprintf(G.kwhy, sizeof(G.kwhy), "cuMemAlloc(per-block results): %s", cu_name(r));
		goto err_mod;
	}
	r = G.api->cuMemAlloc(&G.bad, sizeof(unsigned long long));
	if (r != CUDA_SUCCESS) {
		G.bad = 0;
		snprintf(G.kwhy, sizeof(G.kwhy), "cuMemAlloc(check counter): %s", cu_name(r));
		goto err_out;
	}
	return;
err_out:
	(void)G.api->cuMemFree(G.out); /* teardown of a failed setup: nothing more to do */
	G.out = 0;
err_mod:
	(void)G.api->cuModuleUnload(G.mod);
	G.mod = NULL;
#else
	snprintf(G.kwhy, sizeof(G.kwhy),
		 "built without nvcc: configure found no nvcc/bin2c, so the GPU kernels "
		 "(tools/kernels.cu) are not embedded");
#endif
}

/* cuInit, then the device @ordinal: G.dev, its ordinal and name. */
static int find_device(int ordinal)
{
	CUresult r;
	int count = 0, err;

	r = G.api->cuInit(0);
	if (r != CUDA_SUCCESS) {
		err = cu_fail(r, "cuInit");
		return r == CUDA_ERROR_STUB_LIBRARY ? -VMMX_ENODRIVER : err;
	}
	r = G.api->cuDeviceGetCount(&count);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuDeviceGetCount");
	if (ordinal < 0 || ordinal >= count) {
		set_why("no CUDA device %d (%d visible)", ordinal, count);
		return -VMMX_ENODEV;
	}
	r = G.api->cuDeviceGet(&G.dev, ordinal);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuDeviceGet(%d)", ordinal);
	G.info.ordinal = ordinal;
	r = G.api->cuDeviceGetName(G.info.name, sizeof(G.info.name), G.dev);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuDeviceGetName");
}

/* The attributes of struct gpu_dev, in the order they are read. */
#define DEV_ATTR(a, field) {CU_DEVICE_ATTRIBUTE_##a, #a, offsetof(struct gpu_dev, field)}
static const struct {
	CUdevice_attribute a;
	const char *name;
	size_t off; /* of an int in struct gpu_dev */
} dev_attrs[] = {
    DEV_ATTR(MULTIPROCESSOR_COUNT, sm_count),
    DEV_ATTR(COMPUTE_CAPABILITY_MAJOR, cc_major),
    DEV_ATTR(COMPUTE_CAPABILITY_MINOR, cc_minor),
    DEV_ATTR(PAGEABLE_MEMORY_ACCESS, pageable_access),
    DEV_ATTR(MANAGED_MEMORY, managed),
    DEV_ATTR(CONCURRENT_MANAGED_ACCESS, concurrent_managed),
    DEV_ATTR(HOST_REGISTER_SUPPORTED, host_register),
    DEV_ATTR(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, vmm),
};
#undef DEV_ATTR

/* Every attribute of dev_attrs into G.info; the first failure stops. */
static int read_attrs(void)
{
	for (size_t i = 0; i < sizeof(dev_attrs) / sizeof(dev_attrs[0]); i++) {
		int err = attr(dev_attrs[i].a, dev_attrs[i].name,
			       (int *)((char *)&G.info + dev_attrs[i].off));

		if (err)
			return err;
	}
	return 0;
}

/* Retain the primary context, make it current, read the VMM granularity. */
static int open_context(int ordinal)
{
	CUresult r;

	r = G.api->cuDevicePrimaryCtxRetain(&G.ctx, G.dev);
	if (r != CUDA_SUCCESS) {
		G.ctx = NULL;
		return cu_fail(r, "cuDevicePrimaryCtxRetain(device %d)", ordinal);
	}
	r = G.api->cuCtxSetCurrent(G.ctx);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuCtxSetCurrent(primary context)");
	if (G.info.vmm) {
		CUmemAllocationProp prop = {0};

		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = ordinal;
		r = G.api->cuMemGetAllocationGranularity(&G.info.granularity, &prop,
							CU_MEM_ALLOC_GRANULARITY_MINIMUM);
		if (r != CUDA_SUCCESS)
			return cu_fail(r, "cuMemGetAllocationGranularity(device %d)", ordinal);
	}
	return 0;
}

/* The two events that time copies, prefetches and kernels. */
static int create_events(void)
{
	for (int i = 0; i < 2; i++) {
		CUresult r = G.api->cuEventCreate(&G.ev[i], CU_EVENT_DEFAULT);

		if (r != CUDA_SUCCESS) {
			G.ev[i] = NULL;
			return cu_fail(r, "cuEventCreate");
		}
	}
	return 0;
}

int gpu_open(int ordinal)
{
	int err;

	gpu_close();
	why[0] = '\0';
	err = vmm_cuda_load(VMM_CUDA_CORE | VMM_CUDA_LAUNCH | VMM_CUDA_MANAGED, &G.api, why,
			    sizeof(why));
	if (err)
		return err;
	err = find_device(ordinal);
	if (!err)
		err = read_attrs();
	if (!err)
		err = open_context(ordinal);
	if (!err)
		err = create_events();
	if (err) {
		/* Undoes whatever of the above was done. */
		gpu_close();
		return err;
	}
	load_kernels();
	return 0;
}

void gpu_close(void)
{
	/* Teardown: failures are ignored on purpose, there is nothing left to undo. */
	if (G.ctx && G.api->cuCtxSetCurrent(G.ctx) == CUDA_SUCCESS) {
		if (G.bad)
			(void)G.api->cuMemFree(G.bad);
		if (G.out)
			(void)G.api->cuMemFree(G.out);
		for (int i = 0; i < 2; i++)
			if (G.ev[i])
				(void)G.api->cuEventDestroy(G.ev[i]);
		if (G.mod)
			(void)G.api->cuModuleUnload(G.mod);
	}
	if (G.ctx)
		(void)G.api->cuDevicePrimaryCtxRelease(G.dev);
	memset(&G, 0, sizeof(G));
}

const struct gpu_dev *gpu_dev(void)
{
	return G.ctx ? &G.info : NULL;
}

const char *gpu_kernels_why(void)
{
	if (!G.ctx)
		return why[0] ? why : "the GPU is not open";
	return G.mod ? NULL : G.kwhy;
}

int gpu_mem_info(uint64_t *free_p, uint64_t *total_p)
{
	size_t f = 0, t = 0;
	CUresult r;
	int err = enter();

	if (err)
		return err;
	r = G.api->cuMemGetInfo(&f, &t);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuMemGetInfo");
	*free_p = f;
	*total_p = t;
	return 0;
}

int gpu_sync(void)
{
	CUresult r;
	int err = enter();

	if (err)
		return err;
	r = G.api->cuCtxSynchronize();
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuCtxSynchronize");
}

int gpu_memcpy(void *dst, const void *src, size_t n)
{
	CUresult r;
	int err = enter();

	if (err)
		return err;
	r = G.api->cuMemcpy(dp(dst), dp(src), n);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuMemcpy(%p <- %p, %zu bytes)", dst, src, n);
	/* Device-to-device cuMemcpy returns before the copy is done. */
	r = G.api->cuCtxSynchronize();
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuCtxSynchronize after cuMemcpy");
}

/* Time what @queue puts on the default stream, between two events, and wait for it. */
static int timed(CUresult (*queue)(void *), void *arg, const char *what, double *sec)
{
	float ms = 0;
	CUresult r;

	r = G.api->cuEventRecord(G.ev[0], NULL);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuEventRecord (before %s)", what);
	r = queue(arg);
	if (r != CUDA_SUCCESS) {
		/* Whatever was queued before the failure must not outlive the call. */
		(void)G.api->cuCtxSynchronize();
		return cu_fail(r, "%s", what);
	}
	r = G.api->cuEventRecord(G.ev[1], NULL);
	if (r != CUDA_SUCCESS) {
		(void)G.api->cuCtxSynchronize();
		return cu_fail(r, "cuEventRecord (after %s)", what);
	}
	r = G.api->cuEventSynchronize(G.ev[1]);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "%s (cuEventSynchronize)", what);
	r = G.api->cuEventElapsedTime(&ms, G.ev[0], G.ev[1]);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuEventElapsedTime (%s)", what);
	*sec = ms * 1e-3;
	return 0;
}

struct copy_args {
	CUdeviceptr dst, src;
	size_t n;
};

static CUresult queue_copy(void *arg)
{
	struct copy_args *a = arg;

	return G.api->cuMemcpy(a->dst, a->src, a->n);
}

int gpu_memcpy_timed(void *dst, const void *src, size_t n, double *sec)
{
	struct copy_args a = {dp(dst), dp(src), n};
	char what[96];
	int err = enter();

	if (err)
		return err;
	snprintf(what, sizeof(what), "cuMemcpy(%p <- %p, %zu bytes)", dst, src, n);
	return timed(queue_copy, &a, what, sec);
}

static CUresult prefetch(CUdeviceptr d, size_t n, int host);

struct prefetch_args {
	CUdeviceptr p;
	size_t n;
	int host;
};

static CUresult queue_prefetch(void *arg)
{
	struct prefetch_args *a = arg;

	return prefetch(a->p, a->n, a->host);
}

int gpu_prefetch(void *p, size_t n, int to_host, double *sec)
{
	struct prefetch_args a = {dp(p), n, to_host};
	char what[96];
	double s = 0;
	int err = enter();

	if (err)
		return err;
	snprintf(what, sizeof(what), "cuMemPrefetchAsync(%p, %zu bytes to %s)", p, n,
		 to_host ? "host" : "the device");
	err = timed(queue_prefetch, &a, what, &s);
	if (!err && sec)
		*sec = s;
	return err;
}

static int need_kernels(void)
{
	int err = enter();

	if (err)
		return err;
	if (!G.mod) {
		set_why("GPU workloads unavailable: %s", G.kwhy);
		return -VMMX_ENOTSUP;
	}
	return 0;
}

/* Launch @k on the default stream between the two events; *ms: the time between them. */
static int launch(enum kfn k, unsigned long long work, void **args, double *sec)
{
	unsigned long long want = (work + BLOCK - 1) / BLOCK;
	unsigned int grid = G.grid[k];
	float ms = 0;
	CUresult r;

	if (want < grid)
		grid = want ? (unsigned int)want : 1;
	r = G.api->cuEventRecord(G.ev[0], NULL);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuEventRecord");
	r = G.api->cuLaunchKernel(G.fn[k], grid, 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuLaunchKernel(%s, %u x %u)", kfn_names[k], grid, BLOCK);
	r = G.api->cuEventRecord(G.ev[1], NULL);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuEventRecord");
	/* A fault inside the kernel surfaces here (a sticky error: the context is lost). */
	r = G.api->cuEventSynchronize(G.ev[1]);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "%s (cuEventSynchronize after the kernel)", kfn_names[k]);
	r = G.api->cuEventElapsedTime(&ms, G.ev[0], G.ev[1]);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuEventElapsedTime");
	if (sec)
		*sec = ms * 1e-3;
	return 0;
}

int gpu_fill(void *p, size_t size, unsigned int seed)
{
	CUdeviceptr d = dp(p);
	unsigned long long n = size / 16;
	void *args[] = {&d, &n, &seed};
	int err = need_kernels();

	return err ? err : launch(K_WRITE, n, args, NULL);
}

int gpu_run(enum gpu_workload w, void *p, size_t size, size_t ws, unsigned int seed, double *sec)
{
	CUdeviceptr d = dp(p), d2;
	unsigned long long n = size / 16, m;
	int err = need_kernels();

	if (err)
		return err;
	switch (w) {
	case GPU_WL_READ: {
		void *args[] = {&d, &n, &G.out};

		return launch(K_READ, n, args, sec);
	}
	case GPU_WL_WRITE: {
		void *args[] = {&d, &n, &seed};

		return launch(K_WRITE, n, args, sec);
	}
	case GPU_WL_COPY: {
		void *args[] = {&d2, &d, &m};

		m = copy_half(size) / 16;
		d2 = d + copy_half(size);
		return launch(K_COPY, m, args, sec);
	}
	case GPU_WL_GATHER: {
		unsigned long long wsn = (ws ? ws : size) / 16;
		void *args[] = {&d, &wsn, &n, &seed, &G.out};

		return launch(K_GATHER, n, args, sec);
	}
	default:
		set_why("unknown workload %d", (int)w);
		return -VMMX_EINVAL;
	}
}

int gpu_check(const void *p, size_t size, uint64_t first, unsigned int seed, uint64_t *bad)
{
	CUdeviceptr d = dp(p);
	unsigned long long n = size / 16, f = first, got = 0;
	void *args[] = {&d, &n, &f, &seed, &G.bad};
	CUresult r;
	int err = need_kernels();

	if (err)
		return err;
	r = G.api->cuMemsetD32(G.bad, 0, 2);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuMemsetD32(check counter)");
	err = launch(K_CHECK, n, args, NULL);
	if (err)
		return err;
	r = G.api->cuMemcpy(dp(&got), G.bad, sizeof(got));
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuMemcpy(check counter)");
	*bad = got;
	return 0;
}

/* ---- baseline allocations ---- */

static CUmemLocation mem_loc(int host)
{
	CUmemLocation l;

	memset(&l, 0, sizeof(l));
	l.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
	l.id = host ? 0 : G.info.ordinal;
	return l;
}

#if CUDA_VERSION >= 13000
/* CUDA 13: cuMemAdvise and cuMemPrefetchAsync take a CUmemLocation. */
static CUresult advise(CUdeviceptr d, size_t n, CUmem_advise a)
{
	return G.api->cuMemAdvise(d, n, a, mem_loc(0));
}

static CUresult prefetch(CUdeviceptr d, size_t n, int host)
{
	return G.api->cuMemPrefetchAsync(d, n, mem_loc(host), 0, NULL);
}
#else
static CUresult advise(CUdeviceptr d, size_t n, CUmem_advise a)
{
	return G.api->cuMemAdvise(d, n, a, G.dev);
}

static CUresult prefetch(CUdeviceptr d, size_t n, int host)
{
	return G.api->cuMemPrefetchAsync(d, n, host ? CU_DEVICE_CPU : G.dev, NULL);
}
#endif

static void *map_anon(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		set_why("mmap(%zu bytes): %s", size, strerror(errno));
		return NULL;
	}
	return p;
}

/* cuMemHostAlloc, mapped for the device. */
static int alloc_host(size_t size, CUdeviceptr *d, void **h)
{
	CUresult r = G.api->cuMemHostAlloc(h, size, CU_MEMHOSTALLOC_DEVICEMAP);
	int err;

	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuMemHostAlloc(%zu bytes, DEVICEMAP)", size);
	r = G.api->cuMemHostGetDevicePointer(d, *h, 0);
	if (r != CUDA_SUCCESS) {
		err = cu_fail(r, "cuMemHostGetDevicePointer");
		(void)G.api->cuMemFreeHost(*h); /* undoing our own allocation */
		return err;
	}
	return 0;
}

/* Anonymous memory, then cuMemHostRegister, mapped for the device. */
static int alloc_registered(size_t size, CUdeviceptr *d, void **h)
{
	CUresult r;
	int err;

	if (!G.info.host_register) {
		set_why("the device reports no host registration (HOST_REGISTER_SUPPORTED=0)");
		return -VMMX_ENOTSUP;
	}
	*h = map_anon(size);
	if (!*h)
		return -VMMX_ENOMEM;
	r = G.api->cuMemHostRegister(*h, size, CU_MEMHOSTREGISTER_DEVICEMAP);
	if (r != CUDA_SUCCESS) {
		err = cu_fail(r, "cuMemHostRegister(%zu bytes, DEVICEMAP)", size);
		munmap(*h, size);
		return err;
	}
	r = G.api->cuMemHostGetDevicePointer(d, *h, 0);
	if (r != CUDA_SUCCESS) {
		err = cu_fail(r, "cuMemHostGetDevicePointer");
		(void)G.api->cuMemHostUnregister(*h); /* undoing our own registration */
		munmap(*h, size);
		return err;
	}
	return 0;
}

/* Anonymous memory the device reaches as is (HMM or ATS). */
static int alloc_pageable(size_t size, CUdeviceptr *d, void **h)
{
	if (!G.info.pageable_access) {
		set_why("the device reports no pageable memory access "
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

	if (!G.info.managed) {
		set_why("the device reports no managed memory (MANAGED_MEMORY=0)");
		return -VMMX_ENOTSUP;
	}
	err = gpu_mem_info(&fr, &tot);
	if (err)
		return err;
	if (gpu_managed_refusal(size, fr, msg, sizeof(msg))) {
		set_why("%s", msg);
		return -VMMX_ERANGE;
	}
	r = G.api->cuMemAllocManaged(d, size, CU_MEM_ATTACH_GLOBAL);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuMemAllocManaged(%zu bytes)", size);
	*h = (void *)(uintptr_t)*d;
	if (kind != GPU_ALLOC_MANAGED_PREFETCH)
		return 0;
	r = advise(*d, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION);
	if (r == CUDA_SUCCESS)
		r = advise(*d, size, CU_MEM_ADVISE_SET_ACCESSED_BY);
	if (r != CUDA_SUCCESS) {
		err = cu_fail(r, "cuMemAdvise(preferred location / accessed by device %d)",
			      G.info.ordinal);
		(void)G.api->cuMemFree(*d); /* undoing our own allocation */
		return err;
	}
	return 0;
}

int gpu_alloc(enum gpu_alloc kind, size_t size, struct gpu_mem *m)
{
	CUdeviceptr d = 0;
	void *h = NULL;
	CUresult r;
	int err = enter();

	if (err)
		return err;
	switch (kind) {
	case GPU_ALLOC_DEVICE:
		r = G.api->cuMemAlloc(&d, size);
		err = r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuMemAlloc(%zu bytes)", size);
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
		set_why("unknown allocation kind %d", (int)kind);
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
	err = enter();
	if (err)
		return err;
	r = prefetch(dp(m->dptr), m->size, m->kind == GPU_ALLOC_MANAGED);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuMemPrefetchAsync(%zu bytes to %s)", m->size,
			       m->kind == GPU_ALLOC_MANAGED ? "host" : "the device");
	r = G.api->cuCtxSynchronize();
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuCtxSynchronize after cuMemPrefetchAsync");
}

int gpu_free(struct gpu_mem *m)
{
	CUresult r = CUDA_SUCCESS;
	int err;

	if (!m->dptr && !m->hptr)
		return 0;
	err = enter();
	if (err)
		return err;
	switch (m->kind) {
	case GPU_ALLOC_DEVICE:
	case GPU_ALLOC_MANAGED:
	case GPU_ALLOC_MANAGED_PREFETCH:
		r = G.api->cuMemFree(dp(m->dptr));
		break;
	case GPU_ALLOC_HOST:
		r = G.api->cuMemFreeHost(m->hptr);
		break;
	case GPU_ALLOC_REGISTERED:
		r = G.api->cuMemHostUnregister(m->hptr);
		munmap(m->hptr, m->size);
		break;
	case GPU_ALLOC_PAGEABLE:
		munmap(m->hptr, m->size);
		break;
	default:
		break;
	}
	memset(m, 0, sizeof(*m));
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "freeing a baseline buffer");
}

/* ---- raw VMM calls ---- */

int gpu_va_reserve(size_t size, void **va_p)
{
	CUdeviceptr d = 0;
	CUresult r;
	int err = enter();

	if (err)
		return err;
	r = G.api->cuMemAddressReserve(&d, size, G.info.granularity, 0, 0);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuMemAddressReserve(%zu bytes)", size);
	*va_p = (void *)(uintptr_t)d;
	return 0;
}

int gpu_va_free(void *va, size_t size)
{
	CUresult r = G.api->cuMemAddressFree(dp(va), size);

	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuMemAddressFree(%p, %zu bytes)", va, size);
}

int gpu_vmm_create(int host, size_t size, uint64_t *handle_p)
{
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp prop;
	CUresult r;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location = mem_loc(host);
	r = G.api->cuMemCreate(&h, size, &prop, 0);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuMemCreate(%s, %zu bytes)", host ? "host" : "device", size);
	*handle_p = (uint64_t)h;
	return 0;
}

int gpu_vmm_release(uint64_t handle)
{
	CUresult r = G.api->cuMemRelease((CUmemGenericAllocationHandle)handle);

	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuMemRelease");
}

int gpu_vmm_map(void *va, size_t size, uint64_t handle)
{
	CUresult r = G.api->cuMemMap(dp(va), size, 0, (CUmemGenericAllocationHandle)handle, 0);

	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuMemMap(%p, %zu bytes)", va, size);
}

int gpu_vmm_unmap(void *va, size_t size)
{
	CUresult r = G.api->cuMemUnmap(dp(va), size);

	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuMemUnmap(%p, %zu bytes)", va, size);
}

int gpu_vmm_set_access(void *va, size_t size, int host)
{
	CUmemAccessDesc d[2];
	CUresult r;

	memset(d, 0, sizeof(d));
	d[0].location = mem_loc(0);
	d[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	d[1].location = mem_loc(1);
	d[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	r = G.api->cuMemSetAccess(dp(va), size, d, host ? 2 : 1);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuMemSetAccess(%p, %zu bytes)", va, size);
}

#else /* !VMMX_HAVE_CUDA */

#define NO_CUDA "built without CUDA headers (configure found no cuda.h)"

int gpu_open(int ordinal)
{
	set_why(NO_CUDA);
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
	set_why(NO_CUDA);
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

#endif /* VMMX_HAVE_CUDA */
