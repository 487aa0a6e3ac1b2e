// SPDX-License-Identifier: MIT
/*
 * copy.c - the program's copies under --placement launch: the runtime's
 * cudaMemcpy, cudaMemcpyAsync, cudaMemcpyPeer(Async) and cudaMemcpy2D(Async),
 * the driver's cuMemcpy, cuMemcpyAsync, cuMemcpy{HtoD,DtoH,DtoD}(Async),
 * cuMemcpyPeer(Async) and cuMemcpy2D(Unaligned,Async), with their _ptds
 * and _ptsz forms; and, through hooks.c, the memsets.
 *
 * A copy reads or writes memory that no kernel launch names, and it runs
 * in its stream's order, maybe long after the call returned.  Placement
 * must know of it as of a launch, or a segment sent back while a copy
 * queued behind a kernel still uses it is unmapped under the copy for a
 * moment (the GPU faults: CUDA_ERROR_ILLEGAL_ADDRESS, and the context is
 * lost) or has the copy's write land in device memory already copied out
 * (the write is lost).  Measured on the GPU: a Hugging Face Llama's prefill
 * makes 97 memsets a forward, its decode 144 copies and 32 memsets a token
 * (PyTorch's profiler), and --placement launch failed that way before this.
 *
 * So the segments a copy or memset uses are held while the call is passed
 * on (the mover is waited for first; a held segment is never a victim nor
 * moved), and the event recorded after the call on its stream becomes
 * their last use (place.c: vmmxp_place_use()), which a later move waits
 * for.  A copy reads or writes each of its two ranges in one allocation:
 * the segment under each end of each range is named (a range over several
 * allocations holds those at its ends only).
 *
 * Cost: without --placement launch, nothing: the hooks are not handed out
 * by dlsym() or cuGetProcAddress(), and when bound by name they pass the
 * call on at once; with it, until memory spills, the lookups; then a lock
 * and an event a copy.
 *
 * Not watched (the copy is passed on as it is, and a segment it uses may
 * move under it: such a program needs VMMX_RUN_PLACE_WAIT=device): 3D
 * copies, batched copies (cuMemcpyBatchAsync), copies to and from CUDA
 * arrays, and copies a CUDA graph holds (memcpy and memset nodes, counted
 * by graph.c).
 *
 * Recursion: the runtime's copy calls the driver's, which may be our hook
 * too (the runtime finds the driver through cuGetProcAddress): a thread
 * inside a watched copy passes nested copies on (in_copy).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "preload/preload.h"

static VMMXP_TLS int in_copy;
/* Copies with host memory at both ends, the CPU granted both first (the report). */
static uint64_t both_host;

uint64_t vmmxp_copy_both_host(void)
{
	return __atomic_load_n(&both_host, __ATOMIC_RELAXED);
}

int vmmxp_fn_is_copy(int fn)
{
	return fn >= VMMXP_FN_cuMemcpy && fn <= VMMXP_FN_cudaMemcpy2DAsync_ptsz;
}

/* The chunks under the two ends of [@p, @p + @len), if libvmmx maps them, added to @nm. */
static void name_range(struct vmmxp_named *nm, uintptr_t p, size_t len)
{
	if (!len)
		return;
	vmmxp_name_word(nm, p);
	if (len > 1)
		vmmxp_name_word(nm, p + len - 1);
}

/*
 * The CPU for [@p, + @len) in the buffers of the first @n chunks of @nm:
 * the libvmmx end of a copy whose other end libvmmx does not map (pageable
 * memory, most likely), or an end of one with host memory at both ends,
 * held by placement meanwhile.  vmmx-run sets VMMX_HOST_CPU_ACCESS=placed under
 * --placement launch: a segment it sends back is granted to the GPU only,
 * which makes the send back several times cheaper, but the driver's copy of
 * such memory to or from pageable memory goes through the CPU's mapping and
 * kills the process.  VMMX_ADVISE_CPU grants the CPU what needs it, once,
 * until the segment moves again (a no-op on device memory and chunks
 * granted already).  Return: 0, or the error of a grant that failed.
 */
static int grant_cpu(const struct vmmxp_named *nm, size_t n, uintptr_t p, size_t len)
{
	int err = 0;

	for (size_t i = 0; i < n && !err; i++) {
		struct vmmx_buf *buf = nm->chunk[i].buf;
		uintptr_t lo = (uintptr_t)vmmx_buf_ptr(buf), hi = lo + vmmx_buf_size(buf);
		uintptr_t s = p > lo ? p : lo, e = p + len < hi ? p + len : hi;

		/* The copy's part in this buffer: every chunk of it, not only those at its ends. */
		if (s < e)
			err = vmmx_buf_advise(buf, s - lo, e - s, VMMX_ADVISE_CPU);
	}
	return err;
}

