/* SPDX-License-Identifier: MIT */
/*
 * internal.h - what the files of lib/ share.  Nothing here is exported: the
 * names are vmmx__*, compiled with -fvisibility=hidden.
 *
 * Locking, from outer to inner:
 *   alloc.c's global_lock (making a process-wide allocator and its context)
 *   the allocator list's lock (alloc.c: list edits, and across a fork)
 *   a->lock     (one framework allocator: held across segment creation and
 *                release, so outer to every lock below)
 *   the context list's lock (fork.c: list edits, and across a fork)
 *   buf->lock   (a writer of one buffer: resize, destroy)
 *   ctx->lock   (the buffer list and the deferred-teardown list)
 *   ctx->reg_lock, then ctx->cache_lock (fork.c takes all three in this order)
 * fork.c's prepare handler takes every one of them but buf->lock, in this
 * order, then urcu-bp's locks and the driver layer's (fork.c says why).
 * Readers (lookup, residency, chunks, memcpy splitting, size) take neither:
 * they read RCU-published arrays inside urcu-bp read-side sections, and
 * writers free old arrays only after a grace period.
 */
#ifndef VMMX_LIB_INTERNAL_H
#define VMMX_LIB_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include <urcu/urcu-bp.h>

#include "vmm/vmm.h"
#include "vmmx.h"
#include "vmmx/policy.h"

#define VMMX__FMT(a, b) __attribute__((format(printf, a, b)))

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

/* ---- errors and log (error.c, log.c) ---- */

struct vmmx__log {
	enum vmmx_log_level level;
	vmmx_log_fn *fn;                /* NULL: standard error */
	void *arg;
};

/* Log one line if @log's level admits it (NULL @log: the default level). */
void vmmx__logf(const struct vmmx__log *log, enum vmmx_log_level level, const char *fmt, ...)
	VMMX__FMT(3, 4);
/*
 * Record @err with a message as the thread's last error, log it at debug
 * level, and return @err, so that `return vmmx__fail(log, -VMMX_EINVAL, ...)`
 * reads naturally where an error is first seen.
 */
int vmmx__fail(const struct vmmx__log *log, int err, const char *fmt, ...) VMMX__FMT(3, 4);
/* Set the thread's last error message without logging. */
void vmmx__set_last_error(const char *msg);
/* Clear the thread's last error (entry of public calls that may fail). */
void vmmx__clear_last_error(void);
/* Parse a VMMX_LOG value; -VMMX_EINVAL when it is none of the names. */
int vmmx__log_parse(const char *s, enum vmmx_log_level *level);
const char *vmmx__log_level_name(enum vmmx_log_level level);

/* ---- configuration (config.c) ---- */

/* VMMX_HOST_CPU_ACCESS: which host chunks the CPU is granted too. */
enum vmmx__cpu_access {
	VMMX__CPU_NONE = 0,             /* none: GPU only */
	VMMX__CPU_ALL = 1,              /* every host chunk */
	VMMX__CPU_PLACED = 2,           /* chunks a grow placed on host, not those moved there */
};

#define VMMX__POLICY_SPEC_MAX_CONF 256

/* A size setting as written: bytes, or a percentage resolved against a total later. */
struct vmmx__size_setting {
	bool set;
	bool pct;
	uint64_t value;                 /* bytes, or percent when @pct */
};

/* Accounting slots: one per device ordinal, one for host memory. */
#define VMMX__MAX_DEVICES 16
#define VMMX__HOST_SLOT VMMX__MAX_DEVICES
#define VMMX__NSLOTS (VMMX__MAX_DEVICES + 1)

/*
 * A per-device size setting (VMMX_DEVICE_LIMIT, VMMX_DEVICE_HEADROOM):
 * "SIZE" for every device, "N:SIZE,..." per device ordinal, or both
 * ("8GiB,1:4GiB": device 1 gets 4 GiB, every other device 8 GiB).
 */
struct vmmx__dev_setting {
	struct vmmx__size_setting all;  /* the plain item: devices not named */
	struct vmmx__size_setting dev[VMMX__MAX_DEVICES];
};

struct vmmx__conf {
	char backend[16];
	int device;
	char policy[VMMX__POLICY_SPEC_MAX_CONF];
	char policy_path[4096];
	char trace[4096];
	struct vmmx__size_setting chunk_size;
	struct vmmx__size_setting chunk_max;
	struct vmmx__dev_setting device_limit;
	struct vmmx__size_setting host_limit;
	struct vmmx__dev_setting device_headroom;
	struct vmmx__size_setting cache_limit;
	struct vmmx__size_setting device_prealloc;
	uint64_t sim_device_mem;
	uint64_t sim_host_mem;
	int sim_devices;
	int sim_pageable;
	int host_cpu_access;            /* enum vmmx__cpu_access */
	struct {
		int op;                 /* enum vmmx_op, -1: none */
		uint64_t nth;
	} faults[VMMX_OP_COUNT];
	struct vmmx__log log;
};

