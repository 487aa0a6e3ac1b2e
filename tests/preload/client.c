// SPDX-License-Identifier: MIT
/*
 * client.c - a CUDA program as the interposer sees one: linked against the
 * fake runtime and driver (fakecuda.c), run under vmmx-run on the sim backend
 * by hooks.sh.  Every interposed call, reached the three ways (the dynamic
 * linker, dlsym on the driver's handle, cuGetProcAddress); memory that
 * libvmmx serves against memory the "real" driver made (the fake's
 * sentinels); foreign frees; stream-ordered frees; cudaMemGetInfo; the
 * spill past the device limit; memsets over spilled memory, split where the
 * driver would refuse them; IPC refused with its message; two devices and
 * 8 threads; a forked child; forks while threads allocate, each child's
 * cudaMalloc and cuMemAlloc refused (CUDA's initialization error) within a
 * watchdog, no child hung on a lock and none given a parent's address.
 *
 * The environment (hooks.sh): 2 sim devices of 1 GiB, a 256 MiB device
 * limit, no headroom, a 1 GiB host limit.
 *
 * Modes: no argument, the whole TAP suite; "meminfo", cudaMemGetInfo in the
 * mode VMMX_RUN_MEMINFO names, with the host cap of VMMX_RUN_MEMINFO_HOST
 * (TAP); "spill", allocate past the limit and
 * exit (for --report and --trace); "cache-first on|off|other|none|graph",
 * a caching allocator as PyTorch's past the limit, with VMMX_RUN_CACHE_FIRST
 * set or not, a program that does not ask again, one with nothing unused on
 * the device, one that launched a graph (TAP).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/preload/fakecuda.h"
#include "tests/tap/basic.h"
#include "vmmx.h"

#define MiB ((size_t)1 << 20)
#define THREADS 8
#define ITERS 200

typedef int alloc_fn(unsigned long long *, size_t);

static struct vmmx_ctx *ctx_of(int dev)
{
	struct vmmx_alloc *a;

	return vmmx_alloc_global(dev, &a) ? NULL : vmmx_alloc_ctx(a);
}

/* Served by libvmmx on device @dev: a buffer of that device's context maps it. */
static int ours(const void *p, int dev)
{
	struct vmmx_chunk_info ci;

	return p && !fake_is_real(p) && !vmmx_lookup(ctx_of(dev), p, &ci);
}

/* Device memory is not the CPU's on the sim: fill and read back through libvmmx's copies. */
static int fill_check_on(int dev, void *p, size_t n, unsigned char v)
{
	struct vmmx_ctx *ctx = ctx_of(dev);
	unsigned char back[4096];
	size_t step = n / 7 + 1;

	if (vmmx_memset(ctx, p, v, n))
		return 0;
	for (size_t off = 0; off < n; off += step) {
		size_t k = n - off < sizeof(back) ? n - off : sizeof(back);

		memset(back, ~v, k);
		if (vmmx_memcpy(ctx, back, (char *)p + off, k))
			return 0;
		for (size_t i = 0; i < k; i++)
			if (back[i] != v)
				return 0;
	}
	return 1;
}

static int fill_check(void *p, size_t n, unsigned char v)
{
	return fill_check_on(0, p, n, v);
}

static void test_runtime(void)
{
	void *p = NULL, *q;
	size_t pitch = 0;
	struct fake_pitched pp;

	is_int(0, cudaMalloc(&p, 64 * MiB), "cudaMalloc of 64 MiB succeeds");
	ok(ours(p, 0), "cudaMalloc: libvmmx serves it on device 0");
	ok(fill_check(p, 64 * MiB, 0x5a), "cudaMalloc: every page is usable");
	is_int(0, cudaFree(p), "cudaFree of it succeeds");
	is_uint(0, fake_calls(FAKE_cudaMalloc) + fake_calls(FAKE_cudaFree),
		"cudaMalloc/cudaFree: the real runtime is not called");
	p = NULL;
	is_int(0, cudaMalloc(&p, 0), "cudaMalloc of 0 bytes succeeds");
	ok(p == NULL, "cudaMalloc of 0 bytes gives NULL");
	is_int(0, cudaFree(NULL), "cudaFree(NULL) succeeds");
	is_uint(1, fake_calls(FAKE_cudaFree), "cudaFree(NULL) goes to the real runtime (context init idiom)");

	q = fake_real_alloc();
	is_int(0, cudaFree(q), "cudaFree of a foreign pointer succeeds");
	is_uint(2, fake_calls(FAKE_cudaFree), "cudaFree of a foreign pointer reaches the real runtime");
	ok(!fake_is_real(NULL) && fake_real_alloc() == q, "the foreign pointer was really freed");
	cudaFree(q);

	p = NULL;
	is_int(0, cudaMalloc(&p, 1000), "cudaMalloc of 1000 bytes");
	is_int(1, cudaFree((char *)p + 512), "cudaFree inside an allocation: cudaErrorInvalidValue");
	is_int(0, cudaFree(p), "cudaFree of the allocation then succeeds");
	is_int(1, cudaFree(p), "a second cudaFree: cudaErrorInvalidValue");

	is_int(0, cudaMallocPitch(&p, &pitch, 1000, 10), "cudaMallocPitch succeeds");
	ok(ours(p, 0) && pitch == 1024, "cudaMallocPitch: libvmmx, rows of 1024 bytes");
	ok(fill_check(p, pitch * 10, 1), "cudaMallocPitch: the rows are usable");
	cudaFree(p);
	is_int(0, cudaMalloc3D(&pp, (struct fake_extent){ 100, 4, 3 }), "cudaMalloc3D succeeds");
	ok(ours(pp.ptr, 0) && pp.pitch == 512 && pp.xsize == 100 && pp.ysize == 4,
	   "cudaMalloc3D: libvmmx, pitch 512, the extent");
	cudaFree(pp.ptr);
	is_uint(0, fake_calls(FAKE_cudaMallocPitch) + fake_calls(FAKE_cudaMalloc3D),
		"cudaMallocPitch/cudaMalloc3D: the real runtime is not called");
}