/*
 * Whether a chunk under an end of [@p, @p + @len) lies in host memory now:
 * looked up again, as a move may have ended since the range was named
 * (the segments are held after that, and stay where they are).
 */
static int host_end(uintptr_t p, size_t len)
{
	struct vmmxp_named nm;

	vmmxp_named_start(&nm);
	name_range(&nm, p, len);
	for (size_t i = 0; i < nm.n; i++)
		if (nm.chunk[i].loc.kind != VMMX_LOC_DEVICE)
			return 1;
	return 0;
}

struct vmmxp_use vmmxp_use_begin(uintptr_t a, size_t alen, uintptr_t b, size_t blen, void *stream)
{
	struct vmmxp_use u = { 0, 0, 0, stream };
	struct vmmxp_named nm, nb;
	const struct vmmxp_named *own = NULL;
	uintptr_t p = 0;
	size_t na, n = 0, len = 0;
	int err = 0;

	if (in_copy || !vmmxp_copy_on() || vmmxp_busy())
		return u;
	u.entered = 1;
	in_copy++;
	vmmxp_depth(1);
	/* Each end's own chunks (a's first in @nm), then both, one named by both kept once. */
	vmmxp_named_start(&nm);
	name_range(&nm, a, alen);
	na = nm.n;
	vmmxp_named_start(&nb);
	name_range(&nb, b, blen);
	vmmxp_named_merge(&nm, &nb);
	if (nm.n)
		u.held = vmmxp_place_use(nm.chunk, nm.chunk_ctx, nm.n, stream, vmmxp_capturing);
	/*
	 * The end libvmmx maps, when the other is memory it does not map.
	 * Held, where each lies stays as the grant finds it until the copy is
	 * passed on.  Not held (nothing spilled yet: placement moves nothing,
	 * but libvmmx may have moved a chunk to host memory itself), granted
	 * all the same, outside a capture.
	 */
	if (na && !nb.n && b && blen) {
		own = &nm;
		n = na;
		p = a;
		len = alen;
	} else if (!na && nb.n && a && alen) {
		own = &nb;
		n = nb.n;
		p = b;
		len = blen;
	}
	if (own && (u.held || !vmmxp_capturing(stream)))
		err = grant_cpu(own, n, p, len);
	else if (na && nb.n && (u.held || !vmmxp_capturing(stream)) && host_end(a, alen) &&
		 host_end(b, blen)) {
		/*
		 * Host memory at both ends: the driver copied such a pair
		 * through the CPU's mapping too, and died reading a segment
		 * sent back (a 16 MiB cuMemcpyDtoDAsync between two, training
		 * under PyTorch's cudaMallocAsync backend: docs/DRIVER.md).
		 * Both ends are granted the CPU first (a no-op where granted).
		 */
		__atomic_fetch_add(&both_host, 1, __ATOMIC_RELAXED);
		err = grant_cpu(&nm, na, a, alen);
		if (!err)
			err = grant_cpu(&nb, nb.n, b, blen);
	}
	if (err) {
		static int said;

		u.refused = 1;
		if (!__atomic_fetch_add(&said, 1, __ATOMIC_RELAXED))
			fprintf(stderr, "vmmx-run: a copy between host memory (pageable, or "
				"libvmmx's) and memory sent back to host memory was refused: "
				"granting the CPU that memory failed (%s); the driver's copy "
				"would have killed the process. Way out: "
				"VMMX_HOST_CPU_ACCESS=all\n", vmmx_last_error());
	}
	vmmxp_depth(-1);
	return u;
}

void vmmxp_use_end(struct vmmxp_use u)
{
	if (!u.entered)
		return;
	if (u.held) {
		vmmxp_depth(1);
		vmmxp_place_use_done(u.stream);
		vmmxp_depth(-1);
	}
	in_copy--;
}

/* The most bytes of a copy to the device read for addresses (pointer tables are small). */
#define POINTERS_MAX (64u << 10)

/* @n bytes at @src into @to through the kernel: process_vm_readv() on ourselves. */
static ssize_t self_read(void *to, const void *src, size_t n)
{
	struct iovec local = { to, n }, remote = { (void *)(uintptr_t)src, n };

	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
}

