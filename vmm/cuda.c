// SPDX-License-Identifier: MIT
/*
 * cuda.c - the "cuda" backend: struct vmm_ops over the CUDA driver's
 * virtual-memory API (cuMemAddressReserve, cuMemCreate, cuMemMap,
 * cuMemSetAccess and their inverses), plus copies, memset and sync, host
 * registration (cuMemHostRegister), streams with asynchronous copies, and
 * device attributes and peer access for every device of the machine.
 *
 * Why dlopen: libcuda.so.1 belongs to the driver, not to the toolkit, and is
 * absent on machines without an NVIDIA GPU.  Linking it would make every
 * program that uses libvmmx fail to start there, before it could say why.
 * It is loaded at open time through the one door to the driver,
 * vmm/cudaload.c (shared with the tools and the tests), so a missing driver
 * becomes -VMMX_ENODRIVER with dlerror()'s text, and the sim backend keeps
 * working.  That table holds the versioned names that cuda.h maps the API
 * names to (cuMemGetInfo -> cuMemGetInfo_v2, _ptds/_ptsz under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM); this file keeps a copy of it.
 *
 * Contexts: open retains the device's primary context (the one the CUDA
 * runtime uses too, so libvmmx and cudart code share allocations and the
 * legacy default stream).  libvmmx is called from arbitrary threads, so every
 * entry point that needs a context checks the calling thread's current one:
 *  - none current: make ours current and leave it so (it is what the runtime
 *    would pick, and the next call costs one cuCtxGetCurrent);
 *  - ours current: nothing to do;
 *  - another context current (the caller's own): switch to ours for the call
 *    and switch back, so libvmmx never changes a caller's context behind its
 *    back.
 *
 * Errors: every CUresult goes through cu_fail(), which maps it to -VMMX_E*
 * and reports it once through the instance's report hook, with the call and
 * its arguments, the CUDA error name and its description.
 *
 * Streams: the instance keeps the list of the streams it created and
 * refuses any other value with -VMMX_EINVAL, as the sim does, except in
 * event_record: a framework's allocator frees memory on the framework's own
 * streams, so an event is recorded on any CUstream the caller hands in (it
 * is the caller's to keep alive, as it is for the framework itself).  A CUstream is
 * a pointer into the driver; handing it a destroyed or made-up one is
 * undefined behaviour there, not an error code, so the check has to be ours.
 * Stream 0 is the default stream (the legacy one, or the per-thread one in a
 * CUDA_API_PER_THREAD_DEFAULT_STREAM build).  Host registrations are not
 * tracked: the driver checks them itself (ALREADY_REGISTERED,
 * NOT_REGISTERED), and they outlive vmm_close() like any driver state the
 * caller did not undo.
 *
 * Locking: the instance is written only by vmm_cuda_open() and is read-only
 * afterwards, except the checksum kernel's state, which sum_lock protects
 * (held across a whole checksum), and the stream list, which streams_lock protects; it is
 * held across cuStreamDestroy (so that a destroyed stream is never seen as
 * live) and never across any other driver call.  The driver is
 * thread-safe; the current context is per thread.  There is no global
 * mutable state in this file.
 */
#include "config.h"

#ifdef VMMX_HAVE_CUDA

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <time.h>

#include <cuda.h>

#include "vmm/cudaload.h"
#include "vmm/vmm.h"

#define CUDA_LIB "libcuda.so.1"

_Static_assert(sizeof(vmm_handle_t) == sizeof(CUmemGenericAllocationHandle),
	       "vmm_handle_t must hold a CUmemGenericAllocationHandle");
_Static_assert(sizeof(CUdeviceptr) == sizeof(void *),
	       "unified addressing: a CUdeviceptr is a process address");

/* Devices whose primary context mem_info_other() keeps (libvmmx handles 16). */
#define CUDA_MAX_OTHER 16

/* The instance; read-only once vmm_cuda_open() returns, but for the atomics. */
struct vmm_cuda {
	struct vmm vmm;                 /* first: the dispatch layer's head */
	struct vmm_cuda_api api;        /* the driver, from vmm/cudaload.c */
	CUdevice dev;
	int ordinal;                    /* p->device */
	int device_count;
	CUcontext ctx;                  /* the device's primary context, retained */
	pthread_mutex_t streams_lock;
	CUstream *streams;              /* streams we created, not yet destroyed: streams_lock */
	size_t nstreams, streams_cap;   /* streams_lock */
	uint64_t host_avail;            /* last MemAvailable read: atomic */
	uint64_t host_avail_ns;         /* when (CLOCK_MONOTONIC): atomic */
	/* Primary contexts of other devices, retained at their first free-memory
	 * query and released at close (mem_info_other): atomic, set once. */
	CUcontext other_ctx[CUDA_MAX_OTHER];
	/* The checksum kernel, loaded at the first vmm_checksum(): sum_lock
	 * protects every member below and is held across a whole checksum
	 * (one result word per instance). */
	pthread_mutex_t sum_lock;
	int sum_state;                  /* 0: not loaded; 1: loaded; -VMMX_ENOTSUP: cannot be */
	char sum_why[320];              /* why it cannot be (sum_state < 0) */
	CUmodule sum_mod;
	CUfunction sum_fn;
	CUdeviceptr sum_word;           /* 8 bytes of device memory: the result */
	uint64_t sum_back;              /* the result copied back: here, not on a caller's
					 * stack, so that a copy a failed wait leaves behind
					 * lands in memory that outlives the call */
	CUstream sum_stream;            /* private, non-blocking */
	unsigned int sum_grid;          /* most blocks per launch */
};

static inline struct vmm_cuda *to_cuda(struct vmm *v)
{
	return (struct vmm_cuda *)v;
}

static inline CUdeviceptr dptr(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

/* ---- errors ---- */

static int cu_errno(CUresult r)
{
	switch (r) {
	case CUDA_ERROR_OUT_OF_MEMORY:
		return -VMMX_ENOMEM;
	case CUDA_ERROR_INVALID_VALUE:
		return -VMMX_EINVAL;
	case CUDA_ERROR_NO_DEVICE:
	case CUDA_ERROR_INVALID_DEVICE:
		return -VMMX_ENODEV;
	case CUDA_ERROR_NOT_SUPPORTED:
		return -VMMX_ENOTSUP;
	case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
		return -VMMX_EEXIST;
	case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
		return -VMMX_ENOENT;
	default:
		return -VMMX_EDRIVER;
	}
}

__attribute__((format(printf, 4, 0)))
static int cu_vfail(struct vmm_cuda *c, int err, CUresult r, const char *fmt, va_list ap)
{
	const char *name = NULL, *str = NULL;
	char what[256];

	vsnprintf(what, sizeof(what), fmt, ap);
	/* Both return CUDA_ERROR_INVALID_VALUE and NULL for codes they do not know. */
	if (c->api.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
		name = NULL;
	if (c->api.cuGetErrorString(r, &str) != CUDA_SUCCESS || !str)
		str = "unknown error";
	if (name)
		vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, err, "%s: %s (%s)", what, name, str);
	else
		vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, err, "%s: CUresult %d (%s)", what, (int)r,
			    str);
	return err;
}

/*
 * cu_fail() - the one place a driver result becomes our code: map @r,
 * report it with the call described by @fmt, return the negative code.
 */
__attribute__((format(printf, 3, 4)))
static int cu_fail(struct vmm_cuda *c, CUresult r, const char *fmt, ...)
{
	va_list ap;
	int err;

	va_start(ap, fmt);
	err = cu_vfail(c, cu_errno(r), r, fmt, ap);
	va_end(ap);
	return err;
}

/* As cu_fail() with a code chosen by the caller (open's special cases). */
__attribute__((format(printf, 4, 5)))
static int cu_fail_as(struct vmm_cuda *c, int err, CUresult r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = cu_vfail(c, err, r, fmt, ap);
	va_end(ap);
	return err;
}

static const char *loc_str(struct vmmx_loc loc, char *buf, size_t len)
{
	switch (loc.kind) {
	case VMMX_LOC_DEVICE:
		snprintf(buf, len, "device %d", loc.id);
		break;
	case VMMX_LOC_HOST:
		snprintf(buf, len, "host");
		break;
	case VMMX_LOC_HOST_NUMA:
		snprintf(buf, len, "host-numa %d", loc.id);
		break;
	default:
		snprintf(buf, len, "location kind %d", (int)loc.kind);
		break;
	}
	return buf;
}

/*
 * Fill an allocation property for @loc.  PINNED is the only type the driver
 * offers; requestedHandleTypes stays 0 because HOST allocations refuse any
 * other value and we never export handles.
 */
static int loc_prop(struct vmm_cuda *c, struct vmmx_loc loc, CUmemAllocationProp *prop)
{
	memset(prop, 0, sizeof(*prop));
	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	switch (loc.kind) {
	case VMMX_LOC_DEVICE:
		prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop->location.id = loc.id;
		return 0;
	case VMMX_LOC_HOST:
		prop->location.type = CU_MEM_LOCATION_TYPE_HOST;
		prop->location.id = 0; /* ignored by the driver for HOST */
		return 0;
	case VMMX_LOC_HOST_NUMA:
		prop->location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
		prop->location.id = loc.id;
		return 0;
	default:
		break;
	}
	vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_EINVAL, "cuda: invalid location kind %d",
		    (int)loc.kind);
	return -VMMX_EINVAL;
}

