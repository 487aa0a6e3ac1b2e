/* SPDX-License-Identifier: MIT */
/*
 * vmmx.h - libvmmx public API.
 *
 * libvmmx maps physical chunks of GPU memory and of pinned host memory into
 * one contiguous virtual range that grows and shrinks without moving.  Each
 * chunk is placed by a policy: device only, host only, or device first with
 * an explicit, observable fallback to host memory when the GPU is full.
 *
 * Conventions:
 *  - Functions returning int return 0 on success or a negative -VMMX_E*
 *    code; vmmx_strerror() names the code and vmmx_last_error() gives the
 *    detail of the last failure in the calling thread.
 *  - Output arguments are written only on success.
 *  - Destructors accept NULL.
 *  - Every function documents its calling context: whether it may block,
 *    whether it calls the driver, and which locks it takes.
 *
 * fork(): a CUDA context cannot be used in a child forked without exec, and
 * the driver's objects belong to the parent.  libvmmx installs
 * pthread_atfork() handlers (the plugin loader's when the library is
 * loaded, the rest before the first context or allocator is made) that
 * take its own locks and urcu-bp's (urcu_bp_before_fork() and the after-fork
 * calls) around the fork, so a fork while other threads resize, migrate,
 * register or look up deadlocks neither process.  In the child, every call
 * on a context created by the parent, or on its buffers, streams and
 * events, fails at once with -VMMX_ENODRIVER ("context created in process
 * N; CUDA cannot be used after fork"); getters that return no code
 * (vmmx_buf_ptr, vmmx_buf_size, vmmx_buf_capacity, vmmx_stream_handle)
 * answer NULL or 0 and set the message.  Only vmmx_buf_destroy(),
 * vmmx_stream_destroy(), vmmx_event_destroy() and vmmx_ctx_destroy() work
 * there: they free the child's copy of the host-side records without
 * calling the driver or a policy's fini (on the sim backend too, which
 * stands for the driver).  The framework allocators
 * follow the same rule (see "Frameworks" below): every vmmx_alloc_*,
 * vmmx_torch_* and vmmx_cupy_* call on an allocator the parent made fails
 * at once ("allocator inherited from the parent process N"), and only
 * vmmx_alloc_destroy() works there.  A child may create
 * contexts of its own where the backend allows it (sim; cuda refuses).  A
 * process created with a raw clone() system call bypasses the handlers and
 * is not covered.
 *
 * Several GPUs: a context has one device, VMMX_DEVICE (default 0): its
 * kernels' GPU, whose primary context it retains, and "the device" of
 * device-first and lru.  It may place chunks on every other GPU that device
 * can reach through peer access (vmmx_device_info(): usable); such chunks
 * are mapped for both GPUs.  Placement goes there only when a policy ranks
 * it: device-first:peers=1 (the other GPUs before host memory),
 * device:id=N, interleave (device=W weighs every GPU, deviceN=W one), or
 * vmmx_buf_migrate() to it.  A context reads another GPU's free memory, and
 * on cuda creates a CUDA context there, only once it uses that GPU.
 * VMMX_DEVICE_LIMIT and VMMX_DEVICE_HEADROOM apply to each GPU on its own
 * ("8GiB": 8 GiB on each; "0:8GiB,1:4GiB" per ordinal; "8GiB,1:4GiB": 4 GiB
 * on device 1, 8 GiB on every other); vmmx_ctx_query() reports the
 * context's device's, vmmx_device_info() any device's.  Locations name
 * devices by ordinal everywhere: vmmx_lookup() and vmmx_buf_chunks() (loc.id),
 * vmmx_buf_residency_at(), struct vmmx_stats' dev_* arrays.
 *
 * This header is self-contained, compiles as C99 and C++ and includes no
 * CUDA header.
 */
#ifndef VMMX_H
#define VMMX_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define VMMX_API __attribute__((visibility("default")))
#else
#define VMMX_API
#endif

/** VMMX_VERSION - version of this header: major << 16 | minor << 8 | patch. */
#define VMMX_VERSION ((0 << 16) | (1 << 8) | 0)

/**
 * enum vmmx_error - error codes, returned negated.
 *
 * Codes below 256 are errno values and mean what errno means; libvmmx's own
 * codes start at 256.
 */
enum vmmx_error {
	VMMX_EPERM = EPERM,       /**< operation refused (permissions of a file) */
	VMMX_ENOENT = ENOENT,     /**< no such object (file, policy, address) */
	VMMX_ENOMEM = ENOMEM,     /**< out of memory or over a configured limit */
	VMMX_EFAULT = EFAULT,     /**< address not mapped by this context */
	VMMX_EBUSY = EBUSY,       /**< object still in use */
	VMMX_EEXIST = EEXIST,     /**< object exists already */
	VMMX_ENODEV = ENODEV,     /**< no such device, or no GPU at all */
	VMMX_EINVAL = EINVAL,     /**< invalid argument */
	VMMX_ERANGE = ERANGE,     /**< offset or size out of range */
	VMMX_ENOTSUP = ENOTSUP,   /**< not supported by this backend or device */
	VMMX_EDRIVER = 256,       /**< the driver returned an error (see vmmx_last_error()) */
	VMMX_ENODRIVER = 257,     /**< the CUDA driver library could not be loaded, or the
				   context is the parent's and this is a forked child */
	VMMX_ECONFIG = 258,       /**< invalid configuration value */
	VMMX_ENOBACKEND = 259,    /**< backend unknown or not built in */
	VMMX_EFAULTINJ = 260,     /**< failure injected by the fault layer (tests) */
	VMMX_EPOLICY = 261,       /**< a policy file was refused, or a policy failed */
};

/** enum vmmx_loc_kind - kind of memory a chunk lives in. */
enum vmmx_loc_kind {
	VMMX_LOC_NONE = 0,      /**< no location (unmapped, unknown) */
	VMMX_LOC_DEVICE = 1,    /**< GPU memory; id is the device ordinal */
	VMMX_LOC_HOST = 2,      /**< pinned host memory; id is ignored (0) */
	VMMX_LOC_HOST_NUMA = 3, /**< pinned host memory on NUMA node id */
};

/** struct vmmx_loc - a memory location. */
struct vmmx_loc {
	enum vmmx_loc_kind kind; /**< kind of memory */
	int id;                  /**< device ordinal or NUMA node, per @kind */
};

/** enum vmmx_log_level - verbosity of the log (VMMX_LOG). */
enum vmmx_log_level {
	VMMX_LOG_NONE = 0,  /**< nothing */
	VMMX_LOG_ERROR = 1, /**< failures the library could not handle */
	VMMX_LOG_WARN = 2,  /**< suspicious configuration (the default level) */
	VMMX_LOG_INFO = 3,  /**< placement fallbacks and other notable events */
	VMMX_LOG_DEBUG = 4, /**< every error where it is first seen, driver calls */
};

/**
 * typedef vmmx_log_fn - log sink.
 * @arg: the config's log_arg.
 * @level: severity of the message.
 * @msg: one line, without a trailing newline.
 *
 * Context: called from any thread, possibly with library locks held: it must
 * not call back into libvmmx.
 */
typedef void vmmx_log_fn(void *arg, enum vmmx_log_level level, const char *msg);

/** VMMX_CONFIG_NO_ENV - ignore every VMMX_* environment variable. */
#define VMMX_CONFIG_NO_ENV 0x1u

/**
 * struct vmmx_config - context configuration.
 *
 * Initialise with vmmx_config_init(), then set what you need.  A field left
 * unset (NULL, or -1 for @device) takes the value of its environment variable
 * (unless VMMX_CONFIG_NO_ENV) or the default.  Size fields use the grammar of
 * the environment variables (README: "Sizes").
 */
struct vmmx_config {
	size_t size;               /**< sizeof(struct vmmx_config), set by vmmx_config_init() */
	unsigned int flags;        /**< VMMX_CONFIG_* flags */
	const char *backend;       /**< VMMX_BACKEND: "cuda" or "sim" */
	int device;                /**< VMMX_DEVICE: device ordinal, -1 unset */
	const char *policy;        /**< VMMX_POLICY: "name" or "name:key=val,..." */
	const char *chunk_size;    /**< VMMX_CHUNK_SIZE: smallest chunk (placement resolution),
				        at most 1 TiB */
	const char *chunk_max;     /**< VMMX_CHUNK_MAX: largest chunk */
	const char *device_limit;  /**< VMMX_DEVICE_LIMIT: cap on device bytes held, on each
				        device ("8GiB"), or per ordinal ("0:8GiB,1:4GiB") */
	const char *host_limit;    /**< VMMX_HOST_LIMIT: cap on host bytes held */
	const char *log;           /**< VMMX_LOG: none, error, warn, info or debug */
	const char *const *vars;   /**< more settings, "VMMX_NAME=value", NULL-terminated */
	vmmx_log_fn *log_fn;       /**< log sink; NULL: standard error */
	void *log_arg;             /**< passed to @log_fn */
	const char *policy_path;   /**< VMMX_POLICY_PATH: ':'-separated absolute directories */
	const char *device_headroom; /**< VMMX_DEVICE_HEADROOM: device memory to leave free,
					  on each device or per ordinal, as @device_limit */
	const char *cache_limit;   /**< VMMX_CACHE_LIMIT: most bytes of released chunks kept */
	const char *device_prealloc; /**< VMMX_DEVICE_PREALLOC: device memory taken up front */
	const char *trace;         /**< VMMX_TRACE: file to append placement decisions to (a
				        regular file, a character device, or a FIFO with a
				        reader already: never waited for) */
};

/** enum vmmx_op - driver operations, as counted in stats and failed by the fault layer. */
enum vmmx_op {
	VMMX_OP_RESERVE = 0,    /**< reserve virtual addresses */
	VMMX_OP_UNRESERVE = 1,  /**< free virtual addresses */
	VMMX_OP_CREATE = 2,     /**< create a physical handle */
	VMMX_OP_RELEASE = 3,    /**< release a physical handle */
	VMMX_OP_MAP = 4,        /**< map a handle */
	VMMX_OP_UNMAP = 5,      /**< unmap a range */
	VMMX_OP_SET_ACCESS = 6, /**< grant access to a mapped range */
	VMMX_OP_COPY = 7,       /**< copy */
	VMMX_OP_MEMSET = 8,     /**< memset */
	VMMX_OP_SYNC = 9,       /**< wait for the device */
	VMMX_OP_REGISTER = 10,  /**< register host memory with the device */
	VMMX_OP_UNREGISTER = 11,/**< unregister host memory */
	VMMX_OP_COUNT = 12,     /**< number of operations */
};