/*
 * Up to @n bytes at @src read into @to, through the kernel where it lets
 * us (a source the CPU cannot read fails with EFAULT, where a load would
 * kill the process); where it does not (a seccomp profile without
 * process_vm_readv), read directly when @direct_ok (a source the driver is
 * told is host memory: it reads it as such too), else not at all.
 * Return: the bytes read, 0 when none could be.
 */
static size_t read_host(void *to, const void *src, size_t n, int direct_ok)
{
	static int direct;
	ssize_t got;

	if (!__atomic_load_n(&direct, __ATOMIC_RELAXED)) {
		got = self_read(to, src, n);
		if (got >= 0)
			return (size_t)got;
		if (errno != EPERM && errno != ENOSYS)
			return 0;
		__atomic_store_n(&direct, 1, __ATOMIC_RELAXED);
	}
	if (!direct_ok)
		return 0;
	memcpy(to, src, n);
	return n;
}

/* What scan_pointers() may take a copy's source to be. */
enum scan {
	SCAN_NO,    /* device memory, or nothing to read: not read */
	SCAN_HOST,  /* host memory: the HtoD calls, cudaMemcpyHostToDevice */
	SCAN_MAYBE, /* unified addressing (cuMemcpy, cuMemcpyAsync, cudaMemcpyDefault):
		     * read when the CPU can read the source and not the destination */
};

/*
 * Whether the CPU can read the byte at @p: 1, 0 when it cannot (EFAULT:
 * device memory, which the driver maps for the GPU only), -1 when the
 * kernel will not say (a seccomp profile without process_vm_readv).
 */
static int cpu_readable(uintptr_t p)
{
	unsigned char b;

	if (self_read(&b, (const void *)p, 1) == 1)
		return 1;
	return errno == EFAULT ? 0 : -1;
}

/*
 * Host data at @src, @n bytes, about to be copied to the device at @dst,
 * read for addresses: a kernel may reach a segment through an address held
 * in device memory, which the watch never sees, and a segment being moved is
 * unmapped for a moment (a parked one until brought in): the GPU would
 * fault (CUDA_ERROR_ILLEGAL_ADDRESS, seen on the H200 with a table of
 * weights' addresses under CuPy).  Each 8-byte word that lands 8-byte
 * aligned at @dst and is a libvmmx address (a user-space one: bits 32 to 46
 * only) names its segment, which then never moves nor parks (place.c:
 * vmmxp_place_pointed()).  Tables of pointers built on the CPU (grouped
 * GEMMs' operands, descriptors) reach the GPU this way; addresses a kernel
 * writes to device memory do not (docs/PRELOAD.md).  Only copies of at
 * most POINTERS_MAX bytes are read, and only when their source is host
 * memory (@how): the HtoD calls and the runtime's cudaMemcpyHostToDevice
 * say so; a unified copy (@how SCAN_MAYBE) is read when the CPU can read
 * its source and not its destination (a destination libvmmx maps counts as
 * device memory wherever it lies), which process_vm_readv() tells without
 * touching either (where seccomp refuses it, such a copy is not read).  A
 * source libvmmx maps is not read (its host copies may be granted to the
 * GPU only).  A table into more chunks than a call keeps is marked in turns.
 */
static void scan_pointers(uintptr_t dst, const void *src, size_t n, enum scan how)
{
	uint64_t words[512];
	struct vmmxp_named nm;
	/* The words the GPU will read: 8-byte aligned at the destination. */
	size_t off = (8 - dst % 8) % 8;

	if (how == SCAN_NO || !src || !n || n > POINTERS_MAX || in_copy || !vmmxp_copy_on() ||
	    vmmxp_busy())
		return;
	vmmxp_depth(1);
	vmmxp_named_start(&nm);
	vmmxp_name_word(&nm, (uintptr_t)src);
	if (nm.total) { /* libvmmx's (below): not read */
		vmmxp_depth(-1);
		return;
	}
	/*
	 * Unified: a destination the CPU can read is host memory; the source,
	 * maybe device memory, is read through the kernel only (below).
	 */
	if (how == SCAN_MAYBE) {
		vmmxp_name_word(&nm, dst);
		if (!nm.total && cpu_readable(dst) != 0) {
			vmmxp_depth(-1);
			return;
		}
		vmmxp_named_start(&nm);
	}
	while (off + 8 <= n) {
		size_t want = (n - off) / 8 < 512 ? (n - off) / 8 * 8 : sizeof(words);
		size_t got = read_host(words, (const char *)src + off, want, how == SCAN_HOST) / 8;

		for (size_t i = 0; i < got; i++) {
			if (!(words[i] >> 32) || words[i] >> 47)
				continue;
			vmmxp_name_word(&nm, words[i]);
			/* Full: these marked, then the next (a table into many chunks). */
			if (nm.n == VMMXP_PLACE_MAX) {
				vmmxp_place_pointed(nm.chunk, nm.chunk_ctx, nm.n);
				vmmxp_named_start(&nm);
			}
		}
		if (got * 8 < want)
			break;
		off += want;
	}
	if (nm.n)
		vmmxp_place_pointed(nm.chunk, nm.chunk_ctx, nm.n);
	vmmxp_depth(-1);
}