/* ---- the calling thread's context ---- */

/*
 * Make our primary context current for one call.  *@saved_p receives the
 * context to give back in cu_leave(): NULL when there is nothing to restore
 * (ours was current, or none was and ours stays).
 */
static int cu_enter(struct vmm_cuda *c, CUcontext *saved_p)
{
	CUcontext cur = NULL;
	CUresult r;

	r = c->api.cuCtxGetCurrent(&cur);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuCtxGetCurrent()");
	*saved_p = NULL;
	if (cur == c->ctx)
		return 0;
	r = c->api.cuCtxSetCurrent(c->ctx);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuCtxSetCurrent(primary context of device %d)", c->ordinal);
	*saved_p = cur;
	return 0;
}

static void cu_leave(struct vmm_cuda *c, CUcontext saved)
{
	/*
	 * Failure swallowed on purpose: the operation's own result is what the
	 * caller needs, and setting a context the caller made current only
	 * fails when that context is already gone.
	 */
	if (saved)
		(void)c->api.cuCtxSetCurrent(saved);
}

/*
 * One driver call with our context current on this thread; its result goes
 * to @r, for callers with answers of their own (NOT_READY) or messages of
 * their own.  Evaluates to 0, or the -VMMX_E* code of making the context
 * current (the call was not made).
 */
#define CU_RUN(c, r, call)                                                 \
	({                                                                 \
		CUcontext run_saved_;                                      \
		int run_err_ = cu_enter((c), &run_saved_);                 \
									   \
		if (!run_err_) {                                           \
			(r) = (call);                                      \
			cu_leave((c), run_saved_);                         \
		}                                                          \
		run_err_;                                                  \
	})

/*
 * One driver call with our context current on this thread, its failure
 * mapped and reported once (cu_fail).  Evaluates to 0 or the -VMMX_E* code.
 */
#define CU_CALL(c, call, ...)                                              \
	({                                                                 \
		CUresult r_ = CUDA_SUCCESS;                                \
		int err_ = CU_RUN((c), r_, (call));                        \
									   \
		if (!err_ && r_ != CUDA_SUCCESS)                           \
			err_ = cu_fail((c), r_, __VA_ARGS__);              \
		err_;                                                      \
	})

/* ---- the checksum kernel ---- */

/*
 * vmm_checksum() on the device (the sum is defined in vmm.h).  Hand-written
 * PTX, so that building needs no nvcc (CI has no CUDA): ISA 7.0 for sm_60,
 * which every driver with the VMM API can compile.  Each thread walks the
 * words with a grid stride, four at a time (four loads in flight before
 * the first is mixed, then one at a time for the last few), and keeps its
 * own partial sum; a warp adds its 32 partial sums with shuffles (two
 * 32-bit halves a step) and its first lane adds the warp's sum to the
 * result word with one 64-bit atomic.  Addition is order-independent, so
 * the result is the same whatever the schedule.  Every thread reaches the
 * shuffles (one with no word adds 0): they need the whole warp.
 * Measured on an H200 over 128 MiB: 0.085 ms on an idle GPU and 0.33 ms
 * beside bf16 GEMMs filling it, where one atomic a thread and one load in
 * flight took 0.30 and 0.98 ms (the atomics on one word dominated).
 * tests/vmm/ptx.sh feeds the lines between the markers to ptxas where the
 * toolkit is installed.
 */
static const char sum_ptx[] =
	/* PTX BEGIN */
	".version 7.0\n"
	".target sm_60\n"
	".address_size 64\n"
	".visible .entry vmm_checksum(.param .u64 p_base, .param .u64 p_words, .param .u64 p_out)\n"
	"{\n"
	"	.reg .pred %p<4>;\n"
	"	.reg .b32 %r<12>;\n"
	"	.reg .b64 %rd<40>;\n"
	"	ld.param.u64 %rd1, [p_base];\n"
	"	ld.param.u64 %rd2, [p_words];\n"
	"	ld.param.u64 %rd3, [p_out];\n"
	"	cvta.to.global.u64 %rd1, %rd1;\n"
	"	cvta.to.global.u64 %rd3, %rd3;\n"
	"	mov.u32 %r1, %ctaid.x;\n"
	"	mov.u32 %r2, %ntid.x;\n"
	"	mov.u32 %r3, %tid.x;\n"
	"	mov.u32 %r4, %nctaid.x;\n"
	"	mul.wide.u32 %rd4, %r1, %r2;\n"
	"	cvt.u64.u32 %rd5, %r3;\n"
	"	add.u64 %rd4, %rd4, %rd5;\n"           /* i: this thread's first word */
	"	mul.wide.u32 %rd6, %r4, %r2;\n"        /* the stride: every thread of the grid */
	"	shl.b64 %rd30, %rd6, 3;\n"             /* ... in bytes */
	"	mov.u64 %rd7, 0;\n"                    /* the partial sum */
	"LOOP4:\n"                               /* four words while i + 3 strides < words */
	"	mad.lo.u64 %rd20, %rd6, 3, %rd4;\n"
	"	setp.ge.u64 %p3, %rd20, %rd2;\n"
	"	@%p3 bra LOOP1;\n"
	"	add.u64 %rd21, %rd4, %rd6;\n"
	"	add.u64 %rd22, %rd21, %rd6;\n"
	"	shl.b64 %rd8, %rd4, 3;\n"
	"	add.u64 %rd8, %rd1, %rd8;\n"
	"	add.u64 %rd23, %rd8, %rd30;\n"
	"	add.u64 %rd24, %rd23, %rd30;\n"
	"	add.u64 %rd25, %rd24, %rd30;\n"
	"	ld.global.u64 %rd9, [%rd8];\n"         /* w_i (the GPU is little-endian) */
	"	ld.global.u64 %rd26, [%rd23];\n"
	"	ld.global.u64 %rd27, [%rd24];\n"
	"	ld.global.u64 %rd28, [%rd25];\n"
	"	mul.lo.u64 %rd10, %rd4, 0x9E3779B97F4A7C15U;\n"
	"	xor.b64 %rd9, %rd9, %rd10;\n"
	"	mul.lo.u64 %rd10, %rd21, 0x9E3779B97F4A7C15U;\n"
	"	xor.b64 %rd26, %rd26, %rd10;\n"
	"	mul.lo.u64 %rd10, %rd22, 0x9E3779B97F4A7C15U;\n"
	"	xor.b64 %rd27, %rd27, %rd10;\n"
	"	mul.lo.u64 %rd10, %rd20, 0x9E3779B97F4A7C15U;\n"
	"	xor.b64 %rd28, %rd28, %rd10;\n"
	"	shr.u64 %rd10, %rd9, 30;\n"
	"	xor.b64 %rd9, %rd9, %rd10;\n"
	"	shr.u64 %rd11, %rd26, 30;\n"
	"	xor.b64 %rd26, %rd26, %rd11;\n"
	"	shr.u64 %rd12, %rd27, 30;\n"
	"	xor.b64 %rd27, %rd27, %rd12;\n"
	"	shr.u64 %rd13, %rd28, 30;\n"
	"	xor.b64 %rd28, %rd28, %rd13;\n"
	"	mul.lo.u64 %rd9, %rd9, 0xBF58476D1CE4E5B9U;\n"
	"	mul.lo.u64 %rd26, %rd26, 0xBF58476D1CE4E5B9U;\n"
	"	mul.lo.u64 %rd27, %rd27, 0xBF58476D1CE4E5B9U;\n"
	"	mul.lo.u64 %rd28, %rd28, 0xBF58476D1CE4E5B9U;\n"
	"	shr.u64 %rd10, %rd9, 27;\n"
	"	xor.b64 %rd9, %rd9, %rd10;\n"
	"	shr.u64 %rd11, %rd26, 27;\n"
	"	xor.b64 %rd26, %rd26, %rd11;\n"
	"	shr.u64 %rd12, %rd27, 27;\n"
	"	xor.b64 %rd27, %rd27, %rd12;\n"
	"	shr.u64 %rd13, %rd28, 27;\n"
	"	xor.b64 %rd28, %rd28, %rd13;\n"
	"	mul.lo.u64 %rd9, %rd9, 0x94D049BB133111EBU;\n"
	"	mul.lo.u64 %rd26, %rd26, 0x94D049BB133111EBU;\n"
	"	mul.lo.u64 %rd27, %rd27, 0x94D049BB133111EBU;\n"
	"	mul.lo.u64 %rd28, %rd28, 0x94D049BB133111EBU;\n"
	"	shr.u64 %rd10, %rd9, 31;\n"
	"	xor.b64 %rd9, %rd9, %rd10;\n"
	"	shr.u64 %rd11, %rd26, 31;\n"
	"	xor.b64 %rd26, %rd26, %rd11;\n"
	"	shr.u64 %rd12, %rd27, 31;\n"
	"	xor.b64 %rd27, %rd27, %rd12;\n"
	"	shr.u64 %rd13, %rd28, 31;\n"
	"	xor.b64 %rd28, %rd28, %rd13;\n"
	"	add.u64 %rd7, %rd7, %rd9;\n"
	"	add.u64 %rd7, %rd7, %rd26;\n"
	"	add.u64 %rd7, %rd7, %rd27;\n"
	"	add.u64 %rd7, %rd7, %rd28;\n"
	"	add.u64 %rd4, %rd20, %rd6;\n"
	"	bra.uni LOOP4;\n"
	"LOOP1:\n"                               /* then one at a time */
	"	setp.ge.u64 %p2, %rd4, %rd2;\n"
	"	@%p2 bra SUM;\n"
	"	shl.b64 %rd8, %rd4, 3;\n"
	"	add.u64 %rd8, %rd1, %rd8;\n"
	"	ld.global.u64 %rd9, [%rd8];\n"
	"	mul.lo.u64 %rd10, %rd4, 0x9E3779B97F4A7C15U;\n"
	"	xor.b64 %rd9, %rd9, %rd10;\n"
	"	shr.u64 %rd10, %rd9, 30;\n"
	"	xor.b64 %rd9, %rd9, %rd10;\n"
	"	mul.lo.u64 %rd9, %rd9, 0xBF58476D1CE4E5B9U;\n"
	"	shr.u64 %rd10, %rd9, 27;\n"
	"	xor.b64 %rd9, %rd9, %rd10;\n"
	"	mul.lo.u64 %rd9, %rd9, 0x94D049BB133111EBU;\n"
	"	shr.u64 %rd10, %rd9, 31;\n"
	"	xor.b64 %rd9, %rd9, %rd10;\n"
	"	add.u64 %rd7, %rd7, %rd9;\n"
	"	add.u64 %rd4, %rd4, %rd6;\n"
	"	bra.uni LOOP1;\n"
	"SUM:\n"                                 /* the warp's sum to its first lane */
	"	bar.warp.sync -1;\n"
	"	mov.b64 {%r5, %r6}, %rd7;\n"
	"	shfl.sync.down.b32 %r7, %r5, 16, 31, -1;\n"
	"	shfl.sync.down.b32 %r8, %r6, 16, 31, -1;\n"
	"	mov.b64 %rd31, {%r7, %r8};\n"
	"	add.u64 %rd7, %rd7, %rd31;\n"
	"	mov.b64 {%r5, %r6}, %rd7;\n"
	"	shfl.sync.down.b32 %r7, %r5, 8, 31, -1;\n"
	"	shfl.sync.down.b32 %r8, %r6, 8, 31, -1;\n"
	"	mov.b64 %rd31, {%r7, %r8};\n"
	"	add.u64 %rd7, %rd7, %rd31;\n"
	"	mov.b64 {%r5, %r6}, %rd7;\n"
	"	shfl.sync.down.b32 %r7, %r5, 4, 31, -1;\n"
	"	shfl.sync.down.b32 %r8, %r6, 4, 31, -1;\n"
	"	mov.b64 %rd31, {%r7, %r8};\n"
	"	add.u64 %rd7, %rd7, %rd31;\n"
	"	mov.b64 {%r5, %r6}, %rd7;\n"
	"	shfl.sync.down.b32 %r7, %r5, 2, 31, -1;\n"
	"	shfl.sync.down.b32 %r8, %r6, 2, 31, -1;\n"
	"	mov.b64 %rd31, {%r7, %r8};\n"
	"	add.u64 %rd7, %rd7, %rd31;\n"
	"	mov.b64 {%r5, %r6}, %rd7;\n"
	"	shfl.sync.down.b32 %r7, %r5, 1, 31, -1;\n"
	"	shfl.sync.down.b32 %r8, %r6, 1, 31, -1;\n"
	"	mov.b64 %rd31, {%r7, %r8};\n"
	"	add.u64 %rd7, %rd7, %rd31;\n"
	"	and.b32 %r9, %r3, 31;\n"
	"	setp.ne.u32 %p1, %r9, 0;\n"
	"	@%p1 bra DONE;\n"
	"	atom.global.add.u64 %rd11, [%rd3], %rd7;\n"
	"DONE:\n"
	"	ret;\n"
	"}\n"
	/* PTX END */;

