// SPDX-License-Identifier: MIT
/*
 * resolve.c - where the interposer's entry points come from and where its
 * real counterparts are: the table of hooks, dlsym(), and the driver's
 * cuGetProcAddress().
 *
 * Three ways reach an allocation call, and each must land on a hook:
 *  - the dynamic linker: a program or library linked against libcudart.so
 *    or libcuda.so (PyTorch's libc10_cuda, CuPy) binds cudaMalloc,
 *    cuMemAlloc_v2... to the first definition in the global scope, ours,
 *    because LD_PRELOAD puts this library first;
 *  - dlsym(): a CUDA runtime (nvcc's static one, and libcudart.so itself)
 *    dlopens libcuda.so.1 RTLD_LOCAL and looks up cuGetProcAddress there,
 *    where the global scope does not apply.  dlsym() is interposed: a
 *    lookup of a hooked name hands back the hook and remembers the real
 *    address it found;
 *  - cuGetProcAddress(): the runtime asks the driver for every entry point
 *    by base name, version and stream flavour.  The hook asks the real one,
 *    then swaps the answer for the matching hook when the name, version and
 *    flavour are one the interposer takes (cuMemAlloc at 3020 and later is
 *    cuMemAlloc_v2; an older version still gets the real 32-bit call).
 *
 * Real counterparts: the first real address seen for a name (from dlsym or
 * cuGetProcAddress) or, failing that, dlsym(RTLD_NEXT), then the handles
 * the program used to look CUDA up, then libcuda.so.1 if it is loaded.
 * Slots are written once (compare-and-swap) and read with acquire loads.
 *
 * dlsym(RTLD_NEXT, name) means "after the caller"; through this wrapper the
 * real dlsym() would see the wrapper as the caller.  So RTLD_NEXT is answered
 * here: walk the link map from the caller's object and take the first object
 * after it that defines the name itself.
 *
 * Nothing here initialises CUDA or libvmmx: the table is static and real
 * addresses are resolved when first needed.
 */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload/preload.h"

#define HOOK_NAME(f) #f,
static const char *const fn_names[VMMXP_FN_COUNT] = {
	VMMXP_HOOKS(HOOK_NAME) NULL, VMMXP_HELPERS(HOOK_NAME)
};
#undef HOOK_NAME

/* Hook addresses (cudaGetDevice and cuCtxGetDevice are declared only to be called). */
#define HOOK_ADDR(f) (void *)&f,
static void *const hooks[VMMXP_FN_NHOOKS] = { VMMXP_HOOKS(HOOK_ADDR) };
#undef HOOK_ADDR

static __thread int depth;             /* > 0: the thread is inside libvmmx (state.c) */
static void *reals[VMMXP_FN_COUNT];     /* written once (CAS), acquire loads */
static void *cuda_handle;               /* the last handle a cu* name was looked up in */
static void *cudart_handle;             /* ... a cuda* name */

typedef void *dlsym_fn(void *, const char *);

/* VMMX_RUN_DEBUG set: say on standard error which lookups were answered with a hook. */
static void debug(const char *via, const char *name, int fn)
{
	static int on = -1;

	if (on < 0)
		on = getenv("VMMX_RUN_DEBUG") != NULL;
	if (on)
		fprintf(stderr, "vmmx-run: %s(%s) -> %s\n", via, name,
			fn < VMMXP_FN_NHOOKS ? "the interposer's" : "the real one (remembered)");
}

