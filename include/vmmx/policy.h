/* SPDX-License-Identifier: MIT */
/*
 * vmmx/policy.h - the placement-policy plugin ABI of libvmmx.
 *
 * A policy is a shared object named vmmx_policy_<name>.so that exports one
 * function, vmmx_policy_entry().  libvmmx looks for it in the directories
 * of VMMX_POLICY_PATH, then in $(pkglibdir)/policies, and loads the first
 * file that passes every check.  Before anything of the file runs, its path
 * is walked from / one component at a time, nothing followed implicitly:
 *
 *  - every directory passed through, / included and those reached through
 *    a symbolic link, must be owned by root or by the effective user and
 *    must not be writable by group or others unless it is sticky (as /tmp);
 *  - every symbolic link on the way must be owned by root or by the
 *    effective user; its target is walked by the same rules (from / when
 *    absolute), 40 links at most;
 *  - the file must be a regular file, not a symbolic link, owned by root or
 *    by the effective user and not writable by group or others.
 *
 * The file is then loaded from the descriptor that walk opened, with
 * dlopen("/proc/self/fd/N", RTLD_NOW | RTLD_LOCAL), so renaming or
 * relinking anything after the check cannot substitute another file.
 * Without /proc mounted every plugin file is refused ("cannot load it
 * through /proc/self/fd/N (is /proc mounted?)"): loading by path again
 * would reopen the race; the built-in policies still work.  The dynamic
 * linker therefore knows a plugin as /proc/self/fd/N (dladdr,
 * dl_iterate_phdr, a debugger's list of libraries); libvmmx's logs,
 * statistics ("source"), vmmx_ctx_query() and vmmx_policy_list() name the
 * path searched.  A file
 * that does not exist is skipped silently; any other failure refuses the
 * file, is logged at info level naming the component that failed, and the
 * search goes on.  libvmmx then calls the entry point with the ABI version
 * it speaks, and checks the ops table the policy returns:
 *
 *  - the major numbers must match exactly;
 *  - @size must cover every mandatory member (up to and including @place);
 *  - init, fini and place must be set;
 *  - @name must be the name the file was loaded for.
 *
 * Optional members are appended in later minor versions; libvmmx calls one
 * only when the table's @size covers it, so a policy built against an older
 * minor keeps working, and one built against a newer minor works with an
 * older libvmmx as long as it does not rely on what that libvmmx lacks
 * (it can read host->abi_version).
 *
 * A policy never links libvmmx: everything it may ask of the library comes
 * through the host-services table given to init().  It includes only this
 * header (and vmmx.h, which this header includes, for the types).
 *
 * Calling context, for every callback: called with the buffer's mutex held
 * (placement of one buffer is serialised, placements of different buffers
 * run concurrently in different threads); must not block for long, must
 * not call back into libvmmx other than through the host table, and must be
 * thread-safe across buffers (keep per-call state on the stack).
 *
 * A policy whose own allocation fails should degrade (rank a safe default),
 * never fail the user's allocation for its own reasons.
 */
#ifndef VMMX_POLICY_H
#define VMMX_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "vmmx.h"