/* Threads per block, and blocks per multiprocessor at most: with four loads
 * in flight a thread, 4 blocks keep the memory system as busy as 8 (0.085
 * against 0.091 ms over 128 MiB on an H200) and leave more room beside the
 * program's kernels (0.33 against 0.37 ms). */
#define SUM_BLOCK 256
#define SUM_BLOCKS_PER_SM 4
/* The kernel's first lane of each warp adds the warp's sum: whole warps only. */
_Static_assert(SUM_BLOCK % 32 == 0, "SUM_BLOCK must be a multiple of the warp size");

/* Give back what sum_load() made; sum_lock held or the instance closing. */
static void sum_unload(struct vmm_cuda *c)
{
	CUcontext saved;
	CUresult r;

	if (c->sum_state != 1 || cu_enter(c, &saved))
		return;
	/* Failures reported and swallowed: close cannot fail, and the context's
	 * release frees all of it anyway when libvmmx held the last reference. */
	r = c->api.cuStreamDestroy(c->sum_stream);
	if (r != CUDA_SUCCESS)
		cu_fail(c, r, "cuStreamDestroy(checksum stream %p)", (void *)c->sum_stream);
	r = c->api.cuMemFree(c->sum_word);
	if (r != CUDA_SUCCESS)
		cu_fail(c, r, "cuMemFree(checksum result %#llx)", (unsigned long long)c->sum_word);
	r = c->api.cuModuleUnload(c->sum_mod);
	if (r != CUDA_SUCCESS)
		cu_fail(c, r, "cuModuleUnload(checksum kernel)");
	cu_leave(c, saved);
	c->sum_state = 0;
}

/*
 * Load the kernel, its result word and its stream in our context; sum_lock
 * held.  A driver without the calls, or one that cannot compile the PTX,
 * is remembered as -VMMX_ENOTSUP (it will not change); other failures
 * (out of memory) are tried again at the next call.
 */
static int sum_load(struct vmm_cuda *c)
{
	const struct vmm_cuda_api *api;
	int err, sms = 0, least = 0, greatest = 0;
	CUcontext saved;
	CUresult r;

	if (c->sum_state)
		goto out;
	err = vmm_cuda_load(VMM_CUDA_LAUNCH, &api, c->sum_why, sizeof(c->sum_why));
	if (err) {
		c->sum_state = -VMMX_ENOTSUP;
		goto out;
	}
	/* c->api, copied whole from that table at open, has them: now known
	 * to be non-NULL. */
	(void)api;
	err = cu_enter(c, &saved);
	if (err)
		return err;
	r = c->api.cuModuleLoadData(&c->sum_mod, sum_ptx);
	if (r == CUDA_ERROR_OUT_OF_MEMORY) {
		cu_leave(c, saved);
		return cu_fail(c, r, "cuModuleLoadData(the checksum kernel)");
	}
	if (r != CUDA_SUCCESS) {
		cu_leave(c, saved);
		err = cu_fail_as(c, -VMMX_ENOTSUP, r,
				 "cuda: the checksum kernel does not compile (cuModuleLoadData of PTX 7.0, sm_60)");
		snprintf(c->sum_why, sizeof(c->sum_why),
			 "the driver cannot compile the checksum kernel (cuModuleLoadData: CUresult %d)",
			 (int)r);
		c->sum_state = err;
		return err;
	}
	r = c->api.cuModuleGetFunction(&c->sum_fn, c->sum_mod, "vmm_checksum");
	if (r != CUDA_SUCCESS) {
		err = cu_fail(c, r, "cuModuleGetFunction(vmm_checksum)");
		goto err_module;
	}
	r = c->api.cuMemAlloc(&c->sum_word, 8);
	if (r != CUDA_SUCCESS) {
		err = cu_fail(c, r, "cuMemAlloc(8 bytes: the checksum's result)");
		goto err_module;
	}
	/*
	 * The highest priority: a checksum is waited for by a move that the
	 * program's next launch may wait for in turn, and on a stream of
	 * default priority its blocks would queue behind the program's kernels
	 * filling the GPU (the GEMMs of a large batch).
	 */
	if (c->api.cuCtxGetStreamPriorityRange(&least, &greatest) != CUDA_SUCCESS)
		greatest = 0;
	r = c->api.cuStreamCreateWithPriority(&c->sum_stream, CU_STREAM_NON_BLOCKING, greatest);
	if (r != CUDA_SUCCESS) {
		err = cu_fail(c, r, "cuStreamCreateWithPriority(NON_BLOCKING, %d: the checksum's stream)",
			      greatest);
		goto err_word;
	}
	if (c->api.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->dev) !=
		    CUDA_SUCCESS ||
	    sms <= 0)
		sms = 1; /* a small grid still computes the whole sum, only slower */
	c->sum_grid = (unsigned int)sms * SUM_BLOCKS_PER_SM;
	cu_leave(c, saved);
	c->sum_state = 1;
	return 0;