/*
 * Build the effective configuration: @cfg fields, then @cfg->vars, then the
 * environment, then defaults.  Returns -VMMX_ECONFIG with the last error
 * naming the variable, the value and the expected form.
 */
int vmmx__conf_load(const struct vmmx_config *cfg, struct vmmx__conf *conf);
/* Resolve a size setting: @total is 100%; @dflt when unset. */
uint64_t vmmx__size_resolve(const struct vmmx__size_setting *s, uint64_t total, uint64_t dflt);
/* The setting of device @d (its own item, else the plain one), resolved as above. */
uint64_t vmmx__dev_resolve(const struct vmmx__dev_setting *s, int d, uint64_t total,
			   uint64_t dflt);
/* The highest device ordinal a per-device setting names, or -1 (none named). */
int vmmx__dev_setting_max(const struct vmmx__dev_setting *s);

/* ---- policies (policy.c) ---- */

#define VMMX__POLICY_NAME_MAX 63
#define VMMX__POLICY_SPEC_MAX 256
#define VMMX__POLICY_COUNTERS 8

struct vmmx__policy_counter {
	int claimed;                    /* atomic: slot taken */
	int name_set;                   /* atomic: @name is valid */
	char name[32];
	uint64_t value;                 /* atomic */
};

/* A loaded policy instance: one per distinct spec per context. */
struct vmmx__policy {
	struct vmmx__policy *next;      /* ctx->policies, RCU; written under ctx->lock */
	struct vmmx_ctx *ctx;
	char spec[VMMX__POLICY_SPEC_MAX];
	char name[VMMX__POLICY_NAME_MAX + 1];
	char where[256];                /* file it came from, or "built-in" */
	const struct vmmx_policy_ops *ops;
	void *state;
	void *dl;                       /* NULL for a built-in */
	struct vmmx_policy_host host;   /* given to the policy; container_of finds us */
	unsigned int refs;              /* ctx->lock */
	char msg[256];                  /* last warning or error the policy logged in init */
	bool in_init;
	struct vmmx__policy_counter counters[VMMX__POLICY_COUNTERS];
};

/* Check a spec's syntax; sets the name's length. */
int vmmx__policy_spec_check(const char *spec, size_t *name_len);
/* Get (load or share) the instance for @spec.  Takes ctx->lock. */
int vmmx__policy_get(struct vmmx_ctx *ctx, const char *spec, struct vmmx__policy **pol_p);
/* Drop a reference; the last one unloads (after a grace period). Takes ctx->lock. */
void vmmx__policy_put(struct vmmx_ctx *ctx, struct vmmx__policy *pol);
void vmmx__policy_buf_event(struct vmmx__policy *pol, uint64_t id, size_t capacity, int created);
const char *vmmx__policy_builtin_names(void);

/* One policy the context could load, as vmmx__policy_scan finds it. */
struct vmmx__policy_file {
	const char *name;               /* from the file name vmmx_policy_<name>.so, or the built-in's */
	const char *path;               /* the file, or "built-in" */
	const struct vmmx_policy_ops *ops; /* its table, NULL if none was read; valid during the call */
	const char *why;                /* NULL when the loader accepts it, else why it refuses it */
};
typedef int vmmx__policy_scan_fn(void *arg, const struct vmmx__policy_file *f);
/*
 * Every vmmx_policy_*.so of the loader's directories, in its search order
 * (file names sorted within a directory), checked as the loader checks them
 * but never initialised, then the built-ins.  Stops at the first nonzero
 * answer of @fn and returns it; -VMMX_ENOMEM.  Takes no lock; dlopens.
 */
int vmmx__policy_scan(struct vmmx_ctx *ctx, vmmx__policy_scan_fn *fn, void *arg);

/* ---- device facts, HMM (info.c, hmm.c) ---- */

/*
 * vmmx_hmm_probe() with the files it reads named by the caller (tests): the
 * driver's version text (/proc/driver/nvidia/version), nvidia_uvm's
 * uvm_disable_hmm parameter, the kernel configuration (plain or gzip); NULL
 * for a file that is not there.
 */
int vmmx__hmm_probe_paths(struct vmmx_ctx *ctx, struct vmmx_hmm_info *info,
			  const char *proc_version, const char *uvm_param, const char *kconfig);

