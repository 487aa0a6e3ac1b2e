/* SPDX-License-Identifier: MIT */
/*
 * vmm.h - the driver layer: the only code of libvmmx that talks to a driver.
 *
 * A struct vmm is one opened backend bound to one device.  Callers use the
 * vmm_*() functions below, never the ops table directly: the dispatch layer
 * (vmm.c) counts every call, keeps live counts of reservations, handles,
 * mapped bytes, host registrations and streams whatever the backend, and
 * hosts the fault layer that fails the Nth call of a kind on purpose.
 *
 * What the layer offers: the VMM call sequence (reserve, create, map, set
 * access and their inverses), synchronous copy and memset, host-memory
 * registration (cuMemHostRegister: malloc'd memory the device can reach),
 * streams with asynchronous copies (pipelined chunk migration), a checksum
 * of memory computed by the device (verified host copies), device
 * attributes and peer access for every device of the machine (multi-GPU
 * placement, vmmx-info), what an address is (foreign pointers).  Queries
 * (query, granularity, mem_info, attr, can_access_peer, ptr_info) and
 * stream create/destroy are not counted as driver ops
 * and cannot be failed by the fault layer; everything else can.
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
 * Output arguments are written only on success.
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

/**
 * vmm_stream_t - a stream of asynchronous work (a CUstream on cuda).  0 is
 * the default stream, accepted by vmm_copy_async() and vmm_stream_sync()
 * only; vmm_stream_create() never returns 0.
 */
typedef uint64_t vmm_stream_t;

/**
 * vmm_event_t - a marker in a stream's work (a CUevent on cuda), for
 * "has the work queued before this point finished?".  Never 0.
 */
typedef uint64_t vmm_event_t;

/*
 * Driver operations of this layer beyond the public enum vmmx_op: counted and
 * faultable like them (vmm_fault_arm), but not reported in struct vmmx_stats,
 * whose driver_calls[] is part of the public ABI.  VMM_OP_EVENT counts event
 * records, queries and waits; VMM_OP_CHECKSUM counts device checksums
 * (vmm_checksum).
 */
#define VMM_OP_EVENT VMMX_OP_COUNT
#define VMM_OP_CHECKSUM (VMMX_OP_COUNT + 1)
#define VMM_OP_COUNT (VMMX_OP_COUNT + 2)

/**
 * enum vmm_attr - device capabilities read by vmm_attr().  Flags are 0 or 1.
 * On cuda each is the CU_DEVICE_ATTRIBUTE_* named in the comment.
 */
enum vmm_attr {
	VMM_ATTR_VMM,                 /* cuMemCreate/cuMemMap work
				       * (VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) */
	VMM_ATTR_HOST_VMM,            /* cuMemCreate of HOST location works (HOST_VIRTUAL_MEMORY_
				       * MANAGEMENT_SUPPORTED; HOST_NUMA_... where the header or
				       * the driver lacks it) */
	VMM_ATTR_HOST_NUMA_VMM,       /* cuMemCreate of HOST_NUMA location works */
	VMM_ATTR_HOST_NUMA_ID,        /* NUMA node nearest the device; -1 without NUMA */
	VMM_ATTR_HOST_REGISTER,       /* cuMemHostRegister works (HOST_REGISTER_SUPPORTED) */
	VMM_ATTR_HOST_POINTER_FOR_REGISTERED, /* registered memory has the same address on the
					       * device (CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM) */
	VMM_ATTR_PAGEABLE_ACCESS,     /* kernels may touch malloc'd memory (HMM/ATS:
				       * PAGEABLE_MEMORY_ACCESS) */
	VMM_ATTR_PAGEABLE_HOST_PAGE_TABLES, /* ... through the host's page tables (ATS) */
	VMM_ATTR_POSIX_FD,            /* handles export as file descriptors */
	VMM_ATTR_CONCURRENT_MANAGED,  /* CPU and GPU may use managed memory at once */
	VMM_ATTR_UNIFIED_ADDRESSING,  /* one address space for host and devices */
	VMM_ATTR_COMPUTE_MAJOR,       /* compute capability, major */
	VMM_ATTR_COMPUTE_MINOR,       /* compute capability, minor */
	VMM_ATTR_SM_COUNT,            /* multiprocessors */
	VMM_ATTR_GPU_DIRECT_RDMA_VMM, /* GPUDirect RDMA on cuMemCreate memory */
	VMM_ATTR_COUNT                /* number of attributes */
};

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
	int sim_pageable;             /* nonzero: the emulated device reports pageable
				       * memory access (HMM), default 0 as on the project's GPUs */
	vmm_report_fn *report;        /* may be NULL */
	void *report_arg;
};