err_word:
	(void)c->api.cuMemFree(c->sum_word);
err_module:
	(void)c->api.cuModuleUnload(c->sum_mod);
	cu_leave(c, saved);
	return err;
out:
	if (c->sum_state == 1)
		return 0;
	vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, c->sum_state, "cuda: no device checksum: %s",
		    c->sum_why);
	return c->sum_state;
}

/* Zero the result, run the kernel, bring the result back: one stream, one wait. */
static int cuda_checksum(struct vmm *v, const void *va, size_t size, uint64_t *sum_p)
{
	struct vmm_cuda *c = to_cuda(v);
	CUdeviceptr base = dptr(va);
	uint64_t words = size / 8;
	unsigned int grid;
	void *args[3];
	const char *what;
	CUcontext saved;
	CUresult r;
	int err;

	pthread_mutex_lock(&c->sum_lock);
	err = sum_load(c);
	if (err)
		goto out;
	err = cu_enter(c, &saved);
	if (err)
		goto out;
	grid = words / SUM_BLOCK + 1 < c->sum_grid ? (unsigned int)(words / SUM_BLOCK + 1)
						   : c->sum_grid;
	args[0] = &base;
	args[1] = &words;
	args[2] = &c->sum_word;
	what = "cuMemsetD32Async(checksum result)";
	r = c->api.cuMemsetD32Async(c->sum_word, 0, 2, c->sum_stream);
	if (r == CUDA_SUCCESS) {
		what = "cuLaunchKernel(vmm_checksum)";
		r = c->api.cuLaunchKernel(c->sum_fn, grid, 1, 1, SUM_BLOCK, 1, 1, 0, c->sum_stream,
					  args, NULL);
	}
	if (r == CUDA_SUCCESS) {
		what = "cuMemcpyAsync(checksum result)";
		r = c->api.cuMemcpyAsync(dptr(&c->sum_back), c->sum_word, sizeof(c->sum_back),
					 c->sum_stream);
	}
	if (r == CUDA_SUCCESS) {
		what = "cuStreamSynchronize(checksum stream)";
		r = c->api.cuStreamSynchronize(c->sum_stream);
	}
	cu_leave(c, saved);
	if (r != CUDA_SUCCESS) {
		err = cu_fail(c, r, "%s over [%p, +%zu)", what, va, size);
		goto out;
	}
	*sum_p = c->sum_back;
out:
	pthread_mutex_unlock(&c->sum_lock);
	return err;
}

/* ---- operations ---- */

static void cuda_close(struct vmm *v)
{
	struct vmm_cuda *c = to_cuda(v);
	CUresult r;

	/*
	 * A failed release is reported and otherwise swallowed: close cannot
	 * fail, and the driver reclaims the context at process exit anyway.
	 * Buffers are the caller's to tear down first (the dispatch layer's
	 * counters tell whether it did).
	 */
	/*
	 * Streams the caller left behind go before the context they belong to:
	 * the primary context survives our release when cudart holds it too,
	 * and would keep them forever.  Failures are reported and swallowed.
	 */
	for (size_t i = 0; i < c->nstreams; i++) {
		r = c->api.cuStreamDestroy(c->streams[i]);
		if (r != CUDA_SUCCESS)
			cu_fail(c, r, "cuStreamDestroy(%p) at close", (void *)c->streams[i]);
	}
	free(c->streams);
	pthread_mutex_destroy(&c->streams_lock);
	sum_unload(c);
	pthread_mutex_destroy(&c->sum_lock);
	/* Other devices' contexts that mem_info_other() kept. */
	for (int d = 0; d < CUDA_MAX_OTHER; d++) {
		CUdevice od;

		if (!c->other_ctx[d] || c->api.cuDeviceGet(&od, d) != CUDA_SUCCESS)
			continue;
		r = c->api.cuDevicePrimaryCtxRelease(od);
		if (r != CUDA_SUCCESS)
			cu_fail(c, r, "cuDevicePrimaryCtxRelease(device %d) at close", d);
	}
	r = c->api.cuDevicePrimaryCtxRelease(c->dev);
	if (r != CUDA_SUCCESS)
		cu_fail(c, r, "cuDevicePrimaryCtxRelease(device %d)", c->ordinal);
	free(c);
}

static int cuda_query(struct vmm *v, struct vmm_info *info)
{
	struct vmm_cuda *c = to_cuda(v);
	int count = 0, version = 0;
	CUresult r;

	/* None of these needs a context. */
	r = c->api.cuDeviceGetCount(&count);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuDeviceGetCount()");
	r = c->api.cuDriverGetVersion(&version);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuDriverGetVersion()");
	r = c->api.cuDeviceGetName(info->device_name, (int)sizeof(info->device_name), c->dev);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuDeviceGetName(device %d)", c->ordinal);
	info->backend = "cuda";
	info->device_count = count;
	info->driver_version = version;
	return 0;
}

static int cuda_device_name(struct vmm *v, int device, char *buf, size_t len)
{
	struct vmm_cuda *c = to_cuda(v);
	CUdevice dev;
	CUresult r;

	/* Neither call needs a context: any device of the machine is named. */
	r = c->api.cuDeviceGet(&dev, device);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuDeviceGet(%d)", device);
	r = c->api.cuDeviceGetName(buf, (int)(len < INT32_MAX ? len : INT32_MAX), dev);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuDeviceGetName(device %d)", device);
	return 0;
}

static int cuda_granularity(struct vmm *v, struct vmmx_loc loc, size_t *gran_p)
{
	struct vmm_cuda *c = to_cuda(v);
	CUmemAllocationProp prop;
	size_t gran = 0;
	char ls[32];
	int err;

	err = loc_prop(c, loc, &prop);
	if (err)
		return err;
	err = CU_CALL(c,
		      c->api.cuMemGetAllocationGranularity(&gran, &prop,
							   CU_MEM_ALLOC_GRANULARITY_MINIMUM),
		      "cuMemGetAllocationGranularity(%s, minimum)", loc_str(loc, ls, sizeof(ls)));
	if (err)
		return err;
	*gran_p = gran;
	return 0;
}

/*
 * Device memory of another ordinal.  The total needs no context
 * (cuDeviceTotalMem).  Free memory does: cuMemGetInfo answers for the
 * current context's device only, so that device's primary context is pushed
 * for the call.  Retaining a primary context that nothing else uses creates
 * it, and releasing it again destroys it: tens to hundreds of milliseconds
 * each time, and callers (placement, rebalancing) ask again and again.  So
 * the first free-memory query of a device retains its primary context and
 * the instance keeps it until close: a process that places memory on that
 * GPU pays one context creation there, not one per query.  libvmmx asks for
 * another device's free memory only once it uses that device (placement,
 * migration, vmmx_device_info()), so a context that never does so creates
 * nothing on other GPUs.  Still better than reporting free == total, which
 * would let a policy place chunks on a full GPU.
 */
static int other_ctx_get(struct vmm_cuda *c, int ordinal, CUdevice dev, CUcontext *ctx_p)
{
	CUcontext ctx = NULL, none = NULL;
	CUresult r;

	if (ordinal < CUDA_MAX_OTHER) {
		ctx = __atomic_load_n(&c->other_ctx[ordinal], __ATOMIC_ACQUIRE);
		if (ctx) {
			*ctx_p = ctx;
			return 0;
		}
	}
	r = c->api.cuDevicePrimaryCtxRetain(&ctx, dev);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuDevicePrimaryCtxRetain(device %d)", ordinal);
	if (ordinal >= CUDA_MAX_OTHER) {
		/* Not kept: the caller releases it after the query. */
		*ctx_p = ctx;
		return 1;
	}
	/* Two threads may both retain it: the loser gives its reference back. */
	if (!__atomic_compare_exchange_n(&c->other_ctx[ordinal], &none, ctx, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		(void)c->api.cuDevicePrimaryCtxRelease(dev);
		ctx = none;
	}
	*ctx_p = ctx;
	return 0;
}

static int mem_info_other(struct vmm_cuda *c, int ordinal, uint64_t *free_p, uint64_t *total_p)
{
	CUcontext ctx = NULL, popped;
	size_t fr = 0, tot = 0;
	CUdevice dev;
	CUresult r;
	int err = 0, temp;

	r = c->api.cuDeviceGet(&dev, ordinal);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuDeviceGet(%d)", ordinal);
	if (!free_p) {
		r = c->api.cuDeviceTotalMem(&tot, dev);
		if (r != CUDA_SUCCESS)
			return cu_fail(c, r, "cuDeviceTotalMem(device %d)", ordinal);
		if (total_p)
			*total_p = tot;
		return 0;
	}
	temp = other_ctx_get(c, ordinal, dev, &ctx);
	if (temp < 0)
		return temp;
	r = c->api.cuCtxPushCurrent(ctx);
	if (r != CUDA_SUCCESS) {
		err = cu_fail(c, r, "cuCtxPushCurrent(primary context of device %d)", ordinal);
		goto out;
	}
	r = c->api.cuMemGetInfo(&fr, &tot);
	if (r != CUDA_SUCCESS)
		err = cu_fail(c, r, "cuMemGetInfo(device %d)", ordinal);
	/* Pop failing would mean the stack changed under us: nothing to undo. */
	(void)c->api.cuCtxPopCurrent(&popped);
out:
	if (temp)
		(void)c->api.cuDevicePrimaryCtxRelease(dev);
	if (err)
		return err;
	*free_p = fr;
	if (total_p)
		*total_p = tot;
	return 0;
}

/*
 * Host memory that pinning can take now: MemAvailable, which counts the page
 * cache the kernel would reclaim.  sysinfo's freeram leaves it out and can be
 * a small fraction of RAM on a machine that has read a lot of files, which
 * would make placement refuse host chunks that would succeed.  @freeram is
 * the fallback on kernels without MemAvailable (before 3.14).
 */
static uint64_t read_mem_available(uint64_t freeram)
{
	unsigned long long kib;
	char line[128];
	FILE *f;

	f = fopen("/proc/meminfo", "re");
	if (!f)
		return freeram;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
			fclose(f);
			return (uint64_t)kib << 10;
		}
	}
	fclose(f);
	return freeram;
}

