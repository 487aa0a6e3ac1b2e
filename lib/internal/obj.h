/* SPDX-License-Identifier: MIT */
/*
 * internal/obj.h - layer 2 of lib/: objects.  Contexts (ctx.c), buffers
 * (buf.c), the buffer list (buflist.c), migration (migrate.c), streams and
 * waits (stream.c), events (event.c), read-mostly and verified host copies (shadow.c), host registrations
 * (host.c), the policy glue (policy.c, builtin_*.c), eviction choices
 * (evict.c), placement traces (trace.c) and fork() (fork.c).  Includes
 * mem.h (and through it base.h).  Locking: mem.h has the whole order.
 */
#ifndef VMMX_LIB_INTERNAL_OBJ_H
#define VMMX_LIB_INTERNAL_OBJ_H

#include "mem.h"

/* ---- policies (policy.c) ---- */

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

/* Get (load or share) the instance for @spec.  Takes ctx->lock. */
int vmmx__policy_get(struct vmmx_ctx *ctx, const char *spec, struct vmmx__policy **pol_p);
/* Drop a reference; the last one unloads (after a grace period). Takes ctx->lock. */
void vmmx__policy_put(struct vmmx_ctx *ctx, struct vmmx__policy *pol);
void vmmx__policy_buf_event(struct vmmx__policy *pol, uint64_t id, size_t capacity, int created);
const char *vmmx__policy_builtin_names(void);
/* In a forked child: unload every policy without calling its fini. */
void vmmx__policy_abandon(struct vmmx_ctx *ctx);

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
/*
 * Install the atfork handlers, with @take run first and @give last:
 * the framework allocators' (alloc.c), whose locks are outer to
 * every lock here.  Called before those locks are first taken; 0 or
 * -VMMX_ENOMEM.
 */
int vmmx__atfork_install_outer(void (*take)(void), void (*give)(void));
/* Join the list the atfork handlers lock (installs them on first use); sets ctx->pid. */
int vmmx__ctx_list_add(struct vmmx_ctx *ctx);
void vmmx__ctx_list_del(struct vmmx_ctx *ctx);
/* Destructors of inherited objects: free host-side records, call no driver, no plugin. */
void vmmx__buf_abandon(struct vmmx_buf *buf);
void vmmx__ctx_abandon(struct vmmx_ctx *ctx);
/* Whether the policy's ops table has member @m, and it is set. */
#define VMMX__POLICY_HAS(pol, m) \
	((pol)->ops->size >= VMMX_POLICY_SIZE_THROUGH(struct vmmx_policy_ops, m) && (pol)->ops->m)
/* Tell the buffer's policy about a chunk (enum vmmx_policy_event). */
void vmmx__policy_chunk_event(struct vmmx_buf *buf, const struct vmmx__chunk *c, int event);
/* Whether the policy answers evict(). */
bool vmmx__policy_can_evict(const struct vmmx__policy *pol);
/* Pass advice (enum vmmx_advice) on [off, off+len) of a buffer to its policy, if it takes it. */
void vmmx__policy_advise(struct vmmx__policy *pol, uint64_t buf_id, size_t off, size_t len,
			 int advice);

/* ---- eviction and promotion (evict.c) ---- */

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
/* vmmx_buf_migrate_on() (@st may be NULL) to host location @to, parking the
 * chunks whose copy there may serve: vmmx_park() of one buffer's part;
 * the bytes parked added to *@parked_p. */
int vmmx__park_on(struct vmmx_buf *buf, size_t off, size_t len, struct vmmx_loc to,
		  struct vmmx_stream *st, size_t *parked_p);
/* vmmx_unpark() of one buffer's part [off, off+len) (within its size); the
 * bytes mapped in place added to *@done_p. */
int vmmx__unpark(struct vmmx_buf *buf, size_t off, size_t len, size_t *done_p);
/*
 * vmmx_swap() of one buffer's part each: [out_off, +out_len) of @out to the
 * host location @to_out, then [in_off, +in_len) of @in to device @to_in,
 * the first's remaps onto its kept host copies made while the second's
 * copies run.  Both locks held, both quiesced.  *@out_moved_p,
 * *@in_moved_p: bytes moved.  The first error; @in is not moved when @out
 * failed.
 */
int vmmx__swap_locked(struct vmmx_buf *out, size_t out_off, size_t out_len,
		      struct vmmx_loc to_out, struct vmmx_buf *in, size_t in_off, size_t in_len,
		      struct vmmx_loc to_in, vmm_stream_t s, size_t *out_moved_p, size_t *in_moved_p);
/*
 * Map every parked chunk of @buf at its address again (unparked), for a
 * call (@fn, named in the error) that uses the buffer's memory or
 * mappings.  buf->lock held.  0 (also when none is parked), or the error of
 * the first that could not be mapped: it and those after it stay parked.
 */
int vmmx__unpark_locked(struct vmmx_buf *buf, const char *fn);

/* ---- host copies: read-mostly and verified chunks (shadow.c) ---- */

/* Whether @c keeps a host copy. */
#define VMMX__HAS_SHADOW(c) ((c)->shadow_loc.kind != VMMX_LOC_NONE)
/* vmm_checksum() of [va, va+size), counted in the context's checksums. */
int vmmx__checksum(struct vmmx_ctx *ctx, const void *va, size_t size, uint64_t *sum_p);
/*
 * @nc (of @buf's next table) has just moved from host memory at @loc, whose
 * handle was @h, to a device, and is mapped and granted there: keep @h as
 * @nc's host copy if @nc is read-mostly (unverified), or with
 * VMMX_HOST_COPIES=verified when the checksum of its device copy can be
 * taken (verified, with that sum).  True when @h is kept; false when the
 * caller gives it back.  buf->lock held; calls the driver.
 */
