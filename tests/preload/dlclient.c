// SPDX-License-Identifier: MIT
/*
 * dlclient.c - a CUDA program as XLA, Triton and cuda-python are: not
 * linked against any CUDA library, it dlopens "libcuda.so.1" RTLD_LOCAL
 * (the fake driver, under that name on LD_LIBRARY_PATH: env.sh) and finds
 * every call through dlsym, dlvsym and cuGetProcAddress on that handle.
 * Run under vmmx-run on the sim backend by lookups.sh, which also checks the
 * report's counts.
 *
 * Checked: each path hands back the interposer's entry point for every
 * name it serves, and the calls land in libvmmx (the fake driver's counters
 * stay at 0, the address is a libvmmx buffer's); names it does not serve
 * (cuLaunchKernelEx) and a library that is not the driver but defines a
 * served name pass through; dlsym(RTLD_NEXT) and dlvsym(RTLD_NEXT) answer
 * for the caller (the C library's dlsym, found as interposers bootstrap
 * theirs); stream-ordered pools: the default pool served, the program's
 * own pool passed through; the program's own VMM calls passed through.
 *
 * Modes: no argument, the TAP suite; "bfc", what XLA's BFC allocator does
 * at its first use (cuMemGetInfo, then one cuMemAlloc of 3/4 of the total)
 * and exit 0 when the pool was made (prints its size in MiB).
 */
#include "config.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/preload/fakecuda.h" /* the counters' names only: nothing of it is linked */
#include "tests/tap/basic.h"
#include "vmmx.h"

#define MiB ((size_t)1 << 20)
#define FAKE_VERSION "VMMXFAKE_1"

typedef int alloc_fn(unsigned long long *, size_t);
typedef int free_fn(unsigned long long);
typedef int free_async_fn(unsigned long long, void *);
typedef int info_fn(size_t *, size_t *);
typedef int gpa2_fn(const char *, void **, int, unsigned long long, int *);
typedef int gpa1_fn(const char *, void **, int, unsigned long long);
typedef int pool_alloc_fn(unsigned long long *, size_t, void *, void *);
typedef int get_pool_fn(void **, int);
typedef int pool_create_fn(void **, const void *);
typedef int pool_trim_fn(void *, size_t);
typedef int pool_attr_fn(void *, int, void *);
typedef int vmm_create_fn(unsigned long long *, size_t, const void *, unsigned long long);
typedef int vmm_map_fn(unsigned long long, size_t, size_t, unsigned long long, unsigned long long);
typedef int vmm_release_fn(unsigned long long);
typedef int set_device_fn(int);
typedef unsigned long calls_fn(enum fake_call);
typedef int is_real_fn(const void *);

static void *drv;
static calls_fn *calls_of;    /* the fake's fake_calls() */
static is_real_fn *is_real;   /* its is_real() */

/* Every name vmmx-run serves that a framework finds on the driver's handle. */
static const char *const served[] = {
	"cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocAsync", "cuMemFreeAsync",
	"cuMemAllocAsync_ptsz", "cuMemFreeAsync_ptsz", "cuMemGetInfo_v2", "cuMemAllocPitch_v2",
	"cuMemsetD8_v2", "cuMemsetD32Async", "cuIpcGetMemHandle", "cuMemAllocFromPoolAsync",
	"cuMemAllocFromPoolAsync_ptsz", "cuDeviceGetDefaultMemPool", "cuDeviceGetMemPool",
	"cuMemPoolCreate", "cuMemPoolDestroy", "cuMemPoolTrimTo", "cuMemPoolGetAttribute",
	"cuMemCreate", "cuMemRelease", "cuMemMap", "cuGetProcAddress", "cuGetProcAddress_v2",
	"cudaMalloc", "cudaFree", "cudaMemGetInfo",
};

