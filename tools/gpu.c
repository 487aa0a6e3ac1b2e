// SPDX-License-Identifier: MIT
/*
 * gpu.c - the tools' GPU client on the cuda backend (see gpu.h): the
 * device's primary context, the embedded kernels and their launches, timed
 * copies and prefetches on device events.
 *
 * The driver comes through the one door to it, vmm/cudaload.c, which
 * resolves the versioned names cuda.h maps the API names to (cuMemAlloc ->
 * cuMemAlloc_v2, cuMemPrefetchAsync -> cuMemPrefetchAsync_v2 on CUDA 13), so
 * every call goes to exactly the ABI the compiled-against header describes.
 *
 * Every CUresult is checked; a failure sets the detail (call, arguments,
 * CUDA error name) that gpu_why() returns and becomes a -VMMX_E* code.
 * Every function frees what it allocated on its failure paths.  State (G,
 * gpu-cuda.h) is process-wide and unlocked: the tools are single-threaded.
 * Built only with CUDA headers; gpu-none.c stands in otherwise.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "gpu/client.h"
#include "tools/gpu-cuda.h"


struct gpu_cuda gcu;

static const char *const kfn_names[K_COUNT] = {
    [K_READ] = "vmmx_tool_read",     [K_WRITE] = "vmmx_tool_write", [K_COPY] = "vmmx_tool_copy",
    [K_GATHER] = "vmmx_tool_gather", [K_CHECK] = "vmmx_tool_check",
};

const char *gcu_name(CUresult r)
{
	static char buf[32];

	return vmm_cuda_error_name(r, buf, sizeof(buf));
}

int gcu_fail(CUresult r, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	gpu_set_why("%s: %s", what, gcu_name(r));
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


int gcu_need_open(void)
{
	if (gcu.ctx)
		return 0;
	gpu_set_why("the GPU is not open");
	return -VMMX_ENODEV;
}

/* The primary context is libvmmx's too; a library call may have left another current. */
int gcu_enter(void)
{
	CUresult r;
	int err = gcu_need_open();

	if (err)
		return err;
	r = gcu.api->cuCtxSetCurrent(gcu.ctx);
	return r == CUDA_SUCCESS ? 0 : gcu_fail(r, "cuCtxSetCurrent(primary context)");
}

static int attr(CUdevice_attribute a, const char *name, int *v)
{
	CUresult r = gcu.api->cuDeviceGetAttribute(v, a, gcu.dev);

	if (r != CUDA_SUCCESS) {
		*v = 0;
		return gcu_fail(r, "cuDeviceGetAttribute(%s)", name);
	}
	return 0;
}

static void load_kernels(void)
{
	CUresult r;

	if (gpu_client_load_kernels()) {
		snprintf(gcu.kwhy, sizeof(gcu.kwhy), "%s", gpu_client_why());
		return;
	}
	gcu.mod = gpu_client()->mod;
	for (int k = 0; k < K_COUNT; k++) {
		int per_sm = 0;

		r = gcu.api->cuModuleGetFunction(&gcu.fn[k], gcu.mod, kfn_names[k]);
		if (r != CUDA_SUCCESS) {
			snprintf(gcu.kwhy, sizeof(gcu.kwhy), "cuModuleGetFunction(%s): %s",
				 kfn_names[k], gcu_name(r));
			goto err_mod;
		}
		r = gcu.api->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gcu.fn[k], BLOCK, 0);
		if (r != CUDA_SUCCESS) {
			snprintf(gcu.kwhy, sizeof(gcu.kwhy),
				 "cuOccupancyMaxActiveBlocksPerMultiprocessor(%s): %s",
				 kfn_names[k], gcu_name(r));
			goto err_mod;
		}
		/* One full wave of resident blocks: a second, partial wave would idle SMs. */
		gcu.grid[k] = (unsigned int)((per_sm > 0 ? per_sm : 1) *
					   (gcu.info.sm_count > 0 ? gcu.info.sm_count : 1));
	}
	r = gcu.api->cuMemAlloc(&gcu.out, (size_t)gcu.grid[K_READ] * 4 > (size_t)gcu.grid[K_GATHER] * 4
					 ? (size_t)gcu.grid[K_READ] * 4
					 : (size_t)gcu.grid[K_GATHER] * 4);
	if (r != CUDA_SUCCESS) {
		gcu.out = 0;
		snprintf(gcu.kwhy, sizeof(gcu.kwhy), "cuMemAlloc(per-block results): %s", gcu_name(r));
		goto err_mod;
	}
	r = gcu.api->cuMemAlloc(&gcu.bad, sizeof(unsigned long long));
	if (r != CUDA_SUCCESS) {
		gcu.bad = 0;
		snprintf(gcu.kwhy, sizeof(gcu.kwhy), "cuMemAlloc(check counter): %s", gcu_name(r));
		goto err_out;
	}
	return;