/**
 * enum vmmx_host_access - how vmmx_host_register() makes host memory GPU-visible.
 */
enum vmmx_host_access {
	VMMX_HOST_ACCESS_REGISTER = 0, /**< cuMemHostRegister: the range is pinned and mapped */
	VMMX_HOST_ACCESS_HMM = 1,      /**< HMM: kernels touch pageable memory as is */
	VMMX_HOST_ACCESS_ATS = 2,      /**< ATS: the GPU walks the host's page tables */
};

/** VMMX_STATS_VERSION - version of struct vmmx_stats filled by this library. */
#define VMMX_STATS_VERSION 7

/** VMMX_STATS_DEVICES - devices described one by one in struct vmmx_stats. */
#define VMMX_STATS_DEVICES 16

/**
 * struct vmmx_stats - context statistics.
 *
 * Set @size to sizeof(struct vmmx_stats) before calling vmmx_stats_get(); the
 * library fills at most that many bytes, so old callers keep working when
 * members are appended.
 */
struct vmmx_stats {
	size_t size;                  /**< in: sizeof(struct vmmx_stats) as compiled by the caller */
	unsigned int version;         /**< out: VMMX_STATS_VERSION of the library */
	unsigned int buffers;         /**< live buffers */
	uint64_t device_bytes;        /**< bytes mapped in device chunks */
	uint64_t host_bytes;          /**< bytes mapped in host chunks */
	uint64_t device_chunks;       /**< live device chunks */
	uint64_t host_chunks;         /**< live host chunks */
	uint64_t reserved_bytes;      /**< virtual address space reserved */
	uint64_t placed_device;       /**< chunks ever placed on a device */
	uint64_t placed_host;         /**< chunks ever placed in host memory */
	uint64_t fallbacks;           /**< chunks placed elsewhere than the policy's first choice */
	uint64_t resizes;             /**< successful resizes */
	uint64_t resize_failures;     /**< resizes that failed and were rolled back */
	uint64_t deferred;            /**< teardown steps that failed and wait for a retry */
	uint64_t copies;              /**< driver copies issued by vmmx_memcpy (after splitting) */
	uint64_t driver_calls[VMMX_OP_COUNT]; /**< driver calls by enum vmmx_op */
	uint64_t fallbacks_limit;     /**< fallbacks because the first choice was at its limit */
	uint64_t fallbacks_headroom;  /**< ... would have eaten into VMMX_DEVICE_HEADROOM */
	uint64_t fallbacks_oom;       /**< ... was out of memory */
	uint64_t cache_hits;          /**< chunks mapped from the cache */
	uint64_t cache_misses;        /**< chunks that needed a new handle */
	uint64_t cache_bytes;         /**< bytes of handles in the cache now */
	uint64_t cache_released;      /**< cached handles given back to the driver */
	uint64_t registrations;       /**< live host registrations (vmmx_host_register) */
	uint64_t registered_bytes;    /**< bytes they cover */
	enum vmmx_host_access host_access; /**< the path vmmx_host_register uses */
	uint64_t migrations;          /**< chunks moved by vmmx_buf_migrate (and eviction) */
	uint64_t migrated_bytes;      /**< bytes they held */
	uint64_t evictions;           /**< chunks a policy's evict() spilled to make room */
	uint64_t promotions;          /**< chunks moved back by a policy's rebalance() */
	/* version 2: per device ordinal (device_bytes, device_chunks and
	 * placed_device are the sums over devices) */
	int device_count;             /**< devices the backend shows (entries of the arrays
				           below that may be nonzero, at most VMMX_STATS_DEVICES) */
	uint64_t dev_bytes[VMMX_STATS_DEVICES];  /**< bytes mapped in chunks on device N */
	uint64_t dev_chunks[VMMX_STATS_DEVICES]; /**< live chunks on device N */
	uint64_t dev_held[VMMX_STATS_DEVICES];   /**< bytes of handles held on device N, cached
					              ones included: what VMMX_DEVICE_LIMIT bounds */
	uint64_t dev_placed[VMMX_STATS_DEVICES]; /**< chunks ever placed on device N by grows */
	/* version 3: read-mostly chunks (vmmx_buf_advise) */
	uint64_t shadow_bytes;        /**< host memory kept as copies of read-mostly chunks now
				           on a device (held: counts against VMMX_HOST_LIMIT) */
	uint64_t copies_saved;        /**< chunk moves to host memory that mapped a kept copy
				           instead of copying */
	uint64_t copy_bytes_saved;    /**< bytes those moves did not copy */
	/* version 4: what shrinks keep, and moves that waited for nobody */
	uint64_t slack_bytes;         /**< bytes mapped past buffers' sizes: the tails of chunks
				           that shrinks cut through, until vmmx_buf_trim() */
	uint64_t moves_busy;          /**< policy moves skipped because a libvmmx copy or
				           memset was using the buffer */
	/* version 5: verified host copies (VMMX_HOST_COPIES=verified) */
	uint64_t checksums;           /**< device checksums taken (vmmx_checksum, and the
				           chunks of verified host copies) */
	uint64_t verified_saved;      /**< moves to host memory that mapped a verified copy
				           again because the chunk's checksum was unchanged
				           (counted in @copies_saved too) */
	uint64_t verified_changed;    /**< verified copies found stale at a move back (the
				           chunk was written on the device): copied instead */
	/* version 6: parked chunks (vmmx_park) */
	uint64_t parked_bytes;        /**< bytes of chunks parked now */
	uint64_t parks;               /**< chunks parked (counted in @copies_saved too) */
	uint64_t unparks;             /**< parked chunks mapped at their address again */
	/* version 7: where the driver time went */
	uint64_t driver_ns[VMMX_OP_COUNT]; /**< nanoseconds spent in the driver calls counted in
				                @driver_calls, by op, summed over threads: each
				                call's wall time, waits included (a stream sync
				                waits for its copies, a mapping call for the lock
				                the driver holds across threads) */
	uint64_t checksum_ns;         /**< nanoseconds spent taking the device checksums */
	uint64_t event_calls;         /**< event records, queries and waits: vmmx_event_record(),
				           vmmx_event_query(), vmmx_event_sync() and libvmmx's own */
	uint64_t event_ns;            /**< nanoseconds spent in them */
	uint64_t checksum_calls;      /**< device checksums asked of the driver layer, failed
				           ones included: the calls @checksum_ns is over
				           (@checksums counts those taken) */
};

/**
 * struct vmmx_ctx_info - what a context runs on.
 */
struct vmmx_ctx_info {
	size_t size;              /**< in: sizeof(struct vmmx_ctx_info) */
	const char *backend;      /**< "cuda" or "sim"; static storage */
	int device;               /**< device ordinal of the context */
	int device_count;         /**< devices visible to the backend */
	int driver_version;       /**< CUDA driver version (e.g. 13000), 0 on sim */
	size_t granularity;       /**< allocation granularity of the device, bytes */
	size_t chunk_min;         /**< smallest chunk libvmmx creates */
	size_t chunk_max;         /**< largest chunk libvmmx creates */
	uint64_t device_total;    /**< device memory, bytes */
	uint64_t device_free;     /**< device memory free now, bytes */
	uint64_t host_total;      /**< host memory usable for chunks, bytes */
	uint64_t device_limit;    /**< VMMX_DEVICE_LIMIT on the context's device, bytes,
				       UINT64_MAX if none (other devices: vmmx_device_info) */
	uint64_t host_limit;      /**< VMMX_HOST_LIMIT in bytes, UINT64_MAX if none */
	char device_name[96];     /**< name of the device */
	char policy[64];          /**< default policy of the context */
	uint64_t device_headroom; /**< VMMX_DEVICE_HEADROOM on the context's device, bytes */
	uint64_t cache_limit;     /**< VMMX_CACHE_LIMIT in bytes */
	char policy_source[128];  /**< file the default policy came from, or "built-in" */
	enum vmmx_host_access host_access; /**< the path vmmx_host_register uses */
};

/**
 * struct vmmx_chunk_info - one chunk of a buffer, as seen by vmmx_lookup().
 */
struct vmmx_chunk_info {
	void *base;               /**< first byte of the chunk */
	size_t size;              /**< bytes in the chunk */
	struct vmmx_loc loc;      /**< where its memory lives */
	struct vmmx_buf *buf;     /**< buffer that maps it */
};

/**
 * struct vmmx_residency - bytes of a range per kind of location
 * (vmmx_buf_residency_at() gives one device's share).
 */
struct vmmx_residency {
	size_t device;            /**< bytes on any GPU */
	size_t host;              /**< bytes in host memory (HOST or HOST_NUMA) */
};

struct vmmx_ctx;
struct vmmx_buf;
struct vmmx_stream;

/**
 * vmmx_config_init() - set every field of a config to "unset".
 * @cfg: config to initialise.
 *
 * Context: any thread; no locks; does not block.
 */
VMMX_API void vmmx_config_init(struct vmmx_config *cfg);

/**
 * vmmx_ctx_create() - open a backend and device and make a context.
 * @cfg: configuration, or NULL for the environment alone.
 * @ctx_p: where to store the new context.
 *
 * Reads the VMMX_* environment (with secure_getenv), validates every value,
 * warns about unknown VMMX_* names, opens the backend (loading libcuda.so.1
 * for "cuda") and retains the device's primary context.  libvmmx never falls
 * back from cuda to sim by itself.
 *
 * Return: 0; -VMMX_ECONFIG for a bad value (vmmx_last_error() names the
 * variable, the value and the expected form), or a per-device setting naming
 * a device the backend does not have; -VMMX_ENOBACKEND for an unknown
 * backend or one not built in; -VMMX_ENODRIVER when libcuda.so.1 cannot be
 * loaded; -VMMX_ENODEV when there is no such device; -VMMX_ENOTSUP when the
 * device lacks virtual memory management; -VMMX_ENOMEM; -VMMX_EDRIVER.
 *
 * Context: any thread; may block; calls the driver.
 */
VMMX_API int vmmx_ctx_create(const struct vmmx_config *cfg, struct vmmx_ctx **ctx_p);

/**
 * vmmx_ctx_destroy() - destroy a context and every buffer left in it.
 * @ctx: context, or NULL.
 *
 * Buffers still alive are destroyed (with a warning).  Teardown steps that
 * failed earlier are retried; what still fails is logged as an error.  In a
 * forked child, on a context of the parent: frees the child's host-side
 * records only, without the driver (see the top of this file).
 *
 * Context: no other thread may use @ctx or its buffers; may block; calls the
 * driver.
 */