static void test_driver(void)
{
	unsigned long long d = 0;
	size_t pitch = 0;
	void *q;

	is_int(0, cuMemAlloc_v2(&d, 8 * MiB), "cuMemAlloc_v2 succeeds");
	ok(ours((void *)(uintptr_t)d, 0), "cuMemAlloc_v2: libvmmx serves it");
	is_int(0, cuMemFree_v2(d), "cuMemFree_v2 of it succeeds");
	is_uint(0, fake_calls(FAKE_cuMemAlloc) + fake_calls(FAKE_cuMemFree),
		"cuMemAlloc_v2/cuMemFree_v2: the real driver is not called");
	q = fake_real_alloc();
	is_int(0, cuMemFree_v2((uintptr_t)q), "cuMemFree_v2 of a foreign pointer succeeds");
	is_uint(1, fake_calls(FAKE_cuMemFree), "cuMemFree_v2 of a foreign pointer reaches the driver");
	is_int(0, cuMemAllocPitch_v2(&d, &pitch, 3000, 7, 4), "cuMemAllocPitch_v2 succeeds");
	ok(ours((void *)(uintptr_t)d, 0) && pitch == 3072, "cuMemAllocPitch_v2: libvmmx, pitch 3072");
	cuMemFree_v2(d);
}

/* What a static runtime does: dlopen the driver, dlsym cuGetProcAddress, ask it for everything. */
static void test_lookups(void)
{
	void *h = dlopen(FAKECUDA_SO, RTLD_NOW | RTLD_LOCAL);
	int (*gpa)(const char *, void **, int, unsigned long long, int *);
	int (*gpa1)(const char *, void **, int, unsigned long long);
	void *fn = NULL, *fake_gpa;
	unsigned long long d = 0;
	int st = -1;

	ok(h != NULL, "dlopen of the fake driver");
	if (!h) {
		diag("%s", dlerror());
		return;
	}
	gpa = (int (*)(const char *, void **, int, unsigned long long, int *))dlsym(
		h, "cuGetProcAddress_v2");
	fake_gpa = (void *)cuGetProcAddress_v2; /* the dynamic linker: ours too */
	ok(gpa && (void *)gpa == fake_gpa, "dlsym(driver, cuGetProcAddress_v2) is the interposer's");
	ok(dlsym(h, "cuMemAlloc_v2") == (void *)cuMemAlloc_v2,
	   "dlsym(driver, cuMemAlloc_v2) is the interposer's");
	ok(dlsym(h, "cuCtxGetDevice") != NULL && dlsym(h, "fake_calls") == (void *)fake_calls,
	   "dlsym of other names is untouched");
	ok(dlsym(RTLD_NEXT, "fake_calls") == (void *)fake_calls,
	   "dlsym(RTLD_NEXT) finds a name after the caller");
	ok(dlsym(RTLD_NEXT, "cudaMalloc") == (void *)cudaMalloc,
	   "dlsym(RTLD_NEXT) answers for the caller, not the interposer (the next cudaMalloc is the hook)");
	if (!gpa)
		return;
	is_int(0, gpa("cuMemAlloc", &fn, 13000, 0, &st), "cuGetProcAddress(cuMemAlloc, 13000)");
	ok(fn == (void *)cuMemAlloc_v2 && st == 0, "... hands back the interposed cuMemAlloc_v2");
	is_int(0, ((alloc_fn *)fn)(&d, 4 * MiB), "the looked-up cuMemAlloc allocates");
	ok(ours((void *)(uintptr_t)d, 0), "... from libvmmx");
	cuMemFree_v2(d);
	gpa("cuMemAlloc", &fn, 3000, 0, NULL);
	ok(fn == (void *)cuMemAlloc, "cuGetProcAddress(cuMemAlloc, 3000) keeps the real 32-bit call");
	gpa("cuMemFree", &fn, 13000, 0, NULL);
	ok(fn == (void *)cuMemFree_v2, "cuGetProcAddress(cuMemFree) is interposed");
	gpa("cuMemGetInfo", &fn, 13000, 0, NULL);
	ok(fn == (void *)cuMemGetInfo_v2, "cuGetProcAddress(cuMemGetInfo) is interposed");
	gpa("cuMemAllocPitch", &fn, 13000, 0, NULL);
	ok(fn == (void *)cuMemAllocPitch_v2, "cuGetProcAddress(cuMemAllocPitch) is interposed");
	gpa("cuMemAllocAsync", &fn, 13000, 0, NULL);
	ok(fn == (void *)cuMemAllocAsync, "cuGetProcAddress(cuMemAllocAsync) is interposed");
	gpa("cuMemAllocAsync", &fn, 13000, 2, NULL);
	ok(fn == (void *)cuMemAllocAsync_ptsz, "... per-thread flavour: cuMemAllocAsync_ptsz");
	gpa("cuMemFreeAsync", &fn, 13000, 2, NULL);
	ok(fn == (void *)cuMemFreeAsync_ptsz, "cuGetProcAddress(cuMemFreeAsync, per-thread) is interposed");
	gpa("cuIpcGetMemHandle", &fn, 13000, 0, NULL);
	ok(fn == (void *)cuIpcGetMemHandle, "cuGetProcAddress(cuIpcGetMemHandle) is interposed");
	gpa("cuGetProcAddress", &fn, 13000, 0, NULL);
	ok(fn == (void *)cuGetProcAddress_v2, "cuGetProcAddress(cuGetProcAddress) is interposed");
	gpa("cuCtxGetDevice", &fn, 13000, 0, NULL);
	ok(fn == (void *)cuCtxGetDevice, "cuGetProcAddress of other names is untouched");
	gpa1 = (int (*)(const char *, void **, int, unsigned long long))dlsym(h, "cuGetProcAddress");
	ok(gpa1 == (void *)cuGetProcAddress && !gpa1("cuMemAlloc", &fn, 12000, 0) &&
		   fn == (void *)cuMemAlloc_v2,
	   "the CUDA 11 cuGetProcAddress is interposed too");
	dlclose(h);
}