/*
 * Reading /proc/meminfo costs tens of microseconds, about as much as a whole
 * chunk's driver calls, and placement asks for every chunk.  The figure is
 * an estimate (pinning decides; host memory moves slowly), so one read
 * serves for HOST_AVAIL_TTL_NS.
 * Racing threads may both read: harmless.
 */
#define HOST_AVAIL_TTL_NS (1000 * 1000 * 1000ull)

static uint64_t host_available(struct vmm_cuda *c, uint64_t freeram)
{
	struct timespec ts;
	uint64_t now, then, v;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	then = __atomic_load_n(&c->host_avail_ns, __ATOMIC_ACQUIRE);
	if (then && now - then < HOST_AVAIL_TTL_NS)
		return __atomic_load_n(&c->host_avail, __ATOMIC_RELAXED);
	v = read_mem_available(freeram);
	__atomic_store_n(&c->host_avail, v, __ATOMIC_RELAXED);
	__atomic_store_n(&c->host_avail_ns, now, __ATOMIC_RELEASE);
	return v;
}

/*
 * Host NUMA nodes with memory, as the kernel lists them
 * (/sys/devices/system/node/has_memory, "0-1,3"), read once per process:
 * a bit per node id below 1024.  A kernel without NUMA has no such file:
 * node 0 only.  HOST_NUMA memory on a node outside the list cannot be
 * created, so mem_info refuses it, and a policy asked for such a node
 * (host:numa=N) is refused when it loads instead of failing every grow.
 */
static uint64_t numa_mask[1024 / 64];
static pthread_once_t numa_once = PTHREAD_ONCE_INIT;

static void numa_read(void)
{
	FILE *f = fopen("/sys/devices/system/node/has_memory", "re");
	long lo, hi;
	int c = ',';

	if (!f) {
		numa_mask[0] = 1;
		return;
	}
	while (c == ',' && fscanf(f, "%ld", &lo) == 1) {
		hi = lo;
		c = fgetc(f);
		if (c == '-') {
			if (fscanf(f, "%ld", &hi) != 1)
				break;
			c = fgetc(f);
		}
		for (long n = lo < 0 ? 0 : lo; n <= hi && n < 1024; n++)
			numa_mask[n / 64] |= 1ull << (n % 64);
	}
	fclose(f);
	/* An unreadable list is no reason to refuse the one node every machine has. */
	for (size_t i = 0; i < sizeof(numa_mask) / sizeof(numa_mask[0]); i++)
		if (numa_mask[i])
			return;
	numa_mask[0] = 1;
}

static bool numa_node_ok(int id)
{
	pthread_once(&numa_once, numa_read);
	return id >= 0 && id < 1024 && (numa_mask[id / 64] >> (id % 64) & 1);
}

static int cuda_mem_info(struct vmm *v, struct vmmx_loc loc, uint64_t *free_p, uint64_t *total_p)
{
	struct vmm_cuda *c = to_cuda(v);
	size_t fr = 0, tot = 0;
	struct sysinfo si;
	int err;

	switch (loc.kind) {
	case VMMX_LOC_DEVICE:
		if (loc.id != c->ordinal)
			return mem_info_other(c, loc.id, free_p, total_p);
		err = CU_CALL(c, c->api.cuMemGetInfo(&fr, &tot), "cuMemGetInfo(device %d)",
			      c->ordinal);
		if (err)
			return err;
		if (free_p)
			*free_p = fr;
		if (total_p)
			*total_p = tot;
		return 0;
	case VMMX_LOC_HOST_NUMA:
		if (!numa_node_ok(loc.id)) {
			vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_EINVAL,
				    "cuda: mem_info(host-numa %d): no such NUMA node with memory (/sys/devices/system/node/has_memory)",
				    loc.id);
			return -VMMX_EINVAL;
		}
		/* fall through */
	case VMMX_LOC_HOST:
		/*
		 * Pinned chunks come out of RAM, so RAM is what there is; the
		 * driver has no query for it.  HOST_NUMA reports the whole
		 * machine, not the node.
		 */
		if (sysinfo(&si)) {
			vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_EDRIVER, "cuda: sysinfo: %s",
				    strerror(errno));
			return -VMMX_EDRIVER;
		}
		if (total_p)
			*total_p = (uint64_t)si.totalram * si.mem_unit;
		if (free_p)
			*free_p = host_available(c, (uint64_t)si.freeram * si.mem_unit);
		return 0;
	default:
		break;
	}
	vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_EINVAL, "cuda: mem_info of location kind %d",
		    (int)loc.kind);
	return -VMMX_EINVAL;
}

static int cuda_reserve(struct vmm *v, size_t size, size_t align, void **va_p)
{
	struct vmm_cuda *c = to_cuda(v);
	CUdeviceptr va = 0;
	int err;

	err = CU_CALL(c, c->api.cuMemAddressReserve(&va, size, align, 0, 0),
		      "cuMemAddressReserve(%zu bytes, align %zu)", size, align);
	if (err)
		return err;
	*va_p = (void *)(uintptr_t)va;
	return 0;
}

static int cuda_unreserve(struct vmm *v, void *va, size_t size)
{
	struct vmm_cuda *c = to_cuda(v);
	return CU_CALL(c, c->api.cuMemAddressFree(dptr(va), size), "cuMemAddressFree(%p, %zu bytes)",
		       va, size);
}

static int cuda_create(struct vmm *v, struct vmmx_loc loc, size_t size, vmm_handle_t *h_p)
{
	struct vmm_cuda *c = to_cuda(v);
	CUmemGenericAllocationHandle h = 0;
	CUmemAllocationProp prop;
	char ls[32];
	int err;

	err = loc_prop(c, loc, &prop);
	if (err)
		return err;
	err = CU_CALL(c, c->api.cuMemCreate(&h, size, &prop, 0),
		      "cuMemCreate(%s, %zu bytes)", loc_str(loc, ls, sizeof(ls)), size);
	if (err)
		return err;
	*h_p = h;
	return 0;
}

static int cuda_release(struct vmm *v, vmm_handle_t h)
{
	struct vmm_cuda *c = to_cuda(v);
	return CU_CALL(c, c->api.cuMemRelease(h), "cuMemRelease(handle %#llx)",
		       (unsigned long long)h);
}

static int cuda_map(struct vmm *v, void *va, size_t size, vmm_handle_t h)
{
	struct vmm_cuda *c = to_cuda(v);

	/* offset 0: the driver maps a handle only whole. */
	return CU_CALL(c, c->api.cuMemMap(dptr(va), size, 0, h, 0),
		       "cuMemMap(%p, %zu bytes, handle %#llx)", va, size, (unsigned long long)h);
}

static int cuda_unmap(struct vmm *v, void *va, size_t size)
{
	struct vmm_cuda *c = to_cuda(v);
	return CU_CALL(c, c->api.cuMemUnmap(dptr(va), size), "cuMemUnmap(%p, %zu bytes)", va, size);
}

static const char *access_str(enum vmm_access_flags f)
{
	switch (f) {
	case VMM_ACCESS_NONE:
		return "none";
	case VMM_ACCESS_READ:
		return "read";
	case VMM_ACCESS_RW:
		return "rw";
	}
	return "?";
}

/* Grants in the driver's terms; -VMMX_EINVAL for a grantee or right it has no word for. */
static int access_desc(struct vmm_cuda *c, const struct vmm_access *a, CUmemAccessDesc *d)
{
	memset(d, 0, sizeof(*d));
	switch (a->who.kind) {
	case VMMX_LOC_DEVICE:
		d->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		d->location.id = a->who.id;
		break;
	case VMMX_LOC_HOST:
		/* The CPU: makes HOST and HOST_NUMA chunks loadable at the same VA. */
		d->location.type = CU_MEM_LOCATION_TYPE_HOST;
		d->location.id = 0;
		break;
	case VMMX_LOC_HOST_NUMA:
		/* Accepted by the driver only for HOST_NUMA allocations. */
		d->location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
		d->location.id = a->who.id;
		break;
	default:
		goto bad;
	}
	switch (a->flags) {
	case VMM_ACCESS_NONE:
		d->flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
		return 0;
	case VMM_ACCESS_READ:
		d->flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
		return 0;
	case VMM_ACCESS_RW:
		d->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		return 0;
	}
bad:
	vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_EINVAL,
		    "cuda: set_access: invalid grant (location kind %d, flags %d)",
		    (int)a->who.kind, (int)a->flags);
	return -VMMX_EINVAL;
}