err_out:
	(void)gcu.api->cuMemFree(gcu.out); /* teardown of a failed setup: nothing more to do */
	gcu.out = 0;
err_mod:
	/* The client keeps the module; these kernels are unusable without the rest. */
	gcu.mod = NULL;
}

/* cuInit, then the device @ordinal: gcu.dev, its ordinal and name. */
/* The device the client opened: its ordinal and name. */
static int name_device(int ordinal)
{
	CUresult r;

	gcu.info.ordinal = ordinal;
	r = gcu.api->cuDeviceGetName(gcu.info.name, sizeof(gcu.info.name), gcu.dev);
	return r == CUDA_SUCCESS ? 0 : gcu_fail(r, "cuDeviceGetName");
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

/* Every attribute of dev_attrs into gcu.info; the first failure stops. */
static int read_attrs(void)
{
	for (size_t i = 0; i < sizeof(dev_attrs) / sizeof(dev_attrs[0]); i++) {
		int err = attr(dev_attrs[i].a, dev_attrs[i].name,
			       (int *)((char *)&gcu.info + dev_attrs[i].off));

		if (err)
			return err;
	}
	return 0;
}

/* The VMM granularity, in the primary context the client made current. */
static int read_granularity(int ordinal)
{
	CUresult r;

	if (gcu.info.vmm) {
		CUmemAllocationProp prop = {0};

		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = ordinal;
		r = gcu.api->cuMemGetAllocationGranularity(&gcu.info.granularity, &prop,
							CU_MEM_ALLOC_GRANULARITY_MINIMUM);
		if (r != CUDA_SUCCESS)
			return gcu_fail(r, "cuMemGetAllocationGranularity(device %d)", ordinal);
	}
	return 0;
}

/* The two events that time copies, prefetches and kernels. */
static int create_events(void)
{
	for (int i = 0; i < 2; i++) {
		CUresult r = gcu.api->cuEventCreate(&gcu.ev[i], CU_EVENT_DEFAULT);

		if (r != CUDA_SUCCESS) {
			gcu.ev[i] = NULL;
			return gcu_fail(r, "cuEventCreate");
		}
	}
	return 0;
}

int gpu_open(int ordinal)
{
	const struct gpu_client *c;
	int err;

	gpu_close();
	gpu_set_why("%s", "");
	/* The one client: driver, device, primary context (retained, current). */
	err = gpu_client_open(ordinal, 1);
	if (err) {
		gpu_set_why("%s", gpu_client_why());
		return err;
	}
	c = gpu_client();
	gcu.api = c->api;
	gcu.dev = c->dev;
	gcu.ctx = c->ctx;
	err = name_device(ordinal);
	if (!err)
		err = read_attrs();
	if (!err)
		err = read_granularity(ordinal);
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
	if (gcu.ctx && gcu.api->cuCtxSetCurrent(gcu.ctx) == CUDA_SUCCESS) {
		if (gcu.bad)
			(void)gcu.api->cuMemFree(gcu.bad);
		if (gcu.out)
			(void)gcu.api->cuMemFree(gcu.out);
		for (int i = 0; i < 2; i++)
			if (gcu.ev[i])
				(void)gcu.api->cuEventDestroy(gcu.ev[i]);
	}
	/* The module and the context are the client's. */
	gpu_client_close();
	memset(&gcu, 0, sizeof(gcu));
}

const struct gpu_dev *gpu_dev(void)
{
	return gcu.ctx ? &gcu.info : NULL;
}

const char *gpu_kernels_why(void)
{
	if (!gcu.ctx)
		return gpu_why()[0] ? gpu_why() : "the GPU is not open";
	return gcu.mod ? NULL : gcu.kwhy;
}

int gpu_mem_info(uint64_t *free_p, uint64_t *total_p)
{
	size_t f = 0, t = 0;
	CUresult r;
	int err = gcu_enter();

	if (err)
		return err;
	r = gcu.api->cuMemGetInfo(&f, &t);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuMemGetInfo");
	*free_p = f;
	*total_p = t;
	return 0;
}

int gpu_sync(void)
{
	CUresult r;
	int err = gcu_enter();

	if (err)
		return err;
	r = gcu.api->cuCtxSynchronize();
	return r == CUDA_SUCCESS ? 0 : gcu_fail(r, "cuCtxSynchronize");
}

int gpu_memcpy(void *dst, const void *src, size_t n)
{
	CUresult r;
	int err = gcu_enter();

	if (err)
		return err;
	r = gcu.api->cuMemcpy(dp(dst), dp(src), n);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuMemcpy(%p <- %p, %zu bytes)", dst, src, n);
	/* Device-to-device cuMemcpy returns before the copy is done. */
	r = gcu.api->cuCtxSynchronize();
	return r == CUDA_SUCCESS ? 0 : gcu_fail(r, "cuCtxSynchronize after cuMemcpy");
}

/* Time what @queue puts on the default stream, between two events, and wait for it. */
static int timed(CUresult (*queue)(void *), void *arg, const char *what, double *sec)
{
	float ms = 0;
	CUresult r;

	r = gcu.api->cuEventRecord(gcu.ev[0], NULL);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuEventRecord (before %s)", what);
	r = queue(arg);
	if (r != CUDA_SUCCESS) {
		/* Whatever was queued before the failure must not outlive the call. */
		(void)gcu.api->cuCtxSynchronize();
		return gcu_fail(r, "%s", what);
	}
	r = gcu.api->cuEventRecord(gcu.ev[1], NULL);
	if (r != CUDA_SUCCESS) {
		(void)gcu.api->cuCtxSynchronize();
		return gcu_fail(r, "cuEventRecord (after %s)", what);
	}
	r = gcu.api->cuEventSynchronize(gcu.ev[1]);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "%s (cuEventSynchronize)", what);
	r = gcu.api->cuEventElapsedTime(&ms, gcu.ev[0], gcu.ev[1]);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuEventElapsedTime (%s)", what);
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

	return gcu.api->cuMemcpy(a->dst, a->src, a->n);
}