VMMX_API void vmmx_ctx_destroy(struct vmmx_ctx *ctx);

/**
 * vmmx_ctx_query() - describe what a context runs on.
 * @ctx: context.
 * @info: out; set info->size first.
 *
 * Return: 0; -VMMX_EINVAL for a NULL argument or a @size too small for the
 * first members; -VMMX_EDRIVER when memory figures cannot be read.
 *
 * Context: any thread; takes no lock; calls the driver (memory info).
 */
VMMX_API int vmmx_ctx_query(struct vmmx_ctx *ctx, struct vmmx_ctx_info *info);

/**
 * vmmx_ctx_trim() - release cached chunks to the driver.
 * @ctx: context.
 * @keep_bytes: bytes of cached chunks and host copies to keep (0 releases all).
 *
 * Chunks released by shrinks and destroys are kept per location for reuse
 * (VMMX_CACHE_LIMIT bounds them; VMMX_DEVICE_PREALLOC fills the device's
 * share up front).  They count against the limits.  This gives them back,
 * then, if more than @keep_bytes is still kept, the host copies of
 * read-mostly chunks (vmmx_buf_advise()), skipping buffers that another
 * thread is resizing or migrating.  Teardown steps that failed earlier are
 * retried too.
 *
 * Return: 0; -VMMX_EINVAL for a NULL @ctx.
 *
 * Context: any thread; takes the cache lock, the context's mutex and
 * (tried, never waited for) buffers' mutexes; may block; calls the driver.
 */
VMMX_API int vmmx_ctx_trim(struct vmmx_ctx *ctx, size_t keep_bytes);

/**
 * vmmx_ctx_room() - how much of a new allocation a location would take now.
 * @ctx: context.
 * @loc: a location the context can use: its device or a peer it reaches
 *       (vmmx_device_info(): usable), or host memory.
 * @want: bytes asked about; SIZE_MAX for all the room there is.
 * @room_p: out: how many of @want bytes new chunks at @loc would get now.
 *
 * The room is what a grow placing there would see: the location's limit
 * (VMMX_DEVICE_LIMIT, VMMX_HOST_LIMIT) less the bytes the context holds
 * there, or the driver's free memory less VMMX_DEVICE_HEADROOM, whichever
 * is smaller.  Chunks in the context's cache (and in host memory the host
 * copies of read-mostly chunks) count as room: a new chunk takes them
 * first.  When the driver gives no free-memory figure, the limit alone
 * counts.  The answer is a snapshot (other threads and processes take and
 * give back memory meanwhile), and whether a buffer's policy places at @loc
 * is the policy's choice.  Asking about another device makes the context
 * use it, as placing there would: on cuda its free memory is read through
 * its primary context, retained until vmmx_ctx_destroy().
 *
 * Return: 0; -VMMX_EINVAL for a NULL @ctx or @room_p, or a location the
 * context cannot use (vmmx_last_error() names it); -VMMX_ENODRIVER on a
 * context the parent made, in a forked child.
 *
 * Context: any thread; takes no lock (the context's counters are atomic);
 * calls the driver (its free memory; /proc/meminfo for host memory).
 */
VMMX_API int vmmx_ctx_room(struct vmmx_ctx *ctx, struct vmmx_loc loc, size_t want, size_t *room_p);

/**
 * vmmx_buf_create() - reserve a buffer's virtual range.
 * @ctx: context.
 * @capacity: largest size the buffer may reach; rounded up to the chunk size.
 * @policy: placement policy spec, "name" or "name:key=value,...", or NULL
 *          for the context's default (VMMX_POLICY).  Loaded as a plugin
 *          (include/vmmx/policy.h) or one of the built-ins device-first,
 *          device and host.
 * @buf_p: where to store the buffer.
 *
 * The buffer starts empty (size 0); vmmx_buf_resize() maps memory into it.
 * Its address, vmmx_buf_ptr(), never changes.
 *
 * Return: 0; -VMMX_EINVAL for a zero capacity, a NULL argument or a
 * malformed policy spec; -VMMX_ENOENT for a policy found nowhere;
 * -VMMX_EPOLICY when every file found was refused (vmmx_last_error() says
 * why, file by file); the policy's init error (often -VMMX_EINVAL) for bad
 * arguments; -VMMX_ENOMEM when the address range cannot be reserved.
 *
 * Context: any thread; takes the context's mutex; may block; calls the driver.
 */
VMMX_API int vmmx_buf_create(struct vmmx_ctx *ctx, size_t capacity, const char *policy,
			     struct vmmx_buf **buf_p);

/**
 * vmmx_buf_resize() - grow or shrink a buffer in place.
 * @buf: buffer.
 * @size: new size; rounded up to the chunk size.
 *
 * Growing creates chunks where the policy prefers, falling back down its
 * ranking when a location is over its limit, inside its headroom
 * (VMMX_DEVICE_HEADROOM) or out of memory.  Each chunk is as large as its
 * location can take, up to VMMX_CHUNK_MAX (by default the largest
 * location's memory: a grow that fits one location is one handle) or the
 * policy's own bound.
 *
 * Shrinking never takes away a byte below the new size, even for a
 * moment: kernels, copies and CPU accesses of the kept range may run on
 * during it.  Chunks that lie wholly past the new size are unmapped and go
 * to the context's chunk cache (VMMX_CACHE_LIMIT) or back to the driver.
 * A chunk the new size cuts through stays whole and mapped: its tail past
 * the new size is slack, still charged to its location
 * (vmmx_stats.slack_bytes), used again by a later grow, and given back by
 * vmmx_buf_trim() or vmmx_buf_destroy().  Copies and memsets through
 * libvmmx (vmmx_memcpy(), vmmx_memset()) that run past the new size when
 * the shrink starts finish first.  A chunk past the size that the driver
 * fails to unmap stays mapped as slack too (logged): a shrink loses no data
 * and fails only when the library is out of memory.
 *
 * Data below min(old size, new size) is kept; new bytes are undefined.
 *
 * A failed resize leaves the buffer exactly as it was (size, placement and
 * data) and leaks nothing.
 *
 * Growing or shrinking while a kernel or copy uses the range past the new
 * size is the caller's race.
 *
 * Return: 0; -VMMX_ERANGE when @size exceeds the capacity; -VMMX_ENOMEM when
 * no location the policy allows has room (limits, device memory);
 * -VMMX_EDRIVER or -VMMX_EFAULTINJ when a driver call failed.
 *
 * Context: any thread; takes the buffer's mutex (resizes of one buffer are
 * serialised) and waits for an RCU grace period; may block; calls the driver.
 */
VMMX_API int vmmx_buf_resize(struct vmmx_buf *buf, size_t size);

/**
 * vmmx_buf_trim() - give back what shrinks kept mapped past the size.
 * @buf: buffer.
 *
 * vmmx_buf_resize() keeps the chunk its new size cuts through whole, so as
 * never to unmap bytes the caller may still use.  This replaces that chunk
 * by a handle of just its kept part: a new handle is made on the chunk's
 * location, the kept bytes are copied into it, and it is mapped in the old
 * one's place.  When the location cannot hold both handles at once (at its
 * limit), the kept part goes through a host chunk instead and is migrated
 * home once the old handle is gone (if another thread took that room
 * meanwhile, it stays in host memory, intact, logged).  **The kept
 * bytes of the cut chunk are unmapped for that moment**: call it only when
 * no kernel, copy or CPU access uses them (vmmx_sync() first).  libvmmx's
 * own copies and memsets are waited for.  Chunks wholly past the size that
 * a shrink could not unmap are unmapped too.
 *
 * The old handle goes only once the new one is mapped in its place; if
 * that fails, the old one is mapped back (and failing that, the new one
 * again), so a failed trim leaves the buffer as it was, data included.
 *
 * Return: 0, also when there was nothing to give back; -VMMX_EINVAL for a
 * NULL @buf; -VMMX_ENOMEM when no location has room for the kept part (the
 * chunk stays whole); -VMMX_EDRIVER or -VMMX_EFAULTINJ when a driver call
 * failed (the chunk stays whole).  (The one exception: when both handles
 * fail to map again, four tries each, the buffer is truncated to the
 * chunk's start, logged at error level.)
 *
 * Context: any thread; takes the buffer's mutex and waits for libvmmx calls
 * using the buffer; may block; calls the driver.
 */
VMMX_API int vmmx_buf_trim(struct vmmx_buf *buf);

/**
 * vmmx_buf_ptr() - address of a buffer.
 * @buf: buffer.
 *
 * Return: the first byte; stable for the buffer's life.  Valid for kernels
 * once mapped; host chunks are also valid for the CPU (with the default
 * VMMX_HOST_CPU_ACCESS=all; with "placed", only host chunks that a grow
 * placed, not those that a migration or eviction moved to host; with
 * "none", none).
 *
 * Context: any thread; lock-free.
 */
VMMX_API void *vmmx_buf_ptr(const struct vmmx_buf *buf);

/**
 * vmmx_buf_size() - mapped size of a buffer.
 * @buf: buffer.
 *
 * Return: bytes mapped at the front of the buffer.
 *
 * Context: any thread; lock-free (RCU read side).
 */
VMMX_API size_t vmmx_buf_size(const struct vmmx_buf *buf);

/**
 * vmmx_buf_capacity() - reserved size of a buffer.
 * @buf: buffer.
 *
 * Return: bytes of virtual range reserved.
 *
 * Context: any thread; lock-free.
 */
VMMX_API size_t vmmx_buf_capacity(const struct vmmx_buf *buf);

/**
 * vmmx_buf_residency() - where the bytes of a range live.
 * @buf: buffer.
 * @off: first byte of the range.
 * @len: bytes in the range.
 * @r: out: bytes on a device and in host memory.
 *
 * Return: 0; -VMMX_ERANGE when the range goes past the buffer's size;
 * -VMMX_EINVAL for a NULL argument.
 *
 * Context: any thread; lock-free (RCU read side); does not block.
 */
VMMX_API int vmmx_buf_residency(const struct vmmx_buf *buf, size_t off, size_t len,
				struct vmmx_residency *r);

/**
 * vmmx_buf_residency_at() - bytes of a range at one location.
 * @buf: buffer.
 * @off: first byte of the range.
 * @len: bytes in the range.
 * @loc: VMMX_LOC_DEVICE with a device ordinal; VMMX_LOC_HOST for all host
 *       memory (HOST and HOST_NUMA chunks); VMMX_LOC_HOST_NUMA for one node.
 * @bytes_p: out: bytes of the range there.
 *
 * vmmx_buf_residency() sums every GPU; this tells them apart (a buffer that
 * spilled to a neighbour GPU, an interleaved one).
 *
 * Return: 0; -VMMX_ERANGE when the range goes past the buffer's size;
 * -VMMX_EINVAL for a NULL argument or a location kind that is none of the
 * three.
 *
 * Context: any thread; lock-free (RCU read side); does not block.
 */