/* Grants in one cuMemSetAccess call: the call costs per range, not per grantee. */
#define ACCESS_ON_STACK 8

static int cuda_set_access(struct vmm *v, void *va, size_t size, const struct vmm_access *acc,
			   int n)
{
	struct vmm_cuda *c = to_cuda(v);
	CUmemAccessDesc stack[ACCESS_ON_STACK], *d = stack;
	char grants[160] = "", ls[32];
	size_t used = 0;
	CUresult r = CUDA_SUCCESS;
	int err;

	if (n <= 0 || !acc) {
		vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_EINVAL,
			    "cuda: set_access with %d grants", n);
		return -VMMX_EINVAL;
	}
	if (n > ACCESS_ON_STACK) {
		d = calloc((size_t)n, sizeof(*d));
		if (!d) {
			vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_ENOMEM,
				    "cuda: set_access: no memory for %d grants", n);
			return -VMMX_ENOMEM;
		}
	}
	for (int i = 0; i < n; i++) {
		err = access_desc(c, &acc[i], &d[i]);
		if (err)
			goto out;
	}
	err = CU_RUN(c, r, c->api.cuMemSetAccess(dptr(va), size, d, (size_t)n));
	if (!err && r != CUDA_SUCCESS) {
		for (int i = 0; i < n && used < sizeof(grants); i++) {
			int k = snprintf(grants + used, sizeof(grants) - used, "%s%s %s",
					 i ? ", " : "", loc_str(acc[i].who, ls, sizeof(ls)),
					 access_str(acc[i].flags));
			if (k < 0)
				break;
			used += (size_t)k;
		}
		err = cu_fail(c, r, "cuMemSetAccess(%p, %zu bytes, %s)", va, size, grants);
	}
out:
	if (d != stack)
		free(d);
	return err;
}

/*
 * cuMemcpy and cuMemsetD8 go to the default stream, ordered after earlier
 * work of the blocking streams.  Neither is guaranteed complete on return:
 * a copy between two device-type ranges (a VMM host chunk counts as one)
 * does no host synchronisation, a pageable-to-device copy returns once the
 * data is staged, and a memset of device memory is asynchronous.  libvmmx
 * promises completion on return (the CPU may read a host chunk next), so
 * both wait for the default stream: that covers the operation and whatever
 * it was ordered after, and no more (unlike cuCtxSynchronize, it does not
 * wait for the caller's non-blocking streams).
 */
static int cuda_copy(struct vmm *v, void *dst, const void *src, size_t n)
{
	struct vmm_cuda *c = to_cuda(v);
	CUcontext saved;
	CUresult r;
	int err;

	if (!n)
		return 0;
	err = cu_enter(c, &saved);
	if (err)
		return err;
	r = c->api.cuMemcpy(dptr(dst), dptr(src), n);
	if (r != CUDA_SUCCESS) {
		cu_leave(c, saved);
		return cu_fail(c, r, "cuMemcpy(%p <- %p, %zu bytes)", dst, src, n);
	}
	r = c->api.cuStreamSynchronize(NULL);
	cu_leave(c, saved);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuStreamSynchronize(NULL) after cuMemcpy(%p <- %p, %zu bytes)",
			       dst, src, n);
	return 0;
}

static int cuda_memset(struct vmm *v, void *dst, int value, size_t n)
{
	struct vmm_cuda *c = to_cuda(v);
	CUcontext saved;
	CUresult r;
	int err;

	if (!n)
		return 0;
	err = cu_enter(c, &saved);
	if (err)
		return err;
	r = c->api.cuMemsetD8(dptr(dst), (unsigned char)value, n);
	if (r != CUDA_SUCCESS) {
		cu_leave(c, saved);
		return cu_fail(c, r, "cuMemsetD8(%p, %#x, %zu bytes)", dst,
			       (unsigned char)value, n);
	}
	r = c->api.cuStreamSynchronize(NULL);
	cu_leave(c, saved);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuStreamSynchronize(NULL) after cuMemsetD8(%p, %zu bytes)",
			       dst, n);
	return 0;
}

static int cuda_sync(struct vmm *v)
{
	struct vmm_cuda *c = to_cuda(v);
	return CU_CALL(c, c->api.cuCtxSynchronize(), "cuCtxSynchronize(device %d)", c->ordinal);
}

/* ---- attributes and peers ---- */

/* The driver's attribute behind each of ours; HOST_VMM is special-cased. */
static const CUdevice_attribute attr_map[VMM_ATTR_COUNT] = {
	[VMM_ATTR_VMM] = CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
	[VMM_ATTR_HOST_VMM] = CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
	[VMM_ATTR_HOST_NUMA_VMM] =
		CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
	[VMM_ATTR_HOST_NUMA_ID] = CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID,
	[VMM_ATTR_HOST_REGISTER] = CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED,
	[VMM_ATTR_HOST_POINTER_FOR_REGISTERED] =
		CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
	[VMM_ATTR_PAGEABLE_ACCESS] = CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
	[VMM_ATTR_PAGEABLE_HOST_PAGE_TABLES] =
		CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
	[VMM_ATTR_POSIX_FD] = CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
	[VMM_ATTR_CONCURRENT_MANAGED] = CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
	[VMM_ATTR_UNIFIED_ADDRESSING] = CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
	[VMM_ATTR_COMPUTE_MAJOR] = CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
	[VMM_ATTR_COMPUTE_MINOR] = CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
	[VMM_ATTR_SM_COUNT] = CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
	[VMM_ATTR_GPU_DIRECT_RDMA_VMM] =
		CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
};

/* The CUdevice of any ordinal; -VMMX_ENODEV (reported) for one that does not exist. */
static int cu_device(struct vmm_cuda *c, int ordinal, const char *what, CUdevice *dev_p)
{
	CUresult r;

	if (ordinal < 0 || ordinal >= c->device_count) {
		vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_ENODEV,
			    "cuda: %s: no device %d (%d visible)", what, ordinal, c->device_count);
		return -VMMX_ENODEV;
	}
	r = c->api.cuDeviceGet(dev_p, ordinal);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuDeviceGet(%d) for %s", ordinal, what);
	return 0;
}

/* Neither query needs a context. */
static int cuda_attr(struct vmm *v, int device, enum vmm_attr a, int *val)
{
	struct vmm_cuda *c = to_cuda(v);
	CUdevice_attribute ca;
	CUdevice dev;
	CUresult r;
	int x = 0, err;

	err = cu_device(c, device, vmm_attr_name(a) ? vmm_attr_name(a) : "attr", &dev);
	if (err)
		return err;
	if ((unsigned int)a >= VMM_ATTR_COUNT) {
		vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_EINVAL, "cuda: unknown attribute %d",
			    (int)a);
		return -VMMX_EINVAL;
	}
	ca = attr_map[a];
#if CUDA_VERSION >= 13000
	/*
	 * HOST location support has its own attribute since the 13.0 header
	 * (it may be earlier; 13.0 is where we checked).  A driver older than
	 * the header answers INVALID_VALUE for it: fall back to HOST_NUMA's,
	 * which the driver ties to the same machinery.
	 */
	if (a == VMM_ATTR_HOST_VMM) {
		r = c->api.cuDeviceGetAttribute(
			&x, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
		if (r == CUDA_SUCCESS) {
			*val = x;
			return 0;
		}
		if (r != CUDA_ERROR_INVALID_VALUE)
			return cu_fail(c, r,
				       "cuDeviceGetAttribute(HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "
				       "device %d)", device);
	}
#endif
	r = c->api.cuDeviceGetAttribute(&x, ca, dev);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuDeviceGetAttribute(%s = %d, device %d)", vmm_attr_name(a),
			       (int)ca, device);
	*val = x;
	return 0;
}

static int cuda_can_access_peer(struct vmm *v, int dev, int peer, int *val)
{
	struct vmm_cuda *c = to_cuda(v);
	CUdevice d, p;
	CUresult r;
	int x = 0, err;

	err = cu_device(c, dev, "can_access_peer", &d);
	if (!err)
		err = cu_device(c, peer, "can_access_peer", &p);
	if (err)
		return err;
	/* a device is not its own peer: say 0 without asking, as the sim does */
	if (dev == peer) {
		*val = 0;
		return 0;
	}
	r = c->api.cuDeviceCanAccessPeer(&x, d, p);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuDeviceCanAccessPeer(device %d, peer %d)", dev, peer);
	*val = x;
	return 0;
}

/* ---- host registration ---- */

/*
 * DEVICEMAP gives the range a device address (the same one on machines with
 * VMM_ATTR_HOST_POINTER_FOR_REGISTERED); PORTABLE makes the pinning count in
 * every context, not only our primary one, so cudart code of the caller's
 * sees it as pinned too.
 */