/* ---- context (ctx.c) ---- */

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

/* RCU-published array of a context's buffers, sorted by base address. */
struct vmmx__buflist {
	size_t n;
	struct vmmx_buf *bufs[];
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
};

/* A released handle kept for reuse (cache.c). */
struct vmmx__cached {
	struct vmmx__cached *next;
	vmm_handle_t handle;
	size_t size;
	struct vmmx_loc loc;
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

	pthread_mutex_t cache_lock;     /* inner to buf->lock; protects the cache lists */
	struct vmmx__cached *cache[VMMX__NSLOTS];
	uint64_t cache_bytes[VMMX__NSLOTS]; /* atomic reads, writes under cache_lock */
	uint64_t cache_total;           /* atomic reads, writes under cache_lock */
	uint64_t cache_limit;           /* read-only after create */
	uint64_t shadow_bytes;          /* host copies kept by read-mostly chunks: atomic */

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

/* ---- host memory (host.c) ---- */

struct vmmx__reg;
/* Choose the host-access path from the device's attributes. */
void vmmx__host_setup(struct vmmx_ctx *ctx);
/* Unregister what is left (with a warning). */
void vmmx__host_teardown(struct vmmx_ctx *ctx);
const char *vmmx__host_access_name(int access);

/* In a forked child: forget the registrations' records without the driver. */
void vmmx__host_abandon(struct vmmx_ctx *ctx);

/* ---- fork() (fork.c) ---- */

/* The process libvmmx runs in (getpid(), updated in a forked child): atomic. */
extern int vmmx__pid;

/*
 * Whether @ctx was created by another process (this is a forked child).
 * Every entry point checks it first, before any lock or driver call.
 */
static inline bool vmmx__inherited(const struct vmmx_ctx *ctx)
{
	return ctx->pid != __atomic_load_n(&vmmx__pid, __ATOMIC_RELAXED);
}

/* Fail @fn on an inherited context: -VMMX_ENODRIVER naming both processes. */
int vmmx__fail_inherited(const struct vmmx_ctx *ctx, const char *fn);
/* Install the atfork handlers (once); 0 or -VMMX_ENOMEM. */
int vmmx__atfork_install(void);
/* alloc.c: take every allocator lock before a fork (global_lock, the list's, each a->lock)... */
void vmmx__alloc_atfork_prepare(void);
/* ...and release them after it, in the parent and in the child. */
void vmmx__alloc_atfork_release(void);
/* Join the list the atfork handlers lock (installs them on first use); sets ctx->pid. */
int vmmx__ctx_list_add(struct vmmx_ctx *ctx);
void vmmx__ctx_list_del(struct vmmx_ctx *ctx);
/* Destructors of inherited objects: free host-side records, call no driver, no plugin. */
void vmmx__buf_abandon(struct vmmx_buf *buf);
void vmmx__ctx_abandon(struct vmmx_ctx *ctx);

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
 * A handle of exactly @size at @loc: a cached one, else a new one (charged),
 * giving cached handles back once when the limit or the driver refuses.
 * -VMMX_ENOMEM (not logged: the caller says what it was for), or the
 * driver's error.
 */
int vmmx__handle_get(struct vmmx_ctx *ctx, struct vmmx_loc loc, size_t size, vmm_handle_t *h);
/* Fill the device's cache with VMMX_DEVICE_PREALLOC. */
int vmmx__cache_prealloc(struct vmmx_ctx *ctx, uint64_t bytes);

/* ---- eviction and promotion (evict.c) ---- */

struct vmmx__chunk;
/* Tell the buffer's policy about a chunk (enum vmmx_policy_event). */
void vmmx__policy_chunk_event(struct vmmx_buf *buf, const struct vmmx__chunk *c, int event);
bool vmmx__policy_can_evict(const struct vmmx__policy *pol);
/* Ask the policy for victims to make @need bytes of room at @want and move
 * them; buf->lock held.  Returns bytes moved. */
uint64_t vmmx__policy_evict(struct vmmx_buf *buf, const struct vmmx_policy_request *req,
			    struct vmmx_loc want, uint64_t need);
/* Ask the policy for moves and make them; no buffer lock held. */
int vmmx__policy_rebalance(struct vmmx_ctx *ctx, struct vmmx__policy *pol);

/* ---- migration (migrate.c) ---- */

/* Move the chunks of [off, off+len) to @to; buf->lock held.  *moved_p: bytes moved. */
int vmmx__migrate_locked(struct vmmx_buf *buf, size_t off, size_t len, struct vmmx_loc to,
			 vmm_stream_t s, size_t *moved_p);

/* ---- read-mostly chunks and their host copies (shadow.c) ---- */

/* Whether @c keeps a host copy. */
#define VMMX__HAS_SHADOW(c) ((c)->shadow_loc.kind != VMMX_LOC_NONE)
/* Keep @h, the host handle at @loc that @nc had before it moved to a device,
 * as @nc's host copy. */
void vmmx__shadow_keep(struct vmmx_ctx *ctx, struct vmmx__chunk *nc, struct vmmx_loc loc,
		       vmm_handle_t h);
/* Forget @c's host copy; its handle goes to the cache (@release false) or
 * back to the driver.  Returns the bytes it held (0: none). */
size_t vmmx__shadow_drop(struct vmmx_ctx *ctx, struct vmmx__chunk *c, bool release);
/* VMMX_ADVISE_READ_MOSTLY (@on) or VMMX_ADVISE_NOT_READ_MOSTLY on
 * [off, off+len): publishes a new table when a chunk changes; buf->lock held. */
int vmmx__read_mostly_advise(struct vmmx_buf *buf, size_t off, size_t len, bool on);
/*
 * [off, off+len) of @buf is about to be written through vmmx_memcpy or
 * vmmx_memset: drop the host copies of the chunks it touches (to the cache),
 * keeping their read-mostly mark.  Tries buf->lock, never waits for it (the
 * caller holds pins on @buf): 1 when it is held.  0, or -VMMX_ENOMEM
 * (nothing changed).
 */
int vmmx__shadow_written(struct vmmx_buf *buf, size_t off, size_t len);
/* Release host copies, chunk by chunk, until @bytes are freed; buffers
 * another thread holds (or the caller does) are skipped.  No ctx->lock held. */
uint64_t vmmx__shadow_reclaim(struct vmmx_ctx *ctx, uint64_t bytes);

/* ---- trace (trace.c) ---- */

struct vmmx__trace_rec {
	const struct vmmx_buf *buf;
	size_t chunk;
	size_t off;
	size_t size;
	struct vmmx_loc preferred;
	struct vmmx_loc chosen;
	enum vmmx__why why;             /* why the preferred location was refused */
	bool cache_hit;
	const char *tried;              /* "device:0 at its limit; ..." */
};
int vmmx__trace_open(struct vmmx_ctx *ctx);
void vmmx__trace_close(struct vmmx_ctx *ctx);
void vmmx__trace_place(struct vmmx_ctx *ctx, const struct vmmx__trace_rec *rec);

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
/* Queue a teardown step without trying it now. */
void vmmx__defer(struct vmmx_ctx *ctx, enum vmmx_op op, void *va, size_t size, vmm_handle_t h,
		 struct vmmx_loc loc);
/* Retry deferred steps; returns how many still wait.  Takes ctx->lock. */
uint64_t vmmx__deferred_retry(struct vmmx_ctx *ctx);

/* Add/remove a buffer in the context's RCU list (takes ctx->lock, waits a grace period on remove). */
int vmmx__ctx_add_buf(struct vmmx_ctx *ctx, struct vmmx_buf *buf);
void vmmx__ctx_remove_buf(struct vmmx_ctx *ctx, struct vmmx_buf *buf);
/* Index of the first buffer of @l whose base is above @addr (binary search). */
size_t vmmx__buflist_upper(const struct vmmx__buflist *l, uintptr_t addr);
/* Find the buffer whose reservation holds @addr; RCU read side must be held. */
struct vmmx_buf *vmmx__ctx_find_buf(struct vmmx_ctx *ctx, uintptr_t addr);

/* White-box access for tests. */
struct vmm *vmmx__ctx_vmm(struct vmmx_ctx *ctx);

/* ---- buffers (buf.c) ---- */

struct vmmx__chunk {
	size_t off;                     /* offset in the buffer */
	size_t size;
	struct vmmx_loc loc;
	vmm_handle_t handle;
	bool cpu;                       /* the CPU is granted access (host chunks only) */
	bool read_mostly;               /* advised VMMX_ADVISE_READ_MOSTLY (shadow.c) */
	struct vmmx_loc shadow_loc;     /* NONE, or where @shadow lives (host memory) */
	vmm_handle_t shadow;            /* a read-mostly chunk on a device: its host copy,
					 * unmapped, kept from when it was promoted */
};

/*
 * A buffer's chunk table, RCU-published; immutable once published.  After
 * @c, in the same allocation, the chunks' offsets repeat in one dense array
 * (vmmx__table_offs(), filled by vmmx__table_publish): a lookup's binary
 * search then touches 8 bytes a step instead of a 40-byte chunk, a fifth of
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

struct vmmx_buf {
	struct vmmx_ctx *ctx;           /* read-only */
	uintptr_t base;                 /* read-only */
	size_t capacity;                /* read-only */
	struct vmmx__policy *policy;    /* read-only (a reference) */
	uint64_t id;                    /* read-only: unique in the context */
	pthread_mutex_t lock;           /* serialises writers */
	struct vmmx__table *table;      /* RCU; written under @lock */
	bool read_mostly;               /* a chunk was ever marked read-mostly (shadow.c):
					 * written under @lock, read atomically */
	unsigned int users;             /* libvmmx calls using its memory now (pins); atomic */
	bool moving;                    /* a writer is about to unmap chunks below the size:
					 * written under @lock, read atomically */
};

