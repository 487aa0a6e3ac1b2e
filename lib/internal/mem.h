/* SPDX-License-Identifier: MIT */
/*
 * internal/mem.h - layer 1 of lib/: memory.  Room and charge (room.c),
 * deferred teardown (defer.c), the RCU-published chunk tables (table.c),
 * mapping and granting one chunk (map.c), and the one door to a physical
 * handle with the cache behind it (cache.c).  These files, with the
 * buffer's reservation and the migration's and trim's staging steps
 * (docs/DESIGN.md, "Layers", says which and why), are the only ones in
 * lib/ that call vmm_create, vmm_map, vmm_unmap, vmm_release and
 * vmm_set_access.  Includes base.h only.
 *
 * The context's struct lives here: its fields are this layer's state
 * (limits, what is held, the cache, the deferred list, retired tables).
 * Members that belong to the layers above (policies, the buffer list, host
 * registrations) are pointers to types this layer does not know.
 *
 * Locking, from outer to inner (the whole library's order):
 *   vmmx__alloc_global_lock (alloc_frameworks.c: making a process-wide
 *               allocator and its context)
 *   the allocator list's lock (alloc.c: list edits, and across a fork)
 *   a->lock     (one framework allocator: held across segment creation and
 *                release, so outer to every lock below)
 *   the context list's lock (fork.c: list edits, and across a fork)
 *   buf->lock   (a writer of one buffer: resize, destroy)
 *   ctx->lock   (the buffer list and the deferred-teardown list)
 *   ctx->reg_lock, then ctx->cache_lock (fork.c takes all three in this order)
 *   ctx->hva_lock (innermost: nothing is called under it; fork.c takes it last)
 * fork.c's prepare handler takes every one of them but buf->lock, in this
 * order, then urcu-bp's locks and the driver layer's (fork.c says why).
 * Readers (lookup, residency, chunks, memcpy splitting, size) take neither:
 * they read RCU-published arrays inside urcu-bp read-side sections, and
 * writers free old arrays only after a grace period.
 */
#ifndef VMMX_LIB_INTERNAL_MEM_H
#define VMMX_LIB_INTERNAL_MEM_H

#include <urcu/urcu-bp.h>

#include "base.h"

/*
 * Under ThreadSanitizer (configure --enable-tsan): TSan does not see the
 * ordering liburcu gives, because rcu_dereference() is a plain load behind
 * a compiler barrier and a grace period is a wait on counters it cannot see
 * through.  Every table, buffer list and policy published with RCU would be
 * reported as a race between its writer and its readers, and every free
 * after a grace period as a race with the readers it waited for.  So
 * publication and reading are acquire/release atomics (below, in every
 * build: a stronger ordering than RCU needs, so the program's meaning is
 * unchanged), and in a TSan build each read-side unlock releases, and each
 * grace period acquires, one token: exactly the happens-before that RCU
 * guarantees.  Real races in our code stay visible; no suppression is
 * needed for our own RCU use.
 */
#if defined(__SANITIZE_THREAD__)
#define VMMX__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VMMX__TSAN 1
#endif
#endif
#ifdef VMMX__TSAN
#include <sanitizer/tsan_interface.h>

extern char vmmx__tsan_grace;   /* the token (ctx.c) */

static inline void vmmx__tsan_read_unlock(void)
{
	__tsan_release(&vmmx__tsan_grace);
	urcu_bp_read_unlock();
}

static inline void vmmx__tsan_synchronize_rcu(void)
{
	urcu_bp_synchronize_rcu();
	__tsan_acquire(&vmmx__tsan_grace);
}

#undef urcu_bp_read_unlock
#define urcu_bp_read_unlock() vmmx__tsan_read_unlock()
#undef urcu_bp_synchronize_rcu
#define urcu_bp_synchronize_rcu() vmmx__tsan_synchronize_rcu()
#endif

