/* SPDX-License-Identifier: MIT */
/*
 * vmm.h - the driver layer: the only code of libvmmx that talks to a driver.
 *
 * A struct vmm is one opened backend bound to one device.  Callers use the
 * vmm_*() functions below, never the ops table directly: the dispatch layer
 * (vmm.c) counts every call, keeps live counts of reservations, handles and
 * mapped bytes whatever the backend, and hosts the fault layer that fails the
 * Nth call of a kind on purpose.
 *
 * Backends:
 *  - cuda: libcuda.so.1 loaded with dlopen at run time;
 *  - sim:  an emulated device in host memory that keeps the driver's rules.
 *
 * Preconditions common to every operation (violations return -VMMX_EINVAL):
 * sizes and addresses are multiples of the location's granularity; a handle
 * maps whole, at offset 0, into a reserved range that is free there; access
 * is granted on mapped ranges only; a range is unmapped before its
 * reservation is freed.  Errors are reported once, here, through the
 * report hook (which sets the thread's last error and logs at debug level).
 *
 * Locking: the dispatch layer takes no lock (counters are atomic); each
 * backend is thread-safe on its own.
 */
#ifndef VMM_VMM_H
#define VMM_VMM_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmmx.h"

/** vmm_handle_t - a physical allocation handle (CUmemGenericAllocationHandle). */
typedef uint64_t vmm_handle_t;

/** enum vmm_access_flags - rights granted by vmm_set_access(). */
enum vmm_access_flags {
	VMM_ACCESS_NONE = 0,
	VMM_ACCESS_READ = 1,
	VMM_ACCESS_RW = 3,
};

/** struct vmm_access - one access grant: who (a device or the host) and what. */
struct vmm_access {
	struct vmmx_loc who;          /* VMMX_LOC_DEVICE (ordinal) or VMMX_LOC_HOST (the CPU) */
	enum vmm_access_flags flags;
};

/**
 * typedef vmm_report_fn - error and log hook given by the caller.
 * @arg: the params' report_arg.
 * @level: enum vmmx_log_level of the message.
 * @err: the negative code being returned, or 0 for a plain log line.
 * @msg: the message.
 */
typedef void vmm_report_fn(void *arg, int level, int err, const char *msg);

/** struct vmm_params - what vmm_open() needs. */
struct vmm_params {
	const char *backend;          /* "cuda" or "sim" */
	int device;                   /* device ordinal */
	/* sim only */
	uint64_t sim_device_mem;      /* capacity of each emulated device */
	uint64_t sim_host_mem;        /* capacity of emulated pinned host memory */
	int sim_devices;              /* number of emulated devices */
	vmm_report_fn *report;        /* may be NULL */
	void *report_arg;
};

/** struct vmm_info - facts about the backend and its device. */
struct vmm_info {
	const char *backend;          /* static */
	int device_count;
	int driver_version;           /* 0 on sim */
	char device_name[96];
};

struct vmm;

/**
 * struct vmm_ops - a backend.  Every member is mandatory; the dispatch layer
 * checks arguments that need no backend knowledge before calling in.
 */
struct vmm_ops {
	const char *name;
	void (*close)(struct vmm *v);
	int (*query)(struct vmm *v, struct vmm_info *info);
	int (*granularity)(struct vmm *v, struct vmmx_loc loc, size_t *gran_p);
	int (*mem_info)(struct vmm *v, struct vmmx_loc loc, uint64_t *free_p, uint64_t *total_p);
	int (*reserve)(struct vmm *v, size_t size, size_t align, void **va_p);
	int (*unreserve)(struct vmm *v, void *va, size_t size);
	int (*create)(struct vmm *v, struct vmmx_loc loc, size_t size, vmm_handle_t *h_p);
	int (*release)(struct vmm *v, vmm_handle_t h);
	int (*map)(struct vmm *v, void *va, size_t size, vmm_handle_t h);
	int (*unmap)(struct vmm *v, void *va, size_t size);
	int (*set_access)(struct vmm *v, void *va, size_t size, const struct vmm_access *acc,
			  int n);
	int (*copy)(struct vmm *v, void *dst, const void *src, size_t n);
	int (*memset)(struct vmm *v, void *dst, int c, size_t n);
	int (*sync)(struct vmm *v);
};

/** struct vmm_counts - live objects and calls, counted by the dispatch layer. */
struct vmm_counts {
	int64_t reservations;         /* reserve minus successful unreserve */
	int64_t handles;              /* create minus successful release */
	int64_t mapped_bytes;         /* mapped minus unmapped */
	uint64_t calls[VMMX_OP_COUNT];/* calls made, failed ones included */
	uint64_t injected;            /* failures injected by the fault layer */
};