/* A copy refused (vmmxp_use_begin()): CUDA_ERROR_INVALID_VALUE, cudaErrorInvalidValue. */
#define COPY_REFUSED 1

/* A _ptsz call's stream 0 is the per-thread default stream; a _ptds call runs on it. */
static CUstream on(CUstream s, int pt)
{
	return !s && pt ? CU_STREAM_PER_THREAD_ : s;
}

/*
 * COPY: the hook @name(@params), whose real call is @name@args, reading
 * [@src, + @slen) and writing [@dst, + @dlen) on @stream; code @missing
 * when the real entry point cannot be found; @scan what its source may be
 * (an enum scan: read for addresses, scan_pointers()).
 */
#define COPY(type, missing, name, params, args, dst, dlen, src, slen, stream, scan)              \
	VMMXP_EXPORT type name params                                                           \
	{                                                                                       \
		__typeof__(&name) real = VMMXP_REAL(name);                                      \
		struct vmmxp_use u;                                                             \
		type r;                                                                         \
                                                                                                \
		if (!real)                                                                      \
			return missing;                                                         \
		scan_pointers((uintptr_t)(dst), (const void *)(uintptr_t)(src), (slen), (scan)); \
		u = vmmxp_use_begin((uintptr_t)(dst), (dlen), (uintptr_t)(src), (slen),          \
				    (stream));                                                  \
		r = u.refused ? (type)COPY_REFUSED : real args;                                \
		vmmxp_use_end(u);                                                               \
		return r;                                                                       \
	}

/* The driver's 1D copies: (dst, src, n) and (dst, src, n, stream), each pair with its twin. */
#define DRV_COPY(name, dtype, stype, pt, scan)                                                   \
	COPY(CUresult, CUDA_ENOTFOUND, name, (dtype dst, stype src, size_t n), (dst, src, n),   \
	     dst, n, src, n, on(NULL, pt), scan)
#define DRV_COPY_ASYNC(name, dtype, stype, pt, scan)                                             \
	COPY(CUresult, CUDA_ENOTFOUND, name, (dtype dst, stype src, size_t n, void *stream),    \
	     (dst, src, n, stream), dst, n, src, n, on(stream, pt), scan)
DRV_COPY(cuMemcpy, CUdeviceptr, CUdeviceptr, 0, SCAN_MAYBE)
DRV_COPY(cuMemcpy_ptds, CUdeviceptr, CUdeviceptr, 1, SCAN_MAYBE)
DRV_COPY_ASYNC(cuMemcpyAsync, CUdeviceptr, CUdeviceptr, 0, SCAN_MAYBE)
DRV_COPY_ASYNC(cuMemcpyAsync_ptsz, CUdeviceptr, CUdeviceptr, 1, SCAN_MAYBE)
DRV_COPY(cuMemcpyHtoD_v2, CUdeviceptr, const void *, 0, SCAN_HOST)
DRV_COPY(cuMemcpyHtoD_v2_ptds, CUdeviceptr, const void *, 1, SCAN_HOST)
DRV_COPY(cuMemcpyDtoH_v2, void *, CUdeviceptr, 0, SCAN_NO)
DRV_COPY(cuMemcpyDtoH_v2_ptds, void *, CUdeviceptr, 1, SCAN_NO)
DRV_COPY(cuMemcpyDtoD_v2, CUdeviceptr, CUdeviceptr, 0, SCAN_NO)
DRV_COPY(cuMemcpyDtoD_v2_ptds, CUdeviceptr, CUdeviceptr, 1, SCAN_NO)
DRV_COPY_ASYNC(cuMemcpyHtoDAsync_v2, CUdeviceptr, const void *, 0, SCAN_HOST)
DRV_COPY_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, CUdeviceptr, const void *, 1, SCAN_HOST)
DRV_COPY_ASYNC(cuMemcpyDtoHAsync_v2, void *, CUdeviceptr, 0, SCAN_NO)
DRV_COPY_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, void *, CUdeviceptr, 1, SCAN_NO)
DRV_COPY_ASYNC(cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr, 0, SCAN_NO)
DRV_COPY_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, CUdeviceptr, CUdeviceptr, 1, SCAN_NO)
#undef DRV_COPY
#undef DRV_COPY_ASYNC