/*
 * Publication and reading are our own acquire/release atomics in every
 * build: without _LGPL_SOURCE (libvmmx does not inline liburcu's LGPL
 * code), liburcu's rcu_dereference() is a call through the PLT to
 * rcu_dereference_sym(), two per lookup.  An acquire load is a plain load
 * on x86-64 and orders at least as strongly as RCU needs elsewhere.
 */
#undef rcu_dereference
#define rcu_dereference(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#undef rcu_assign_pointer
#define rcu_assign_pointer(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)

/* ---- the context's memory state ---- */

enum vmmx__why {
	VMMX__WHY_OK = 0,
	VMMX__WHY_LIMIT,                /* over VMMX_*_LIMIT */
	VMMX__WHY_HEADROOM,             /* would eat into VMMX_DEVICE_HEADROOM */
	VMMX__WHY_OOM,                  /* the memory is full (driver) */
	VMMX__WHY_NCODES,
};
const char *vmmx__why_name(enum vmmx__why why);

/*
 * The last free-memory figure per location, shared by grows: a figure read
 * less than VMMX__FREE_TTL_NS ago (and adjusted for what grows created since)
 * serves the next grow too, so back-to-back grows do not each pay a
 * cuMemGetInfo (and /proc/meminfo for host memory).  Up to
 * VMMX__FREE_TTL_AMPLE_NS it still serves while it shows more than
 * VMMX__FREE_MARGIN beyond what the grow wants and the headroom: others'
 * allocations in that time would have to exceed the margin to matter, and
 * a driver out-of-memory is handled anyway (smaller handles, fallback).
 * A release forgets it (memory came back).  Atomics, no lock.
 */
#define VMMX__FREE_TTL_NS (1000 * 1000ull)
#define VMMX__FREE_TTL_AMPLE_NS (100 * 1000 * 1000ull)
#define VMMX__FREE_MARGIN (1ull << 30)
struct vmmx__freecache {
	uint64_t fr;
	uint64_t ns;                    /* 0: unknown */
};

/* One teardown step that failed and waits for a retry (ctx->lock). */
struct vmmx__deferred {
	struct vmmx__deferred *next;
	enum vmmx_op op;                /* UNMAP, RELEASE or UNRESERVE */
	void *va;
	size_t size;
	vmm_handle_t handle;
	struct vmmx_loc loc;            /* RELEASE: where the handle's memory is charged */
};

struct vmmx__counters {
	uint64_t placed[VMMX__NSLOTS];
	uint64_t fallbacks[VMMX__WHY_NCODES];   /* by the first choice's reason */
	uint64_t resizes;
	uint64_t resize_failures;
	uint64_t copies;
	uint64_t cache_hits;
	uint64_t cache_misses;
	uint64_t cache_released;
	uint64_t migrations;
	uint64_t migrated_bytes;
	uint64_t evictions;
	uint64_t promotions;
	uint64_t copies_saved;          /* moves to host that mapped a kept copy */
	uint64_t copy_bytes_saved;
	uint64_t moves_busy;            /* policy moves skipped: a pinned buffer (evict.c) */
	uint64_t checksums;             /* device checksums taken (vmm_checksum) */
	uint64_t verified_saved;        /* moves to host that mapped a verified copy */
	uint64_t verified_changed;      /* verified copies found stale (chunk written) */
	uint64_t parks;                 /* chunks parked (vmmx_park) */
	uint64_t unparks;               /* parked chunks mapped again in place */
	uint64_t hva_reused;            /* parks that found their copy's own mapping kept */
};

/* A released handle kept for reuse (cache.c). */
struct vmmx__cached {
	struct vmmx__cached *next;
	vmm_handle_t handle;
	size_t size;
	struct vmmx_loc loc;
};

/* A host handle's own mapping (hva.c): kept from its first park until
 * the handle is released. */
struct vmmx__hva {
	vmm_handle_t handle;
	void *va;
	size_t size;
	bool used;                      /* a chunk holds it (its @hva) */
};