/*
 * struct vmm - common head of every backend instance.  Backends embed it as
 * their first member and allocate it in their open function.
 */
struct vmm {
	const struct vmm_ops *ops;
	vmm_report_fn *report;
	void *report_arg;
	/* counters: atomic (__atomic builtins), no lock */
	int64_t live_reservations;
	int64_t live_handles;
	int64_t live_mapped;
	uint64_t calls[VMMX_OP_COUNT];
	uint64_t injected;
	/* fault layer: fail the fault_at[op]-th next call of op (0: disarmed) */
	uint64_t fault_at[VMMX_OP_COUNT];
	int fault_err[VMMX_OP_COUNT];
};

/**
 * vmm_open() - open a backend.
 * Return: 0; -VMMX_ENOBACKEND (unknown or not built); what the backend's open
 * returns (-VMMX_ENODRIVER, -VMMX_ENODEV, -VMMX_ENOTSUP, -VMMX_ENOMEM).
 */
int vmm_open(const struct vmm_params *p, struct vmm **v_p);
/** vmm_close() - close a backend; NULL is a no-op.  Does not check for leaks. */
void vmm_close(struct vmm *v);
/** vmm_backend_built() - whether a backend of that name is compiled in. */
bool vmm_backend_built(const char *name);

int vmm_query(struct vmm *v, struct vmm_info *info);
int vmm_granularity(struct vmm *v, struct vmmx_loc loc, size_t *gran_p);
int vmm_mem_info(struct vmm *v, struct vmmx_loc loc, uint64_t *free_p, uint64_t *total_p);
int vmm_reserve(struct vmm *v, size_t size, size_t align, void **va_p);
int vmm_unreserve(struct vmm *v, void *va, size_t size);
int vmm_create(struct vmm *v, struct vmmx_loc loc, size_t size, vmm_handle_t *h_p);
int vmm_release(struct vmm *v, vmm_handle_t h);
int vmm_map(struct vmm *v, void *va, size_t size, vmm_handle_t h);
int vmm_unmap(struct vmm *v, void *va, size_t size);
int vmm_set_access(struct vmm *v, void *va, size_t size, const struct vmm_access *acc, int n);
int vmm_copy(struct vmm *v, void *dst, const void *src, size_t n);
int vmm_memset(struct vmm *v, void *dst, int c, size_t n);
int vmm_sync(struct vmm *v);

/** vmm_counts() - read the dispatch layer's counters. */
void vmm_counts(struct vmm *v, struct vmm_counts *c);

/**
 * vmm_fault_arm() - make the @nth next call of @op fail once with @err.
 * @nth: 1 fails the very next call; 0 disarms.
 * @err: negative code to return; 0 means -VMMX_EFAULTINJ.
 * Return: 0; -VMMX_EINVAL for an unknown op.
 */
int vmm_fault_arm(struct vmm *v, enum vmmx_op op, uint64_t nth, int err);
/** vmm_fault_disarm_all() - disarm every op. */
void vmm_fault_disarm_all(struct vmm *v);
/** vmm_op_name() - "create", "map", ...; NULL for an unknown op. */
const char *vmm_op_name(enum vmmx_op op);
/** vmm_op_parse() - the op of a name, or -1. */
int vmm_op_parse(const char *name, size_t len);

/** vmm_reportf() - report through the instance's hook (backends use it). */
void vmm_reportf(struct vmm *v, int level, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Backend constructors (vmm/sim.c, vmm/cuda.c). */
int vmm_sim_open(const struct vmm_params *p, struct vmm **v_p);
#ifdef VMMX_HAVE_CUDA
int vmm_cuda_open(const struct vmm_params *p, struct vmm **v_p);
#endif

/* Sim-only introspection for tests: live objects as the emulated driver sees them. */
struct vmm_sim_counts {
	int64_t reservations;
	int64_t handles;
	int64_t mappings;
	uint64_t device_used[8];      /* bytes of device memory held, per device (first 8) */
	uint64_t host_used;
};
/** vmm_sim_counts() - -VMMX_ENOTSUP when @v is not the sim backend. */
int vmm_sim_counts(struct vmm *v, struct vmm_sim_counts *c);

static inline bool vmm_loc_is_host(struct vmmx_loc loc)
{
	return loc.kind == VMMX_LOC_HOST || loc.kind == VMMX_LOC_HOST_NUMA;
}

#endif /* VMM_VMM_H */