/* The interposer's entry point for @name: the global scope's (LD_PRELOAD comes first). */
static void *hook(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

static int in_file(const void *p, const char *part)
{
	Dl_info di;

	return p && dladdr(p, &di) && di.dli_fname && strstr(di.dli_fname, part);
}

/* Served by libvmmx: a buffer of device @dev's context maps it, the fake did not make it. */
static int ours(unsigned long long d, int dev)
{
	struct vmmx_chunk_info ci;
	struct vmmx_alloc *a;

	return d && !is_real((void *)(uintptr_t)d) && !vmmx_alloc_global(dev, &a) &&
	       !vmmx_lookup(vmmx_alloc_ctx(a), (void *)(uintptr_t)d, &ci);
}

static void test_dlsym(void)
{
	void *other, *p;
	int n_ok = 0, v_ok = 0, none = 0;

	for (size_t i = 0; i < sizeof(served) / sizeof(served[0]); i++) {
		void *h = hook(served[i]);

		if (in_file(h, "libvmmx-preload") && dlsym(drv, served[i]) == h)
			n_ok++;
		else
			diag("dlsym(libcuda, %s) = %p, the interposer's %p", served[i],
			     dlsym(drv, served[i]), h);
		if (dlvsym(drv, served[i], FAKE_VERSION) == h)
			v_ok++;
		else
			diag("dlvsym(libcuda, %s, %s) = %p, the interposer's %p", served[i],
			     FAKE_VERSION, dlvsym(drv, served[i], FAKE_VERSION), h);
		if (!dlvsym(drv, served[i], "NO_SUCH_VERSION"))
			none++;
	}
	is_int((int)(sizeof(served) / sizeof(served[0])), n_ok,
	       "dlsym(dlopen(\"libcuda.so.1\", RTLD_LOCAL), name) is the interposer's, for all %d names",
	       n_ok);
	is_int((int)(sizeof(served) / sizeof(served[0])), v_ok,
	       "dlvsym(libcuda, name, its version) is the interposer's, for all %d names", v_ok);
	is_int((int)(sizeof(served) / sizeof(served[0])), none,
	       "dlvsym(libcuda, name, a version it lacks) stays NULL");
	p = dlsym(drv, "cuLaunchKernelEx");
	ok(p && !in_file(p, "libvmmx-preload"),
	   "dlsym(libcuda, cuLaunchKernelEx), a call vmmx-run does not serve, is the driver's");
	ok(dlsym(drv, "fake_calls") == (void *)calls_of && calls_of,
	   "dlsym(libcuda, a name that is not CUDA's) is untouched");
	other = dlopen(NOTCUDA_SO, RTLD_NOW | RTLD_LOCAL);
	p = other ? dlsym(other, "cuMemAlloc_v2") : NULL;
	ok(p && p != hook("cuMemAlloc_v2") && in_file(p, "libvmmxnotcuda"),
	   "dlsym(a library that is not the driver, cuMemAlloc_v2) is that library's own");
	if (!other)
		diag("%s", dlerror());
	p = dlsym(dlopen(NULL, RTLD_NOW), "cuMemAlloc_v2");
	ok(p == hook("cuMemAlloc_v2"), "dlsym(the program's handle, cuMemAlloc_v2): the global scope's, ours");
}

static void test_rtld_next(void)
{
	void *d34 = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	void *d225 = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	void *d = d34 ? d34 : d225;

	ok(d && d != (void *)dlsym && !in_file(d, "libvmmx-preload") && in_file(d, "libc"),
	   "dlvsym(RTLD_NEXT, dlsym, GLIBC_2.34/2.2.5) is the C library's dlsym, not the interposer's");
	ok(d && ((void *(*)(void *, const char *))d)(drv, "cuMemAlloc_v2") != hook("cuMemAlloc_v2"),
	   "... which finds the real driver's cuMemAlloc_v2 (an interposer layered on ours bootstraps so)");
	ok(dlsym(RTLD_NEXT, "vmmx_parse_size") == (void *)vmmx_parse_size,
	   "dlsym(RTLD_NEXT) answers for the caller");
}

/* cuGetProcAddress: @name at @ver with @flags gives the interposer's @want (NULL: the real one). */
static int proc_is(void *gpa, int v2, const char *name, int ver, unsigned long long flags,
		   const char *want)
{
	void *fn = NULL;
	int st = -1, r;

	r = v2 ? ((gpa2_fn *)gpa)(name, &fn, ver, flags, &st) : ((gpa1_fn *)gpa)(name, &fn, ver, flags);
	if (r || !fn)
		return 0;
	if (!want)
		return !in_file(fn, "libvmmx-preload");
	return fn == hook(want);
}

static void test_proc(void)
{
	void *gpa = dlsym(drv, "cuGetProcAddress_v2"), *gpa1 = dlsym(drv, "cuGetProcAddress");
	static const struct {
		const char *name;
		int ver;
		unsigned long long flags;
		const char *want;
	} cases[] = {
		{ "cuMemAlloc", 13000, 0, "cuMemAlloc_v2" },
		{ "cuMemAlloc", 3020, 1, "cuMemAlloc_v2" },
		{ "cuMemAlloc", 3000, 0, NULL },
		{ "cuMemFree", 12000, 0, "cuMemFree_v2" },
		{ "cuMemGetInfo", 12000, 2, "cuMemGetInfo_v2" },
		{ "cuMemAllocPitch", 11000, 0, "cuMemAllocPitch_v2" },
		{ "cuMemAllocAsync", 11020, 0, "cuMemAllocAsync" },
		{ "cuMemAllocAsync", 11020, 2, "cuMemAllocAsync_ptsz" },
		{ "cuMemFreeAsync", 13000, 2, "cuMemFreeAsync_ptsz" },
		{ "cuMemAllocFromPoolAsync", 11020, 0, "cuMemAllocFromPoolAsync" },
		{ "cuMemAllocFromPoolAsync", 12000, 1, "cuMemAllocFromPoolAsync" },
		{ "cuMemAllocFromPoolAsync", 13000, 2, "cuMemAllocFromPoolAsync_ptsz" },
		{ "cuDeviceGetDefaultMemPool", 11020, 0, "cuDeviceGetDefaultMemPool" },
		{ "cuDeviceGetMemPool", 11020, 0, "cuDeviceGetMemPool" },
		{ "cuMemPoolCreate", 11020, 0, "cuMemPoolCreate" },
		{ "cuMemPoolDestroy", 11020, 0, "cuMemPoolDestroy" },
		{ "cuMemPoolTrimTo", 11020, 0, "cuMemPoolTrimTo" },
		{ "cuMemPoolGetAttribute", 11020, 0, "cuMemPoolGetAttribute" },
		{ "cuMemCreate", 10020, 0, "cuMemCreate" },
		{ "cuMemMap", 10020, 0, "cuMemMap" },
		{ "cuMemRelease", 10020, 0, "cuMemRelease" },
		{ "cuMemsetD8", 13000, 1, "cuMemsetD8_v2" },
		{ "cuMemsetD32Async", 13000, 2, "cuMemsetD32Async_ptsz" },
		{ "cuIpcGetMemHandle", 4010, 0, "cuIpcGetMemHandle" },
		{ "cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2" },
		{ "cuGetProcAddress", 11030, 0, "cuGetProcAddress" },
		{ "cuLaunchKernelEx", 12000, 0, NULL },
	};
	int good = 0, good1 = 0;

	ok(gpa && gpa == hook("cuGetProcAddress_v2") && gpa1 == hook("cuGetProcAddress"),
	   "dlsym(libcuda, cuGetProcAddress{,_v2}): the interposer's");
	if (!gpa || !gpa1)
		return;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (proc_is(gpa, 1, cases[i].name, cases[i].ver, cases[i].flags, cases[i].want))
			good++;
		else
			diag("cuGetProcAddress_v2(%s, %d, %llu): not %s", cases[i].name, cases[i].ver,
			     cases[i].flags, cases[i].want ? cases[i].want : "the real one");
		if (proc_is(gpa1, 0, cases[i].name, cases[i].ver, cases[i].flags, cases[i].want))
			good1++;
		else
			diag("cuGetProcAddress(%s, %d, %llu): not %s", cases[i].name, cases[i].ver,
			     cases[i].flags, cases[i].want ? cases[i].want : "the real one");
	}
	is_int((int)(sizeof(cases) / sizeof(cases[0])), good,
	       "cuGetProcAddress_v2: every name, version and flavour answered as expected (%d)", good);
	is_int((int)(sizeof(cases) / sizeof(cases[0])), good1,
	       "cuGetProcAddress (the CUDA 11 ABI): the same (%d)", good1);
}