struct vmmx_ctx {
	struct vmm *vmm;                /* read-only after create */
	struct vmmx__conf conf;         /* read-only after create */
	int device;
	int ndev;                       /* devices usable (at most VMMX__MAX_DEVICES) */
	size_t gran;                    /* allocation granularity (all locations) */
	size_t chunk_min;
	size_t chunk_max;
	uint64_t limit[VMMX__NSLOTS];   /* UINT64_MAX: none */
	uint64_t total[VMMX__NSLOTS];   /* memory of the location at create time */
	uint64_t headroom[VMMX__NSLOTS];/* device memory to leave free */
	struct vmmx__freecache fcache[VMMX__NSLOTS]; /* atomic members */
	bool peer[VMMX__MAX_DEVICES];   /* the context's device can access this device */
	uint64_t active;                /* bit d: the context uses device d (atomic; see
					 * vmmx__dev_active) */
	struct vmmx__policy *policy;    /* default policy (a reference) */
	uint64_t held[VMMX__NSLOTS];    /* bytes of live handles, cache included: atomic */
	struct vmmx__counters ctr;      /* atomic */
	uint64_t next_buf_id;           /* atomic */
	struct vmmx__table *retired;    /* replaced tables awaiting a grace period: atomic */
	uint64_t nretired;              /* atomic, approximate */
	int trace_fd;                   /* VMMX_TRACE, -1 if none */
	/* Host memory the layer above keeps and can give back for a new handle
	 * (the host copies of read-mostly chunks, shadow.c), asked by
	 * vmmx__make_room() after the cache: set by vmmx_ctx_create, read-only
	 * after, NULL for none.  A hook, so that this layer calls nothing above. */
	uint64_t (*reclaim_host)(struct vmmx_ctx *ctx, uint64_t bytes);

	pthread_mutex_t cache_lock;     /* inner to buf->lock; protects the cache lists */
	struct vmmx__cached *cache[VMMX__NSLOTS];
	uint64_t cache_bytes[VMMX__NSLOTS]; /* atomic reads, writes under cache_lock */
	uint64_t cache_total;           /* atomic reads, writes under cache_lock */
	uint64_t cache_limit;           /* read-only after create */
	uint64_t shadow_bytes;          /* host copies kept by read-mostly chunks: atomic */
	uint64_t parked_bytes;          /* bytes of parked chunks: atomic */
	/* Host handles' own mappings (vmmx__hva_make), kept while the handle
	 * lives: innermost, held across no other lock or driver call (hva.c). */
	pthread_mutex_t hva_lock;
	struct vmmx__hva *hvas;         /* @hva_lock */
	size_t nhvas, hvas_cap;         /* @hva_lock */

	int host_access;                /* enum vmmx_host_access: read-only after create */
	pthread_mutex_t reg_lock;       /* protects @regs */
	struct vmmx__reg *regs;         /* host registrations (host.c) */
	uint64_t reg_count, reg_bytes;  /* atomic */

	int pid;                        /* the process that created it (fork.c) */
	struct vmmx_ctx *list_prev, *list_next; /* every live context: fork.c's lock */

	pthread_mutex_t lock;
	struct vmmx__buflist *bufs;     /* RCU; written under @lock */
	struct vmmx__policy *policies;  /* RCU; written under @lock */
	struct vmmx__deferred *deferred;/* @lock; FIFO order */
	struct vmmx__deferred **deferred_tail;
	uint64_t ndeferred;             /* @lock, read atomically by stats */
};

static inline const struct vmmx__log *vmmx__ctx_log(const struct vmmx_ctx *ctx)
{
	return ctx ? &ctx->conf.log : NULL;
}

/* Accounting slot of a location, or -1 when the context cannot use it. */
static inline int vmmx__slot(const struct vmmx_ctx *ctx, struct vmmx_loc loc)
{
	switch (loc.kind) {
	case VMMX_LOC_DEVICE:
		return loc.id >= 0 && loc.id < ctx->ndev ? loc.id : -1;
	case VMMX_LOC_HOST:
		return VMMX__HOST_SLOT;
	case VMMX_LOC_HOST_NUMA:
		return loc.id >= 0 ? VMMX__HOST_SLOT : -1;
	default:
		return -1;
	}
}

