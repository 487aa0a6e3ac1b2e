/* SPDX-License-Identifier: MIT */
/*
 * vmmx/alloc.h - the framework allocator of libvmmx: a caching allocator
 * over libvmmx buffers, the process-wide instances and the entry points
 * PyTorch (CUDAPluggableAllocator) and CuPy call.  It sits on top of the
 * rest of the API (vmmx.h): contexts, buffers, streams, events, the room
 * query.  vmmx.h includes this header, so either may be included; both
 * compile as C and C++ and include no CUDA header.
 */
#ifndef VMMX_ALLOC_H
#define VMMX_ALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmmx.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Frameworks allocate thousands of tensors a step and know their addresses,
 * not buffers.  A struct vmmx_alloc is a caching allocator over libvmmx
 * buffers: memory comes in segments (each a buffer, placed chunk by chunk by
 * the policy), split into blocks with best-fit free lists, a small pool
 * (requests up to 1 MiB, 2 MiB segments) and a large pool (up to 10 MiB, 20
 * MiB segments); bigger requests get a segment of their own, never split, so
 * that a tensor's chunks hold nothing else and can move without disturbing
 * other tensors.  Freed memory stays mapped and is reused.  Segments go back
 * to libvmmx on vmmx_alloc_empty_cache() or when a new segment would not fit
 * on the device (or not fit at all): idle cached segments are released
 * first and the placement retried.
 *
 * Streams: memory freed on stream S is reused at once by allocations on S
 * (the work queued on S keeps its order), and by allocations on another
 * stream only after an event recorded on S has completed, i.e. after S's work
 * up to the free.  Each segment belongs to one stream; an idle one moves to
 * another stream only through such an event.  Stream arguments are the
 * backend's stream handle: a CUstream (cudaStream_t) on cuda, including a
 * framework's own, or a vmmx_stream_handle(); NULL is the default stream.
 *
 * The plain entry points (vmmx_torch_*, vmmx_cupy_*) use one process-wide
 * allocator per device ordinal, made on first use, thread-safe, configured
 * from the VMMX_* environment (or vmmx_alloc_global_config()), placing
 * through VMMX_POLICY (default device-first).  They are never torn down: a
 * framework frees tensors during its own exit, after any destructor of ours.
 *
 * fork(): an allocator belongs to the process that made it, as its context
 * does.  The atfork handlers hold every allocator's mutex and the
 * process-wide lock across a fork, so a fork while other threads allocate
 * deadlocks neither process.  In the child, every call on an allocator the
 * parent made fails at once with -VMMX_ENODRIVER ("allocator inherited from
 * the parent process N; CUDA cannot be used after fork"), before any lock
 * or driver call: no address of the parent's is handed out, and the cache
 * is not emptied.  vmmx_alloc_destroy() works: it frees the child's copy of
 * the records, without the driver.  The process-wide allocators the parent
 * made are inherited the same way: in the child vmmx_alloc_global() answers
 * the parent's, vmmx_torch_alloc() and vmmx_cupy_malloc() return NULL with
 * that message, the frees log it.  A device the parent made none for gets a
 * new one where the backend allows a context in the child (sim; cuda
 * refuses).
 */

struct vmmx_alloc;

/** VMMX_ALLOC_STATS_VERSION - version of struct vmmx_alloc_stats filled by this library. */
#define VMMX_ALLOC_STATS_VERSION 1

/**
 * struct vmmx_alloc_stats - what a caching allocator holds and did.
 *
 * Set @size first; the library fills at most that many bytes, so old
 * callers keep working when members are appended.  Bytes per location are
 * read from the segments' chunk tables when the call runs, so they follow
 * migrations (prefetch, eviction).
 */
struct vmmx_alloc_stats {
	size_t size;                 /**< in: sizeof(struct vmmx_alloc_stats) */
	unsigned int version;        /**< out: VMMX_ALLOC_STATS_VERSION */
	int device;                  /**< the context's device */
	uint64_t allocated_bytes;    /**< bytes in live blocks (sizes rounded up to 512) */
	uint64_t allocated_peak;     /**< most @allocated_bytes seen */
	uint64_t requested_bytes;    /**< bytes the live allocations asked for */
	uint64_t reserved_bytes;     /**< bytes of segments, cached free blocks included */
	uint64_t reserved_peak;      /**< most @reserved_bytes seen */
	uint64_t device_reserved;    /**< of @reserved_bytes, on a GPU */
	uint64_t host_reserved;      /**< of @reserved_bytes, in host memory */
	uint64_t device_allocated;   /**< of @allocated_bytes, on a GPU */
	uint64_t host_allocated;     /**< of @allocated_bytes, in host memory */
	uint64_t segments;           /**< live segments (each a libvmmx buffer) */
	uint64_t active_blocks;      /**< live allocations */
	uint64_t allocs;             /**< successful allocations (size 0 excluded) */
	uint64_t frees;              /**< frees (NULL excluded) */
	uint64_t cache_hits;         /**< allocations served by cached memory, no new segment */
	uint64_t segment_allocs;     /**< segments made */
	uint64_t segment_frees;      /**< segments given back to libvmmx */
	uint64_t fallback_segments;  /**< segments placed in host memory (whole: see below) */
	uint64_t fallback_bytes;     /**< their bytes in host memory when made */
	uint64_t stream_reuses;      /**< idle segments handed to another stream, event completed */
	uint64_t stream_waits;       /**< idle segments passed over: their stream was not done */
	uint64_t cross_stream_frees; /**< frees on a stream other than the segment's (via events) */
	uint64_t reclaims;           /**< times idle segments were released so a new one fits */
	uint64_t failures;           /**< allocations that failed */
};

/**
 * vmmx_alloc_create() - make a caching allocator on a context.
 * @ctx: context; its device is the allocator's.
 * @policy: placement policy of the segments, or NULL for the context's default.
 * @a_p: out: the allocator.
 *
 * Return: 0; -VMMX_EINVAL for a NULL argument or a malformed policy spec;
 * -VMMX_ENOENT / -VMMX_EPOLICY when the policy cannot be loaded (checked
 * here, so that a bad spec fails now and not at the first allocation);
 * -VMMX_ENOMEM; -VMMX_ENODRIVER on a context the parent made, in a forked
 * child.
 *
 * Context: any thread; takes the context's mutex; may block (a policy
 * plugin is loaded); does not call the driver.
 */
VMMX_API int vmmx_alloc_create(struct vmmx_ctx *ctx, const char *policy, struct vmmx_alloc **a_p);

/**
 * vmmx_alloc_destroy() - give every segment back and free the allocator.
 * @a: allocator, or NULL.
 *
 * Live allocations are released too, with a warning: their memory is gone.
 * Waits for the device first, so that no queued work uses what is released.
 * In a forked child, on the parent's allocator: frees the child's copy of
 * the records only (no driver call, no wait, no warning).
 *
 * Context: no other thread may use @a; blocks; calls the driver (not in a
 * forked child).
 */
VMMX_API void vmmx_alloc_destroy(struct vmmx_alloc *a);

/**
 * vmmx_alloc_malloc() - allocate device-accessible memory.
 * @a: allocator.
 * @size: bytes; 0 gives NULL and succeeds.
 * @stream: the stream the memory will be used on first (NULL: default).
 * @ptr_p: out: the address, aligned to 512 bytes.
 *
 * Served from a cached free block of @stream's segments when one fits (best
 * fit; no driver call); else from an idle segment of another stream whose
 * event has completed; else from a new segment placed by the policy.  A
 * segment lies in one location: one the policy placed partly on the device
 * and partly in host memory is moved wholly to host memory, because the
 * driver crashes on a copy (cudaMemcpy, as frameworks use) whose range runs
 * from device chunks into host chunks.
 *
 * Return: 0; -VMMX_EINVAL for a NULL @a or @ptr_p; -VMMX_ENOMEM when no
 * location the policy allows has room even after idle segments were given
 * back (vmmx_last_error() says why for each); -VMMX_EDRIVER, -VMMX_EFAULTINJ;
 * -VMMX_ENODRIVER on the parent's allocator in a forked child (@ptr_p is
 * left alone, even for a @size of 0).
 *
 * Context: any thread; takes the allocator's mutex; a cache hit does not
 * block and calls no driver; a new segment calls the driver (reserve,
 * create, map, grant) and may block, with the mutex held.
 */
VMMX_API int vmmx_alloc_malloc(struct vmmx_alloc *a, size_t size, void *stream, void **ptr_p);

/**
 * vmmx_alloc_free() - give memory back to the allocator's cache.
 * @a: allocator.
 * @ptr: an address vmmx_alloc_malloc() returned, or NULL (no-op).
 * @stream: the stream whose queued work last uses the memory; PyTorch and
 *          CuPy pass the stream it was allocated on.
 *
 * The block is reusable at once on its segment's stream when @stream is
 * that stream; otherwise an event is recorded on @stream and the block
 * waits for it.
 *
 * Return: 0; -VMMX_EINVAL for a NULL @a, an address this allocator did not
 * return (or already freed: vmmx_last_error() says which), or a @stream
 * the driver refuses as invalid (the sim: one it did not make; cuda
 * reports most bad handles as -VMMX_EDRIVER, below): the memory then stays
 * allocated and valid, to be freed again; -VMMX_EDRIVER (or another driver
 * error, -VMMX_EFAULTINJ) when the event cannot be recorded otherwise: the
 * block is taken all the same and kept out of use until
 * vmmx_alloc_empty_cache(), so do not free it again; -VMMX_ENODRIVER on the
 * parent's allocator in a forked child (nothing is taken).
 *
 * Context: any thread; takes the allocator's mutex; does not block; calls
 * the driver only for a free on another stream (event record).
 */
VMMX_API int vmmx_alloc_free(struct vmmx_alloc *a, void *ptr, void *stream);

/**
 * vmmx_alloc_empty_cache() - give idle segments back to libvmmx.
 * @a: allocator.
 *
 * Waits for the device, completes pending frees, and destroys every segment
 * with no live allocation (its chunks go to the context's chunk cache and
 * from there to the driver, see vmmx_ctx_trim()).
 *
 * Return: 0; -VMMX_EINVAL for a NULL @a; -VMMX_EDRIVER when waiting for the
 * device failed (nothing was released); -VMMX_ENODRIVER on the parent's
 * allocator in a forked child (nothing is released: vmmx_alloc_destroy()
 * frees the child's copy).
 *
 * Context: any thread; takes the allocator's mutex; blocks; calls the driver.
 */
VMMX_API int vmmx_alloc_empty_cache(struct vmmx_alloc *a);

/**
 * vmmx_alloc_stats() - read an allocator's statistics.
 * @a: allocator.
 * @st: out; set st->size first.
 *
 * Return: 0; -VMMX_EINVAL for a NULL argument or a @size too small for
 * @size and @version; -VMMX_ENODRIVER on the parent's allocator in a
 * forked child.
 *
 * Context: any thread; takes the allocator's mutex for a walk over its
 * segments and blocks; lock-free residency reads; no driver call.
 */
VMMX_API int vmmx_alloc_stats(struct vmmx_alloc *a, struct vmmx_alloc_stats *st);

/**
 * vmmx_alloc_ctx() - the context an allocator lives in.
 * @a: allocator.
 *
 * Return: the context, NULL for a NULL @a.
 *
 * Context: any thread; lock-free.
 */
VMMX_API struct vmmx_ctx *vmmx_alloc_ctx(const struct vmmx_alloc *a);

/**
 * vmmx_alloc_global_config() - settings of the process-wide allocators.
 * @vars: "VMMX_NAME=value" strings, NULL-terminated (copied), or NULL to
 *        forget earlier ones; they override the environment as
 *        struct vmmx_config's @vars do.
 *
 * Applies to the contexts vmmx_alloc_global() makes from now on.
 *
 * Return: 0; -VMMX_EBUSY when a process-wide allocator exists already
 * (settings are read once, when it is made); -VMMX_EINVAL for an entry that
 * is not VMMX_NAME=value; -VMMX_ENOMEM.
 *
 * Context: any thread; takes the process-wide lock.
 */
VMMX_API int vmmx_alloc_global_config(const char *const *vars);

/**
 * vmmx_alloc_global() - the process-wide allocator of a device, made on first use.
 * @device: device ordinal (VMMX_DEVICE of its context).
 * @a_p: out: the allocator.
 *
 * The first call for a device makes a context on it (configuration from
 * vmmx_alloc_global_config() and the environment, VMMX_DEVICE replaced by
 * @device) and an allocator with the context's default policy.  Both live
 * until the process ends.
 *
 * In a forked child, a device's allocator the parent made is answered as
 * it is: every call on it fails with -VMMX_ENODRIVER (see "fork()" above).
 *
 * Return: 0; -VMMX_EINVAL for a NULL @a_p; -VMMX_ENODEV for a @device out of
 * range; what vmmx_ctx_create() returns (-VMMX_ECONFIG, -VMMX_ENODRIVER...),
 * each time it is asked again (nothing is cached after a failure).
 *
 * Context: any thread; lock-free once made; the first call takes the
 * process-wide lock, blocks and calls the driver.
 */
VMMX_API int vmmx_alloc_global(int device, struct vmmx_alloc **a_p);

/**
 * vmmx_torch_alloc() - PyTorch's CUDAPluggableAllocator allocation function.
 * @size: bytes (a negative size fails).
 * @device: device ordinal.
 * @stream: the caller's current stream (a cudaStream_t).
 *
 * vmmx_alloc_malloc() on vmmx_alloc_global(@device).
 *
 * Return: the address; NULL on failure (PyTorch raises an out-of-memory
 * error; vmmx_last_error() in the same thread says why: "allocator
 * inherited from the parent process N" in a forked child) or for size 0.
 *
 * Context: as vmmx_alloc_malloc().
 */
VMMX_API void *vmmx_torch_alloc(ssize_t size, int device, void *stream);

/**
 * vmmx_torch_free() - PyTorch's CUDAPluggableAllocator free function.
 * @ptr: address from vmmx_torch_alloc(), or NULL.
 * @size: its size (unused: the allocator knows it).
 * @device: device ordinal it was allocated on.
 * @stream: the stream it was allocated on (PyTorch passes that one).
 *
 * Failures (an unknown pointer, the parent's allocator in a forked child)
 * are logged at error level.
 *
 * Context: as vmmx_alloc_free().
 */
VMMX_API void vmmx_torch_free(void *ptr, ssize_t size, int device, void *stream);

/**
 * vmmx_cupy_malloc() - CuPy's cupy.cuda.memory.CFunctionAllocator malloc.
 * @param: unused (CuPy's param argument).
 * @size: bytes.
 * @device: device ordinal.
 *
 * CuPy passes no stream: memory is ordered on the default stream (the
 * legacy one, which orders CuPy's blocking streams too).
 *
 * Return: the address; NULL on failure (CuPy raises OutOfMemoryError;
 * vmmx_last_error() says why, as for vmmx_torch_alloc()) or for size 0.
 *
 * Context: as vmmx_alloc_malloc().
 */
VMMX_API void *vmmx_cupy_malloc(void *param, size_t size, int device);

/**
 * vmmx_cupy_free() - CuPy's cupy.cuda.memory.CFunctionAllocator free.
 * @param: unused.
 * @ptr: address from vmmx_cupy_malloc(), or NULL.
 * @device: device ordinal.
 *
 * Context: as vmmx_alloc_free().
 */
VMMX_API void vmmx_cupy_free(void *param, void *ptr, int device);

#ifdef __cplusplus
}
#endif

#endif /* VMMX_ALLOC_H */