static void test_streams(void)
{
	struct vmmx_alloc *a;
	struct vmmx_alloc_stats st0 = { .size = sizeof(st0) }, st1 = { .size = sizeof(st1) };
	struct vmmx_stream *s1, *s2;
	void *p = NULL, *q = NULL, *h1, *h2;
	unsigned long long d = 0, e = 0;

	if (vmmx_alloc_global(0, &a) || vmmx_stream_create(vmmx_alloc_ctx(a), &s1) ||
	    vmmx_stream_create(vmmx_alloc_ctx(a), &s2))
		bail("streams: %s", vmmx_last_error());
	h1 = vmmx_stream_handle(s1);
	h2 = vmmx_stream_handle(s2);
	is_int(0, cudaMallocAsync(&p, 3 * MiB, h1), "cudaMallocAsync on a stream succeeds");
	ok(ours(p, 0), "cudaMallocAsync: libvmmx serves it");
	is_int(0, cudaFreeAsync(p, h1), "cudaFreeAsync on the same stream");
	is_int(0, cudaMallocAsync(&q, 3 * MiB, h1), "cudaMallocAsync again on that stream");
	ok(q == p, "memory freed on a stream is reused at once on that stream");
	vmmx_alloc_stats(a, &st0);
	is_int(0, cudaFreeAsync(q, h2), "cudaFreeAsync on another stream");
	vmmx_alloc_stats(a, &st1);
	is_uint(st0.cross_stream_frees + 1, st1.cross_stream_frees,
		"a free on another stream waits for that stream's event (stream-ordered)");
	is_uint(0, fake_calls(FAKE_cudaMallocAsync) + fake_calls(FAKE_cudaFreeAsync),
		"cudaMallocAsync/cudaFreeAsync: the real runtime is not called");
	is_int(0, cudaMallocAsync_ptsz(&p, MiB, h1), "cudaMallocAsync_ptsz succeeds");
	ok(ours(p, 0), "cudaMallocAsync_ptsz: libvmmx serves it");
	is_int(0, cudaFreeAsync_ptsz(p, h1), "cudaFreeAsync_ptsz succeeds");
	is_int(0, cuMemAllocAsync(&d, 5 * MiB, h2), "cuMemAllocAsync succeeds");
	ok(ours((void *)(uintptr_t)d, 0), "cuMemAllocAsync: libvmmx serves it");
	is_int(0, cuMemFreeAsync(d, h2), "cuMemFreeAsync succeeds");
	is_int(0, cuMemAllocAsync_ptsz(&e, MiB, h2), "cuMemAllocAsync_ptsz succeeds");
	ok(ours((void *)(uintptr_t)e, 0), "cuMemAllocAsync_ptsz: libvmmx serves it");
	is_int(0, cuMemFreeAsync_ptsz(e, h2), "cuMemFreeAsync_ptsz succeeds");
	is_uint(0, fake_calls(FAKE_cuMemAllocAsync) + fake_calls(FAKE_cuMemFreeAsync),
		"cuMemAllocAsync/cuMemFreeAsync: the real driver is not called");
	q = fake_real_alloc();
	is_int(0, cudaFreeAsync(q, h1), "cudaFreeAsync of a foreign pointer");
	is_uint(1, fake_calls(FAKE_cudaFreeAsync), "... reaches the real runtime");
	q = fake_real_alloc();
	is_int(0, cuMemFreeAsync((uintptr_t)q, h1), "cuMemFreeAsync of a foreign pointer");
	is_uint(1, fake_calls(FAKE_cuMemFreeAsync), "... reaches the real driver");
	vmmx_alloc_empty_cache(a);
	vmmx_stream_destroy(s1);
	vmmx_stream_destroy(s2);
}

static void test_meminfo_device(void)
{
	size_t f = 0, t = 0, f2 = 0, t2 = 0;
	void *p = NULL;
	struct vmmx_alloc *a;

	vmmx_alloc_global(0, &a);
	vmmx_alloc_empty_cache(a);
	is_int(0, cudaMemGetInfo(&f, &t), "cudaMemGetInfo succeeds");
	is_uint(256 * MiB, t, "cudaMemGetInfo: total is the device limit");
	is_uint(256 * MiB, f, "cudaMemGetInfo: all of it free");
	cudaMalloc(&p, 64 * MiB);
	cudaMemGetInfo(&f, &t);
	is_uint(192 * MiB, f, "cudaMemGetInfo: free drops by a live allocation");
	cudaFree(p);
	cudaMemGetInfo(&f, &t);
	is_uint(256 * MiB, f, "cudaMemGetInfo: memory freed to the cache counts as free");
	is_int(0, cuMemGetInfo_v2(&f2, &t2), "cuMemGetInfo_v2 succeeds");
	ok(f2 == f && t2 == t, "cuMemGetInfo_v2 says the same");
	is_uint(0, fake_calls(FAKE_cudaMemGetInfo) + fake_calls(FAKE_cuMemGetInfo),
		"cudaMemGetInfo/cuMemGetInfo_v2: the real calls are not made");
}

/* Bytes of [p, p + n) in host memory. */
static size_t host_bytes(void *p, size_t n)
{
	struct vmmx_chunk_info ci;
	struct vmmx_residency r = { 0, 0 };

	if (vmmx_lookup(ctx_of(0), p, &ci) ||
	    vmmx_buf_residency(ci.buf, (size_t)((char *)p - (char *)vmmx_buf_ptr(ci.buf)), n, &r))
		bail("residency of %p: %s", p, vmmx_last_error());
	return r.host;
}

static void test_spill(void)
{
	void *p[3] = { 0 }, *big = NULL;
	unsigned long long d;
	size_t host = 0;

	for (int i = 0; i < 3; i++) {
		is_int(0, cudaMalloc(&p[i], 128 * MiB), "cudaMalloc of 128 MiB #%d (384 MiB past a 256 MiB limit)", i);
		host += host_bytes(p[i], 128 * MiB);
	}
	ok(host >= 128 * MiB, "past the limit, allocations spill to host memory (%zu MiB)", host / MiB);
	ok(fill_check(p[2], 128 * MiB, 0x77), "spilled memory is usable");
	is_int(2, cudaMalloc(&big, (size_t)4 << 30),
	       "cudaMalloc past every limit: cudaErrorMemoryAllocation");
	is_int(2, cuMemAlloc_v2(&d, (size_t)4 << 30), "cuMemAlloc_v2 past every limit: CUDA_ERROR_OUT_OF_MEMORY");
	for (int i = 0; i < 3; i++)
		cudaFree(p[i]);
}

/* ---- memsets ---- */

/* The context whose buffers map @p (either device's), or NULL. */
static struct vmmx_ctx *mapper(const void *p, struct vmmx_chunk_info *ci)
{
	for (int d = 0; d < 2; d++)
		if (!vmmx_lookup(ctx_of(d), p, ci))
			return ctx_of(d);
	return NULL;
}