VMMX_API int vmmx_buf_residency_at(const struct vmmx_buf *buf, size_t off, size_t len,
				   struct vmmx_loc loc, size_t *bytes_p);

/**
 * vmmx_buf_chunks() - list the chunks of a buffer.
 * @buf: buffer.
 * @chunks: out: up to @max chunk descriptions, in address order (may be NULL
 *          when @max is 0).
 * @max: room in @chunks.
 * @count_p: out: number of chunks the buffer has (may exceed @max).
 *
 * Return: 0; -VMMX_EINVAL for a NULL @count_p or a NULL @chunks with @max > 0.
 *
 * Context: any thread; lock-free (RCU read side); one consistent snapshot.
 */
VMMX_API int vmmx_buf_chunks(const struct vmmx_buf *buf, struct vmmx_chunk_info *chunks,
			     size_t max, size_t *count_p);

/**
 * enum vmmx_advice - hints for vmmx_buf_advise().
 */
enum vmmx_advice {
	VMMX_ADVISE_HOT = 1,         /**< in use now (an explicit touch) */
	VMMX_ADVISE_COLD = 2,        /**< not needed soon: a first victim */
	VMMX_ADVISE_READ_MOSTLY = 3, /**< not written while on a device: moving it there keeps
				          its host copy, so moving it back needs no copy */
	VMMX_ADVISE_WILL_NEED = 4,   /**< about to be used: bring it close now if there is room */
	VMMX_ADVISE_NOT_READ_MOSTLY = 5, /**< about to be written: drop the host copies */
	VMMX_ADVISE_CPU = 6,         /**< the CPU, or a driver copy to or from pageable memory,
				          will use it: grant the CPU its host chunks */
};

/**
 * vmmx_buf_advise() - tell the buffer's policy how a range is used.
 * @buf: buffer.
 * @off: first byte.
 * @len: bytes.
 * @advice: enum vmmx_advice.
 *
 * libvmmx sees no hardware access counters: recency comes from this call.
 * The policy (if it implements advise(), e.g. lru) records the hint, and
 * may then ask for moves (rebalance()), which libvmmx makes before
 * returning: the range must not be in use by kernels meanwhile.
 *
 * Read-mostly: %VMMX_ADVISE_READ_MOSTLY marks the chunks that lie wholly
 * inside the range (a chunk the range covers only in part is not marked:
 * its other bytes may be written); chunks a later grow adds are not marked.
 * A marked chunk that moves from host memory to a device keeps its host
 * handle, unmapped, with the data as it was; when it moves back to that
 * host location (vmmx_buf_migrate(), vmmx_prefetch(), a policy's eviction),
 * that handle is mapped again: no copy, no new pinned memory (counted in
 * &vmmx_stats.copies_saved).  **libvmmx cannot see writes by kernels or by
 * the CPU through the buffer's pointer: the advice is the caller's promise
 * that nothing writes the range that way while it is on a device.  Such a
 * write is LOST when the chunk moves back to host memory: its old host copy
 * is mapped again.**  Writes through libvmmx's own API are seen:
 * vmmx_memcpy() and vmmx_memset() into a marked chunk on a device drop its
 * host copy before they write (the chunk stays marked, and the next move
 * back copies the new bytes).  %VMMX_ADVISE_NOT_READ_MOSTLY
 * unmarks every chunk the range touches and drops their copies; give it
 * before writing with kernels.
 *
 * CPU access: %VMMX_ADVISE_CPU grants the CPU every host chunk the range
 * touches that is granted to the GPU only (VMMX_HOST_CPU_ACCESS=placed or
 * none), so that the CPU may use it through the buffer's pointer and the
 * driver may copy it to or from pageable memory (such a copy of a GPU-only
 * chunk kills the process in the driver).  The grant lasts until the chunk
 * moves; it costs about 20 ms per GiB (H200), once.  It is not passed to
 * the policy.  Chunks on a device are left as they are (the CPU cannot be
 * granted device memory).  The copies are host memory held, charged against
 * VMMX_HOST_LIMIT (&vmmx_stats.shadow_bytes); libvmmx releases them when a
 * new host chunk needs the room, on vmmx_ctx_trim(), and with their chunks.
 *
 * Return: 0; -VMMX_ERANGE past the size; -VMMX_EINVAL for a bad advice;
 * -VMMX_ENOMEM when the read-mostly mark or the CPU grant could not be
 * recorded (nothing changed); the driver's error of a CPU grant that failed
 * (the chunks granted before it stay granted); errors of a move that failed
 * (the data stays intact where it was).
 *
 * Context: any thread; takes the buffer's mutex; may block and call the
 * driver when moves are made.
 */
VMMX_API int vmmx_buf_advise(struct vmmx_buf *buf, size_t off, size_t len, int advice);

/**
 * vmmx_buf_destroy() - unmap, release and unreserve a buffer.
 * @buf: buffer, or NULL.
 *
 * Context: no other thread may use @buf, but for calls by address
 * (vmmx_prefetch(), vmmx_park(), vmmx_unpark()) that found it before,
 * which are waited for; a vmmx_memcpy() or vmmx_memset() of its memory is
 * a use (one begun as the range goes reads or writes it unmapped); takes
 * the context's mutex; waits for an RCU grace period; may block; calls the
 * driver.
 */
VMMX_API void vmmx_buf_destroy(struct vmmx_buf *buf);

/**
 * vmmx_host_register() - make ordinary host memory GPU-visible.
 * @ctx: context.
 * @ptr: start of the range (malloc'd, mmap'd, static...); any alignment.
 * @len: bytes.
 * @dptr_p: out: the address kernels use for @ptr.
 *
 * Where the device has pageable memory access (HMM, or ATS), nothing is
 * done and *@dptr_p is @ptr.  Elsewhere the range is registered
 * (cuMemHostRegister, pinned and mapped for the device) and the device
 * pointer returned; on devices that can use host pointers for registered
 * memory (Hopper) it is @ptr too.  vmmx_ctx_query() and the stats say which
 * path this context uses.
 *
 * Rules (the same on both paths): a range may not share a page with another
 * registration (the driver pins whole pages) unless it is exactly the same
 * range, which counts a reference and returns the same pointer; memory
 * inside a libvmmx buffer is refused; the range must stay allocated until
 * unregistered; vmmx_ctx_destroy() unregisters what is left, with a warning.
 *
 * Return: 0; -VMMX_EINVAL for NULL, zero length, a wrapping range or a
 * range inside a buffer; -VMMX_EEXIST when it shares pages with another
 * registration (vmmx_last_error() names it); -VMMX_ENOMEM; -VMMX_EDRIVER.
 *
 * Context: any thread; takes the context's registration lock across the
 * driver call (pinning takes about 36 ms per GiB); calls the driver.
 */
VMMX_API int vmmx_host_register(struct vmmx_ctx *ctx, void *ptr, size_t len, void **dptr_p);

/**
 * vmmx_host_unregister() - drop a registration.
 * @ctx: context.
 * @ptr: the @ptr given to vmmx_host_register().
 *
 * The last reference unregisters (and unpins) the range.
 *
 * Return: 0; -VMMX_EINVAL for NULL or an address inside a registration
 * (partial unregistering is not supported: give the base); -VMMX_ENOENT
 * when @ptr is not registered; -VMMX_EDRIVER.
 *
 * Context: any thread; takes the context's registration lock; calls the
 * driver.
 */
VMMX_API int vmmx_host_unregister(struct vmmx_ctx *ctx, void *ptr);

/**
 * vmmx_stream_create() - a stream for ordering libvmmx work with kernels.
 * @ctx: context.
 * @s_p: out: the stream.
 *
 * On the cuda backend this is a CUstream (non-blocking) that callers may
 * launch their own kernels on (vmmx_stream_handle()); vmmx_buf_migrate_on()
 * runs after the work queued on it.
 *
 * Return: 0; -VMMX_EINVAL; -VMMX_ENOMEM; -VMMX_EDRIVER.
 *
 * Context: any thread; calls the driver.
 */
VMMX_API int vmmx_stream_create(struct vmmx_ctx *ctx, struct vmmx_stream **s_p);

/**
 * vmmx_stream_destroy() - destroy a stream (work queued on it still completes).
 * @s: stream, or NULL.
 *
 * Context: any thread; calls the driver.
 */
VMMX_API void vmmx_stream_destroy(struct vmmx_stream *s);

/**
 * vmmx_stream_handle() - the backend's stream: a CUstream on cuda.
 * @s: stream.
 *
 * Return: the handle (cast it to CUstream), NULL for a NULL @s; on the sim
 * backend an opaque nonzero value that no driver understands.
 *
 * Context: any thread; lock-free.
 */
VMMX_API void *vmmx_stream_handle(const struct vmmx_stream *s);

/**
 * vmmx_stream_sync() - wait for the work queued on a stream.
 * @s: stream.
 *
 * Return: 0; -VMMX_EINVAL; -VMMX_EDRIVER.
 *
 * Context: any thread; blocks; calls the driver.
 */
VMMX_API int vmmx_stream_sync(struct vmmx_stream *s);

/*
 * ---- Events: marks in a stream's work ----
 *
 * An event marks the work queued on a stream up to a point (a CUevent on
 * cuda, timing disabled): once recorded, it says without waiting whether
 * that work has finished.  The framework allocator reuses memory freed on
 * one stream for another this way.  An event belongs to its context:
 * destroy it before the context.
 */
struct vmmx_event;

/**
 * vmmx_event_create() - an event, for ordering work across streams.
 * @ctx: context.
 * @ev_p: out: the event.
 *
 * The event starts unrecorded: vmmx_event_query() and vmmx_event_sync()
 * answer at once that it is complete.
 *
 * Return: 0; -VMMX_EINVAL for a NULL argument; -VMMX_ENOMEM; -VMMX_ENODRIVER
 * on a context the parent made, in a forked child; -VMMX_EDRIVER.
 *
 * Context: any thread; takes no lock of libvmmx; calls the driver.
 */
VMMX_API int vmmx_event_create(struct vmmx_ctx *ctx, struct vmmx_event **ev_p);