/*
 * Pins: a libvmmx call that uses a buffer's memory (a copy, a memset) pins
 * it from before it reads the table until its driver call returned; a
 * writer that unmaps chunks below the size (shrink, trim, migration)
 * quiesces it first.  vmmx__buf_pin() returns false, pinning nothing, while
 * the buffer is moving: the caller drops its other pins, waits and looks
 * again.  vmmx__buf_quiesce() needs @buf->lock; with @wait it waits for the
 * pins to go, without it returns false (quiescing nothing) if any is held.
 * vmmx__buf_unquiesce() ends it.  Lock-free; quiesce may spin.
 */
bool vmmx__buf_pin(struct vmmx_buf *buf);
void vmmx__buf_unpin(struct vmmx_buf *buf);
bool vmmx__buf_quiesce(struct vmmx_buf *buf, bool wait);
void vmmx__buf_unquiesce(struct vmmx_buf *buf);

/*
 * Index of the chunk holding offset @off of @t (off < t->mapped), by binary
 * search.
 */
size_t vmmx__table_find(const struct vmmx__table *t, size_t off);
/* A table of @n chunks (header fields unset but n); NULL when out of memory. */
struct vmmx__table *vmmx__table_alloc(size_t n);
/* A copy of @t's header and chunks (offsets are filled at publish); NULL when out of memory. */
struct vmmx__table *vmmx__table_dup(const struct vmmx__table *t);
/*
 * Publish @t as @buf's table and retire the old one (vmmx__retire).
 */