int gpu_memcpy_timed(void *dst, const void *src, size_t n, double *sec)
{
	struct copy_args a = {dp(dst), dp(src), n};
	char what[96];
	int err = gcu_enter();

	if (err)
		return err;
	snprintf(what, sizeof(what), "cuMemcpy(%p <- %p, %zu bytes)", dst, src, n);
	return timed(queue_copy, &a, what, sec);
}


struct prefetch_args {
	CUdeviceptr p;
	size_t n;
	int host;
};

static CUresult queue_prefetch(void *arg)
{
	struct prefetch_args *a = arg;

	return gcu_prefetch(a->p, a->n, a->host);
}

int gpu_prefetch(void *p, size_t n, int to_host, double *sec)
{
	struct prefetch_args a = {dp(p), n, to_host};
	char what[96];
	double s = 0;
	int err = gcu_enter();

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
	int err = gcu_enter();

	if (err)
		return err;
	if (!gcu.mod) {
		gpu_set_why("GPU workloads unavailable: %s", gcu.kwhy);
		return -VMMX_ENOTSUP;
	}
	return 0;
}

/* Launch @k on the default stream between the two events; *ms: the time between them. */
static int launch(enum kfn k, unsigned long long work, void **args, double *sec)
{
	unsigned long long want = (work + BLOCK - 1) / BLOCK;
	unsigned int grid = gcu.grid[k];
	float ms = 0;
	CUresult r;

	if (want < grid)
		grid = want ? (unsigned int)want : 1;
	r = gcu.api->cuEventRecord(gcu.ev[0], NULL);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuEventRecord");
	r = gcu.api->cuLaunchKernel(gcu.fn[k], grid, 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuLaunchKernel(%s, %u x %u)", kfn_names[k], grid, BLOCK);
	r = gcu.api->cuEventRecord(gcu.ev[1], NULL);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuEventRecord");
	/* A fault inside the kernel surfaces here (a sticky error: the context is lost). */
	r = gcu.api->cuEventSynchronize(gcu.ev[1]);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "%s (cuEventSynchronize after the kernel)", kfn_names[k]);
	r = gcu.api->cuEventElapsedTime(&ms, gcu.ev[0], gcu.ev[1]);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuEventElapsedTime");
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
		void *args[] = {&d, &n, &gcu.out};

		return launch(K_READ, n, args, sec);
	}
	case GPU_WL_WRITE: {
		void *args[] = {&d, &n, &seed};

		return launch(K_WRITE, n, args, sec);
	}
	case GPU_WL_COPY: {
		void *args[] = {&d2, &d, &m};

		m = gpu_copy_half(size) / 16;
		d2 = d + gpu_copy_half(size);
		return launch(K_COPY, m, args, sec);
	}
	case GPU_WL_GATHER: {
		unsigned long long wsn = (ws ? ws : size) / 16;
		void *args[] = {&d, &wsn, &n, &seed, &gcu.out};

		return launch(K_GATHER, n, args, sec);
	}
	default:
		gpu_set_why("unknown workload %d", (int)w);
		return -VMMX_EINVAL;
	}
}

int gpu_check(const void *p, size_t size, uint64_t first, unsigned int seed, uint64_t *bad)
{
	CUdeviceptr d = dp(p);
	unsigned long long n = size / 16, f = first, got = 0;
	void *args[] = {&d, &n, &f, &seed, &gcu.bad};
	CUresult r;
	int err = need_kernels();

	if (err)
		return err;
	r = gcu.api->cuMemsetD32(gcu.bad, 0, 2);
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuMemsetD32(check counter)");
	err = launch(K_CHECK, n, args, NULL);
	if (err)
		return err;
	r = gcu.api->cuMemcpy(dp(&got), gcu.bad, sizeof(got));
	if (r != CUDA_SUCCESS)
		return gcu_fail(r, "cuMemcpy(check counter)");
	*bad = got;
	return 0;
}