/**
 * vmmx_event_record() - mark the work queued on a stream so far.
 * @ev: event.
 * @stream: the stream, as vmmx_prefetch() and the framework allocator take
 *          it: a CUstream (cudaStream_t) of the context's device on cuda,
 *          a framework's own or vmmx_stream_handle(); NULL for the default
 *          stream.  On the sim backend only NULL and vmmx_stream_handle() of
 *          the context's streams.
 *
 * The event completes once the work queued on @stream before this call
 * has.  Recording again moves the mark: the earlier one is forgotten.  The
 * caller keeps @stream alive until the record completes (a stream
 * destroyed with work queued still completes it).
 *
 * Return: 0; -VMMX_EINVAL for a NULL @ev or a stream the driver refuses as
 * invalid (the sim: one it did not make; cuda reports most bad handles as
 * -VMMX_EDRIVER); -VMMX_ENODRIVER on the parent's event in a forked child;
 * -VMMX_EDRIVER, or -VMMX_EFAULTINJ from the fault layer (tests).
 *
 * Context: any thread, one call at a time per event; takes no lock of
 * libvmmx; does not block; calls the driver.
 */
VMMX_API int vmmx_event_record(struct vmmx_event *ev, void *stream);

/**
 * vmmx_event_query() - whether the work an event marks has finished.
 * @ev: event.
 *
 * Return: 0 when it has (or the event was never recorded); -VMMX_EBUSY
 * while it is still queued or running (an answer, not a failure: no
 * message is set or logged); -VMMX_EINVAL for a NULL @ev; -VMMX_ENODRIVER
 * on the parent's event in a forked child; -VMMX_EDRIVER (an earlier
 * kernel failed: the device reports it here), -VMMX_EFAULTINJ.
 *
 * Context: any thread; takes no lock of libvmmx; never blocks; calls the
 * driver.
 */
VMMX_API int vmmx_event_query(struct vmmx_event *ev);

/**
 * vmmx_event_sync() - wait until the work an event marks has finished.
 * @ev: event.
 *
 * Return: 0 (at once for an event never recorded); -VMMX_EINVAL for a NULL
 * @ev; -VMMX_ENODRIVER on the parent's event in a forked child;
 * -VMMX_EDRIVER, -VMMX_EFAULTINJ.
 *
 * Context: any thread; takes no lock of libvmmx; blocks; calls the driver.
 */
VMMX_API int vmmx_event_sync(struct vmmx_event *ev);

/**
 * vmmx_event_destroy() - destroy an event.
 * @ev: event, or NULL.
 *
 * A record still pending completes first on the device's side; nothing
 * waits for it here.  In a forked child, on the parent's event: frees the
 * child's record only, without the driver.  A failure of the driver is
 * logged as a warning.
 *
 * Context: any thread; no other call may use @ev; calls the driver.
 */
VMMX_API void vmmx_event_destroy(struct vmmx_event *ev);

/**
 * vmmx_buf_migrate() - move a range's chunks to another location, under the same address.
 * @buf: buffer.
 * @off: first byte of the range.
 * @len: bytes; the range is widened to whole chunks (the unit of placement).
 * @to: destination: a device the context can reach, or host memory.
 * @moved_p: out (may be NULL): bytes moved; written on failure too, to say
 *           how far the call got.
 *
 * Each chunk gets a handle at @to (from the cache when one fits), its data
 * is copied, and the new handle replaces the old one at the same address.
 * Chunks already at @to are left alone.  Per chunk the move is atomic: a
 * failure at any step leaves that chunk where and as it was; chunks moved
 * before the failure stay moved.  Data is preserved.
 *
 * The range must not be in use by a kernel or a copy while it moves (the
 * caller's race): finish that work first, or use vmmx_buf_migrate_on().
 *
 * Return: 0; -VMMX_ERANGE when the range goes past the size; -VMMX_EINVAL
 * for a location the context cannot use; -VMMX_ENOMEM when @to has no room
 * (its limit, its memory); -VMMX_EDRIVER or -VMMX_EFAULTINJ when a driver
 * step failed.
 *
 * Context: any thread; takes the buffer's mutex for the whole move (resizes
 * wait); waits for an RCU grace period; blocks until the data is moved;
 * calls the driver.
 */
VMMX_API int vmmx_buf_migrate(struct vmmx_buf *buf, size_t off, size_t len, struct vmmx_loc to,
			      size_t *moved_p);

/**
 * vmmx_buf_migrate_on() - vmmx_buf_migrate() ordered after a stream's work.
 * @buf: buffer.
 * @off: first byte of the range.
 * @len: bytes.
 * @to: destination.
 * @s: stream whose queued work (kernels using the range) must finish first;
 *     the move's copies run on it.
 * @moved_p: out (may be NULL): bytes moved, also on failure.
 *
 * Return: as vmmx_buf_migrate(); -VMMX_EINVAL for a NULL @s or a stream of
 * another context.
 *
 * Context: as vmmx_buf_migrate(); blocks until the stream's earlier work
 * and the move are done.
 */
VMMX_API int vmmx_buf_migrate_on(struct vmmx_buf *buf, size_t off, size_t len,
				 struct vmmx_loc to, struct vmmx_stream *s, size_t *moved_p);

/**
 * vmmx_memcpy() - copy, split at every change of location.
 * @ctx: context.
 * @dst: destination; device-accessible memory or host memory.
 * @src: source; likewise.
 * @n: bytes.
 *
 * Ranges inside buffers of @ctx are split into runs of one location and one
 * driver copy is issued per run (a single copy across a device/host boundary
 * crashed the CUDA driver).  Memory outside @ctx's buffers is classified by
 * the driver before anything touches it (cuPointerGetAttributes on cuda,
 * the emulated driver's records on sim): device memory (another context's
 * buffer, cuMemAlloc memory), registered, managed and host-chunk memory are
 * copied by the driver, one allocation per driver copy; memory the driver
 * does not know must be host memory the CPU may read (write, for @dst),
 * checked against the process's memory map.  The CPU never loads from or
 * stores to GPU memory.  The copy is complete when the call returns.
 *
 * All or nothing for its checks: both ranges are split and every piece is
 * classified and checked before the first byte is written, so a call that
 * fails with -VMMX_EINVAL or -VMMX_EFAULT (a range past a buffer's size,
 * unmapped or read-only memory, ...) has written nothing.  Only a driver
 * error during the copy itself, after every check passed, may leave part of
 * @dst written.  A read-mostly chunk (vmmx_buf_advise()) that the copy
 * writes on a device loses its host copy first, so the bytes written are
 * what moves back to host memory.
 *
 * Return: 0; -VMMX_EFAULT when a range touches the unmapped tail of a
 * buffer, reserved address space with nothing mapped, or host memory that is
 * not mapped, not readable or (destination) not writable, with the reason in
 * vmmx_last_error(); -VMMX_EINVAL for overlapping ranges, a range that wraps
 * around the end of the address space or NULL pointers; -VMMX_ENOMEM when
 * the list of pieces or a read-mostly chunk's new table could not be
 * allocated (nothing written); -VMMX_ENODRIVER in a forked child (see the
 * top of this file); -VMMX_EDRIVER.
 *
 * Context: any thread; lock-free lookups (RCU read side); reads
 * /proc/self/maps for host memory outside the context's buffers; blocks
 * until the copy is done; calls the driver.
 */
VMMX_API int vmmx_memcpy(struct vmmx_ctx *ctx, void *dst, const void *src, size_t n);

/**
 * vmmx_memset() - set bytes, split at every change of location.
 * @ctx: context.
 * @dst: destination, inside a buffer of @ctx, or memory outside it
 *       classified as vmmx_memcpy() does.
 * @c: byte value.
 * @n: bytes.
 *
 * All or nothing for its checks, as vmmx_memcpy(): every piece of the range
 * is checked before the first byte is set, so a refused call (-VMMX_EFAULT,
 * or -VMMX_EINVAL for a range that wraps around the end of the address
 * space) sets nothing; host memory outside the context's buffers is
 * checked writable, to its end, before the CPU sets a byte of it.
 * Read-mostly chunks written lose their host copy, as with vmmx_memcpy().
 *
 * Return: as vmmx_memcpy().
 *
 * Context: as vmmx_memcpy().
 */
VMMX_API int vmmx_memset(struct vmmx_ctx *ctx, void *dst, int c, size_t n);

/**
 * vmmx_checksum() - a checksum of a range of a buffer, computed by the device.
 * @ctx: context.
 * @ptr: first byte, inside a buffer of @ctx (device or host chunks, any
 *       mix), 8-byte aligned.
 * @size: bytes, a multiple of 8, up to the buffer's size; 0 gives 0.
 * @sum_p: receives the checksum (written only on success).
 *
 * The checksum is defined exactly, the same on every backend: the sum mod
 * 2^64, over the little-endian 64-bit words w_i at @ptr + 8i, of
 * mix(w_i ^ (i * 0x9e3779b97f4a7c15)), where mix is the splitmix64
 * finalizer (x ^= x >> 30; x *= 0xbf58476d1ce4e5b9; x ^= x >> 27;
 * x *= 0x94d049bb133111eb; x ^= x >> 31).  Any change of the bytes changes
 * it but with a probability of about 2^-64; words swapped or moved change
 * it too (each term mixes in its index).  The i of a word counts from
 * @ptr, so a range's sum depends on where the range starts.
 * VMMX_HOST_COPIES=verified uses it to tell whether a chunk was written
 * on the device (vmmx(7)).  The buffer is pinned as for vmmx_memcpy(): no
 * resize or migration unmaps the range under the device meanwhile; kernels
 * writing the range meanwhile are the caller's race.
 *
 * Return: 0; -VMMX_EINVAL for a NULL argument, a misaligned @ptr or a
 * @size that is not a multiple of 8, a @ptr in no buffer of @ctx, or a
 * range past the buffer's size, the message naming which; -VMMX_EFAULT
 * for a range that reaches a parked chunk (vmmx_park(): the kernel would
 * fault the context); -VMMX_ENOTSUP when the driver cannot run the checksum kernel (too old, or
 * without the module calls); -VMMX_ENODRIVER in a forked child;
 * -VMMX_ENOMEM; -VMMX_EDRIVER.
 *
 * Context: any thread; lock-free lookup (RCU read side); the first call of
 * a context loads the checksum kernel; blocks until the device has summed
 * the range (one kernel at a time per context); calls the driver.
 */
VMMX_API int vmmx_checksum(struct vmmx_ctx *ctx, const void *ptr, size_t size, uint64_t *sum_p);

/**
 * vmmx_sync() - wait until the device has finished all work.
 * @ctx: context.
 *
 * Return: 0; -VMMX_EDRIVER when the device reports an error.
 *
 * Context: any thread; blocks; calls the driver.
 */
