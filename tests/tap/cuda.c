// SPDX-License-Identifier: MIT
/*
 * cuda.c - the tests' minimal CUDA driver client (see cuda.h): dlopen of
 * libcuda.so.1, the device's primary context, one module, synchronous
 * launches.
 *
 * Symbols are resolved by the versioned names cuda.h maps the API names to,
 * with the same list trick as vmm/cuda.c.  State is process-wide and
 * unlocked: the TAP library is used from the main thread only.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/cuda.h"

static char why[256];

const char *tcuda_why(void)
{
	return why;
}

#ifdef VMMX_HAVE_CUDA

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>

#include <cuda.h>

#define TCUDA_FNS(X)                                                                       \
	X(cuGetErrorName)                                                                  \
	X(cuInit)                                                                          \
	X(cuDeviceGetCount)                                                                \
	X(cuDeviceGet)                                                                     \
	X(cuDevicePrimaryCtxRetain)                                                        \
	X(cuDevicePrimaryCtxRelease)                                                       \
	X(cuCtxSetCurrent)                                                                 \
	X(cuCtxSynchronize)                                                                \
	X(cuModuleLoadData)                                                                \
	X(cuModuleUnload)                                                                  \
	X(cuModuleGetFunction)                                                             \
	X(cuLaunchKernel)

#define T_DECL(f) __typeof__(f) *f;
static struct {
	void *lib;
	struct {
		TCUDA_FNS(T_DECL)
	} api;
	CUdevice dev;
	CUcontext ctx;                  /* retained primary context, NULL when closed */
	CUmodule mod;                   /* loaded module, NULL when none */
} T;
#undef T_DECL

#define T_STR_(x) #x
#define T_STR(x) T_STR_(x)
#define T_SYM(f) { T_STR(f), offsetof(__typeof__(T.api), f) },
static const struct {
	const char *name;
	size_t off;
} tsyms[] = { TCUDA_FNS(T_SYM) };
#undef T_SYM

static const char *cu_name(CUresult r)
{
	static char buf[32];
	const char *s = NULL;

	if (T.api.cuGetErrorName && T.api.cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
		return s;
	snprintf(buf, sizeof(buf), "CUresult %d", (int)r);
	return buf;
}

static int open_fail(int err, const char *what, CUresult r)
{
	snprintf(why, sizeof(why), "%s: %s", what, cu_name(r));
	tcuda_close();
	return err;
}

int tcuda_open(int device)
{
	const char *e;
	int count = 0;
	CUresult r;

	tcuda_close();
	why[0] = '\0';
	/* NODELETE: libcuda keeps threads after cuInit and must stay mapped. */
	T.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!T.lib) {
		e = dlerror();
		snprintf(why, sizeof(why), "no CUDA driver: %s", e ? e : "dlopen failed");
		return -VMMX_ENODRIVER;
	}
	for (size_t i = 0; i < sizeof(tsyms) / sizeof(tsyms[0]); i++) {
		void *fn = dlsym(T.lib, tsyms[i].name);

		if (!fn) {
			snprintf(why, sizeof(why), "libcuda.so.1 has no %s", tsyms[i].name);
			tcuda_close();
			return -VMMX_ENODRIVER;
		}
		memcpy((char *)&T.api + tsyms[i].off, &fn, sizeof(fn));
	}
	r = T.api.cuInit(0);
	if (r == CUDA_ERROR_NO_DEVICE)
		return open_fail(-VMMX_ENODEV, "no CUDA device: cuInit", r);
	if (r == CUDA_ERROR_STUB_LIBRARY)
		return open_fail(-VMMX_ENODRIVER, "libcuda.so.1 is the toolkit stub: cuInit", r);
	if (r != CUDA_SUCCESS)
		return open_fail(-VMMX_EDRIVER, "cuInit", r);
	r = T.api.cuDeviceGetCount(&count);
	if (r != CUDA_SUCCESS)
		return open_fail(-VMMX_EDRIVER, "cuDeviceGetCount", r);
	if (device < 0 || device >= count) {
		snprintf(why, sizeof(why), "no CUDA device %d (%d visible)", device, count);
		tcuda_close();
		return -VMMX_ENODEV;
	}
	r = T.api.cuDeviceGet(&T.dev, device);
	if (r != CUDA_SUCCESS)
		return open_fail(-VMMX_ENODEV, "cuDeviceGet", r);
	r = T.api.cuDevicePrimaryCtxRetain(&T.ctx, T.dev);
	if (r != CUDA_SUCCESS) {
		T.ctx = NULL;
		return open_fail(-VMMX_EDRIVER, "cuDevicePrimaryCtxRetain", r);
	}
	r = T.api.cuCtxSetCurrent(T.ctx);
	if (r != CUDA_SUCCESS)
		return open_fail(-VMMX_EDRIVER, "cuCtxSetCurrent", r);
	return 0;
}

