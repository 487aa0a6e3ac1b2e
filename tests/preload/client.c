// SPDX-License-Identifier: MIT
/*
 * client.c - a CUDA program as the interposer sees one: linked against the
 * fake runtime and driver (fakecuda.c), run under vmmx-run on the sim backend
 * by hooks.sh.  Every interposed call, reached the three ways (the dynamic
 * linker, dlsym on the driver's handle, cuGetProcAddress); memory that
 * libvmmx serves against memory the "real" driver made (the fake's
 * sentinels); foreign frees; stream-ordered frees; cudaMemGetInfo; the
 * spill past the device limit; IPC refused with its message; two devices
 * and 8 threads; a forked child.
 *
 * The environment (hooks.sh): 2 sim devices of 1 GiB, a 256 MiB device
 * limit, no headroom, a 1 GiB host limit.
 *
 * Modes: no argument, the whole TAP suite; "meminfo", cudaMemGetInfo in the
 * mode VMMX_RUN_MEMINFO names (TAP); "spill", allocate past the limit and
 * exit (for --report and --trace).
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

static void test_spill(void)
{
	void *p[3] = { 0 }, *big = NULL;
	unsigned long long d;
	size_t host = 0;

	for (int i = 0; i < 3; i++) {
		struct vmmx_chunk_info ci;
		struct vmmx_residency r;

		is_int(0, cudaMalloc(&p[i], 128 * MiB), "cudaMalloc of 128 MiB #%d (384 MiB past a 256 MiB limit)", i);
		if (!vmmx_lookup(ctx_of(0), p[i], &ci) &&
		    !vmmx_buf_residency(ci.buf, (size_t)((char *)p[i] - (char *)vmmx_buf_ptr(ci.buf)),
					128 * MiB, &r))
			host += r.host;
	}
	ok(host >= 128 * MiB, "past the limit, allocations spill to host memory (%zu MiB)", host / MiB);
	ok(fill_check(p[2], 128 * MiB, 0x77), "spilled memory is usable");
	is_int(2, cudaMalloc(&big, (size_t)4 << 30),
	       "cudaMalloc past every limit: cudaErrorMemoryAllocation");
	is_int(2, cuMemAlloc_v2(&d, (size_t)4 << 30), "cuMemAlloc_v2 past every limit: CUDA_ERROR_OUT_OF_MEMORY");
	for (int i = 0; i < 3; i++)
		cudaFree(p[i]);
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

static int meminfo_mode(void)
{
	const char *m = getenv("VMMX_RUN_MEMINFO");
	int total = m && !strcmp(m, "device+host");
	size_t f = 0, t = 0;
	void *p = NULL;

	plan(3);
	cudaMalloc(&p, 384 * MiB);
	is_int(0, cudaMemGetInfo(&f, &t), "cudaMemGetInfo succeeds (%s)", total ? "device+host" : "device");
	is_uint(total ? 1280 * MiB : 256 * MiB, t, "total: %s", total ? "device limit + host limit" : "device limit");
	is_uint(total ? 896 * MiB : 0, f, "free: %s", total ? "what is left on both" : "nothing left on the device");
	cudaFree(p);
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

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "meminfo"))
		return meminfo_mode();
	if (argc > 1 && !strcmp(argv[1], "spill"))
		return spill_mode();
	if (!getenv("LD_PRELOAD"))
		skip_all("not under vmmx-run (hooks.sh runs this)");
	plan_lazy();
	test_runtime();
	test_driver();
	test_lookups();
	test_streams();
	test_meminfo_device();
	test_spill();
	test_ipc();
	test_threads();
	test_fork();
	return tap_done();
}