/**
 * enum vmm_mem - what an address is to the driver (vmm_ptr_info()).
 */
enum vmm_mem {
	VMM_MEM_PAGEABLE,             /* unknown to the driver: ordinary host memory, or
				       * nothing at all (the caller checks which) */
	VMM_MEM_REGISTERED,           /* page-locked host memory the driver knows
				       * (cuMemHostRegister, cuMemHostAlloc) */
	VMM_MEM_HOST_CHUNK,           /* a mapped VMM chunk of host memory */
	VMM_MEM_DEVICE,               /* device memory (cuMemAlloc, a mapped VMM device chunk) */
	VMM_MEM_MANAGED,              /* managed memory (cuMemAllocManaged) */
	VMM_MEM_RESERVED,             /* reserved address space with nothing mapped there */
};

/** struct vmm_ptr_info - what vmm_ptr_info() found at an address. */
struct vmm_ptr_info {
	enum vmm_mem kind;
	int device;                   /* VMM_MEM_DEVICE: the device's ordinal; else -1 */
	size_t len;                   /* bytes from the address known to be of @kind and of
				       * one allocation; 0: unknown (the caller bounds it) */
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
 * checks arguments that need no backend knowledge before calling in.  New
 * members are appended; backends fill the table with designated initializers.
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
	/* appended for registration, streams and multi-GPU */
	int (*attr)(struct vmm *v, int device, enum vmm_attr a, int *val);
	int (*can_access_peer)(struct vmm *v, int dev, int peer, int *val);
	int (*host_register)(struct vmm *v, void *ptr, size_t len, void **dptr_p);
	int (*host_unregister)(struct vmm *v, void *ptr);
	int (*stream_create)(struct vmm *v, vmm_stream_t *s_p);
	int (*stream_destroy)(struct vmm *v, vmm_stream_t s);
	int (*copy_async)(struct vmm *v, void *dst, const void *src, size_t n, vmm_stream_t s);
	int (*stream_sync)(struct vmm *v, vmm_stream_t s);
	/* appended for foreign pointers and fork() */
	int (*ptr_info)(struct vmm *v, const void *p, struct vmm_ptr_info *info);
	void (*abandon)(struct vmm *v);
	/* appended for the framework allocator and prefetch */
	int (*event_create)(struct vmm *v, vmm_event_t *e_p);
	int (*event_destroy)(struct vmm *v, vmm_event_t e);
	int (*event_record)(struct vmm *v, vmm_event_t e, vmm_stream_t s);
	int (*event_query)(struct vmm *v, vmm_event_t e);
	int (*event_sync)(struct vmm *v, vmm_event_t e);
	/* appended for several GPUs */
	int (*device_name)(struct vmm *v, int device, char *buf, size_t len);
	/* appended for verified host copies; arguments checked by vmm_checksum() */
	int (*checksum)(struct vmm *v, const void *va, size_t size, uint64_t *sum_p);
};