#ifdef __cplusplus
extern "C" {
#endif

/** VMMX_POLICY_ABI_MAJOR - incompatible changes bump this. */
#define VMMX_POLICY_ABI_MAJOR 1
/** VMMX_POLICY_ABI_MINOR - appended members bump this. */
#define VMMX_POLICY_ABI_MINOR 1
/** VMMX_POLICY_ABI - the version this header describes. */
#define VMMX_POLICY_ABI ((uint32_t)((VMMX_POLICY_ABI_MAJOR << 16) | VMMX_POLICY_ABI_MINOR))
/** VMMX_POLICY_ABI_MAJOR_OF() - major number of an ABI version. */
#define VMMX_POLICY_ABI_MAJOR_OF(v) ((uint32_t)(v) >> 16)

/** VMMX_POLICY_MAX_RANK - most locations one answer may rank. */
#define VMMX_POLICY_MAX_RANK 8
/** VMMX_POLICY_MAX_ROOM - most locations described in a request. */
#define VMMX_POLICY_MAX_ROOM 17

/**
 * struct vmmx_policy_room - what one location can take now.
 */
struct vmmx_policy_room {
	struct vmmx_loc loc;      /**< the location */
	uint64_t room;            /**< bytes libvmmx could place there now (limits, headroom, free memory, cache) */
	uint64_t held;            /**< bytes the context holds there (cache included) */
	uint64_t limit;           /**< the context's limit there, UINT64_MAX if none */
};

/**
 * struct vmmx_policy_request - the question asked for each new chunk.
 *
 * Valid only during the call.
 */
struct vmmx_policy_request {
	size_t size;              /**< sizeof(struct vmmx_policy_request) of the library */
	uint64_t buf_id;          /**< identity of the buffer, unique in its context */
	size_t buf_capacity;      /**< capacity of the buffer */
	size_t offset;            /**< offset of the new chunk in the buffer */
	size_t chunk_index;       /**< index the new chunk will have */
	size_t want;              /**< bytes this grow still has to place from @offset */
	size_t chunk_min;         /**< smallest chunk (resolution of placement) */
	size_t chunk_max;         /**< largest chunk */
	int device;               /**< the context's device */
	int device_count;         /**< devices visible to the context */
	size_t nroom;             /**< entries in @room */
	/**
	 * @room: the context's device, the other devices it uses (a placement or
	 * migration went or looked there: reading a GPU's free memory needs a
	 * CUDA context on it, which libvmmx creates only for devices in use), and
	 * host memory.  A policy may rank any device: libvmmx asks its room then.
	 */
	const struct vmmx_policy_room *room;
};

/**
 * struct vmmx_policy_answer - where the next chunk should go.
 *
 * libvmmx zeroes it before the call.  It tries @locs in order: the first
 * location with room gets the chunk; the others are fallbacks, counted and
 * traced as such.
 */
struct vmmx_policy_answer {
	struct vmmx_loc locs[VMMX_POLICY_MAX_RANK]; /**< locations, most preferred first */
	unsigned int nlocs;       /**< entries used in @locs (at least 1) */
	size_t max_len;           /**< most bytes for this chunk (rounded down to chunk_min,
				       at least chunk_min); 0: as large as libvmmx allows */
};

/**
 * struct vmmx_policy_chunk - a chunk of a buffer, as chunk_event() reports it.
 */
struct vmmx_policy_chunk {
	uint64_t buf_id;          /**< the buffer (struct vmmx_policy_request.buf_id) */
	size_t offset;            /**< offset of the chunk in the buffer */
	size_t size;              /**< bytes */
	struct vmmx_loc loc;      /**< where it is now */
};

/** enum vmmx_policy_event - what happened to a chunk (chunk_event()). */
enum vmmx_policy_event {
	VMMX_POLICY_EV_PLACED = 1,   /**< a grow mapped it */
	VMMX_POLICY_EV_RELEASED = 2, /**< a shrink or destroy unmapped it */
	VMMX_POLICY_EV_MOVED = 3,    /**< a migration moved it (loc is the new location) */
};

/**
 * struct vmmx_policy_move - a chunk to move, as evict() and rebalance() ask.
 *
 * The chunk is named by its buffer and the offset it starts at; libvmmx
 * ignores a move naming no chunk of a buffer of this policy instance, a
 * chunk already at @to, or a buffer busy in another thread.
 */
struct vmmx_policy_move {
	uint64_t buf_id;          /**< the buffer */
	size_t offset;            /**< offset at which the chunk starts */
	struct vmmx_loc to;       /**< where to move it */
};

/**
 * struct vmmx_policy_host - services libvmmx offers a policy.
 *
 * The functions take the @host pointer itself as first argument.  Valid from
 * init() until fini() returns.
 */
struct vmmx_policy_host {
	uint32_t abi_version;     /**< VMMX_POLICY_ABI of the library */
	uint32_t size;            /**< sizeof(struct vmmx_policy_host) of the library */
	const char *policy_name;  /**< the name this instance was loaded under */
	int device;               /**< the context's device */
	/** log() - one line at an enum vmmx_log_level, prefixed with the policy's name. */
	void (*log)(const struct vmmx_policy_host *host, int level, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	/** device_count() - devices visible to the context. */
	int (*device_count)(const struct vmmx_policy_host *host);
	/** mem_info() - free and total memory of a location; 0 or a -VMMX_E* code. */
	int (*mem_info)(const struct vmmx_policy_host *host, struct vmmx_loc loc, uint64_t *free_p,
			uint64_t *total_p);
	/** limit() - the context's limit (UINT64_MAX if none) and held bytes at a location. */
	int (*limit)(const struct vmmx_policy_host *host, struct vmmx_loc loc, uint64_t *limit_p,
		     uint64_t *held_p);
	/** parse_size() - vmmx_parse_size(), for arguments. */
	int (*parse_size)(const char *s, uint64_t total, uint64_t *out);
	/**
	 * counter_add() - add to a named counter of this policy (up to 8 names of
	 * up to 31 characters); shown by vmmx_stats_json().  Lock-free.
	 */
	void (*counter_add)(const struct vmmx_policy_host *host, const char *name, uint64_t delta);
};

/**
 * struct vmmx_policy_ops - a policy.
 */
struct vmmx_policy_ops {
	uint32_t abi_version;     /**< VMMX_POLICY_ABI the policy was built with */
	uint32_t size;            /**< sizeof(struct vmmx_policy_ops) the policy was built with */
	const char *name;         /**< name; must match the file's vmmx_policy_<name>.so */
	const char *description;  /**< one line for humans (vmmx-info), may be NULL */

	/**
	 * init() - make an instance.
	 * @host: services; keep the pointer for later calls.
	 * @args: the text after "name:" in the policy spec ("key=val,key=val"),
	 *        or "" when there is none.
	 * @state_p: out: the instance's state, passed to every other callback.
	 *
	 * Return: 0; a negative -VMMX_E* code (-VMMX_EINVAL for bad arguments,
	 * after host->log() explained which) refuses the instance.
	 */
	int (*init)(const struct vmmx_policy_host *host, const char *args, void **state_p);

	/** fini() - destroy an instance; every buffer using it is gone. */
	void (*fini)(void *state);

	/**
	 * place() - rank locations for the next chunk of a grow.
	 * @state: from init().
	 * @req: the question.
	 * @ans: out: ranked locations and an optional length bound.
	 *
	 * Return: 0; a negative code fails the grow (use only for a broken
	 * request: a policy with nothing better to say ranks a default).
	 */
	int (*place)(void *state, const struct vmmx_policy_request *req,
		     struct vmmx_policy_answer *ans);

	/* ---- optional members, ABI 1.0 ---- */

	/**
	 * buf_event() - a buffer using this instance was created (@created 1)
	 * or destroyed (0).  May be NULL.
	 */
	void (*buf_event)(void *state, uint64_t buf_id, size_t capacity, int created);

	/* ---- optional members, ABI 1.1: eviction and promotion ---- */

	/**
	 * chunk_event() - a chunk of a buffer using this instance was placed,
	 * released or moved (enum vmmx_policy_event).  May be NULL.
	 */
	void (*chunk_event)(void *state, const struct vmmx_policy_chunk *c, int event);

	/**
	 * advise() - vmmx_buf_advise() on [offset, offset + len) of a buffer
	 * (enum vmmx_advice).  libvmmx sees no hardware access counters: this
	 * and chunk_event() are all a policy learns about use.  May be NULL.
	 */
	void (*advise)(void *state, uint64_t buf_id, size_t offset, size_t len, int advice);

	/**
	 * evict() - the next chunk of a grow wants @want (the answer's first
	 * location) and it lacks @need bytes of room: name chunks to move
	 * elsewhere (victims), most expendable first, into @moves.
	 * @req: the request of that grow (the growing buffer's chunks past
	 *       req->offset do not exist yet).
	 * Return: moves written (at most @max); 0 to fall back as usual.
	 * May be NULL.
	 */
	size_t (*evict)(void *state, const struct vmmx_policy_request *req, struct vmmx_loc want,
			uint64_t need, struct vmmx_policy_move *moves, size_t max);

	/**
	 * rebalance() - room changed (memory freed by a shrink, destroy or
	 * migration, or advice given): name moves to make now, in order (for
	 * example demotions first, then promotions), into @moves.
	 * @room: what each location can take now (as in a request).
	 * Return: moves written (at most @max).  May be NULL.
	 */
	size_t (*rebalance)(void *state, const struct vmmx_policy_room *room, size_t nroom,
			    struct vmmx_policy_move *moves, size_t max);
};

/** typedef vmmx_policy_entry_fn - the type of a policy's entry point. */
typedef const struct vmmx_policy_ops *vmmx_policy_entry_fn(uint32_t core_abi);

/**
 * vmmx_policy_entry() - the one symbol a policy exports.
 * @core_abi: VMMX_POLICY_ABI of the loading libvmmx.
 *
 * Return: the policy's ops table (static storage), or NULL to refuse the
 * library (for example a major it cannot serve).
 */
#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
const struct vmmx_policy_ops *vmmx_policy_entry(uint32_t core_abi);

/** VMMX_POLICY_SIZE_THROUGH() - size a table needs to cover member @m. */
#define VMMX_POLICY_SIZE_THROUGH(type, m) (offsetof(type, m) + sizeof(((type *)0)->m))

#ifdef __cplusplus
}
#endif

#endif /* VMMX_POLICY_H */
