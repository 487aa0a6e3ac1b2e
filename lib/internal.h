/* SPDX-License-Identifier: MIT */
/*
 * internal.h - what the files of lib/ share.  Nothing here is exported: the
 * names are vmmx__*, compiled with -fvisibility=hidden.
 *
 * Locking, from outer to inner:
 *   buf->lock   (a writer of one buffer: resize, destroy)
 *   ctx->lock   (the buffer list and the deferred-teardown list)
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

#define VMMX__FMT(a, b) __attribute__((format(printf, a, b)))

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

/* A size setting as written: bytes, or a percentage resolved against a total later. */
struct vmmx__size_setting {
	bool set;
	bool pct;
	uint64_t value;                 /* bytes, or percent when @pct */
};

struct vmmx__conf {
	char backend[16];
	int device;
	char policy[256];
	struct vmmx__size_setting chunk_size;
	struct vmmx__size_setting chunk_max;
	struct vmmx__size_setting device_limit;
	struct vmmx__size_setting host_limit;
	uint64_t sim_device_mem;
	uint64_t sim_host_mem;
	int sim_devices;
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

/* ---- placement (place.c) ---- */

#define VMMX__MAX_RANK 8

/* What the policy is asked for the next chunk of a grow. */
struct vmmx__place_req {
	size_t off;                     /* offset of the chunk in the buffer */
	size_t want;                    /* bytes still to place in this grow */
	int device;                     /* the context's device */
	uint64_t room_device;           /* bytes the device can take (limits, free memory) */
	uint64_t room_host;             /* bytes host memory can take */
};

/*
 * The seam between buffers and placement policies: rank() fills @locs with
 * locations in order of preference and returns how many (1..max), or a
 * negative error.  Called with the buffer's lock held; must not block.
 */
struct vmmx__policy {
	const char *name;
	int (*rank)(const struct vmmx__policy *pol, const struct vmmx__place_req *req,
		    struct vmmx_loc *locs, int max);
};

/* Find a built-in policy by name ("device-first", "device", "host"); NULL if none. */
const struct vmmx__policy *vmmx__policy_find(const char *name, size_t len);
/* Comma-separated names of the built-in policies, for messages. */
const char *vmmx__policy_names(void);

/* ---- context (ctx.c) ---- */

enum vmmx__kind { VMMX__DEVICE = 0, VMMX__HOST = 1, VMMX__NKINDS = 2 };

static inline enum vmmx__kind vmmx__kind_of(struct vmmx_loc loc)
{
	return loc.kind == VMMX_LOC_DEVICE ? VMMX__DEVICE : VMMX__HOST;
}

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
	uint64_t placed[VMMX__NKINDS];
	uint64_t fallbacks;
	uint64_t resizes;
	uint64_t resize_failures;
	uint64_t copies;
};

struct vmmx_ctx {
	struct vmm *vmm;                /* read-only after create */
	struct vmmx__conf conf;         /* read-only after create */
	int device;
	size_t gran;                    /* allocation granularity (all locations) */
	size_t chunk_min;
	size_t chunk_max;
	uint64_t limit[VMMX__NKINDS];   /* UINT64_MAX: none */
	uint64_t total[VMMX__NKINDS];   /* memory of the location at create time */
	const struct vmmx__policy *policy;   /* default policy */
	uint64_t held[VMMX__NKINDS];    /* bytes of live handles: atomic */
	struct vmmx__counters ctr;      /* atomic */

	pthread_mutex_t lock;
	struct vmmx__buflist *bufs;     /* RCU; written under @lock */
	struct vmmx__deferred *deferred;/* @lock; FIFO order */
	struct vmmx__deferred **deferred_tail;
	uint64_t ndeferred;             /* @lock, read atomically by stats */
};

static inline const struct vmmx__log *vmmx__ctx_log(const struct vmmx_ctx *ctx)
{
	return ctx ? &ctx->conf.log : NULL;
}

/* Charge @bytes at a location against its limit; -VMMX_ENOMEM when over. Atomic. */
int vmmx__charge(struct vmmx_ctx *ctx, struct vmmx_loc loc, uint64_t bytes);
void vmmx__uncharge(struct vmmx_ctx *ctx, struct vmmx_loc loc, uint64_t bytes);

/*
 * Teardown steps that must not fail the caller: on failure the step is
 * queued on the context and retried later (next resize, buffer destroy,
 * context destroy).  Each returns 0 if done now, 1 if deferred.
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
};

/* A buffer's chunk table, RCU-published; immutable once published. */
struct vmmx__table {
	size_t size;                    /* logical size (what vmmx_buf_size says) */
	size_t mapped;                  /* end of the last chunk, >= size */
	size_t n;
	struct vmmx__chunk c[];
};

struct vmmx_buf {
	struct vmmx_ctx *ctx;           /* read-only */
	uintptr_t base;                 /* read-only */
	size_t capacity;                /* read-only */
	const struct vmmx__policy *policy; /* read-only */
	pthread_mutex_t lock;           /* serialises writers */
	struct vmmx__table *table;      /* RCU; written under @lock */
};

/*
 * Index of the chunk holding offset @off of @t (off < t->mapped), by binary
 * search.
 */
size_t vmmx__table_find(const struct vmmx__table *t, size_t off);
/* Grant access to a freshly mapped chunk: the device, and the CPU for host chunks. */
int vmmx__chunk_set_access(struct vmmx_ctx *ctx, void *va, size_t size, struct vmmx_loc loc);

/* ---- helpers ---- */

static inline size_t vmmx__round_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

static inline size_t vmmx__round_down(size_t x, size_t a)
{
	return x / a * a;
}

/* Format a byte count for humans ("1.5 GiB") into @buf. */
const char *vmmx__fmt_size(uint64_t bytes, char *buf, size_t len);

#endif /* VMMX_LIB_INTERNAL_H */