VMMX_API int vmmx_sync(struct vmmx_ctx *ctx);

/**
 * vmmx_lookup() - find the chunk that maps an address.
 * @ctx: context.
 * @addr: any address.
 * @info: out: the chunk's base, size, location and buffer.
 *
 * The answer describes the chunk at the time of the call; it stays true
 * while no other thread resizes or destroys that buffer.
 *
 * On several GPUs, info->loc.id is the ordinal of the device holding the
 * chunk (the context's, or a peer's).
 *
 * Return: 0; -VMMX_ENOENT when @addr is in no buffer of @ctx;
 * -VMMX_EFAULT when it is in a buffer's reservation beyond its size.
 *
 * Context: any thread; lock-free (RCU read side); never blocks.
 */
VMMX_API int vmmx_lookup(struct vmmx_ctx *ctx, const void *addr, struct vmmx_chunk_info *info);

/**
 * vmmx_stats_get() - read a context's statistics.
 * @ctx: context.
 * @st: out; set st->size first.
 *
 * Return: 0; -VMMX_EINVAL for a NULL argument or a size too small to hold
 * @size and @version.
 *
 * Context: any thread; lock-free; counters are read one by one, so the
 * snapshot is not atomic across members.
 */
VMMX_API int vmmx_stats_get(struct vmmx_ctx *ctx, struct vmmx_stats *st);

/**
 * vmmx_stats_json() - the statistics as one JSON object.
 * @ctx: context.
 * @buf: out: NUL-terminated JSON text.
 * @len: room in @buf.
 * @len_p: out (may be NULL): bytes the text needs, NUL included, also when
 *         @buf was too small.
 *
 * The object holds every member of struct vmmx_stats (driver calls by
 * name), held bytes and limits per location, the cache, and each loaded
 * policy with its source file and its own counters.
 *
 * Return: 0; -VMMX_ERANGE when @len is too small (nothing useful in @buf);
 * -VMMX_EINVAL for a NULL @ctx or @buf.
 *
 * Context: any thread; lock-free (RCU read side).
 */
VMMX_API int vmmx_stats_json(struct vmmx_ctx *ctx, char *buf, size_t len, size_t *len_p);

/**
 * vmmx_op_name() - the name of a driver operation, as vmmx_stats_json()
 * writes it ("reserve", "map", "set_access", ...).
 * @op: an enum vmmx_op below VMMX_OP_COUNT.
 *
 * Return: a static string; NULL for an op out of range.
 *
 * Context: any thread.
 */
VMMX_API const char *vmmx_op_name(enum vmmx_op op);

/**
 * struct vmmx_device_info - what one device offers, from vmmx_device_info().
 *
 * Flags are 1 (yes), 0 (no) or -1 (unknown: the driver did not answer).
 * Set @size before the call; the library fills at most that many bytes, so
 * old callers keep working when members are appended.
 */
struct vmmx_device_info {
	size_t size;              /**< in: sizeof(struct vmmx_device_info) */
	int ordinal;              /**< device ordinal */
	char name[96];            /**< name ("" only when the driver does not answer) */
	uint64_t total;           /**< device memory, bytes */
	uint64_t free;            /**< device memory free now, bytes */
	int compute_major;        /**< compute capability, major (-1 unknown) */
	int compute_minor;        /**< compute capability, minor (-1 unknown) */
	int sm_count;             /**< multiprocessors (-1 unknown) */
	int vmm;                  /**< virtual memory management (cuMemCreate, cuMemMap) */
	int host_vmm;             /**< cuMemCreate of HOST memory (pinned host chunks) */
	int host_numa_vmm;        /**< cuMemCreate of HOST_NUMA memory */
	int host_numa_id;         /**< NUMA node nearest the device; -1 without NUMA or unknown */
	int host_register;        /**< cuMemHostRegister works */
	int host_pointer_for_registered; /**< registered memory has the same address on the device */
	int pageable_access;      /**< kernels may touch malloc'd memory (HMM or ATS) */
	int pageable_host_page_tables; /**< ... through the host's page tables (ATS) */
	int posix_fd;             /**< handles export as POSIX file descriptors */
	int concurrent_managed;   /**< CPU and GPU may use managed memory at once */
	int unified_addressing;   /**< one address space for host and devices */
	int gpu_direct_rdma_vmm;  /**< GPUDirect RDMA on cuMemCreate memory */
	size_t granularity_device; /**< allocation granularity of device chunks (0 unknown) */
	size_t granularity_host;  /**< allocation granularity of host chunks (0 unknown) */
	int peer_count;           /**< entries used in @peers */
	int peers[16];            /**< devices this one can access (peer access), ascending */
	/* appended: the context's view of this device */
	int usable;               /**< 1: the context may place chunks here (its own device,
				       or a peer of it); 0: it cannot reach this device */
	uint64_t limit;           /**< the context's VMMX_DEVICE_LIMIT here, UINT64_MAX if none */
	uint64_t headroom;        /**< the context's VMMX_DEVICE_HEADROOM here */
	uint64_t held;            /**< bytes of handles the context holds here, cache included */
};

/**
 * vmmx_device_info() - describe one device of the context's backend.
 * @ctx: context.
 * @device: device ordinal, 0 to the device count less one (any device the
 *          backend sees, not only the context's; at most 16 are handled).
 * @info: out; set info->size first.
 *
 * Reads memory, capability attributes, allocation granularities and peer
 * access, and the context's limit, headroom and held bytes there.  On cuda,
 * the free memory of a device other than the context's is read through that
 * device's primary context: the first such read retains that context until
 * vmmx_ctx_destroy() (creating it costs tens of milliseconds and some of
 * that GPU's memory when nothing else uses the device).
 *
 * Return: 0; -VMMX_EINVAL for a NULL argument or a @size too small for
 * @size and @ordinal; -VMMX_ENODEV for a device that does not exist;
 * -VMMX_EDRIVER when its memory cannot be read.  An attribute the driver
 * does not answer is -1, not an error.
 *
 * Context: any thread; takes no lock; calls the driver (queries only).
 */
VMMX_API int vmmx_device_info(struct vmmx_ctx *ctx, int device, struct vmmx_device_info *info);

/** enum vmmx_hmm_state - whether kernels can touch pageable (malloc'd) host memory. */
enum vmmx_hmm_state {
	VMMX_HMM_ABSENT = 0,      /**< no: host memory must be registered (or be host chunks) */
	VMMX_HMM_HMM = 1,         /**< yes, through the kernel's HMM (open module, Linux 6.1.24+) */
	VMMX_HMM_ATS = 2,         /**< yes, the GPU walks the host's page tables (ATS, Grace) */
};

/**
 * struct vmmx_hmm_info - whether HMM works and, if not, why; from vmmx_hmm_probe().
 *
 * Facts are 1 (yes), 0 (no) or -1 (unknown: the file that says was not
 * there).  Set @size first; the library fills at most that many bytes.
 */
struct vmmx_hmm_info {
	size_t size;              /**< in: sizeof(struct vmmx_hmm_info) */
	enum vmmx_hmm_state state; /**< what the device reports */
	int device_pageable_access; /**< the device's PAGEABLE_MEMORY_ACCESS attribute */
	int open_module;          /**< the NVIDIA kernel module is the open one
				       (/proc/driver/nvidia/version); 0: proprietary */
	int uvm_disable_hmm;      /**< nvidia_uvm's uvm_disable_hmm parameter is Y */
	int config_device_private; /**< the kernel has CONFIG_DEVICE_PRIVATE (HMM needs it) */
	int config_hmm_mirror;    /**< the kernel has CONFIG_HMM_MIRROR */
	char kernel[128];         /**< the kernel's release (uname -r) */
	char why[512];            /**< one sentence: why HMM is absent, every reason found, or
				       how the device reaches pageable memory when it is not */
};

/**
 * vmmx_hmm_probe() - find out whether HMM works for the context's device, and why not.
 * @ctx: context.
 * @info: out; set info->size first.
 *
 * @state comes from the device's attributes (PAGEABLE_MEMORY_ACCESS, and
 * PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES for ATS); the rest explains
 * it from what the machine says: the kernel module's flavour
 * (/proc/driver/nvidia/version: NVIDIA's HMM needs the open module),
 * /sys/module/nvidia_uvm/parameters/uvm_disable_hmm, the kernel
 * configuration (/boot/config-RELEASE, else /proc/config.gz, read without
 * running anything) for CONFIG_DEVICE_PRIVATE and CONFIG_HMM_MIRROR, the
 * kernel's release (HMM needs 6.1.24, 6.2.11 or 6.3 and later) and the CUDA
 * driver's version (12.2 or later).  The files describe the machine, also
 * on the sim backend, whose device has no pageable access unless
 * VMMX_SIM_PAGEABLE says so.  vmmx_host_register() uses pageable pointers as
 * they are exactly when @state is not VMMX_HMM_ABSENT.
 *
 * Return: 0; -VMMX_EINVAL for a NULL argument or a @size too small for
 * @size and @state.
 *
 * Context: any thread; takes no lock; reads files; calls the driver (device
 * attributes).
 */
VMMX_API int vmmx_hmm_probe(struct vmmx_ctx *ctx, struct vmmx_hmm_info *info);

/**
 * struct vmmx_policy_info - one policy a context could load, from vmmx_policy_list().
 */
struct vmmx_policy_info {
	char name[64];            /**< policy name (from the file name vmmx_policy_<name>.so) */
	char file[256];           /**< the file ("..." and its end when longer), or "built-in" */
	unsigned abi;             /**< abi_version of its ops table (major << 16 | minor);
				       0 when none could be read */
	char description[128];    /**< its one-line description, "" if none */
	int usable;               /**< 1: the loader accepts it; 0: it refuses it */
	char why[192];            /**< refused: why; usable but hidden by an earlier one of the
				       same name: "hidden by FILE"; otherwise "" */
};

/**
 * vmmx_policy_list() - every policy a context could load, and why not for refused files.
 * @ctx: context.
 * @out: out: up to @max entries (may be NULL when @max is 0).
 * @max: room in @out.
 * @count_p: out: number of entries found (may exceed @max).
 *
 * Lists, in the loader's search order, every vmmx_policy_<name>.so of the
 * VMMX_POLICY_PATH directories, of the build tree's policies (when the
 * library runs uninstalled from it) and of $(pkglibdir)/policies, sorted by
 * file name within a directory, then the built-ins.  Each file is checked as
 * the loader checks it (owner and permissions of the file and of every
 * directory and symbolic link on its path from /, dlopen of the descriptor
 * checked, vmmx_policy_entry, ABI major, table size, mandatory callbacks,
 * name: include/vmmx/policy.h) and closed again; no policy's init is called.
 * A spec "NAME" loads the first usable entry named NAME.
 *
 * Return: 0; -VMMX_EINVAL for a NULL @ctx or @count_p, or a NULL @out with
 * @max > 0; -VMMX_ENOMEM.
 *
 * Context: any thread; takes no context lock, only the loader's own
 * (process-wide, around each dlopen and dlclose); dlopens (and runs the
 * constructors of) each policy file; may block on the file system; does not
 * call the driver.
 */