/*
 * The real driver's rule, as probed on an H100 (docs/PRELOAD.md): a memset
 * stays inside one host chunk, or on chunks of one GPU; it never runs from
 * a host allocation into another, or between device and host memory.
 */
static int driver_takes(const void *ptr, size_t len)
{
	uintptr_t end = (uintptr_t)ptr + len;
	struct vmmx_chunk_info ci, next;
	struct vmmx_ctx *ctx = mapper(ptr, &ci);

	if (!ctx)
		return 1; /* not libvmmx's: the fake's own arena */
	if (ci.loc.kind != VMMX_LOC_DEVICE)
		return end <= (uintptr_t)ci.base + ci.size;
	for (uintptr_t p = (uintptr_t)ci.base + ci.size; p < end; p = (uintptr_t)next.base + next.size)
		if (vmmx_lookup(ctx, (void *)p, &next) || next.loc.kind != VMMX_LOC_DEVICE ||
		    next.loc.id != ci.loc.id)
			return 0;
	return 1;
}

static unsigned long n_refused;

/* The fake driver's memset: the driver's checks, then the write through libvmmx. */
static int fake_memset(const struct fake_set *e)
{
	size_t len = e->count * e->elem;
	unsigned char pat[65536];
	struct vmmx_chunk_info ci;
	struct vmmx_ctx *ctx;

	if ((uintptr_t)e->ptr % e->elem || !driver_takes(e->ptr, len)) {
		__atomic_fetch_add(&n_refused, 1, __ATOMIC_RELAXED);
		return 1; /* CUDA_ERROR_INVALID_VALUE */
	}
	ctx = mapper(e->ptr, &ci);
	if (!ctx) {
		memset(e->ptr, (int)e->value, len); /* the arena is the CPU's */
		return 0;
	}
	if (e->elem == 1)
		return vmmx_memset(ctx, e->ptr, (int)e->value, len) ? 999 : 0;
	for (size_t i = 0; i < sizeof(pat); i++)
		pat[i] = (unsigned char)(e->value >> (8 * (i % e->elem)));
	for (size_t off = 0; off < len; off += sizeof(pat))
		if (vmmx_memcpy(ctx, (char *)e->ptr + off, pat,
				len - off < sizeof(pat) ? len - off : sizeof(pat)))
			return 999;
	return 0;
}

enum set_kind { RT, RT_ASYNC, DRV, DRV_ASYNC };

struct set_variant {
	const char *name;
	enum set_kind kind;
	unsigned int elem;
	void *fn;
};

#define V(f, k, e) { #f, k, e, (void *)f }
static const struct set_variant set_variants[] = {
	V(cudaMemset, RT, 1), V(cudaMemset_ptds, RT, 1), V(cudaMemsetAsync, RT_ASYNC, 1),
	V(cudaMemsetAsync_ptsz, RT_ASYNC, 1), V(cuMemsetD8_v2, DRV, 1), V(cuMemsetD16_v2, DRV, 2),
	V(cuMemsetD32_v2, DRV, 4), V(cuMemsetD8_v2_ptds, DRV, 1), V(cuMemsetD16_v2_ptds, DRV, 2),
	V(cuMemsetD32_v2_ptds, DRV, 4), V(cuMemsetD8Async, DRV_ASYNC, 1),
	V(cuMemsetD16Async, DRV_ASYNC, 2), V(cuMemsetD32Async, DRV_ASYNC, 4),
	V(cuMemsetD8Async_ptsz, DRV_ASYNC, 1), V(cuMemsetD16Async_ptsz, DRV_ASYNC, 2),
	V(cuMemsetD32Async_ptsz, DRV_ASYNC, 4),
};
#undef V

typedef int d8_fn(unsigned long long, unsigned char, size_t);
typedef int d16_fn(unsigned long long, unsigned short, size_t);
typedef int d32_fn(unsigned long long, unsigned int, size_t);
typedef int d8a_fn(unsigned long long, unsigned char, size_t, void *);
typedef int d16a_fn(unsigned long long, unsigned short, size_t, void *);
typedef int d32a_fn(unsigned long long, unsigned int, size_t, void *);

/* Call @v on @n elements of @v->elem bytes at @p. */
static int set_call(const struct set_variant *v, void *p, unsigned int value, size_t n, void *s)
{
	unsigned long long d = (uintptr_t)p;

	switch (v->kind * 4 + v->elem) {
	case RT * 4 + 1:
		return ((int (*)(void *, int, size_t))v->fn)(p, (int)value, n);
	case RT_ASYNC * 4 + 1:
		return ((int (*)(void *, int, size_t, void *))v->fn)(p, (int)value, n, s);
	case DRV * 4 + 1:
		return ((d8_fn *)v->fn)(d, (unsigned char)value, n);
	case DRV * 4 + 2:
		return ((d16_fn *)v->fn)(d, (unsigned short)value, n);
	case DRV * 4 + 4:
		return ((d32_fn *)v->fn)(d, value, n);
	case DRV_ASYNC * 4 + 1:
		return ((d8a_fn *)v->fn)(d, (unsigned char)value, n, s);
	case DRV_ASYNC * 4 + 2:
		return ((d16a_fn *)v->fn)(d, (unsigned short)value, n, s);
	default:
		return ((d32a_fn *)v->fn)(d, value, n, s);
	}
}

/* Bytes [@p, @p + @len) hold @value's elements of @elem bytes (little-endian). */
static int holds(void *p, size_t len, unsigned int value, unsigned int elem)
{
	static unsigned char back[1 << 20];
	struct vmmx_chunk_info ci;
	struct vmmx_ctx *ctx = mapper(p, &ci);

	for (size_t off = 0; off < len; off += sizeof(back)) {
		size_t k = len - off < sizeof(back) ? len - off : sizeof(back);

		if (!ctx || vmmx_memcpy(ctx, back, (char *)p + off, k))
			return 0;
		for (size_t i = 0; i < k; i++)
			if (back[i] != (unsigned char)(value >> (8 * ((off + i) % elem))))
				return 0;
	}
	return 1;
}