/* Whether the context may place chunks at @loc: host memory, its device or a peer of it. */
static inline bool vmmx__loc_usable(const struct vmmx_ctx *ctx, struct vmmx_loc loc)
{
	int k = vmmx__slot(ctx, loc);

	return k >= 0 && (loc.kind != VMMX_LOC_DEVICE || ctx->peer[k]);
}

/*
 * The devices a context uses: its own, and every device whose room a
 * placement or migration asked for (vmmx__room).  Policy requests and
 * rebalancing list only these: reading another device's free memory needs a
 * CUDA context on it, and a context that never places memory on another GPU
 * must create nothing there (two processes on two GPUs would each take
 * memory on both).  Bits are only ever set.  Atomic.
 */
static inline bool vmmx__dev_active(const struct vmmx_ctx *ctx, int d)
{
	return d >= 0 && d < VMMX__MAX_DEVICES &&
	       (__atomic_load_n(&ctx->active, __ATOMIC_RELAXED) >> d & 1);
}

static inline void vmmx__dev_activate(struct vmmx_ctx *ctx, int d)
{
	if (!vmmx__dev_active(ctx, d))
		__atomic_fetch_or(&ctx->active, 1ull << d, __ATOMIC_RELAXED);
}

/* Charge @bytes at a location against its limit; -VMMX_ENOMEM when over. Atomic. */
int vmmx__charge(struct vmmx_ctx *ctx, struct vmmx_loc loc, uint64_t bytes);
void vmmx__uncharge(struct vmmx_ctx *ctx, struct vmmx_loc loc, uint64_t bytes);
/*
 * Bytes a location can take for new chunks now, and if that is less than
 * @want, why (limit, headroom or full).  Counts cached handles as available.
 */
/*
 * The driver's free memory, read at most once per location for one grow
 * (a cuMemGetInfo costs microseconds; a grow asks for every chunk) and
 * decremented by what the grow creates.  Zero it to start; forget() after
 * anything else moves memory (an eviction).
 */
struct vmmx__roomsnap {
	uint64_t fr[VMMX__NSLOTS];
	uint64_t ns[VMMX__NSLOTS];      /* when the driver said so */
	bool have[VMMX__NSLOTS];
};

/* Keep what a grow learnt (call at its end). */
void vmmx__roomsnap_save(struct vmmx_ctx *ctx, const struct vmmx__roomsnap *snap);
/* Forget the shared figure of a location (memory was released). */
void vmmx__freecache_forget(struct vmmx_ctx *ctx, struct vmmx_loc loc);

static inline void vmmx__roomsnap_forget(struct vmmx__roomsnap *snap)
{
	if (snap)
		for (int k = 0; k < VMMX__NSLOTS; k++)
			snap->have[k] = false;
}

/* @snap may be NULL: ask the driver now. */
uint64_t vmmx__room(struct vmmx_ctx *ctx, struct vmmx_loc loc, uint64_t want,
		    enum vmmx__why *why, struct vmmx__roomsnap *snap);

/* ---- the chunk cache (cache.c) ---- */

/* Take the largest cached handle at @loc of at most @max bytes; false if none. */
bool vmmx__cache_take(struct vmmx_ctx *ctx, struct vmmx_loc loc, size_t max, size_t min,
		      vmm_handle_t *h, size_t *size);
/* Keep an unmapped handle for reuse, or release it when over the cache limit. */
void vmmx__cache_put(struct vmmx_ctx *ctx, struct vmmx_loc loc, vmm_handle_t h, size_t size);
/* Release cached handles at @loc's slot (or every slot if @loc.kind is NONE)
 * until @bytes are freed or none is left; returns bytes released. */