VMMX_API int vmmx_policy_list(struct vmmx_ctx *ctx, struct vmmx_policy_info *out, size_t max,
			      size_t *count_p);

/**
 * vmmx_strerror() - name an error code.
 * @err: a code, negative (as returned) or positive.
 *
 * Return: a static string; never NULL ("unknown error N" for codes libvmmx
 * does not define).
 *
 * Context: any thread.
 */
VMMX_API const char *vmmx_strerror(int err);

/**
 * vmmx_last_error() - detail of the last failure in the calling thread.
 *
 * Return: a message naming what failed and why (for a bad setting: the
 * variable, the value and the expected form); "" when nothing failed yet.
 * Valid until the thread's next libvmmx call.
 *
 * Context: any thread; thread-local.
 */
VMMX_API const char *vmmx_last_error(void);

/**
 * vmmx_version() - version of the library, as VMMX_VERSION encodes it.
 *
 * Return: the version of the libvmmx the program runs with (VMMX_VERSION is
 * the one it was compiled against).
 *
 * Context: any thread.
 */
VMMX_API unsigned int vmmx_version(void);

/**
 * vmmx_loc_name() - write a location as text ("device:0", "host", "host-numa:1").
 * @loc: location.
 * @buf: out.
 * @len: room in @buf.
 *
 * Return: @buf.
 *
 * Context: any thread.
 */
VMMX_API const char *vmmx_loc_name(struct vmmx_loc loc, char *buf, size_t len);

/**
 * vmmx_parse_size() - parse a size with libvmmx's grammar.
 * @s: text: bytes ("4096"), binary units ("4KiB", "4K", "2GiB", "2G"),
 *     decimal units ("4KB", "2GB"), or a percentage ("50%").
 * @total: what 100% means; 0 when percentages are not allowed.
 * @out: out: bytes.
 *
 * Return: 0; -VMMX_EINVAL for text outside the grammar; -VMMX_ERANGE for a
 * value that overflows 64 bits or a percentage over 100.
 *
 * Context: any thread.
 */
VMMX_API int vmmx_parse_size(const char *s, uint64_t total, uint64_t *out);

/*
 * ---- By address: prefetch and advice ----
 *
 * Frameworks know their tensors' addresses, not buffers: these work on an
 * address range of a context's buffers (the caching allocator that gives
 * out such addresses is in vmmx/alloc.h).
 */

/**
 * vmmx_prefetch() - move the chunks under an address range to a location.
 * @ctx: context.
 * @ptr: first byte; any address of @ctx's buffers (a tensor's data).
 * @len: bytes; the range may span several buffers.  Each buffer's part is
 *       widened to whole chunks, as vmmx_buf_migrate() does.
 * @loc: destination: a device of the context (usually its own), or host.
 * @stream: the stream whose queued work uses the range (a cudaStream_t or
 *          vmmx_stream_handle(); NULL: none, the range is idle now).  The
 *          move waits for the work queued on it so far (an event, not a
 *          stream sync, so any CUstream of the context is accepted).
 *
 * Buffers are found with the lock-free lookup; each part moves with
 * vmmx_buf_migrate() on the context's own copy stream, so other streams'
 * kernels keep running.  Chunks already at @loc are left alone, so a
 * prefetch of resident memory costs a lookup.  Nothing else may use the
 * moved chunks meanwhile: with an allocator, a range that is a whole
 * allocation of 10 MiB or more (a segment of its own) is safe to move.
 * The call returns when the move is done (run it on a helper thread to
 * overlap it with compute).  A chunk advised read-mostly keeps its host
 * copy when moved to a device (see vmmx_advise()).  A buffer another
 * thread destroys meanwhile (an allocator freeing the memory) is held
 * until its part is done: vmmx_buf_destroy() waits for it; a part found
 * destroyed already is in no buffer (-VMMX_ENOENT).  The same holds for
 * vmmx_park() and vmmx_unpark().
 *
 * Return: 0; -VMMX_EINVAL for a NULL @ctx or @ptr or a location the context
 * cannot use; -VMMX_ENOENT when part of the range is in no buffer of @ctx;
 * -VMMX_EFAULT when it runs past a buffer's size; -VMMX_ENOMEM when @loc has
 * no room (what moved stays moved); -VMMX_EDRIVER.
 *
 * Context: any thread; takes each buffer's mutex in turn; blocks; calls
 * the driver.
 */
VMMX_API int vmmx_prefetch(struct vmmx_ctx *ctx, const void *ptr, size_t len, struct vmmx_loc loc,
			   void *stream);

/**
 * vmmx_swap() - send one address range back to host memory and bring
 * another to a device, the first's mapping overlapped with the second's copy.
 * @ctx: context.
 * @out, @out_len: the range to send back, as vmmx_prefetch() takes one
 *                 (@out_len 0: none, @out may be NULL).
 * @to_out: where it goes: a host location (VMMX_LOC_HOST or
 *          VMMX_LOC_HOST_NUMA).
 * @in, @in_len: the range to bring in (@in_len 0: none).
 * @to_in: where it comes: a device of the context.
 * @stream: as vmmx_prefetch(): both moves wait for the work queued on it.
 *
 * The same as vmmx_prefetch(@out, @to_out) followed, if that succeeded, by
 * vmmx_prefetch(@in, @to_in), and faster where @out's chunks go back to the
 * host copies they kept (read-mostly, or unchanged under
 * VMMX_HOST_COPIES=verified: see vmmx_advise()).  Such a send back maps the
 * copy at the chunk's address and grants it to the GPU, about 1 ms for 128
 * MiB of host memory on an H200, and a bring-in that needs the room it makes
 * could not start its copy before.  Here the device memory of @out's chunks
 * goes first, @in's copies start in it, and @out's copies are mapped and
 * granted while those copies run: on an H200 a pair of 128 MiB chunks took
 * 3.0 ms against 4.3-4.4 ms as two vmmx_prefetch() calls on one thread, and
 * 2.7 against 2.8-2.9 ms on each of two (2.4 ms is the copy alone).  That
 * holds when each range lies in one buffer, the two
 * buffers differ, and every chunk of @out that moves has its copy at
 * @to_out, its checksum unchanged; otherwise the two moves are made in turn.
 *
 * Each chunk moves whole or not at all, as in every move.  A copy of @out
 * that cannot be mapped back after a few tries leaves its chunk's address
 * unmapped, with an error logged (its data stays in that copy): as a failed
 * restore does in vmmx_buf_migrate().  Nothing may use either range
 * meanwhile, as for vmmx_prefetch().
 *
 * Return: 0; as vmmx_prefetch() for either move (@in is not moved when
 * @out failed: what moved stays moved); -VMMX_EINVAL also for a @to_out
 * that is not host memory or a @to_in that is not a device.
 *
 * Context: any thread; takes the two buffers' mutexes (in address order);
 * blocks; calls the driver.
 */
VMMX_API int vmmx_swap(struct vmmx_ctx *ctx, const void *out, size_t out_len,
		       struct vmmx_loc to_out, const void *in, size_t in_len, struct vmmx_loc to_in,
		       void *stream);

/**
 * vmmx_park() - send an address range back to host memory, its addresses
 * left unmapped until it is used again.
 * @ctx, @ptr, @len, @stream: as vmmx_prefetch().
 * @loc: a host location (VMMX_LOC_HOST or VMMX_LOC_HOST_NUMA).
 * @parked_p: if not NULL, set to the bytes parked (also on failure: what
 *            was parked before it).
 *
 * As vmmx_prefetch() to @loc, except for the chunks on a device whose host
 * copy at @loc may serve (read-mostly, or unchanged under
 * VMMX_HOST_COPIES=verified: see vmmx_advise()).  Those are *parked*: the
 * device memory goes back, the host copy becomes the chunk's memory, mapped
 * at an address of libvmmx's own (once, granted to the context's GPU), and
 * the chunk's own addresses are left unmapped.  Chunks without such a copy
 * are moved as vmmx_prefetch() moves them, mapped in place.
 *
 * What it is for: granting host memory to the GPU costs about 11 us a MiB on
 * an H200 (1.4 ms for 128 MiB), and a chunk sent back with vmmx_prefetch()
 * is granted at its address every time, then unmapped there again when it
 * comes back.  A parked chunk is neither: a round trip (park, then
 * vmmx_prefetch() to the device) is an unmap, a map and grant of device
 * memory, and a copy from the host copy's own address.
 *
 * The caller's promise: nothing uses a parked range (no kernel, no copy, no
 * CPU access: an access to an unmapped address faults, and a GPU fault ends
 * the CUDA context) until it is brought back:
 *  - vmmx_prefetch() or vmmx_buf_migrate() to a device brings it in;
 *  - to @loc, it maps it at its addresses again (an "unpark": the grant that
 *    the park saved), after which it is plain host memory;
 *  - vmmx_memcpy(), vmmx_memset() and vmmx_checksum() over a parked chunk
 *    fail with -VMMX_EFAULT, naming it; vmmx_buf_trim(), and a vmmx_buf_resize() that
 *    grows into a parked chunk's tail, unpark first; shrinking past parked
 *    chunks and destroying the buffer release them.
 * vmmx_lookup() and vmmx_buf_chunks() report a parked chunk at @loc;
 * &vmmx_stats.parked_bytes counts them.
 *
 * Return: as vmmx_prefetch(); -VMMX_EINVAL also for a @loc that is not host
 * memory.
 *
 * Context: as vmmx_prefetch().
 */
VMMX_API int vmmx_park(struct vmmx_ctx *ctx, const void *ptr, size_t len, struct vmmx_loc loc,
		       void *stream, size_t *parked_p);