static dlsym_fn *real_dlsym(void)
{
	static dlsym_fn *fn;
	dlsym_fn *f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);

	if (f)
		return f;
	/* dlvsym is not interposed; glibc 2.34 moved dlsym into libc under a new version. */
	f = (dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!f)
		f = (dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	if (!f)
		f = (dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
	if (!f) {
		fputs("vmmx-run: cannot find the C library's dlsym; giving up\n", stderr);
		abort();
	}
	__atomic_store_n(&fn, f, __ATOMIC_RELEASE);
	return f;
}

int vmmxp_busy(void)
{
	return depth > 0;
}

void vmmxp_depth(int d)
{
	depth += d;
}

const char *vmmxp_fn_name(enum vmmxp_fn fn)
{
	return fn_names[fn];
}

void *vmmxp_hook(enum vmmxp_fn fn)
{
	return hooks[fn];
}

static int fn_find(const char *name)
{
	if (!name || name[0] != 'c' || name[1] != 'u')
		return -1;
	for (int i = 0; i < VMMXP_FN_COUNT; i++)
		if (fn_names[i] && !strcmp(fn_names[i], name))
			return i;
	return -1;
}

/* Remember @p as the real @fn unless one is known; never one of ours. */
static void offer_real(int fn, void *p)
{
	void *none = NULL;

	if (!p || (fn < VMMXP_FN_NHOOKS && p == hooks[fn]))
		return;
	__atomic_compare_exchange_n(&reals[fn], &none, p, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
}

void *vmmxp_real(enum vmmxp_fn fn)
{
	void *p = __atomic_load_n(&reals[fn], __ATOMIC_ACQUIRE);
	void *h;

	if (p)
		return p;
	p = real_dlsym()(RTLD_NEXT, fn_names[fn]);
	if (!p) {
		h = __atomic_load_n(fn_names[fn][2] == 'd' ? &cudart_handle : &cuda_handle,
				    __ATOMIC_ACQUIRE);
		if (h)
			p = real_dlsym()(h, fn_names[fn]);
	}
	if (!p && fn_names[fn][2] != 'd') {
		h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			p = real_dlsym()(h, fn_names[fn]);
			dlclose(h);
		}
	}
	offer_real(fn, p);
	return __atomic_load_n(&reals[fn], __ATOMIC_ACQUIRE);
}

/* dlsym(RTLD_NEXT, @name) on behalf of the object that contains @caller. */
static void *next_after(const void *caller, const char *name)
{
	struct link_map *lm = NULL, *l;
	Dl_info di;

	if (!dladdr1(caller, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
		return real_dlsym()(RTLD_NEXT, name);
	for (l = lm->l_next; l; l = l->l_next) {
		Dl_info pi;
		void *h, *p;

		/* No file: the program itself (never "next") or the vDSO. */
		if (!l->l_name || !strchr(l->l_name, '/'))
			continue;
		h = dlopen(l->l_name, RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			continue;
		p = real_dlsym()(h, name);
		dlclose(h);
		/* dlsym on a handle searches the object's dependencies too: keep only its own. */
		if (p && dladdr(p, &pi) && pi.dli_fname && !strcmp(pi.dli_fname, l->l_name))
			return p;
	}
	return NULL;
}

VMMXP_EXPORT void *dlsym(void *handle, const char *name)
{
	void *p;
	int fn;

	if (handle == RTLD_NEXT)
		return next_after(__builtin_return_address(0), name);
	p = real_dlsym()(handle, name);
	fn = fn_find(name);
	if (!p || fn < 0 || vmmxp_busy())
		return p;
	if (handle != RTLD_DEFAULT)
		__atomic_store_n(name[2] == 'd' ? &cudart_handle : &cuda_handle, handle,
				 __ATOMIC_RELEASE);
	offer_real(fn, p);
	debug("dlsym", name, fn);
	return fn < VMMXP_FN_NHOOKS ? hooks[fn] : p;
}

/*
 * The driver's base names the interposer answers for: from version @from on,
 * @fn (or @fn_pt for the per-thread default stream flavour, when there is
 * one); before it, @old (-1: the real call, e.g. the 32-bit cuMemAlloc of
 * before CUDA 3.2).
 */
struct proc_entry {
	const char *name;
	int from;
	int fn, fn_pt, old;
};

#define FN(f) VMMXP_FN_##f
static const struct proc_entry proc_table[] = {
	{ "cuMemAlloc", 3020, FN(cuMemAlloc_v2), -1, -1 },
	{ "cuMemFree", 3020, FN(cuMemFree_v2), -1, -1 },
	{ "cuMemGetInfo", 3020, FN(cuMemGetInfo_v2), -1, -1 },
	{ "cuMemAllocPitch", 3020, FN(cuMemAllocPitch_v2), -1, -1 },
	{ "cuMemAllocAsync", 0, FN(cuMemAllocAsync), FN(cuMemAllocAsync_ptsz), -1 },
	{ "cuMemFreeAsync", 0, FN(cuMemFreeAsync), FN(cuMemFreeAsync_ptsz), -1 },
	{ "cuMemsetD8", 3020, FN(cuMemsetD8_v2), FN(cuMemsetD8_v2_ptds), -1 },
	{ "cuMemsetD16", 3020, FN(cuMemsetD16_v2), FN(cuMemsetD16_v2_ptds), -1 },
	{ "cuMemsetD32", 3020, FN(cuMemsetD32_v2), FN(cuMemsetD32_v2_ptds), -1 },
	{ "cuMemsetD8Async", 0, FN(cuMemsetD8Async), FN(cuMemsetD8Async_ptsz), -1 },
	{ "cuMemsetD16Async", 0, FN(cuMemsetD16Async), FN(cuMemsetD16Async_ptsz), -1 },
	{ "cuMemsetD32Async", 0, FN(cuMemsetD32Async), FN(cuMemsetD32Async_ptsz), -1 },
	{ "cuIpcGetMemHandle", 0, FN(cuIpcGetMemHandle), -1, -1 },
	{ "cuGetProcAddress", 12000, FN(cuGetProcAddress_v2), -1, FN(cuGetProcAddress) },
	{ "cuCtxGetDevice", 0, FN(cuCtxGetDevice), -1, -1 },
};
#undef FN

/* The hook that answers cuGetProcAddress(@symbol, @version, @flags), or -1. */
static int proc_map(const char *symbol, int version, unsigned long long flags)
{
	if (!symbol || strncmp(symbol, "cu", 2))
		return -1;
	for (size_t i = 0; i < sizeof(proc_table) / sizeof(proc_table[0]); i++) {
		const struct proc_entry *e = &proc_table[i];

		if (strcmp(symbol, e->name))
			continue;
		if (version < e->from)
			return e->old;
		return (flags & CU_GET_PROC_ADDRESS_PER_THREAD) && e->fn_pt >= 0 ? e->fn_pt : e->fn;
	}
	return -1;
}

static void proc_swap(const char *symbol, int version, unsigned long long flags, void **pfn)
{
	int fn = proc_map(symbol, version, flags);

	if (fn < 0 || !*pfn || vmmxp_busy())
		return;
	offer_real(fn, *pfn);
	debug("cuGetProcAddress", symbol, fn);
	if (fn < VMMXP_FN_NHOOKS)
		*pfn = hooks[fn];
}

/*
 * The driver's own lookup, CUDA 11.3 to 12 ABI (cuda.h maps cuGetProcAddress
 * to cuGetProcAddress_v2 from 12.0 on; libcuda exports both).
 */
VMMXP_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
				       unsigned long long flags)
{
	CUresult (*real)(const char *, void **, int, unsigned long long);
	CUresult r;

	real = (CUresult(*)(const char *, void **, int, unsigned long long))vmmxp_real(
		VMMXP_FN_cuGetProcAddress);
	if (!real)
		return CUDA_ENOTFOUND;
	r = real(symbol, pfn, version, flags);
	if (r == CUDA_OK && pfn)
		proc_swap(symbol, version, flags, pfn);
	return r;
}

VMMXP_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
					  unsigned long long flags, int *status)
{
	CUresult (*real)(const char *, void **, int, unsigned long long, int *);
	CUresult r;

	real = (CUresult(*)(const char *, void **, int, unsigned long long, int *))vmmxp_real(
		VMMXP_FN_cuGetProcAddress_v2);
	if (!real)
		return CUDA_ENOTFOUND;
	r = real(symbol, pfn, version, flags, status);
	if (r == CUDA_OK && pfn)
		proc_swap(symbol, version, flags, pfn);
	return r;
}