#define PEER_PARAMS (CUdeviceptr dst, void *dctx, CUdeviceptr src, void *sctx, size_t n)
#define PEER_ASYNC_PARAMS                                                                       \
	(CUdeviceptr dst, void *dctx, CUdeviceptr src, void *sctx, size_t n, void *stream)
COPY(CUresult, CUDA_ENOTFOUND, cuMemcpyPeer, PEER_PARAMS, (dst, dctx, src, sctx, n), dst, n, src,
     n, on(NULL, 0), SCAN_NO)
COPY(CUresult, CUDA_ENOTFOUND, cuMemcpyPeer_ptds, PEER_PARAMS, (dst, dctx, src, sctx, n), dst, n,
     src, n, on(NULL, 1), SCAN_NO)
COPY(CUresult, CUDA_ENOTFOUND, cuMemcpyPeerAsync, PEER_ASYNC_PARAMS,
     (dst, dctx, src, sctx, n, stream), dst, n, src, n, on(stream, 0), SCAN_NO)
COPY(CUresult, CUDA_ENOTFOUND, cuMemcpyPeerAsync_ptsz, PEER_ASYNC_PARAMS,
     (dst, dctx, src, sctx, n, stream), dst, n, src, n, on(stream, 1), SCAN_NO)
#undef PEER_PARAMS
#undef PEER_ASYNC_PARAMS

/*
 * A 2D copy's range on one side: from its first byte to its last (@x, @y
 * the start, @pitch between rows), at @dev, or @host for host memory
 * (CUmemorytype 1); 0 bytes for an array (3), which libvmmx never maps.
 */
static size_t span2d(int type, size_t x, size_t y, size_t pitch, size_t width, size_t height,
		     CUdeviceptr dev, const void *host, uintptr_t *start)
{
	/* Host memory (1) is no libvmmx memory, but the other end's grant needs its range. */
	*start = (type == 1 ? (uintptr_t)host : (uintptr_t)dev) + y * pitch + x;
	if ((type != 1 && type != 2 && type != 4) || !width || !height)
		return 0;
	return (height - 1) * pitch + width;
}

/* The driver's 2D copies: the ranges come from the descriptor (NULL: the driver's to refuse). */
#define DRV_COPY2D(name, params, args, stream)                                                  \
	VMMXP_EXPORT CUresult name params                                                       \
	{                                                                                       \
		__typeof__(&name) real = VMMXP_REAL(name);                                      \
		struct vmmxp_use u = { 0 };                                                     \
		uintptr_t d = 0, s = 0;                                                         \
		size_t dlen = 0, slen = 0;                                                      \
		CUresult r;                                                                     \
                                                                                                \
		if (!real)                                                                      \
			return CUDA_ENOTFOUND;                                                  \
		if (p) {                                                                        \
			dlen = span2d(p->dst_type, p->dst_x, p->dst_y, p->dst_pitch, p->width,  \
				      p->height, p->dst_device, p->dst_host, &d);               \
			slen = span2d(p->src_type, p->src_x, p->src_y, p->src_pitch, p->width,  \
				      p->height, p->src_device, p->src_host, &s);               \
			u = vmmxp_use_begin(d, dlen, s, slen, (stream));                        \
		}                                                                               \
		r = u.refused ? (CUresult)COPY_REFUSED : real args;                            \
		vmmxp_use_end(u);                                                               \
		return r;                                                                       \
	}
DRV_COPY2D(cuMemcpy2D_v2, (const struct vmmxp_memcpy2d *p), (p), on(NULL, 0))
DRV_COPY2D(cuMemcpy2D_v2_ptds, (const struct vmmxp_memcpy2d *p), (p), on(NULL, 1))
DRV_COPY2D(cuMemcpy2DUnaligned_v2, (const struct vmmxp_memcpy2d *p), (p), on(NULL, 0))
DRV_COPY2D(cuMemcpy2DUnaligned_v2_ptds, (const struct vmmxp_memcpy2d *p), (p), on(NULL, 1))
DRV_COPY2D(cuMemcpy2DAsync_v2, (const struct vmmxp_memcpy2d *p, void *stream), (p, stream),
	   on(stream, 0))