uint64_t vmmx__cache_evict(struct vmmx_ctx *ctx, struct vmmx_loc loc, uint64_t bytes);
/* Free @bytes at @loc for a new handle: cached handles, then (host memory)
 * the host copies of read-mostly chunks (shadow.c).  Returns bytes freed. */
uint64_t vmmx__make_room(struct vmmx_ctx *ctx, struct vmmx_loc loc, uint64_t bytes);
/*
 * The one door to a physical handle: every handle lib/ creates comes from
 * here (and only cache.c calls vmm_create).  A handle of @size at @loc, or,
 * when memory is short, a smaller one down to @min in halving steps of
 * whole chunk_min (@min == @size: exactly @size):
 *  1. a cached handle of at most the size and at least half of it (never
 *     below @min), so that many small cached handles do not turn a big grow
 *     into many chunks;
 *  2. else a new one, charged against the location's limit;
 *  3. when the limit refuses, or the driver is out of memory, cached handles
 *     (and host copies, ctx->reclaim_host) are given back, once, and the
 *     same size is tried again;
 *  4. after that, a limit refusal ends it (*@why = LIMIT) and a driver
 *     out-of-memory halves the size (*@why = OOM: fragmented or shared).
 * With VMMX__HANDLE_FRESH (filling the cache): no cached handle is taken and
 * none given back, and a limit refusal halves the size like a driver
 * out-of-memory.  A cache hit or miss is counted.
 * Returns 0 with *@h, *@got (its size) and *@hit (it came from the cache);
 * -VMMX_ENOMEM, unlogged (the caller says what it was for), with *@why set
 * (left as it was if the loop never ran but OK -> OOM); or the driver's
 * error.  Takes ctx->cache_lock briefly; calls the driver.
 */
#define VMMX__HANDLE_FRESH 1u
int vmmx__handle_get(struct vmmx_ctx *ctx, struct vmmx_loc loc, size_t size, size_t min,
		     unsigned int flags, vmm_handle_t *h, size_t *got, bool *hit,
		     enum vmmx__why *why);
/* In a forked child: forget the cached handles' records without the driver. */
void vmmx__cache_abandon(struct vmmx_ctx *ctx);
/* Fill the device's cache with VMMX_DEVICE_PREALLOC. */
int vmmx__cache_prealloc(struct vmmx_ctx *ctx, uint64_t bytes);

/*
 * Tries of a driver step that undoes or repeats one that just worked (an
 * unmap of our own mapping, a map back at an address unmapped a moment
 * ago): a failure there is most likely transient (a driver resource, an
 * injected fault), and a range left mapped, or a chunk left unmapped,
 * breaks the buffer.  The torture test (tests/stress) lost chunks to two
 * faults in a row with a single try, and left handles mapped at 1% of
 * calls failed.
 */
#define VMMX__TRIES 4

/* vmm_unmap() tried VMMX__TRIES times; 0 or the last error. */
int vmmx__unmap_tries(struct vmmx_ctx *ctx, void *va, size_t size);

/*
 * Waits that guard an unmap: vmm_stream_sync() of @s, then vmm_sync() of the
 * whole device, each tried VMMX__TRIES times; 0 once either worked, else the
 * last error (the context is lost: a real failed wait is sticky).  Memory a
 * copy may still be using must not be unmapped before one of them worked:
 * on the GPU that ends the context (CUDA_ERROR_LAUNCH_FAILED, seen by the
 * torture test at 3% of calls failed).
 */
int vmmx__wait_tries(struct vmmx_ctx *ctx, vmm_stream_t s);

/*
 * Teardown steps that must not fail the caller: on failure the step is
 * queued on the context and retried later (next resize, buffer destroy,
 * context destroy).  Each returns 0 if done now, 1 if deferred.  An unmap
 * is tried VMMX__TRIES times first: a range left mapped blocks every map at it.
 */
int vmmx__unmap_or_defer(struct vmmx_ctx *ctx, void *va, size_t size);
int vmmx__release_or_defer(struct vmmx_ctx *ctx, vmm_handle_t h, struct vmmx_loc loc,
			   size_t size);
