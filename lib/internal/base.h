/* SPDX-License-Identifier: MIT */
/*
 * internal/base.h - layer 0 of lib/: primitives with no context.  Errors and
 * the thread's last error (error.c), logging (log.c), sizes (size.c),
 * locations (loc.c) and the configuration (config.c).  Nothing here knows a
 * context, a buffer or the driver's objects; the files of this layer include
 * this header only.  docs/DESIGN.md ("Layers") has the whole diagram;
 * .ci/check-layers enforces it.
 *
 * Nothing here is exported: the names are vmmx__*, compiled with
 * -fvisibility=hidden.  Locking: none; every function here is thread-safe
 * (the last error is thread-local).
 */
#ifndef VMMX_LIB_INTERNAL_BASE_H
#define VMMX_LIB_INTERNAL_BASE_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "vmm/vmm.h"
#include "vmmx.h"
#include "vmmx/policy.h"

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
/*
 * vmmx__fail() with a message of one %p, @addr, written only when
 * vmmx_last_error() asks for it (or the log shows debug lines): for misses
 * on a hot path, such as vmmx_lookup() of each word of a launch's
 * parameters, most of them no pointer.  @fmt must outlive the thread's next
 * call (a string literal).
 */
int vmmx__fail_addr(const struct vmmx__log *log, int err, const char *fmt, const void *addr);
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

/* VMMX_HOST_COPIES: which chunks promoted from host memory keep their host
 * handle (shadow.c). */
enum vmmx__host_copies {
	VMMX__HOST_COPIES_NONE = 0,     /* read-mostly chunks only (the caller's promise) */
	VMMX__HOST_COPIES_VERIFIED = 1, /* every chunk, kept with a device checksum */
};

#define VMMX__POLICY_SPEC_MAX_CONF 256
/* A policy spec ("name" or "name:key=value,..."): bounds, and a check of its
 * syntax that sets the name's length; -VMMX_EINVAL (config.c). */
#define VMMX__POLICY_NAME_MAX 63
#define VMMX__POLICY_SPEC_MAX 256
int vmmx__policy_spec_check(const char *spec, size_t *name_len);

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
	struct vmmx__size_setting sleep_piece; /* sleep.c: bytes per offload step */
	uint64_t sim_device_mem;
	uint64_t sim_host_mem;
	int sim_devices;
	int sim_pageable;
	int host_cpu_access;            /* enum vmmx__cpu_access */
	int host_copies;                /* enum vmmx__host_copies */
	struct {
		int op;                 /* enum vmmx_op or the driver layer's own
					 * (VMM_OP_EVENT, VMM_OP_CHECKSUM), -1: none */
		uint64_t nth;
	} faults[VMM_OP_COUNT];
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

/* Whether @a and @b are the same location (kind and id). */
static inline bool vmmx__same_loc(struct vmmx_loc a, struct vmmx_loc b)
{
	return a.kind == b.kind && a.id == b.id;
}

#endif /* VMMX_LIB_INTERNAL_BASE_H */