void vmmx__table_publish(struct vmmx_buf *buf, struct vmmx__table *t);
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
/*
 * Grant access to a freshly mapped range of one location: the devices that
 * need it, and the CPU too when @cpu (host chunks only).
 */
int vmmx__chunk_set_access(struct vmmx_ctx *ctx, void *va, size_t size, struct vmmx_loc loc,
			   bool cpu);
/* Map @c's handle at @va and grant it as @c says; on failure nothing stays mapped. */
int vmmx__chunk_remap(struct vmmx_ctx *ctx, void *va, const struct vmmx__chunk *c);
/* vmmx__chunk_remap() tried a few times: to put a chunk back after a failed step. */
int vmmx__chunk_restore(struct vmmx_ctx *ctx, void *va, const struct vmmx__chunk *c);

/* Whether @a and @b are the same location (kind and id). */
static inline bool vmmx__same_loc(struct vmmx_loc a, struct vmmx_loc b)
{
	return a.kind == b.kind && a.id == b.id;
}

/* Whether a chunk placed at @loc by a grow (@moved false) or moved there by a
 * migration (@moved true) is granted to the CPU (VMMX_HOST_CPU_ACCESS). */
static inline bool vmmx__cpu_grant(const struct vmmx_ctx *ctx, struct vmmx_loc loc, bool moved)
{
	if (!vmm_loc_is_host(loc))
		return false;
	return ctx->conf.host_cpu_access == VMMX__CPU_ALL ||
	       (ctx->conf.host_cpu_access == VMMX__CPU_PLACED && !moved);
}

/* ---- helpers ---- */

static inline size_t vmmx__round_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

static inline size_t vmmx__round_down(size_t x, size_t a)
{
	return x / a * a;
}

/* Copy @s into @out as the content of a JSON string (quotes, backslashes and
 * control bytes escaped, bytes that are not well-formed UTF-8 as \u00XX, so
 * the result is valid UTF-8); truncates rather than overflow, never inside a
 * sequence or an escape. */
void vmmx__json_escape(char *out, size_t len, const char *s);

/* Format a byte count for humans ("1.5 GiB") into @buf. */
const char *vmmx__fmt_size(uint64_t bytes, char *buf, size_t len);

#endif /* VMMX_LIB_INTERNAL_H */