int vmmx__unreserve_or_defer(struct vmmx_ctx *ctx, void *va, size_t size);
/* A mapping of a range reserved for it alone, unmapped and the range
 * unreserved; the unreserve is queued behind the unmap when that was
 * deferred (a range still holding a mapping must not be freed).  0 if the
 * unmap was done now, 1 if deferred. */
int vmmx__unmap_unreserve_or_defer(struct vmmx_ctx *ctx, void *va, size_t size);
/* Queue a teardown step without trying it now. */
void vmmx__defer(struct vmmx_ctx *ctx, enum vmmx_op op, void *va, size_t size, vmm_handle_t h,
		 struct vmmx_loc loc);
/* Retry deferred steps; returns how many still wait.  Takes ctx->lock. */
uint64_t vmmx__deferred_retry(struct vmmx_ctx *ctx);
/* In a forked child: forget the queued steps without the driver. */
void vmmx__deferred_abandon(struct vmmx_ctx *ctx);


/* ---- chunk tables (table.c) ---- */

struct vmmx__chunk {
	size_t off;                     /* offset in the buffer */
	size_t size;
	struct vmmx_loc loc;
	vmm_handle_t handle;
	bool cpu;                       /* the CPU is granted access (host chunks only) */
	bool read_mostly;               /* advised VMMX_ADVISE_READ_MOSTLY (shadow.c) */
	bool verified;                  /* @shadow was kept by VMMX_HOST_COPIES=verified and
					 * serves only while the chunk's checksum is @shadow_sum;
					 * parked: @shadow_sum is the sum of what it holds */
	struct vmmx_loc shadow_loc;     /* NONE, or where @shadow lives (host memory) */
	vmm_handle_t shadow;            /* a chunk on a device: its host copy, unmapped,
					 * kept from when it was promoted (shadow.c) */
	uint64_t shadow_sum;            /* @verified: vmm_checksum() of the chunk right
					 * after it was promoted */
	void *hva;                      /* NULL, or where the host copy is also mapped, at an
					 * address of its own, granted to the GPU: @shadow's
					 * of a chunk on a device, @handle's of a parked one
					 * (kept by hva.c past the chunk's use of it) */
	bool parked;                    /* vmmx_park(): the chunk's address is unmapped; its
					 * data is @handle (host memory), mapped at @hva */
};

/*
 * A buffer's chunk table, RCU-published; immutable once published.  After
 * @c, in the same allocation, the chunks' offsets repeat in one dense array
 * (vmmx__table_offs(), filled by vmmx__table_publish): a lookup's binary
 * search then touches 8 bytes a step instead of a 64-byte chunk, an eighth of
 * the cache lines of a table that a writer has just replaced.
 */
struct vmmx__table {
	struct vmmx__table *retired_next; /* ctx->retired, once replaced */
	size_t size;                    /* logical size (what vmmx_buf_size says) */
	size_t mapped;                  /* end of the last chunk, >= size */
	size_t n;
	struct vmmx__chunk c[];
};

/* The @n offsets after @t's chunks; valid once @t is published. */
static inline size_t *vmmx__table_offs(const struct vmmx__table *t)
{
	return (size_t *)&t->c[t->n];
}

/*
 * Index of the chunk holding offset @off of @t (off < t->mapped), by binary
 * search.
 */
size_t vmmx__table_find(const struct vmmx__table *t, size_t off);
/*
 * The chunks [*@first, *@last) that [@off, @off + @len) of @t touches, @len
 * may run past the size (a range to the logical end covers the last
 * chunk's rounding too).  Return: the range's end, widened to the mapped
 * end then; 0 when it touches no chunk.
 */
size_t vmmx__table_span(const struct vmmx__table *t, size_t off, size_t len, size_t *first,
			size_t *last);