/* The pieces logged since the last clear cover [@p, @p + @len) in order, each one the driver takes, as @v made them. */
static int pieces_ok(const struct set_variant *v, void *p, size_t len, unsigned int value, void *s,
		     size_t *n_p)
{
	const struct fake_set *log;
	size_t n = fake_set_log(&log);
	uintptr_t at = (uintptr_t)p;

	*n_p = n;
	for (size_t i = 0; i < n; i++) {
		const struct fake_set *e = &log[i];

		if (strcmp(e->call, v->name) || (uintptr_t)e->ptr != at || e->elem != v->elem ||
		    e->value != (v->elem == 1 ? (value & 0xff) : v->elem == 2 ? (value & 0xffff) : value) ||
		    e->stream != (v->kind == RT_ASYNC || v->kind == DRV_ASYNC ? s : NULL) ||
		    !driver_takes(e->ptr, e->count * e->elem))
			return 0;
		at += e->count * e->elem;
	}
	return at == (uintptr_t)p + len;
}

static void test_memset_variants(char *lo, size_t len, void *stream)
{
	for (size_t i = 0; i < sizeof(set_variants) / sizeof(set_variants[0]); i++) {
		const struct set_variant *v = &set_variants[i];
		unsigned int value = 0x5a3c9617u + (unsigned int)i * 0x01010101u;
		struct vmmx_chunk_info ci;
		struct vmmx_ctx *ctx = mapper(lo, &ci);
		size_t pieces = 0;

		/* Fill around the range to see that nothing outside it is written. */
		vmmx_memset(ctx, lo - 64, 0xee, len + 128);
		fake_set_log_clear();
		n_refused = 0;
		is_int(0, set_call(v, lo, value, len / v->elem, stream), "%s over spilled memory succeeds",
		       v->name);
		ok(pieces_ok(v, lo, len, value, stream, &pieces) && pieces >= 3 && !n_refused,
		   "%s: split in %zu pieces the driver takes, in order, value, element size and stream kept",
		   v->name, pieces);
		ok(holds(lo, len, value, v->elem), "%s: every byte is set", v->name);
		ok(holds(lo - 64, 64, 0xeeeeeeee, 1) && holds(lo + len, 64, 0xeeeeeeee, 1),
		   "%s: nothing outside the range is written", v->name);
	}
}

static void test_memset(void)
{
	void *a = NULL, *b = NULL, *h = dlopen(FAKECUDA_SO, RTLD_NOW | RTLD_LOCAL);
	struct vmmx_chunk_info ci, cj;
	struct vmmx_stream *s;
	char *dev_end, *host_end, *lo, *q = fake_real_alloc();
	const struct fake_set *log;
	int (*gpa)(const char *, void **, int, unsigned long long, int *);
	void *fn = NULL;
	size_t len;

	fake_set_impl(fake_memset);
	/*
	 * 192 MiB of the 256 MiB limit serve allocations (64 MiB reserve): b does
	 * not fit and lies wholly in host memory (a segment has one location).
	 * Migration can still mix one: b's first chunk moves to the device.
	 */
	if (cudaMalloc(&a, 128 * MiB) || cudaMalloc(&b, 448 * MiB) || !mapper(b, &ci) ||
	    vmmx_prefetch(ctx_of(0), b, ci.size, (struct vmmx_loc){ VMMX_LOC_DEVICE, 0 }, NULL) ||
	    vmmx_stream_create(ctx_of(0), &s))
		bail("memset: %s", vmmx_last_error());
	/* The first host chunk in b, and the device chunk before it. */
	for (dev_end = b; mapper(dev_end, &ci) && ci.loc.kind == VMMX_LOC_DEVICE;)
		dev_end = (char *)ci.base + ci.size;
	host_end = (char *)ci.base + ci.size;
	ok(dev_end > (char *)b && ci.loc.kind == VMMX_LOC_HOST && host_end < (char *)b + 448 * MiB &&
		   mapper(host_end, &cj) && cj.loc.kind == VMMX_LOC_HOST,
	   "memset: the allocation runs from device memory into two host chunks (%zu MiB chunks)",
	   ci.size / MiB);
	lo = dev_end - MiB - 4;
	len = (size_t)(host_end - lo) + MiB + 8;
	ok(!driver_takes(lo, len) && fake_memset(&(struct fake_set){ "", lo, 0, 1, len, NULL }) == 1 &&
		   n_refused == 1,
	   "memset: the fake driver refuses the range whole, as the real one does");
	test_memset_variants(lo, len, vmmx_stream_handle(s));

	fake_set_log_clear();
	is_int(1, cuMemsetD32_v2((uintptr_t)(lo + 1), 7, 16), "a misaligned cuMemsetD32: the driver's error");
	is_uint(1, fake_set_log(&log), "... from one real call with the range whole");
	fake_set_log_clear();
	is_int(0, cudaMemset(q, 0x42, 100), "cudaMemset of memory libvmmx did not make succeeds");
	ok(fake_set_log(&log) == 1 && log[0].ptr == q && log[0].count == 100 &&
		   ((unsigned char *)q)[99] == 0x42,
	   "... in one real call with the range unchanged");
	fake_set_log_clear();
	is_int(0, cudaMemset(lo + 8, 3, 4096), "cudaMemset inside one device chunk succeeds");
	is_uint(1, fake_set_log(&log), "... in one real call");

	gpa = h ? (int (*)(const char *, void **, int, unsigned long long, int *))dlsym(
			  h, "cuGetProcAddress_v2") :
		  NULL;
	ok(gpa && !gpa("cuMemsetD8", &fn, 13000, 0, NULL) && fn == (void *)cuMemsetD8_v2,
	   "cuGetProcAddress(cuMemsetD8) hands back the interposed cuMemsetD8_v2");
	ok(gpa && !gpa("cuMemsetD16", &fn, 13000, 2, NULL) && fn == (void *)cuMemsetD16_v2_ptds,
	   "... per-thread flavour: cuMemsetD16_v2_ptds");
	ok(gpa && !gpa("cuMemsetD32Async", &fn, 13000, 2, NULL) && fn == (void *)cuMemsetD32Async_ptsz,
	   "cuGetProcAddress(cuMemsetD32Async, per-thread) is cuMemsetD32Async_ptsz");
	fake_set_log_clear();
	ok(fn && !((d32a_fn *)fn)((uintptr_t)lo, 0x01020304, len / 4, NULL) &&
		   fake_set_log(&log) >= 3 && holds(lo, len, 0x01020304, 4),
	   "the looked-up cuMemsetD32Async splits and sets spilled memory");
	if (h)
		dlclose(h);
	fake_set_impl(NULL);
	vmmx_stream_destroy(s);
	cudaFree(q);
	cudaFree(a);
	cudaFree(b);
}