bool vmmx__shadow_promoted(struct vmmx_buf *buf, struct vmmx__chunk *nc, struct vmmx_loc loc,
			   vmm_handle_t h);
/*
 * As vmmx__shadow_promoted() for a chunk brought in from parked (verified),
 * with no checksum: @sum is that of the bytes parked, which the copy moved
 * unchanged.  Always keeps @h (true).
 */
bool vmmx__shadow_kept(struct vmmx_buf *buf, struct vmmx__chunk *nc, struct vmmx_loc loc,
		       vmm_handle_t h, uint64_t sum);
/*
 * @c (of @buf's next table, on a device, with a host copy) is about to move
 * back to its copy's location: true when the copy may be mapped again
 * (unverified, or its checksum is unchanged); else the copy is dropped to
 * the cache (counted as changed when the checksum differed) and the chunk
 * must be copied.  buf->lock held; calls the driver.
 */
bool vmmx__shadow_unchanged(struct vmmx_buf *buf, struct vmmx__chunk *c);
/* Forget @c's host copy (unmapped from its @hva first); its handle goes to
 * the cache (@release false) or back to the driver.  Returns the bytes it
 * held (0: none). */
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

/* ---- streams (stream.c) ---- */

/* A driver stream of a context (vmmx_stream_create). */
struct vmmx_stream {
	struct vmmx_ctx *ctx;           /* read-only */
	vmm_stream_t s;                 /* read-only */
};

/* ---- events (event.c) ---- */

/* A driver event of a context (vmmx_event_create). */
struct vmmx_event {
	struct vmmx_ctx *ctx;           /* read-only */
	vmm_event_t e;                  /* read-only */
};

/* ---- the buffer list (buflist.c) ---- */

/* RCU-published array of a context's buffers, sorted by base address. */
struct vmmx__buflist {
	size_t n;
	struct vmmx_buf *bufs[];
};

/* Add/remove a buffer in the context's RCU list (takes ctx->lock, waits a grace period on remove). */
int vmmx__ctx_add_buf(struct vmmx_ctx *ctx, struct vmmx_buf *buf);
void vmmx__ctx_remove_buf(struct vmmx_ctx *ctx, struct vmmx_buf *buf);
/* Index of the first buffer of @l whose base is above @addr (binary search). */
size_t vmmx__buflist_upper(const struct vmmx__buflist *l, uintptr_t addr);
/* Find the buffer whose reservation holds @addr; RCU read side must be held. */
struct vmmx_buf *vmmx__ctx_find_buf(struct vmmx_ctx *ctx, uintptr_t addr);
/* In a forked child: take @buf out of the list without a grace period. */
void vmmx__buflist_abandon(struct vmmx_ctx *ctx, struct vmmx_buf *buf);

/* White-box access for tests (ctx.c). */
struct vmm *vmmx__ctx_vmm(struct vmmx_ctx *ctx);

/* ---- buffers (buf.c) ---- */

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
	bool host_copies;               /* a chunk ever kept a verified host copy (shadow.c):
					 * written under @lock, read atomically */
	unsigned int users;             /* libvmmx calls using its memory now (pins); atomic */
	unsigned int holds;             /* calls by address working on it (prefetch.c): destroy
					 * waits for them; atomic */
	bool moving;                    /* a writer is about to unmap chunks below the size:
					 * written under @lock, read atomically */
	/* Sleep and wake (sleep.c): written under vmmx__sleep_lock, read atomically. */
	char *tag;                      /* NULL or the tag; freed after a grace period */
	int sleep;                      /* enum vmmx__sleep_state */
	size_t sleep_size;              /* the size it wakes to */
	size_t sleep_nruns;
	struct vmmx__sleep_run *sleep_runs; /* where its device chunks were (migrated offload) */
	struct vmmx_buf *stash;         /* host buffer holding the offloaded contents, kept
					 * across cycles until vmmx_sleep_release(); NULL none */
	size_t stash_from;              /* the stash holds [stash_from, sleep_size) */
	struct vmmx_buf *stash_of;      /* this buffer is the stash of that one; NULL if not */
};

/* ---- sleep and wake (sleep.c; the buffer's fields above) ---- */

enum vmmx__sleep_state { VMMX__AWAKE = 0, VMMX__OFFLOADED, VMMX__DISCARDED };

/* A run of adjacent chunks on one device, as it was before the sleep. */
struct vmmx__sleep_run {
	size_t off;
	size_t len;
	struct vmmx_loc loc;
};

/* The calling thread's current tag (vmmx_tag_scope): new buffers carry it. */
extern __thread char vmmx__tag_cur[VMMX_TAG_MAX];
/* Free a buffer's sleep records and destroy its stash (destroy), or only
 * forget them (@abandon: a forked child, no driver). */
void vmmx__buf_sleep_free(struct vmmx_buf *buf, bool abandon);

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
/* Wait until no libvmmx call pins @buf (a quiesce). */
void vmmx__buf_wait_unpinned(struct vmmx_buf *buf);
/*
 * Wait until no libvmmx call pins @buf, and none by address holds it
 * (buf->holds, taken under the RCU read side where the lookup found it):
 * destroy, after unlisting it.
 */
void vmmx__buf_wait_released(struct vmmx_buf *buf);
void vmmx__buf_unquiesce(struct vmmx_buf *buf);

/*
 * Publish @t as @buf's table and retire the old one (vmmx__retire).
 */
void vmmx__table_publish(struct vmmx_buf *buf, struct vmmx__table *t);

#endif /* VMMX_LIB_INTERNAL_OBJ_H */