/* A table of @n chunks (header fields unset but n); NULL when out of memory. */
struct vmmx__table *vmmx__table_alloc(size_t n);
/* A copy of @t's header and chunks (offsets are filled at publish); NULL when out of memory. */
struct vmmx__table *vmmx__table_dup(const struct vmmx__table *t);
/*
 * Retire a replaced table: it joins the context's list and is freed after
 * the next grace period, which one writer waits for once every
 * VMMX__RETIRE_BATCH retirements (and vmmx_ctx_destroy), so writers rarely
 * wait for readers.  Lock-free.
 */
void vmmx__retire(struct vmmx_ctx *ctx, struct vmmx__table *old);
/* Wait for a grace period and free every table retired before it. */
void vmmx__reclaim(struct vmmx_ctx *ctx);
#define VMMX__RETIRE_BATCH 64

/* In a forked child: free the retired tables without a grace period. */
void vmmx__table_abandon(struct vmmx_ctx *ctx);

/* ---- mapping one chunk (map.c) ---- */

/*
 * Grant access to a freshly mapped range of one location: the devices that
 * need it, and the CPU too when @cpu (host chunks only).
 */
int vmmx__chunk_set_access(struct vmmx_ctx *ctx, void *va, size_t size, struct vmmx_loc loc,
			   bool cpu);
/* Map @c's handle at @va and grant it as @c says; on failure nothing stays mapped. */
int vmmx__chunk_remap(struct vmmx_ctx *ctx, void *va, const struct vmmx__chunk *c);
/*
 * Map a handle fresh from vmmx__handle_get() at @va and grant it (@cpu: to
 * the CPU too).  On failure nothing stays mapped and the handle is gone:
 * kept in the cache when only its mapping failed, released (or its release
 * deferred) when its unmap was deferred.  0 or the driver's error.
 */
int vmmx__chunk_map_new(struct vmmx_ctx *ctx, void *va, size_t size, struct vmmx_loc loc,
			vmm_handle_t h, bool cpu);
/* vmmx__chunk_remap() tried a few times: to put a chunk back after a failed step. */
int vmmx__chunk_restore(struct vmmx_ctx *ctx, void *va, const struct vmmx__chunk *c);

/* Whether a chunk placed at @loc by a grow (@moved false) or moved there by a
 * migration (@moved true) is granted to the CPU (VMMX_HOST_CPU_ACCESS). */
static inline bool vmmx__cpu_grant(const struct vmmx_ctx *ctx, struct vmmx_loc loc, bool moved)
{
	if (!vmm_loc_is_host(loc))
		return false;
	return ctx->conf.host_cpu_access == VMMX__CPU_ALL ||
	       (ctx->conf.host_cpu_access == VMMX__CPU_PLACED && !moved);
}

/* ---- host handles' own mappings (hva.c) ---- */

/*
 * Map host handle @h (at @loc, @size bytes) at an address of its own,
 * granted to the context's GPU only: where a parked chunk's data is read
 * from (vmmx_park()).  The mapping is kept while the handle lives, and
 * found again here for free.  0 with *@hva_p set, or the error,
 * everything undone.
 */
int vmmx__hva_make(struct vmmx_ctx *ctx, vmm_handle_t h, struct vmmx_loc loc, size_t size,
		   void **hva_p);
/* A chunk is done with what vmmx__hva_make() gave it: kept for the handle's
 * next park (released with the handle, vmmx__hva_forget()).  False when a
 * mapping the table could not keep was dropped and its unmap had to be
 * deferred: the handle is still mapped there, so it must be released,
 * never cached. */
bool vmmx__hva_drop(struct vmmx_ctx *ctx, void *hva, size_t size);
/* Handle @h is about to be released: its own mapping, if one is kept,
 * unmapped and unreserved first (defer.c). */
void vmmx__hva_forget(struct vmmx_ctx *ctx, vmm_handle_t h);
/* Context teardown: every kept mapping dropped (@abandon: forgotten, no
 * driver call, in a forked child), the table freed. */
void vmmx__hva_teardown(struct vmmx_ctx *ctx, bool abandon);

#endif /* VMMX_LIB_INTERNAL_MEM_H */