DRV_COPY2D(cuMemcpy2DAsync_v2_ptsz, (const struct vmmxp_memcpy2d *p, void *stream), (p, stream),
	   on(stream, 1))
#undef DRV_COPY2D

/*
 * The runtime's: the kind does not matter (a pointer libvmmx does not map is
 * not named), but cudaMemcpyHostToDevice's source is read for addresses, and
 * cudaMemcpyDefault's where it is host memory (scan_pointers()).
 */
#define RT_PARAMS (void *dst, const void *src, size_t n, int kind)
/* cudaMemcpyHostToDevice (1), cudaMemcpyDefault (4) */
#define SCAN_KIND(kind) ((kind) == 1 ? SCAN_HOST : (kind) == 4 ? SCAN_MAYBE : SCAN_NO)
#define RT_ASYNC_PARAMS (void *dst, const void *src, size_t n, int kind, void *stream)
COPY(cudaError_t, RT_ENOTFOUND, cudaMemcpy, RT_PARAMS, (dst, src, n, kind), dst, n, src, n,
     on(NULL, 0), SCAN_KIND(kind))
COPY(cudaError_t, RT_ENOTFOUND, cudaMemcpy_ptds, RT_PARAMS, (dst, src, n, kind), dst, n, src, n,
     on(NULL, 1), SCAN_KIND(kind))
COPY(cudaError_t, RT_ENOTFOUND, cudaMemcpyAsync, RT_ASYNC_PARAMS, (dst, src, n, kind, stream),
     dst, n, src, n, on(stream, 0), SCAN_KIND(kind))
COPY(cudaError_t, RT_ENOTFOUND, cudaMemcpyAsync_ptsz, RT_ASYNC_PARAMS,
     (dst, src, n, kind, stream), dst, n, src, n, on(stream, 1), SCAN_KIND(kind))
COPY(cudaError_t, RT_ENOTFOUND, cudaMemcpyPeer,
     (void *dst, int ddev, const void *src, int sdev, size_t n), (dst, ddev, src, sdev, n), dst,
     n, src, n, on(NULL, 0), SCAN_NO)
COPY(cudaError_t, RT_ENOTFOUND, cudaMemcpyPeerAsync,
     (void *dst, int ddev, const void *src, int sdev, size_t n, void *stream),
     (dst, ddev, src, sdev, n, stream), dst, n, src, n, on(stream, 0), SCAN_NO)
#undef SCAN_KIND
#undef RT_PARAMS
#undef RT_ASYNC_PARAMS

/* The runtime's 2D copies: rows of @w bytes, @h of them, @dp and @sp apart. */
#define RT2D_PARAMS (void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t h, int kind)
#define RT2D_ASYNC_PARAMS                                                                       \
	(void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t h, int kind,        \
	 void *stream)
#define SPAN(pitch) (w && h ? (h - 1) * (pitch) + w : 0)
COPY(cudaError_t, RT_ENOTFOUND, cudaMemcpy2D, RT2D_PARAMS, (dst, dp, src, sp, w, h, kind), dst,
     SPAN(dp), src, SPAN(sp), on(NULL, 0), SCAN_NO)
COPY(cudaError_t, RT_ENOTFOUND, cudaMemcpy2D_ptds, RT2D_PARAMS, (dst, dp, src, sp, w, h, kind),
     dst, SPAN(dp), src, SPAN(sp), on(NULL, 1), SCAN_NO)
COPY(cudaError_t, RT_ENOTFOUND, cudaMemcpy2DAsync, RT2D_ASYNC_PARAMS,
     (dst, dp, src, sp, w, h, kind, stream), dst, SPAN(dp), src, SPAN(sp), on(stream, 0), SCAN_NO)
COPY(cudaError_t, RT_ENOTFOUND, cudaMemcpy2DAsync_ptsz, RT2D_ASYNC_PARAMS,
     (dst, dp, src, sp, w, h, kind, stream), dst, SPAN(dp), src, SPAN(sp), on(stream, 1), SCAN_NO)
#undef SPAN
#undef RT2D_PARAMS
#undef RT2D_ASYNC_PARAMS
#undef COPY