/** struct vmm_counts - live objects and calls, counted by the dispatch layer. */
struct vmm_counts {
	int64_t reservations;         /* reserve minus successful unreserve */
	int64_t handles;              /* create minus successful release */
	int64_t mapped_bytes;         /* mapped minus unmapped */
	int64_t registrations;        /* host_register minus successful host_unregister */
	int64_t streams;              /* stream_create minus successful stream_destroy */
	uint64_t calls[VMMX_OP_COUNT];/* calls made, failed ones included */
	uint64_t injected;            /* failures injected by the fault layer */
	int64_t events;               /* event_create minus successful event_destroy */
	uint64_t event_calls;         /* event records, queries and waits (VMM_OP_EVENT) */
	uint64_t checksum_calls;      /* checksums (VMM_OP_CHECKSUM) */
	uint64_t ns[VMM_OP_COUNT];    /* time in the calls of each op, ns, summed over threads */
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
	int64_t live_registrations;
	int64_t live_streams;
	int64_t live_events;
	uint64_t calls[VMM_OP_COUNT];
	uint64_t ns[VMM_OP_COUNT];      /* time in those calls (vmm_counts()) */
	uint64_t injected;
	/* fault layer: fail the fault_at[op]-th next call of op (0: disarmed) */
	uint64_t fault_at[VMM_OP_COUNT];
	int fault_err[VMM_OP_COUNT];
	uint64_t fault_more[VMM_OP_COUNT]; /* atomic: calls to fail after the first */
	/* random faults: fail a call when hash(seed, call number) < rate */
	uint32_t fault_rate;            /* in millionths of calls, 0: off */
	uint64_t fault_seed;
	uint64_t fault_seq;             /* atomic: calls seen while random faults were on */
	uint64_t slow_ns[VMM_OP_COUNT]; /* atomic: vmm_fault_slow(), 0: full speed */
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
/**
 * vmm_mem_info() - free and total memory of a location.
 * @free_p: receives the free bytes; NULL when only the total is wanted,
 *          which on cuda needs no context on another device
 *          (cuDeviceTotalMem).  The first free-memory query of a device
 *          other than the opened one retains that device's primary context
 *          until vmm_close() (creating it when nothing else uses that GPU).
 * @total_p: receives the total bytes (may be NULL).
 * Not counted; no fault.
 * Return: 0; -VMMX_EINVAL for an unknown location; a driver error.
 */
int vmm_mem_info(struct vmm *v, struct vmmx_loc loc, uint64_t *free_p, uint64_t *total_p);
/**
 * vmm_device_name() - the name of any device of the machine, NUL-terminated
 * (truncated to @len).  Needs no context.  Not counted; no fault.
 * Return: 0; -VMMX_EINVAL for a NULL @buf or a zero @len; -VMMX_ENODEV for a
 * device that does not exist; a driver error.
 */
int vmm_device_name(struct vmm *v, int device, char *buf, size_t len);
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

/**
 * vmm_attr() - read a capability of a device.
 * @device: any device ordinal of the machine, not only the opened one.
 * @val: receives the value.
 * Not counted as a driver op; the fault layer does not touch it.
 * Return: 0; -VMMX_ENODEV for a device that does not exist; -VMMX_EINVAL for
 * an unknown attribute or a NULL @val; a driver error.
 * Context: any thread; no lock; does not block.
 */
int vmm_attr(struct vmm *v, int device, enum vmm_attr a, int *val);
/** vmm_attr_name() - "vmm", "host_register", ...; NULL for an unknown attribute. */
const char *vmm_attr_name(enum vmm_attr a);

/**
 * vmm_can_access_peer() - whether @dev can map memory of @peer
 * (cuDeviceCanAccessPeer).  *@val is 1 or 0; 0 when @dev == @peer.
 * Not counted; no fault.
 * Return: 0; -VMMX_ENODEV for a device that does not exist; -VMMX_EINVAL for
 * a NULL @val; a driver error.
 */
int vmm_can_access_peer(struct vmm *v, int dev, int peer, int *val);

/**
 * vmm_host_register() - page-lock [@ptr, @ptr + @len) of ordinary host memory
 * (malloc, mmap) and map it for every device (cuMemHostRegister with
 * DEVICEMAP | PORTABLE); *@dptr_p receives the address kernels use (equal to
 * @ptr with VMM_ATTR_HOST_POINTER_FOR_REGISTERED).  Counted and faulted as
 * VMMX_OP_REGISTER.  Pins memory: slow (about 28 GB/s) and it may block.
 * Return: 0; -VMMX_EINVAL (NULL @ptr or @dptr_p, @len 0, a range that wraps,
 * memory that is not mapped, memory the VMM calls mapped); -VMMX_EEXIST when
 * the range overlaps a registration; -VMMX_ENOMEM; a driver error.
 */
int vmm_host_register(struct vmm *v, void *ptr, size_t len, void **dptr_p);
/**
 * vmm_host_unregister() - undo vmm_host_register(); @ptr must be the base
 * of a registration.  Counted and faulted as VMMX_OP_UNREGISTER.
 * Return: 0; -VMMX_ENOENT when no registration starts at @ptr; a driver error.
 */
int vmm_host_unregister(struct vmm *v, void *ptr);

/**
 * vmm_stream_create() - a new non-blocking stream (no implicit ordering with
 * the default stream).  *@s_p is never 0.  Not counted; no fault.
 * Return: 0; -VMMX_EINVAL (NULL @s_p); -VMMX_ENOMEM; a driver error.
 */
int vmm_stream_create(struct vmm *v, vmm_stream_t *s_p);
/**
 * vmm_stream_destroy() - destroy a stream.  Work already queued on it still
 * completes (cuStreamDestroy does not wait); the stream's id is dead at once.
 * Not counted; no fault.
 * Return: 0; -VMMX_EINVAL for 0 or an unknown stream; a driver error.
 */
int vmm_stream_destroy(struct vmm *v, vmm_stream_t s);
/**
 * vmm_copy_async() - queue a copy of @n bytes on stream @s (0: the default
 * stream); it is complete after vmm_stream_sync(@s) returns, and neither side
 * may be touched before.  The rules of vmm_copy() hold: one call must not
 * span device and host memory (the sim refuses it as vmm_copy() does).  On
 * cuda the copy is asynchronous only when the host side is page-locked
 * (registered memory, host chunks); from pageable memory the driver stages
 * it and may return late.  Counted and faulted as VMMX_OP_COPY.
 * Return: 0; -VMMX_EINVAL (unknown stream, NULL address, overlap, a range
 * spanning device and host memory); -VMMX_EFAULT (sim: unmapped or not
 * granted); a driver error.  Errors of the copy itself may surface only at
 * vmm_stream_sync().
 */
int vmm_copy_async(struct vmm *v, void *dst, const void *src, size_t n, vmm_stream_t s);
/**
 * vmm_stream_sync() - wait until everything queued on @s (0: the default
 * stream) is complete.  Counted and faulted as VMMX_OP_SYNC.  Blocks.
 * Return: 0; -VMMX_EINVAL for an unknown stream; a driver error (including
 * the failure of a queued copy).
 */
int vmm_stream_sync(struct vmm *v, vmm_stream_t s);

/**
 * vmm_ptr_info() - what @p is to the driver: device memory (of which
 * device), page-locked host memory, a host chunk, managed memory, reserved
 * but unmapped space, or memory the driver does not know (pageable).  On
 * cuda cuPointerGetAttributes and cuMemGetAddressRange; on sim the records
 * of every sim instance of the process.  Reads no byte at @p.  A query:
 * not counted, not faulted.
 * Return: 0; -VMMX_EINVAL for a NULL @info; a driver error.
 * Context: any thread; the sim takes its lock; does not block.
 */
int vmm_ptr_info(struct vmm *v, const void *p, struct vmm_ptr_info *info);

/**
 * vmm_host_range_check() - whether the CPU may read (or, with @write, write)
 * every byte of [@p, @p + @n) of ordinary host memory, from the process's
 * memory map (/proc/self/maps; where that cannot be read, only whether
 * the range is mapped).  Reads no byte at @p.
 * Return: 0, or -VMMX_EFAULT with *@why ("is not mapped", "is not
 * readable", "is not writable").
 * Context: any thread; no lock; reads a file.
 */
int vmm_host_range_check(const void *p, size_t n, bool write, const char **why);

/**
 * vmm_abandon() - forget an instance in a forked child: free what this
 * process holds of it without calling the driver (whose state belongs to
 * the parent).  NULL is a no-op.
 * Context: the child, with no other thread using @v.
 */
void vmm_abandon(struct vmm *v);

/*
 * fork(): take the driver layer's process-wide locks before a fork and
 * release them after, in parent and child (lib/fork.c calls these).
 */
void vmm_atfork_prepare(void);
void vmm_atfork_parent(void);
void vmm_atfork_child(void);

/**
 * vmm_event_create() - a new event (timing disabled: events here only order
 * work).  *@e_p is never 0.  Not counted; no fault.
 * Return: 0; -VMMX_EINVAL (NULL @e_p); -VMMX_ENOMEM; a driver error.
 */
int vmm_event_create(struct vmm *v, vmm_event_t *e_p);
/**
 * vmm_event_destroy() - destroy an event; a record still pending completes
 * first on the device's side.  Not counted; no fault.
 * Return: 0; -VMMX_EINVAL for 0 or an unknown event; a driver error.
 */
int vmm_event_destroy(struct vmm *v, vmm_event_t e);
/**
 * vmm_event_record() - mark the work queued on @s so far: the event completes
 * once that work has.  @s may be 0 (the default stream), a stream of
 * vmm_stream_create(), or - on cuda - any CUstream of the context that the
 * caller keeps alive (a framework's stream, passed to the driver as is).  The
 * sim accepts 0 and its own streams.  Recording again moves the mark.
 * Counted and faulted as VMM_OP_EVENT.
 * Return: 0; -VMMX_EINVAL (unknown event, unknown sim stream); a driver error.
 */
int vmm_event_record(struct vmm *v, vmm_event_t e, vmm_stream_t s);
/**
 * vmm_event_query() - whether the work an event marks has completed.  An
 * event never recorded counts as completed.  Does not block.  Counted and
 * faulted as VMM_OP_EVENT.
 * Return: 0 completed; -VMMX_EBUSY not yet (not reported as an error);
 * -VMMX_EINVAL unknown event; a driver error.
 */
int vmm_event_query(struct vmm *v, vmm_event_t e);
/**
 * vmm_event_sync() - wait until the work an event marks has completed.
 * Blocks.  Counted and faulted as VMM_OP_EVENT.
 * Return: 0; -VMMX_EINVAL unknown event; a driver error.
 */
int vmm_event_sync(struct vmm *v, vmm_event_t e);

/*
 * The checksum of vmm_checksum(), the same on every backend: the sum mod
 * 2^64, over the little-endian 64-bit words w_i at va + 8i, of
 * mix(w_i ^ (i * VMM_SUM_GOLDEN)), with mix the splitmix64 finalizer
 * (x ^= x >> 30; x *= VMM_SUM_MUL1; x ^= x >> 27; x *= VMM_SUM_MUL2;
 * x ^= x >> 31).  A sum, so the device may reduce in any order; the index
 * in each term makes a moved or swapped word change it.
 */
#define VMM_SUM_GOLDEN 0x9e3779b97f4a7c15ull
#define VMM_SUM_MUL1 0xbf58476d1ce4e5b9ull
#define VMM_SUM_MUL2 0x94d049bb133111ebull

/**
 * vmm_checksum() - the checksum (above) of [@va, @va + @size), computed by
 * the device: synchronous, the sum is in *@sum_p when it returns.
 * @va: 8-byte aligned; every byte mapped and granted (READ) to the opened
 *      device: device chunks, host chunks, or both.
 * @size: a multiple of 8; 0 gives 0.
 * @sum_p: receives the sum.
 * On cuda a PTX kernel, loaded at the first call (per instance) and run on a
 * private stream; the range must not be written meanwhile (the caller's
 * race, as for a copy).  The sim computes it on the CPU after the same
 * checks as a copy's source, except that a range may cross from device into
 * host memory (a kernel reads both) and must lie in a reservation (a kernel
 * cannot read plain pageable memory).  Counted and faulted as
 * VMM_OP_CHECKSUM.
 * Return: 0; -VMMX_EINVAL (NULL @va or @sum_p, @va not 8-byte aligned, @size
 * not a multiple of 8, a range that wraps); -VMMX_EFAULT (sim: not mapped,
 * not granted, not in a reservation); -VMMX_ENOTSUP (cuda: the driver lacks
 * the module and launch calls, or cannot compile the kernel: callers copy
 * as they would without a checksum); -VMMX_ENOMEM; a driver error.
 * Context: any thread; calls the driver and blocks until the sum is back;
 * on cuda concurrent calls on one instance take turns (one result word).
 */
int vmm_checksum(struct vmm *v, const void *va, size_t size, uint64_t *sum_p);

/** vmm_counts() - read the dispatch layer's counters. */
void vmm_counts(struct vmm *v, struct vmm_counts *c);

/**
 * vmm_fault_arm() - make the @nth next call of @op fail once with @err.
 * @op: an enum vmmx_op, VMM_OP_EVENT or VMM_OP_CHECKSUM.
 * @nth: 1 fails the very next call; 0 disarms.
 * @err: negative code to return; 0 means -VMMX_EFAULTINJ.
 * Return: 0; -VMMX_EINVAL for an unknown op.
 */
int vmm_fault_arm(struct vmm *v, enum vmmx_op op, uint64_t nth, int err);
/**
 * vmm_fault_arm_n() - as vmm_fault_arm(), but fail @count calls in a row
 * from the @nth next one (a failure and then the failure of its undo).
 * Return: 0; -VMMX_EINVAL for an unknown op or a @count of 0.
 */
int vmm_fault_arm_n(struct vmm *v, enum vmmx_op op, uint64_t nth, uint64_t count, int err);
/**
 * vmm_fault_random() - fail a seeded pseudo-random share of every counted
 * call (every op) with -VMMX_EFAULTINJ, on top of the armed faults.
 * @ppm: millionths of calls to fail (10000 is 1%), 0 turns it off.
 * @seed: the choice is a hash of @seed and the call's number since this
 * call, so one thread's run repeats exactly; many threads race for numbers.
 * Context: any thread; lock-free.
 */
void vmm_fault_random(struct vmm *v, uint32_t ppm, uint64_t seed);
/**
 * vmm_fault_slow() - make every next call of @op take @ns nanoseconds more
 * (a sleep before the backend is reached, timed as the call's: a slow driver
 * on demand); 0 puts it back to full speed.  Not undone by
 * vmm_fault_disarm_all().
 * Return: 0, or -VMMX_EINVAL for an op out of range.
 */
int vmm_fault_slow(struct vmm *v, enum vmmx_op op, uint64_t ns);
/** vmm_fault_disarm_all() - disarm every op and the random faults. */
void vmm_fault_disarm_all(struct vmm *v);
/** vmm_op_name() - "create", "map", ...; NULL for an unknown op. */
const char *vmm_op_name(enum vmmx_op op);
/** vmm_op_parse() - the op of a name (the layer's own ops too: "event",
 * "checksum"), or -1. */
int vmm_op_parse(const char *name, size_t len);

/** vmm_reportf() - report through the instance's hook (backends use it). */
void vmm_reportf(struct vmm *v, int level, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Backend constructors (vmm/sim.c, vmm/cuda.c). */
int vmm_sim_open(const struct vmm_params *p, struct vmm **v_p);
void vmm_sim_atfork_prepare(void);
void vmm_sim_atfork_parent(void);
void vmm_sim_atfork_child(void);
#ifdef VMMX_HAVE_CUDA
int vmm_cuda_open(const struct vmm_params *p, struct vmm **v_p);
#endif

/* Sim-only introspection for tests: live objects as the emulated driver sees them. */
struct vmm_sim_counts {
	int64_t reservations;
	int64_t handles;
	int64_t mappings;
	int64_t registrations;        /* live host registrations */
	int64_t streams;              /* live streams */
	uint64_t device_used[8];      /* bytes of device memory held, per device (first 8) */
	uint64_t host_used;
	/* free-memory queries (mem_info with a free_p) per device (first 8): on
	 * cuda, querying a device other than the opened one needs a context there */
	uint64_t free_queries[8];
};
/** vmm_sim_counts() - -VMMX_ENOTSUP when @v is not the sim backend. */
int vmm_sim_counts(struct vmm *v, struct vmm_sim_counts *c);
/**
 * vmm_sim_stream_hold() - test hook: while @hold, work recorded on sim stream
 * @s (0: the default stream) stays pending, so events recorded on it do not
 * complete until vmm_stream_sync(@s), vmm_sync() or a release (@hold false,
 * which completes everything queued).  Lets tests prove that nothing waits
 * on, or runs ahead of, unfinished work.
 * Return: 0; -VMMX_EINVAL unknown stream; -VMMX_ENOTSUP when @v is not sim.
 */
int vmm_sim_stream_hold(struct vmm *v, vmm_stream_t s, bool hold);

static inline bool vmm_loc_is_host(struct vmmx_loc loc)
{
	return loc.kind == VMMX_LOC_HOST || loc.kind == VMMX_LOC_HOST_NUMA;
}

#endif /* VMM_VMM_H */