/* The calls found each way land in libvmmx. */
static void test_calls(void)
{
	void *gpa = dlsym(drv, "cuGetProcAddress_v2"), *fn = NULL;
	alloc_fn *by_sym = (alloc_fn *)dlsym(drv, "cuMemAlloc_v2");
	alloc_fn *by_ver = (alloc_fn *)dlvsym(drv, "cuMemAlloc_v2", FAKE_VERSION);
	free_fn *fr = (free_fn *)dlsym(drv, "cuMemFree_v2");
	info_fn *info = (info_fn *)dlsym(drv, "cuMemGetInfo_v2");
	unsigned long long d1 = 0, d2 = 0, d3 = 0;
	size_t f = 0, t = 0;
	int r;

	((gpa2_fn *)gpa)("cuMemAlloc", &fn, 13000, 0, NULL);
	ok(by_sym && !by_sym(&d1, 8 * MiB) && ours(d1, 0), "cuMemAlloc_v2 found by dlsym allocates from libvmmx");
	ok(by_ver && !by_ver(&d2, 8 * MiB) && ours(d2, 0), "... found by dlvsym too");
	ok(fn && !((alloc_fn *)fn)(&d3, 8 * MiB) && ours(d3, 0), "... found by cuGetProcAddress too");
	is_uint(0, calls_of(FAKE_cuMemAlloc), "the real cuMemAlloc_v2 is never called");
	ok(!fr(d1) && !fr(d2) && !fr(d3), "cuMemFree_v2 found by dlsym frees them");
	r = info ? info(&f, &t) : -1;
	ok(!r && t == 256 * MiB && !calls_of(FAKE_cuMemGetInfo),
	   "cuMemGetInfo_v2 found by dlsym answers from libvmmx (total %zu MiB)", t / MiB);
}