static char *capture_stderr(int *saved, char *path)
{
	int fd;

	strcpy(path, "/tmp/vmmx-preload-err.XXXXXX");
	fd = mkstemp(path);
	fflush(stderr);
	*saved = dup(2);
	dup2(fd, 2);
	close(fd);
	return path;
}

static char *restore_stderr(int saved, const char *path)
{
	static char buf[4096];
	FILE *f;
	size_t n;

	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	f = fopen(path, "r");
	n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	buf[n] = 0;
	if (f)
		fclose(f);
	unlink(path);
	return buf;
}

static void test_ipc(void)
{
	unsigned char h[64];
	char path[64];
	void *p = NULL, *q = fake_real_alloc();
	unsigned long long d = 0;
	char *msg;
	int saved, r1, r2;

	cudaMalloc(&p, MiB);
	cuMemAlloc_v2(&d, MiB);
	capture_stderr(&saved, path);
	r1 = cudaIpcGetMemHandle(h, p);
	r2 = cuIpcGetMemHandle(h, d);
	msg = restore_stderr(saved, path);
	is_int(1, r1, "cudaIpcGetMemHandle on libvmmx memory: cudaErrorInvalidValue");
	is_int(1, r2, "cuIpcGetMemHandle on libvmmx memory: CUDA_ERROR_INVALID_VALUE");
	like(msg, "vmmx-run: cudaIpcGetMemHandle(", "the refusal names cudaIpcGetMemHandle");
	like(msg, "vmmx-run: cuIpcGetMemHandle(", "the refusal names cuIpcGetMemHandle");
	like(msg, "Way out: run this program without vmmx-run", "the message gives the way out");
	is_uint(0, fake_calls(FAKE_cudaIpcGetMemHandle) + fake_calls(FAKE_cuIpcGetMemHandle),
		"the real IPC calls are not made on libvmmx memory");
	is_int(0, cudaIpcGetMemHandle(h, q), "cudaIpcGetMemHandle of foreign memory succeeds");
	is_uint(1, fake_calls(FAKE_cudaIpcGetMemHandle), "... through the real runtime");
	cudaFree(q);
	cudaFree(p);
	cuMemFree_v2(d);
}

struct worker {
	int id, errors;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	unsigned int seed = (unsigned int)w->id * 7919u + 1;
	int dev = w->id % 2;

	cudaSetDevice(dev);
	for (int i = 0; i < ITERS; i++) {
		size_t n = (size_t)(rand_r(&seed) % (3 * MiB)) + 1;
		void *p = NULL;
		unsigned long long d = 0;

		if (i % 2 ? cudaMalloc(&p, n) : cuMemAlloc_v2(&d, n)) {
			w->errors++;
			continue;
		}
		if (!p)
			p = (void *)(uintptr_t)d;
		if (!ours(p, dev) || ours(p, !dev) || !fill_check_on(dev, p, n, (unsigned char)w->id))
			w->errors++;
		if (i % 2 ? cudaFree(p) : cuMemFree_v2((uintptr_t)p))
			w->errors++;
	}
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[THREADS];
	struct worker w[THREADS];
	int errors = 0;
	void *p = NULL;

	cudaSetDevice(1);
	cudaMalloc(&p, MiB);
	ok(ours(p, 1) && !ours(p, 0), "after cudaSetDevice(1), cudaMalloc lands on device 1");
	cudaFree(p);
	cudaSetDevice(0);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ i, 0 };
		pthread_create(&t[i], NULL, work, &w[i]);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		errors += w[i].errors;
	}
	is_int(0, errors, "%d threads x %d allocations on their own devices: no error", THREADS, ITERS);
}

static void test_fork(void)
{
	int st = 0;
	pid_t pid = fork();

	if (pid == 0) {
		printf("# child: no CUDA here\n");
		exit(7);
	}
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 7, "a forked child that does not touch CUDA exits normally");
}

/* ---- forks while other threads allocate ---- */

#define FORKS		20
#define FORK_THREADS	4
#define CHILD_TIMEOUT_S 5   /* the child's alarm(); the parent kills it 2 s later */
#define CUDA_NOT_INIT	3   /* cudaErrorInitializationError, CUDA_ERROR_NOT_INITIALIZED */

static int fork_stop;        /* atomic */
static int fork_errors;      /* atomic: failures in the parent's threads */