static int cuda_host_register(struct vmm *v, void *ptr, size_t len, void **dptr_p)
{
	struct vmm_cuda *c = to_cuda(v);
	CUdeviceptr dp = 0;
	CUcontext saved;
	CUresult r;
	int err;

	if (!dptr_p) {
		vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_EINVAL,
			    "cuda: host_register(%p, %zu): NULL output", ptr, len);
		return -VMMX_EINVAL;
	}
	err = cu_enter(c, &saved);
	if (err)
		return err;
	r = c->api.cuMemHostRegister(ptr, len,
				     CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
	if (r != CUDA_SUCCESS) {
		cu_leave(c, saved);
		return cu_fail(c, r, "cuMemHostRegister(%p, %zu bytes, DEVICEMAP | PORTABLE)", ptr,
			       len);
	}
	r = c->api.cuMemHostGetDevicePointer(&dp, ptr, 0);
	if (r != CUDA_SUCCESS) {
		/*
		 * Undo: a registration the caller has no address for is one it
		 * would never unregister.  The undo's own failure is swallowed:
		 * the first error is the one to report.
		 */
		(void)c->api.cuMemHostUnregister(ptr);
		cu_leave(c, saved);
		return cu_fail(c, r, "cuMemHostGetDevicePointer(%p) after cuMemHostRegister", ptr);
	}
	cu_leave(c, saved);
	*dptr_p = (void *)(uintptr_t)dp;
	return 0;
}

static int cuda_host_unregister(struct vmm *v, void *ptr)
{
	struct vmm_cuda *c = to_cuda(v);
	return CU_CALL(c, c->api.cuMemHostUnregister(ptr), "cuMemHostUnregister(%p)", ptr);
}

/* ---- streams ---- */

static inline CUstream cu_stream(vmm_stream_t s)
{
	return (CUstream)(uintptr_t)s;
}

/* Index of @st in the stream list, or SIZE_MAX; streams_lock is held. */
static size_t stream_index(const struct vmm_cuda *c, CUstream st)
{
	for (size_t i = 0; i < c->nstreams; i++)
		if (c->streams[i] == st)
			return i;
	return SIZE_MAX;
}

/* Whether @s is 0 (when @zero_ok) or a stream of ours; -VMMX_EINVAL reported if not. */
static int stream_check(struct vmm_cuda *c, vmm_stream_t s, bool zero_ok, const char *what)
{
	size_t i;

	if (!s && zero_ok)
		return 0;
	pthread_mutex_lock(&c->streams_lock);
	i = s ? stream_index(c, cu_stream(s)) : SIZE_MAX;
	pthread_mutex_unlock(&c->streams_lock);
	if (i != SIZE_MAX)
		return 0;
	vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_EINVAL, "cuda: %s: unknown stream %#llx",
		    what, (unsigned long long)s);
	return -VMMX_EINVAL;
}

static int cuda_stream_create(struct vmm *v, vmm_stream_t *s_p)
{
	struct vmm_cuda *c = to_cuda(v);
	CUstream st = NULL, *n;
	int err;

	/* NON_BLOCKING: no implicit wait on the legacy default stream, whoever uses it */
	err = CU_CALL(c, c->api.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING),
		      "cuStreamCreate(NON_BLOCKING)");
	if (err)
		return err;

	pthread_mutex_lock(&c->streams_lock);
	if (c->nstreams == c->streams_cap) {
		size_t cap = c->streams_cap ? c->streams_cap * 2 : 8;

		n = realloc(c->streams, cap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&c->streams_lock);
			/* a stream we could not record is one nobody could destroy */
			(void)c->api.cuStreamDestroy(st);
			vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_ENOMEM,
				    "cuda: stream_create: no memory for the stream list");
			return -VMMX_ENOMEM;
		}
		c->streams = n;
		c->streams_cap = cap;
	}
	c->streams[c->nstreams++] = st;
	pthread_mutex_unlock(&c->streams_lock);
	*s_p = (vmm_stream_t)(uintptr_t)st;
	return 0;
}

/*
 * cuStreamDestroy returns at once; work queued on the stream still runs to
 * completion and the driver frees the stream after it.
 */
static int cuda_stream_destroy(struct vmm *v, vmm_stream_t s)
{
	struct vmm_cuda *c = to_cuda(v);
	CUresult r;
	size_t i;

	pthread_mutex_lock(&c->streams_lock);
	i = s ? stream_index(c, cu_stream(s)) : SIZE_MAX;
	if (i == SIZE_MAX) {
		pthread_mutex_unlock(&c->streams_lock);
		vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_EINVAL,
			    "cuda: stream_destroy: unknown stream %#llx", (unsigned long long)s);
		return -VMMX_EINVAL;
	}
	/* No context needed: a stream knows its own.  Held lock: see the top comment. */
	r = c->api.cuStreamDestroy(cu_stream(s));
	if (r == CUDA_SUCCESS)
		c->streams[i] = c->streams[--c->nstreams];
	pthread_mutex_unlock(&c->streams_lock);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuStreamDestroy(%p)", (void *)cu_stream(s));
	return 0;
}

/*
 * Returns once the copy is queued.  Destroying the stream while this call
 * runs is the caller's race.  Copies from pageable memory are staged by the
 * driver and may return only when the source has been read.
 */
static int cuda_copy_async(struct vmm *v, void *dst, const void *src, size_t n, vmm_stream_t s)
{
	struct vmm_cuda *c = to_cuda(v);
	int err;

	err = stream_check(c, s, true, "copy_async");
	if (err || !n)
		return err;
	return CU_CALL(c, c->api.cuMemcpyAsync(dptr(dst), dptr(src), n, cu_stream(s)),
		       "cuMemcpyAsync(%p <- %p, %zu bytes, stream %p)",
		       dst, src, n, (void *)cu_stream(s));
}

static int cuda_stream_sync(struct vmm *v, vmm_stream_t s)
{
	struct vmm_cuda *c = to_cuda(v);
	int err;

	err = stream_check(c, s, true, "stream_sync");
	if (err)
		return err;
	/* stream 0 means the current context's default stream: ours must be current */
	return CU_CALL(c, c->api.cuStreamSynchronize(cu_stream(s)),
		       "cuStreamSynchronize(%p)", (void *)cu_stream(s));
}

/* ---- what an address is ---- */

/*
 * cuPointerGetAttributes answers for any address: one it does not know gets
 * the attributes' null values, not an error.  The extent given is the
 * mapping's (MAPPING_BASE_ADDR/SIZE: one handle, so one kind of memory)
 * and nothing else: RANGE_* and cuMemGetAddressRange answer a whole VMM
 * reservation, which may mix device and host chunks, and one copy across
 * those crashed the driver.  Without a mapping extent len is 0 and the
 * caller cuts the range at granularity boundaries, which no chunk crosses.
 * VMM address space the driver knows with nothing mapped is RESERVED.
 */
static int cuda_ptr_info(struct vmm *v, const void *p, struct vmm_ptr_info *info)
{
	struct vmm_cuda *c = to_cuda(v);
	CUpointer_attribute attrs[] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_IS_MANAGED,        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
		CU_POINTER_ATTRIBUTE_RANGE_SIZE,        CU_POINTER_ATTRIBUTE_MAPPED,
		CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, CU_POINTER_ATTRIBUTE_MAPPING_SIZE,
	};
	unsigned int type = 0, managed = 0, mapped = 0; /* MAPPED may be written as a bool */
	bool have_mapped = true;
	int ordinal = -1;
	CUdeviceptr start = 0, mbase = 0;
	size_t size = 0, msize = 0;
	void *data[] = { &type, &ordinal, &managed, &start, &size, &mapped, &mbase, &msize };
	struct vmm_ptr_info out = { .kind = VMM_MEM_PAGEABLE, .device = -1 };
	uintptr_t a = (uintptr_t)p;
	CUresult r = CUDA_SUCCESS;
	int err;

	err = CU_RUN(c, r, c->api.cuPointerGetAttributes(8, attrs, data, dptr(p)));
	/* A driver without the mapping attributes (before 11.7): the first five. */
	if (!err && r == CUDA_ERROR_INVALID_VALUE) {
		have_mapped = false;
		err = CU_RUN(c, r, c->api.cuPointerGetAttributes(5, attrs, data, dptr(p)));
	}
	if (err)
		return err;
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuPointerGetAttributes(%p)", p);
	if (managed)
		out.kind = VMM_MEM_MANAGED;
	else if (have_mapped && start && !(mapped & 0xff) && type != CU_MEMORYTYPE_HOST)
		out.kind = VMM_MEM_RESERVED;
	else if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_ARRAY)
		out.kind = VMM_MEM_DEVICE;
	else if (type)
		out.kind = VMM_MEM_REGISTERED;
	if (out.kind == VMM_MEM_DEVICE)
		out.device = ordinal;
	if (out.kind != VMM_MEM_PAGEABLE && out.kind != VMM_MEM_RESERVED && mbase && msize &&
	    a >= mbase && a - mbase < msize)
		out.len = mbase + msize - a;
	*info = out;
	return 0;
}