static void test_pools(void)
{
	pool_alloc_fn *pa = (pool_alloc_fn *)dlsym(drv, "cuMemAllocFromPoolAsync");
	free_async_fn *fa = (free_async_fn *)dlsym(drv, "cuMemFreeAsync");
	get_pool_fn *getdef = (get_pool_fn *)dlsym(drv, "cuDeviceGetDefaultMemPool");
	pool_create_fn *create = (pool_create_fn *)dlsym(drv, "cuMemPoolCreate");
	pool_trim_fn *trim = (pool_trim_fn *)dlsym(drv, "cuMemPoolTrimTo");
	pool_attr_fn *attr = (pool_attr_fn *)dlsym(drv, "cuMemPoolGetAttribute");
	set_device_fn *set_dev = (set_device_fn *)dlsym(drv, "cudaSetDevice");
	struct vmmx_alloc_stats st = { .size = sizeof(st) };
	unsigned long long d = 0, e = 0, used = 0;
	void *pool = NULL, *own = NULL;
	struct vmmx_alloc *a;
	int r;

	if (!pa || !fa || !getdef || !create || !trim || !attr || !set_dev) {
		ok(0, "the pool calls are found");
		return;
	}
	is_int(0, getdef(&pool, 0), "cuDeviceGetDefaultMemPool(0)");
	ok(!pa(&d, 3 * MiB, pool, NULL) && ours(d, 0),
	   "cuMemAllocFromPoolAsync on the default pool: served by libvmmx");
	r = attr(pool, 7, &used); /* CU_MEMPOOL_ATTR_USED_MEM_CURRENT */
	ok(!r && used >= 3 * MiB,
	   "cuMemPoolGetAttribute(default pool, USED_MEM_CURRENT) counts it (%llu bytes)", used);
	is_int(0, fa(d, NULL), "cuMemFreeAsync frees it");
	is_int(0, trim(pool, 0), "cuMemPoolTrimTo(default pool, 0)");
	vmmx_alloc_global(0, &a);
	vmmx_alloc_stats(a, &st);
	is_uint(0, st.reserved_bytes, "... gives libvmmx's idle memory back");
	is_uint(0, calls_of(FAKE_cuMemAllocFromPoolAsync), "the real cuMemAllocFromPoolAsync is not called");

	set_dev(1);
	d = 0;
	ok(!pa(&d, MiB, (void *)(uintptr_t)0xd01, NULL) && ours(d, 1),
	   "the current device's default pool, never asked for: served on device 1");
	fa(d, NULL);
	set_dev(0);

	is_int(0, create(&own, NULL), "cuMemPoolCreate (the program's own pool)");
	ok(!pa(&e, MiB, own, NULL) && is_real((void *)(uintptr_t)e) &&
		   calls_of(FAKE_cuMemAllocFromPoolAsync) == 1,
	   "cuMemAllocFromPoolAsync on it passes through to the driver");
	is_int(0, fa(e, NULL), "cuMemFreeAsync of that passes through too");
}