static int fail(const char *what, const char *arg, CUresult r)
{
	snprintf(why, sizeof(why), "%s(%s): %s", what, arg, cu_name(r));
	diag("%s", why);
	return (int)r;
}

int tcuda_load(const void *image)
{
	CUmodule mod = NULL;
	CUresult r;

	why[0] = '\0';
	if (!T.ctx) {
		snprintf(why, sizeof(why), "tcuda_load: tcuda_open() did not succeed");
		diag("%s", why);
		return -1;
	}
	r = T.api.cuCtxSetCurrent(T.ctx);
	if (r != CUDA_SUCCESS)
		return fail("cuCtxSetCurrent", "primary context", r);
	r = T.api.cuModuleLoadData(&mod, image);
	if (r != CUDA_SUCCESS)
		return fail("cuModuleLoadData", "test kernels", r);
	if (T.mod)
		(void)T.api.cuModuleUnload(T.mod);
	T.mod = mod;
	return 0;
}

int tcuda_launch(const char *kernel, unsigned int grid, unsigned int block, void **args)
{
	CUfunction fn;
	CUresult r;

	why[0] = '\0';
	if (!T.mod) {
		snprintf(why, sizeof(why), "tcuda_launch(%s): no module loaded", kernel);
		diag("%s", why);
		return -1;
	}
	/* The calling thread may have lost the context to another library call. */
	r = T.api.cuCtxSetCurrent(T.ctx);
	if (r != CUDA_SUCCESS)
		return fail("cuCtxSetCurrent", "primary context", r);
	r = T.api.cuModuleGetFunction(&fn, T.mod, kernel);
	if (r != CUDA_SUCCESS)
		return fail("cuModuleGetFunction", kernel, r);
	r = T.api.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, NULL, args, NULL);
	if (r != CUDA_SUCCESS)
		return fail("cuLaunchKernel", kernel, r);
	/* Faults inside the kernel surface here, not at the launch. */
	r = T.api.cuCtxSynchronize();
	if (r != CUDA_SUCCESS)
		return fail("cuCtxSynchronize after", kernel, r);
	return 0;
}

int tcuda_launch_on(const char *kernel, unsigned int grid, unsigned int block, void **args,
		    void *stream)
{
	CUfunction fn;
	CUresult r;

	why[0] = '\0';
	if (!T.mod) {
		snprintf(why, sizeof(why), "tcuda_launch_on(%s): no module loaded", kernel);
		diag("%s", why);
		return -1;
	}
	r = T.api.cuCtxSetCurrent(T.ctx);
	if (r != CUDA_SUCCESS)
		return fail("cuCtxSetCurrent", "primary context", r);
	r = T.api.cuModuleGetFunction(&fn, T.mod, kernel);
	if (r != CUDA_SUCCESS)
		return fail("cuModuleGetFunction", kernel, r);
	/* No synchronisation: the stream's owner waits. */
	r = T.api.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, (CUstream)stream, args, NULL);
	if (r != CUDA_SUCCESS)
		return fail("cuLaunchKernel", kernel, r);
	return 0;
}

void tcuda_close(void)
{
	/* Failures ignored: this is teardown, possibly after a sticky error. */
	if (T.mod)
		(void)T.api.cuModuleUnload(T.mod);
	if (T.ctx)
		(void)T.api.cuDevicePrimaryCtxRelease(T.dev);
	if (T.lib)
		dlclose(T.lib);
	memset(&T, 0, sizeof(T));
}

#else /* !VMMX_HAVE_CUDA */

int tcuda_open(int device)
{
	snprintf(why, sizeof(why), "built without CUDA headers (configure found no cuda.h)");
	return -VMMX_ENOTSUP;
}

int tcuda_load(const void *image)
{
	snprintf(why, sizeof(why), "built without CUDA");
	diag("tcuda_load: %s", why);
	return -1;
}

int tcuda_launch(const char *kernel, unsigned int grid, unsigned int block, void **args)
{
	snprintf(why, sizeof(why), "built without CUDA");
	diag("tcuda_launch(%s): %s", kernel, why);
	return -1;
}

int tcuda_launch_on(const char *kernel, unsigned int grid, unsigned int block, void **args,
		    void *stream)
{
	snprintf(why, sizeof(why), "built without CUDA");
	diag("tcuda_launch_on(%s): %s", kernel, why);
	return -1;
}

void tcuda_close(void)
{
}

#endif /* VMMX_HAVE_CUDA */