/*
 * In a forked child the driver's state is the parent's: free our own
 * memory and call nothing of the driver's.
 */
static void cuda_abandon(struct vmm *v)
{
	struct vmm_cuda *c = to_cuda(v);

	free(c->streams);
	free(c); /* the driver library stays loaded (vmm/cudaload.c never closes it) */
}

/* ---- events ---- */

static inline CUevent cu_event(vmm_event_t e)
{
	return (CUevent)(uintptr_t)e;
}

static int cuda_event_create(struct vmm *v, vmm_event_t *e_p)
{
	struct vmm_cuda *c = to_cuda(v);
	CUevent ev = NULL;
	int err;

	/* no timing: recording and querying an event without it is cheaper */
	err = CU_CALL(c, c->api.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING),
		      "cuEventCreate(DISABLE_TIMING)");
	if (!err)
		*e_p = (vmm_event_t)(uintptr_t)ev;
	return err;
}

static int cuda_event_destroy(struct vmm *v, vmm_event_t e)
{
	struct vmm_cuda *c = to_cuda(v);

	return CU_CALL(c, c->api.cuEventDestroy(cu_event(e)), "cuEventDestroy(%p)",
		       (void *)cu_event(e));
}

/* Any stream of the context: see the top comment. */
static int cuda_event_record(struct vmm *v, vmm_event_t e, vmm_stream_t s)
{
	struct vmm_cuda *c = to_cuda(v);

	return CU_CALL(c, c->api.cuEventRecord(cu_event(e), cu_stream(s)),
		       "cuEventRecord(%p, stream %p)", (void *)cu_event(e), (void *)cu_stream(s));
}

static int cuda_event_query(struct vmm *v, vmm_event_t e)
{
	struct vmm_cuda *c = to_cuda(v);
	CUresult r = CUDA_SUCCESS;
	int err;

	err = CU_RUN(c, r, c->api.cuEventQuery(cu_event(e)));
	if (err)
		return err;
	/* NOT_READY is an answer, not a failure: nothing is reported */
	if (r == CUDA_ERROR_NOT_READY)
		return -VMMX_EBUSY;
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuEventQuery(%p)", (void *)cu_event(e));
	return 0;
}

static int cuda_event_sync(struct vmm *v, vmm_event_t e)
{
	struct vmm_cuda *c = to_cuda(v);

	return CU_CALL(c, c->api.cuEventSynchronize(cu_event(e)), "cuEventSynchronize(%p)",
		       (void *)cu_event(e));
}

static const struct vmm_ops cuda_ops = {
	.name = "cuda",
	.close = cuda_close,
	.query = cuda_query,
	.granularity = cuda_granularity,
	.mem_info = cuda_mem_info,
	.reserve = cuda_reserve,
	.unreserve = cuda_unreserve,
	.create = cuda_create,
	.release = cuda_release,
	.map = cuda_map,
	.unmap = cuda_unmap,
	.set_access = cuda_set_access,
	.copy = cuda_copy,
	.memset = cuda_memset,
	.sync = cuda_sync,
	.attr = cuda_attr,
	.can_access_peer = cuda_can_access_peer,
	.host_register = cuda_host_register,
	.host_unregister = cuda_host_unregister,
	.stream_create = cuda_stream_create,
	.stream_destroy = cuda_stream_destroy,
	.copy_async = cuda_copy_async,
	.stream_sync = cuda_stream_sync,
	.ptr_info = cuda_ptr_info,
	.abandon = cuda_abandon,
	.event_create = cuda_event_create,
	.event_destroy = cuda_event_destroy,
	.event_record = cuda_event_record,
	.event_query = cuda_event_query,
	.event_sync = cuda_event_sync,
	.device_name = cuda_device_name,
	.checksum = cuda_checksum,
};

/* ---- open ---- */

static int load_driver(struct vmm_cuda *c)
{
	const struct vmm_cuda_api *api;
	char why[320];
	int err = vmm_cuda_load(VMM_CUDA_CORE, &api, why, sizeof(why));

	if (err) {
		vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, err, "cuda: %s", why);
		return err;
	}
	c->api = *api;
	return 0;
}

#define VMM_ATTR CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED

static int init_device(struct vmm_cuda *c, int ordinal)
{
	const char *vis;
	CUresult r;
	int vmm = 0;

	r = c->api.cuInit(0);
	switch (r) {
	case CUDA_SUCCESS:
		break;
	case CUDA_ERROR_NO_DEVICE:
		return cu_fail_as(c, -VMMX_ENODEV, r, "cuda: no CUDA device: cuInit(0)");
	case CUDA_ERROR_STUB_LIBRARY:
		/* The toolkit's link stub was found instead of the driver's library. */
		return cu_fail_as(c, -VMMX_ENODRIVER, r,
				  "cuda: %s is the CUDA toolkit's stub, not the driver: cuInit(0)",
				  CUDA_LIB);
	case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
		/* The user-space library does not match the loaded kernel module. */
		return cu_fail_as(c, -VMMX_ENODRIVER, r,
				  "cuda: %s does not match the kernel driver: cuInit(0)", CUDA_LIB);
	default:
		return cu_fail(c, r, "cuInit(0)");
	}

	r = c->api.cuDeviceGetCount(&c->device_count);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuDeviceGetCount()");
	if (ordinal < 0 || ordinal >= c->device_count) {
		vis = getenv("CUDA_VISIBLE_DEVICES");
		vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_ENODEV,
			    "cuda: no device %d: %d CUDA device%s visible%s%s%s", ordinal,
			    c->device_count, c->device_count == 1 ? "" : "s",
			    vis ? " (CUDA_VISIBLE_DEVICES=" : "", vis ? vis : "", vis ? ")" : "");
		return -VMMX_ENODEV;
	}
	r = c->api.cuDeviceGet(&c->dev, ordinal);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuDeviceGet(%d)", ordinal);
	r = c->api.cuDeviceGetAttribute(&vmm, VMM_ATTR, c->dev);
	if (r != CUDA_SUCCESS)
		return cu_fail(c, r, "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, %d)",
			       ordinal);
	if (!vmm) {
		vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_ENOTSUP,
			    "cuda: device %d lacks virtual memory management (cuMemCreate, cuMemMap)",
			    ordinal);
		return -VMMX_ENOTSUP;
	}
	return 0;
}

int vmm_cuda_open(const struct vmm_params *p, struct vmm **v_p)
{
	struct vmm_cuda *c;
	CUcontext cur = NULL;
	char name[96] = "";
	int version = 0;
	CUresult r;
	int err;

	c = calloc(1, sizeof(*c));
	if (!c) {
		if (p->report)
			p->report(p->report_arg, VMMX_LOG_DEBUG, -VMMX_ENOMEM,
				  "cuda: no memory for the backend instance");
		return -VMMX_ENOMEM;
	}
	c->vmm.ops = &cuda_ops;
	c->vmm.report = p->report;
	c->vmm.report_arg = p->report_arg;
	c->ordinal = p->device;
	if (pthread_mutex_init(&c->streams_lock, NULL)) {
		vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_ENOMEM,
			    "cuda: pthread_mutex_init failed");
		free(c);
		return -VMMX_ENOMEM;
	}
	if (pthread_mutex_init(&c->sum_lock, NULL)) {
		vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, -VMMX_ENOMEM,
			    "cuda: pthread_mutex_init failed");
		err = -VMMX_ENOMEM;
		goto err_streams_lock;
	}

	err = load_driver(c);
	if (err)
		goto err_mutex;
	err = init_device(c, p->device);
	if (err)
		goto err_mutex;

	r = c->api.cuDevicePrimaryCtxRetain(&c->ctx, c->dev);
	if (r != CUDA_SUCCESS) {
		err = cu_fail(c, r, "cuDevicePrimaryCtxRetain(device %d)", p->device);
		goto err_mutex;
	}
	/*
	 * Make it current on the opening thread unless the caller has a
	 * context of its own there (see the top comment); other threads get
	 * it at their first call.
	 */
	r = c->api.cuCtxGetCurrent(&cur);
	if (r == CUDA_SUCCESS && !cur)
		r = c->api.cuCtxSetCurrent(c->ctx);
	if (r != CUDA_SUCCESS) {
		err = cu_fail(c, r, "making the primary context of device %d current", p->device);
		goto err_release;
	}

	/* Facts for the debug log; failures here are not worth failing open. */
	(void)c->api.cuDriverGetVersion(&version);
	(void)c->api.cuDeviceGetName(name, (int)sizeof(name), c->dev);
	vmm_reportf(&c->vmm, VMMX_LOG_DEBUG, 0, "cuda: device %d of %d (%s), driver %d.%d",
		    p->device, c->device_count, name, version / 1000, version % 1000 / 10);

	*v_p = &c->vmm;
	return 0;

err_release:
	(void)c->api.cuDevicePrimaryCtxRelease(c->dev);
err_mutex:
	pthread_mutex_destroy(&c->sum_lock);
err_streams_lock:
	pthread_mutex_destroy(&c->streams_lock);
	free(c);
	return err;
}

#endif /* VMMX_HAVE_CUDA */