static void test_vmm(void)
{
	vmm_create_fn *create = (vmm_create_fn *)dlsym(drv, "cuMemCreate");
	vmm_map_fn *map = (vmm_map_fn *)dlsym(drv, "cuMemMap");
	vmm_release_fn *rel = (vmm_release_fn *)dlsym(drv, "cuMemRelease");
	unsigned long long h = 0;

	ok(create && !create(&h, 2 * MiB, NULL, 0) && h == 0x4a11 && calls_of(FAKE_cuMemCreate) == 1,
	   "the program's own cuMemCreate passes through to the driver");
	ok(map && !map(0x7000000, 2 * MiB, 0, h, 0) && calls_of(FAKE_cuMemMap) == 1,
	   "... and its cuMemMap");
	ok(rel && !rel(h) && calls_of(FAKE_cuMemRelease) == 1, "... and its cuMemRelease");
}

static int bfc_mode(void)
{
	info_fn *info = (info_fn *)dlsym(drv, "cuMemGetInfo_v2");
	alloc_fn *alloc = (alloc_fn *)dlsym(drv, "cuMemAlloc_v2");
	unsigned long long d = 0;
	size_t f = 0, t = 0, pool;

	if (!info || !alloc || info(&f, &t))
		return 2;
	pool = t / 4 * 3;
	if (alloc(&d, pool)) {
		printf("bfc pool of %zu MiB (3/4 of %zu MiB): out of memory\n", pool / MiB, t / MiB);
		return 1;
	}
	printf("bfc pool of %zu MiB (3/4 of %zu MiB): made\n", pool / MiB, t / MiB);
	return 0;
}

int main(int argc, char **argv)
{
	drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!drv) {
		fprintf(stderr, "dlopen(libcuda.so.1): %s\n", dlerror());
		return 2;
	}
	calls_of = (calls_fn *)dlsym(drv, "fake_calls");
	is_real = (is_real_fn *)dlsym(drv, "fake_is_real");
	if (argc > 1 && !strcmp(argv[1], "bfc"))
		return bfc_mode();
	if (!getenv("LD_PRELOAD"))
		skip_all("not under vmmx-run (lookups.sh runs this)");
	if (!calls_of || !is_real)
		bail("the fake driver's counters are not found");
	plan_lazy();
	test_dlsym();
	test_rtld_next();
	test_proc();
	test_calls();
	test_pools();
	test_vmm();
	return tap_done();
}