/**
 * vmmx_unpark() - map the parked chunks of an address range at their
 * addresses again.
 * @ctx: context.
 * @ptr, @len: the range, as vmmx_prefetch() takes it.
 * @unparked_p: if not NULL, set to the bytes mapped in place (also on
 *              failure: those before it).
 *
 * Each chunk of the range that vmmx_park() parked becomes plain host memory
 * at its addresses (mapped and granted there, as a chunk sent back with
 * vmmx_prefetch() is); the range's other chunks are left alone, wherever
 * they are (unlike vmmx_prefetch() to host memory, which would move chunks
 * on a device too).  For a caller that is about to let kernels read a parked
 * range where it lies.
 *
 * Return: 0 (also when nothing in the range is parked); -VMMX_EINVAL for a
 * NULL @ctx or @ptr; -VMMX_ENOENT or -VMMX_EFAULT as vmmx_prefetch();
 * -VMMX_ENOMEM; -VMMX_EDRIVER when a chunk could not be mapped (it, and
 * those of its buffer after it, stay parked).
 *
 * Context: any thread; takes each buffer's mutex in turn; calls the driver.
 */
VMMX_API int vmmx_unpark(struct vmmx_ctx *ctx, const void *ptr, size_t len, size_t *unparked_p);

/**
 * vmmx_advise() - vmmx_buf_advise() on an address range.
 * @ctx: context.
 * @ptr: first byte.
 * @len: bytes; may span buffers (each part goes to its buffer's policy).
 * @advice: enum vmmx_advice.
 *
 * Return: 0; -VMMX_EINVAL for a NULL argument or a bad advice;
 * -VMMX_ENOENT / -VMMX_EFAULT as vmmx_prefetch(); errors of moves the
 * policy asked for.
 *
 * Context: as vmmx_buf_advise(), once per buffer.
 */
VMMX_API int vmmx_advise(struct vmmx_ctx *ctx, const void *ptr, size_t len, int advice);

/* ---- sleep and wake: tagged memory given back and taken again ---- */

/** VMMX_TAG_MAX - bytes of a tag, its terminating NUL included. */
#define VMMX_TAG_MAX 32

/** enum vmmx_sleep_mode - what vmmx_sleep() does with the contents. */
enum vmmx_sleep_mode {
	VMMX_SLEEP_OFFLOAD = 0, /**< copied to pinned host memory, back at the wake */
	VMMX_SLEEP_DISCARD = 1, /**< dropped: physical memory released, contents
				 *   undefined at the wake */
};

/**
 * struct vmmx_sleep_stats - one tag's memory, as vmmx_sleep_stats() finds it.
 */
struct vmmx_sleep_stats {
	uint64_t buffers;        /**< buffers carrying the tag */
	uint64_t bytes;          /**< their sizes, added (asleep ones: the size they wake to) */
	uint64_t asleep_bytes;   /**< of which asleep */
	uint64_t offloaded_bytes; /**< of which asleep with their contents in host memory */
	uint64_t device_bytes;   /**< bytes of the tag's chunks on a device now */
	uint64_t host_bytes;     /**< bytes of the tag's chunks in host memory now */
	uint64_t stash_bytes;    /**< pinned host memory holding the tag's offloaded
				  *   contents, or kept for its next offload */
};

/**
 * vmmx_buf_set_tag() - name the group a buffer sleeps and wakes with.
 * @buf: buffer.
 * @tag: up to VMMX_TAG_MAX - 1 bytes; NULL or "" takes the tag away.
 *
 * Return: 0; -VMMX_EINVAL for a NULL @buf or a tag too long;
 * -VMMX_EBUSY while the buffer is asleep.
 *
 * Context: any thread; takes the buffer's mutex; no driver call.
 */
VMMX_API int vmmx_buf_set_tag(struct vmmx_buf *buf, const char *tag);

/**
 * vmmx_buf_tag() - a buffer's tag.
 * @buf: buffer.
 * @out: receives the tag ("" for none), NUL-terminated.
 * @len: bytes at @out; VMMX_TAG_MAX is always enough.
 *
 * Return: 0; -VMMX_EINVAL for a NULL argument; -VMMX_ERANGE when @len is
 * too small.
 *
 * Context: any thread; takes the buffer's mutex.
 */
VMMX_API int vmmx_buf_tag(struct vmmx_buf *buf, char *out, size_t len);

/**
 * vmmx_tag_scope() - set the calling thread's current tag.
 * @tag: the tag every buffer this thread creates from now on carries (the
 *       framework allocator's segments included); NULL or "" for none.
 *
 * The framework allocator reuses its free blocks across tags: to keep a
 * tag's memory apart, give each tag segments of its own (the Python
 * package's vmmx.torch.region() routes each tag to a memory pool of its
 * own, docs/FRAMEWORKS.md).
 *
 * Return: 0; -VMMX_EINVAL for a tag too long (the current tag is kept).
 *
 * Context: any thread; thread-local; no lock.
 */
VMMX_API int vmmx_tag_scope(const char *tag);

/**
 * vmmx_sleep() - give the device memory of tagged buffers back.
 * @ctx: context.
 * @tags: tags to put to sleep; NULL for every tagged buffer of @ctx.
 * @ntags: entries of @tags.
 * @mode: enum vmmx_sleep_mode.
 * @stream: the stream (a CUstream; NULL: the default stream) whose queued
 *          work may use the memory.
 * @bytes_p: out (may be NULL): bytes put to sleep by this call.
 *
 * Every buffer carrying one of @tags, and awake, goes to sleep.  Its
 * addresses stay reserved; its device memory goes back to the driver, so
 * other processes can allocate it (chunks this context keeps cached on the
 * devices go back too).
 *
 * VMMX_SLEEP_OFFLOAD copies the contents to the buffer's stash, pinned host
 * memory made at its first offload and kept, mapped, across cycles (so a
 * warm cycle pins and maps no host memory; vmmx_sleep_release() gives it
 * back), then unmaps the buffer.  The copies run in pieces on a stream of
 * their own, each piece unmapped while the next one copies.  A buffer with
 * read-mostly chunks (VMMX_ADVISE_READ_MOSTLY) instead migrates to host
 * memory under the same address, so that chunks whose host copy is current
 * are mapped again, not copied; it stays mapped there while asleep.
 * VMMX_SLEEP_DISCARD unmaps every chunk and keeps nothing.
 *
 * While asleep a buffer's range is unmapped (except for the read-mostly
 * case above): a kernel that touches it faults, as after a discard, and
 * vmmx_buf_size() answers 0 (vmmx_sleep_stats() gives the size it wakes
 * to).
 *
 * While a buffer sleeps, vmmx_buf_resize() and vmmx_buf_set_tag() refuse it
 * (-VMMX_EBUSY) and its policy moves none of its chunks; a
 * vmmx_buf_migrate() or vmmx_prefetch() the caller asks for is obeyed (it
 * takes device memory without waking the buffer).
 *
 * Queued work: before anything moves, an event is recorded on @stream and
 * queried without waiting; if the work before it has not finished the call
 * fails with -VMMX_EBUSY and changes nothing.  Synchronise that stream (or
 * the device) first.  Work on other streams is the caller's to finish.
 *
 * All or nothing: when a step fails, the buffers this call put to sleep are
 * woken again before it returns.  No byte of an offloaded buffer is lost
 * at any failure: each chunk is where it was or moved, intact.
 *
 * Return: 0; -VMMX_EINVAL for a NULL @ctx, a bad @mode, or a NULL @tags
 * with @ntags nonzero; -VMMX_EBUSY while work is queued on @stream, or a
 * libvmmx copy uses a buffer; -VMMX_ENOMEM when host memory is short;
 * -VMMX_EDRIVER or -VMMX_EFAULTINJ when a driver step failed.
 *
 * Context: any thread; takes each buffer's mutex in turn; blocks until the
 * data is moved; calls the driver.  Do not resize or migrate the buffers
 * from another thread meanwhile.
 */
VMMX_API int vmmx_sleep(struct vmmx_ctx *ctx, const char *const *tags, size_t ntags, int mode,
			void *stream, size_t *bytes_p);

/**
 * vmmx_wake() - bring sleeping tagged buffers back, at the same addresses.
 * @ctx: context.
 * @tags: tags to wake; NULL for every sleeping buffer of @ctx.
 * @ntags: entries of @tags.
 * @bytes_p: out (may be NULL): bytes woken by this call.
 *
 * An offloaded or discarded buffer grows back to its old size, placed by
 * its policy as any grow is (on its device when there is room; a policy
 * that spills puts what does not fit in host memory), and offloaded
 * contents are copied back from its stash, which is kept for the next
 * sleep.  A read-mostly buffer migrated at the sleep moves each chunk back
 * to the device it was on.  A discarded buffer's contents are undefined.
 *
 * A buffer that cannot be woken (its device is full) stays asleep, intact,
 * and the call goes on with the others; it returns the first error, and a
 * later call finishes the job.
 *
 * Return: 0; -VMMX_EINVAL for a NULL @ctx, or a NULL @tags with @ntags
 * nonzero; -VMMX_ENOMEM when a device has no room; -VMMX_EDRIVER or
 * -VMMX_EFAULTINJ when a driver step failed.
 *
 * Context: as vmmx_sleep().
 */
VMMX_API int vmmx_wake(struct vmmx_ctx *ctx, const char *const *tags, size_t ntags,
		       size_t *bytes_p);

/**
 * vmmx_sleep_release() - give back the host memory kept for offloads.
 * @ctx: context.
 * @tags: tags whose awake buffers give their stash back; NULL for every
 *        tagged buffer of @ctx.
 * @ntags: entries of @tags.
 * @bytes_p: out (may be NULL): bytes of pinned host memory given back.
 *
 * A buffer keeps its stash after a wake so that the next offload pins and
 * maps nothing.  This gives it back; the next offload makes a new one.
 * Asleep buffers keep theirs (it holds their contents).  Destroying a
 * buffer gives its stash back too.
 *
 * Return: 0; -VMMX_EINVAL as vmmx_wake(); -VMMX_ENOMEM when out of memory.
 *
 * Context: as vmmx_sleep().
 */
VMMX_API int vmmx_sleep_release(struct vmmx_ctx *ctx, const char *const *tags, size_t ntags,
				size_t *bytes_p);

/**
 * vmmx_sleep_stats() - a tag's buffers and where their memory is.
 * @ctx: context.
 * @tag: tag; "" for untagged buffers.
 * @st: out.
 *
 * Return: 0; -VMMX_EINVAL for a NULL argument.
 *
 * Context: any thread; RCU read side; no lock, no driver call.
 */
VMMX_API int vmmx_sleep_stats(struct vmmx_ctx *ctx, const char *tag,
			      struct vmmx_sleep_stats *st);

#ifdef __cplusplus
}
#endif

/* The framework allocator, declared apart; included so that users of vmmx.h
 * alone keep compiling. */
#include "vmmx/alloc.h"

#endif /* VMMX_H */