/* cudaMalloc/cudaFree in a loop, sizes from small blocks to huge segments. */
static void *fork_worker(void *arg)
{
	static const size_t sizes[] = { 512, 64 * 1024, 3 * MiB, 12 * MiB };
	unsigned int id = (unsigned int)(uintptr_t)arg;

	cudaSetDevice(0);
	for (unsigned int i = 0; !__atomic_load_n(&fork_stop, __ATOMIC_RELAXED); i++) {
		void *p = NULL;

		if (cudaMalloc(&p, sizes[(i + id) % 4]) || !p) {
			__atomic_fetch_add(&fork_errors, 1, __ATOMIC_RELAXED);
			continue;
		}
		if (cudaFree(p))
			__atomic_fetch_add(&fork_errors, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* The child: an exit status with one bit per failed expectation; SIGALRM if it hangs. */
static void fork_child(void)
{
	void *sentinel = (void *)&fork_stop, *p = sentinel;
	unsigned long real0 = fake_calls(FAKE_cudaMalloc) + fake_calls(FAKE_cuMemAlloc);
	unsigned long long d = 7;
	int st = 0, err;

	alarm(CHILD_TIMEOUT_S);
	err = cudaMalloc(&p, MiB);
	if (err != CUDA_NOT_INIT)
		st |= 1;
	if (p != sentinel)
		st |= 2;
	err = cuMemAlloc_v2(&d, MiB);
	if (err != CUDA_NOT_INIT)
		st |= 4;
	if (d != 7)
		st |= 8;
	if (fake_calls(FAKE_cudaMalloc) + fake_calls(FAKE_cuMemAlloc) != real0)
		st |= 16; /* passed to the real driver, whose state is the parent's too */
	_exit(st);
}

static void test_fork_threads(void)
{
	pthread_t t[FORK_THREADS];
	int hung = 0, failed = 0;

	for (unsigned int i = 0; i < FORK_THREADS; i++)
		pthread_create(&t[i], NULL, fork_worker, (void *)(uintptr_t)i);
	for (int i = 0; i < FORKS; i++) {
		struct timespec ts = { 0, (long)(1 + i % 5) * 1000 * 1000 };
		int status = 0, w;
		pid_t pid, r = 0;

		nanosleep(&ts, NULL);
		pid = fork();
		if (pid < 0)
			bail("fork: %s", strerror(errno));
		if (!pid)
			fork_child();
		for (w = 0; w < (CHILD_TIMEOUT_S + 2) * 100; w++) {
			r = waitpid(pid, &status, WNOHANG);
			if (r == pid || (r < 0 && errno != EINTR))
				break;
			nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
		}
		if (r != pid) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			hung++;
		} else if (WIFSIGNALED(status)) {
			hung++;
		} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			if (!failed++)
				diag("fork %d: child status %#x", i, status);
		}
	}
	__atomic_store_n(&fork_stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < FORK_THREADS; i++)
		pthread_join(t[i], NULL);
	is_int(0, hung, "%d forks while %d threads cudaMalloc/cudaFree: no child hung (%d s alarm)",
	       FORKS, FORK_THREADS, CHILD_TIMEOUT_S);
	is_int(0, failed,
	       "... each child's cudaMalloc and cuMemAlloc failed with the initialization error, "
	       "no address given, the real driver not called");
	is_int(0, fork_errors, "... and the parent's threads allocated and freed without error");
}

static int meminfo_mode(void)
{
	const char *m = getenv("VMMX_RUN_MEMINFO");
	const char *cap_s = getenv("VMMX_RUN_MEMINFO_HOST");
	int total = m && !strcmp(m, "device+host");
	uint64_t cap = 1024 * MiB; /* the host limit */
	size_t f = 0, t = 0;
	void *p = NULL, *q = NULL;

	plan(3);
	if (cap_s && !vmmx_parse_size(cap_s, 0, &cap) && cap > 1024 * MiB)
		cap = 1024 * MiB;
	cudaMalloc(&p, 256 * MiB); /* fills the device */
	cudaMalloc(&q, 128 * MiB); /* in host memory */
	is_int(0, cudaMemGetInfo(&f, &t), "cudaMemGetInfo succeeds (%s)", total ? "device+host" : "device");
	is_uint(total ? 256 * MiB + cap : 256 * MiB, t, "total: %s",
		total ? "device limit + host limit or cap" : "device limit");
	is_uint(total ? cap - 128 * MiB : 0, f, "free: %s",
		total ? "what is left on both" : "nothing left on the device");
	cudaFree(p);
	cudaFree(q);
	return tap_done();
}

static int spill_mode(void)
{
	void *p[3];

	for (int i = 0; i < 3; i++)
		if (cudaMalloc(&p[i], 128 * MiB))
			return 1;
	printf("spilled\n");
	return 0;
}

/*
 * A caching allocator as PyTorch's: a block freed by the program stays in
 * its cache (cache[]), given back to CUDA only when an allocation says out
 * of memory; then the request is asked again, once, the same way.
 */
struct cache {
	void *blk[4];
	int n, oom;
};

static void cache_give_back(struct cache *c)
{
	c->oom++;
	while (c->n)
		cudaFree(c->blk[--c->n]);
}

static int cache_malloc(struct cache *c, void **p, size_t size)
{
	int err = cudaMalloc(p, size);

	if (err != 2) /* cudaErrorMemoryAllocation */
		return err;
	cache_give_back(c);
	return cudaMalloc(p, size);
}

static int cache_mem_alloc(struct cache *c, void **p, size_t size)
{
	unsigned long long d = 0;
	int err = cuMemAlloc_v2(&d, size);

	if (err == 2) { /* CUDA_ERROR_OUT_OF_MEMORY */
		cache_give_back(c);
		err = cuMemAlloc_v2(&d, size);
	}
	*p = (void *)(uintptr_t)d;
	return err;
}

/* The thread's stream capture mode, read by exchanging it and back. */
static int capture_mode(void)
{
	int m = 0, was;

	cuThreadExchangeStreamCaptureMode(&m);
	was = m;
	cuThreadExchangeStreamCaptureMode(&m);
	return was;
}

/*
 * "cache-first on|off" under a 256 MiB device limit: H, 72 MiB the program
 * holds and never uses, and a 72 MiB block freed to the cache (the warm-up
 * block transformers makes), both on the device, then 64 MiB weights.
 * With VMMX_RUN_CACHE_FIRST=1 (on): the first weight that would spill is
 * refused, the cache given back, and it lands on the device; past the
 * limit, a weight in a capture (the thread's capture mode relaxed) and a
 * cudaMallocAsync spill unrefused; a cuMemAlloc is refused, has nothing
 * to give back, and spills asked again; no request after it is refused.
 * Off: nothing refused, the weights spill beside the cached block.
 */
static int cache_first_mode(int on)
{
	struct cache c = { .n = 0 };
	void *w[5] = { 0 }, *h = NULL, *warm = NULL, *as = NULL, *z = NULL;
	size_t n = 64 * MiB;
	int relaxed = 2, global = 0, ooms;

	plan(16);
	/* A request of 0 bytes, before any refusal, is no request asked again. */
	is_int(0, cudaMalloc(&z, 0), "cudaMalloc of 0 bytes");
	ok(!cache_malloc(&c, &h, 72 * MiB) && !cache_malloc(&c, &warm, 72 * MiB),
	   "H and the warm-up block: 72 MiB each");
	c.blk[c.n++] = warm; /* freed by the program, kept in its cache */
	ok(!cache_malloc(&c, &w[0], n) && !cache_malloc(&c, &w[1], n), "two weights of 64 MiB");
	if (on) {
		is_int(1, c.oom, "the second weight, which would spill, was refused once");
		ok(c.n == 0 && !host_bytes(w[1], n), "... the cache given back, and it lies on the device");
		ok(fill_check(w[1], n, 0x32), "the weight asked again holds data");
	} else {
		is_int(0, c.oom, "no request refused");
		ok(c.n == 1 && host_bytes(w[1], n), "the weight spilled beside the cached block");
		ok(fill_check(w[0], n, 0x31), "the first weight holds data");
	}
	/* past the limit, the cache empty, H held on the device */
	ooms = c.oom;
	cuThreadExchangeStreamCaptureMode(&relaxed);
	is_int(0, cache_malloc(&c, &w[2], n), "past the limit, the thread's capture mode relaxed");
	is_int(2, capture_mode(), "... the mode left as it was");
	cuThreadExchangeStreamCaptureMode(&global);
	is_int(ooms, c.oom, "... not refused (a capture: PyTorch would raise out of memory)");
	is_int(0, cudaMallocAsync(&as, n, NULL), "cudaMallocAsync past the limit: not refused");
	ok(host_bytes(w[2], n) && host_bytes(as, n) == n, "both in host memory");
	is_int(0, cache_mem_alloc(&c, &w[3], n), "cuMemAlloc past the limit, nothing cached");
	is_int(ooms + (on ? 1 : 0), c.oom, on ? "... refused once, asked again: spilled" :
	       "... not refused");
	is_uint(n, host_bytes(w[3], n), "... wholly in host memory");
	is_int(0, cache_malloc(&c, &w[4], n), "the next weight");
	is_int(ooms + (on ? 1 : 0), c.oom, "... not refused: refusals stopped, or never on");
	cudaFreeAsync(as, NULL);
	for (int i = 0; i < 5; i++)
		cudaFree(w[i]);
	while (c.n)
		cudaFree(c.blk[--c.n]);
	cudaFree(h);
	cudaFree(z);
	return tap_done();
}

/*
 * "cache-first none", VMMX_RUN_CACHE_FIRST=1: N, 72 MiB set by a
 * cudaMemset (named: in use), and two weights of 64 MiB fill the device; a
 * third would spill, and nothing the program holds unused could make
 * room: served.
 */
static int cache_first_none(void)
{
	void *nm = NULL, *w[3] = { 0 };
	size_t n = 64 * MiB;

	plan(4);
	ok(!cudaMalloc(&nm, 72 * MiB) && !cudaMemset(nm, 0, 72 * MiB),
	   "N, 72 MiB, set by a cudaMemset");
	ok(!cudaMalloc(&w[0], n) && !cudaMalloc(&w[1], n), "two weights of 64 MiB");
	is_int(0, cudaMalloc(&w[2], n), "a third, past the limit, N in use: not refused");
	ok(host_bytes(w[2], n) != 0, "... it spilled");
	for (int i = 0; i < 3; i++)
		cudaFree(w[i]);
	cudaFree(nm);
	return tap_done();
}

/*
 * "cache-first graph", VMMX_RUN_CACHE_FIRST=1: beside H, 72 MiB unused, a
 * cudaMallocPitch that would spill is served (never asked again); then, in
 * a program that has launched a CUDA graph (PyTorch may be capturing on
 * another thread, where it frees no cache), a weight that would spill too.
 */
static int cache_first_graph(void)
{
	static struct fake_graph g;
	void *h = NULL, *w[3] = { 0 }, *e = NULL, *pt = NULL;
	size_t n = 64 * MiB, pitch = 0;

	plan(6);
	ok(!cudaMalloc(&h, 72 * MiB) && !cudaMalloc(&w[0], n) && !cudaMalloc(&w[1], n),
	   "H, 72 MiB unused, and two weights of 64 MiB");
	is_int(0, cudaMallocPitch(&pt, &pitch, MiB, 64), "cudaMallocPitch past the limit beside H: "
	       "not refused (pitched allocations are not asked again)");
	ok(host_bytes(pt, pitch * 64) != 0, "... it spilled");
	ok(!cuGraphInstantiateWithFlags(&e, &g, 0) && !cuGraphLaunch(e, NULL),
	   "a graph instantiated and launched");
	is_int(0, cudaMalloc(&w[2], n), "a third weight, past the limit beside H: not refused");
	ok(host_bytes(w[2], n) != 0, "... it spilled");
	cuGraphExecDestroy(e);
	for (int i = 0; i < 3; i++)
		cudaFree(w[i]);
	cudaFree(pt);
	cudaFree(h);
	return tap_done();
}

/*
 * "cache-first other", VMMX_RUN_CACHE_FIRST=1, beside H, 72 MiB unused:
 * a weight freed and asked for again, served from libvmmx's cache, and
 * 128 MiB, more than H holds, are not refused; then a program that asks
 * for less after a refusal (as a BFC allocator backs off) instead of the
 * same size again: served, and no request after it is refused.
 */
static int cache_first_other(void)
{
	void *h = NULL, *w[3] = { 0 }, *less = NULL, *big = NULL;
	size_t n = 64 * MiB;

	plan(8);
	ok(!cudaMalloc(&h, 72 * MiB) && !cudaMalloc(&w[0], n) && !cudaMalloc(&w[1], n),
	   "H, 72 MiB unused, and two weights of 64 MiB");
	cudaFree(w[1]);
	is_int(0, cudaMalloc(&w[1], n), "the second freed and asked for again: not refused");
	is_uint(0, host_bytes(w[1], n), "... on the device (libvmmx's cached segment)");
	is_int(0, cudaMalloc(&big, 128 * MiB), "128 MiB past the limit, more than H holds: not refused");
	is_int(2, cudaMalloc(&w[2], n), "a third weight, past the limit beside H: refused");
	is_int(0, cudaMalloc(&less, 32 * MiB), "32 MiB asked for instead: served");
	is_int(0, cudaMalloc(&w[2], n), "the third weight asked for after that: not refused");
	ok(host_bytes(w[2], n) != 0, "... it spilled");
	for (int i = 0; i < 3; i++)
		cudaFree(w[i]);
	cudaFree(big);
	cudaFree(less);
	cudaFree(h);
	return tap_done();
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "meminfo"))
		return meminfo_mode();
	if (argc > 1 && !strcmp(argv[1], "spill"))
		return spill_mode();
	if (argc > 2 && !strcmp(argv[1], "cache-first"))
		return !strcmp(argv[2], "other") ? cache_first_other()
		       : !strcmp(argv[2], "none") ? cache_first_none()
		       : !strcmp(argv[2], "graph") ? cache_first_graph()
						  : cache_first_mode(!strcmp(argv[2], "on"));
	if (!getenv("LD_PRELOAD"))
		skip_all("not under vmmx-run (hooks.sh runs this)");
	plan_lazy();
	test_runtime();
	test_driver();
	test_lookups();
	test_streams();
	test_meminfo_device();
	test_spill();
	test_memset();
	test_ipc();
	test_threads();
	test_fork();
	test_fork_threads();
	return tap_done();
}
