// SPDX-License-Identifier: MIT
/*
 * abi.c - the layout of every public struct, pinned.  The offsets and sizes
 * below are the x86-64 LP64 values written out as literals: a change of
 * layout (a member moved, resized or inserted rather than appended) fails
 * here and forces a conscious decision: append instead, or bump the ABI
 * (VMMX_POLICY_ABI_MAJOR for the plugin structs, the library's
 * -version-info and VMMX_STATS_VERSION for the others) and update this file.
 * Appending a member changes only the struct's size line.
 *
 * Also pinned: the size/version members come first (so old callers and
 * plugins are recognised), the plugin ABI version and the numeric values
 * of the error codes and of the enums that cross the API.
 */
#include "config.h"

#include <stddef.h>

#include "vmmx.h"
#include "vmmx/policy.h"
#include "tests/tap/basic.h"

#define STRUCT(s, size) \
	is_uint(size, sizeof(struct s), "sizeof(struct " #s ") is " #size)
#define MEMBER(s, m, off, size)                                                            \
	ok(offsetof(struct s, m) == (off) && sizeof(((struct s *)0)->m) == (size),            \
	   "struct " #s "." #m ": offset %zu (want " #off "), size %zu (want " #size ")",    \
	   offsetof(struct s, m), sizeof(((struct s *)0)->m))

int main(void)
{
#if !defined(__x86_64__) || !defined(__LP64__)
	skip_all("the literals are the x86-64 LP64 layout");
#endif
	plan(188);

	/* struct vmmx_config */
	STRUCT(vmmx_config, 144);
	MEMBER(vmmx_config, size, 0, 8);
	MEMBER(vmmx_config, flags, 8, 4);
	MEMBER(vmmx_config, backend, 16, 8);
	MEMBER(vmmx_config, device, 24, 4);
	MEMBER(vmmx_config, policy, 32, 8);
	MEMBER(vmmx_config, chunk_size, 40, 8);
	MEMBER(vmmx_config, chunk_max, 48, 8);
	MEMBER(vmmx_config, device_limit, 56, 8);
	MEMBER(vmmx_config, host_limit, 64, 8);
	MEMBER(vmmx_config, log, 72, 8);
	MEMBER(vmmx_config, vars, 80, 8);
	MEMBER(vmmx_config, log_fn, 88, 8);
	MEMBER(vmmx_config, log_arg, 96, 8);
	MEMBER(vmmx_config, policy_path, 104, 8);
	MEMBER(vmmx_config, device_headroom, 112, 8);
	MEMBER(vmmx_config, cache_limit, 120, 8);
	MEMBER(vmmx_config, device_prealloc, 128, 8);
	MEMBER(vmmx_config, trace, 136, 8);

	/* struct vmmx_stats */
	STRUCT(vmmx_stats, 1056);
	MEMBER(vmmx_stats, size, 0, 8);
	MEMBER(vmmx_stats, version, 8, 4);
	MEMBER(vmmx_stats, buffers, 12, 4);
	MEMBER(vmmx_stats, device_bytes, 16, 8);
	MEMBER(vmmx_stats, host_bytes, 24, 8);
	MEMBER(vmmx_stats, device_chunks, 32, 8);
	MEMBER(vmmx_stats, host_chunks, 40, 8);
	MEMBER(vmmx_stats, reserved_bytes, 48, 8);
	MEMBER(vmmx_stats, placed_device, 56, 8);
	MEMBER(vmmx_stats, placed_host, 64, 8);
	MEMBER(vmmx_stats, fallbacks, 72, 8);
	MEMBER(vmmx_stats, resizes, 80, 8);
	MEMBER(vmmx_stats, resize_failures, 88, 8);
	MEMBER(vmmx_stats, deferred, 96, 8);
	MEMBER(vmmx_stats, copies, 104, 8);
	MEMBER(vmmx_stats, driver_calls, 112, 96);
	MEMBER(vmmx_stats, fallbacks_limit, 208, 8);
	MEMBER(vmmx_stats, fallbacks_headroom, 216, 8);
	MEMBER(vmmx_stats, fallbacks_oom, 224, 8);
	MEMBER(vmmx_stats, cache_hits, 232, 8);
	MEMBER(vmmx_stats, cache_misses, 240, 8);
	MEMBER(vmmx_stats, cache_bytes, 248, 8);
	MEMBER(vmmx_stats, cache_released, 256, 8);
	MEMBER(vmmx_stats, registrations, 264, 8);
	MEMBER(vmmx_stats, registered_bytes, 272, 8);
	MEMBER(vmmx_stats, host_access, 280, 4);
	MEMBER(vmmx_stats, migrations, 288, 8);
	MEMBER(vmmx_stats, migrated_bytes, 296, 8);
	MEMBER(vmmx_stats, evictions, 304, 8);
	MEMBER(vmmx_stats, promotions, 312, 8);
	/* version 2: per device */
	MEMBER(vmmx_stats, device_count, 320, 4);
	MEMBER(vmmx_stats, dev_bytes, 328, 128);
	MEMBER(vmmx_stats, dev_chunks, 456, 128);
	MEMBER(vmmx_stats, dev_held, 584, 128);
	MEMBER(vmmx_stats, dev_placed, 712, 128);
	/* version 3: read-mostly chunks */
	MEMBER(vmmx_stats, shadow_bytes, 840, 8);
	MEMBER(vmmx_stats, copies_saved, 848, 8);
	MEMBER(vmmx_stats, copy_bytes_saved, 856, 8);
	/* version 4: slack and skipped moves */
	MEMBER(vmmx_stats, slack_bytes, 864, 8);
	MEMBER(vmmx_stats, moves_busy, 872, 8);
	/* version 5: verified host copies */
	MEMBER(vmmx_stats, checksums, 880, 8);
	MEMBER(vmmx_stats, verified_saved, 888, 8);
	MEMBER(vmmx_stats, verified_changed, 896, 8);
	/* version 6: parked chunks */
	MEMBER(vmmx_stats, parked_bytes, 904, 8);
	MEMBER(vmmx_stats, parks, 912, 8);
	MEMBER(vmmx_stats, unparks, 920, 8);
	/* version 7: driver time */
	MEMBER(vmmx_stats, driver_ns, 928, 96);
	MEMBER(vmmx_stats, checksum_ns, 1024, 8);
	MEMBER(vmmx_stats, event_calls, 1032, 8);
	MEMBER(vmmx_stats, event_ns, 1040, 8);
	MEMBER(vmmx_stats, checksum_calls, 1048, 8);

	/* struct vmmx_ctx_info */
	STRUCT(vmmx_ctx_info, 408);
	MEMBER(vmmx_ctx_info, size, 0, 8);
	MEMBER(vmmx_ctx_info, backend, 8, 8);
	MEMBER(vmmx_ctx_info, device, 16, 4);
	MEMBER(vmmx_ctx_info, device_count, 20, 4);
	MEMBER(vmmx_ctx_info, driver_version, 24, 4);
	MEMBER(vmmx_ctx_info, granularity, 32, 8);
	MEMBER(vmmx_ctx_info, chunk_min, 40, 8);
	MEMBER(vmmx_ctx_info, chunk_max, 48, 8);
	MEMBER(vmmx_ctx_info, device_total, 56, 8);
	MEMBER(vmmx_ctx_info, device_free, 64, 8);
	MEMBER(vmmx_ctx_info, host_total, 72, 8);
	MEMBER(vmmx_ctx_info, device_limit, 80, 8);
	MEMBER(vmmx_ctx_info, host_limit, 88, 8);
	MEMBER(vmmx_ctx_info, device_name, 96, 96);
	MEMBER(vmmx_ctx_info, policy, 192, 64);
	MEMBER(vmmx_ctx_info, device_headroom, 256, 8);
	MEMBER(vmmx_ctx_info, cache_limit, 264, 8);
	MEMBER(vmmx_ctx_info, policy_source, 272, 128);
	MEMBER(vmmx_ctx_info, host_access, 400, 4);

	/* struct vmmx_chunk_info */
	STRUCT(vmmx_chunk_info, 32);
	MEMBER(vmmx_chunk_info, base, 0, 8);
	MEMBER(vmmx_chunk_info, size, 8, 8);
	MEMBER(vmmx_chunk_info, loc, 16, 8);
	MEMBER(vmmx_chunk_info, buf, 24, 8);

	/* struct vmmx_residency */
	STRUCT(vmmx_residency, 16);
	MEMBER(vmmx_residency, device, 0, 8);
	MEMBER(vmmx_residency, host, 8, 8);

	/* struct vmmx_loc */
	STRUCT(vmmx_loc, 8);
	MEMBER(vmmx_loc, kind, 0, 4);
	MEMBER(vmmx_loc, id, 4, 4);

	/* struct vmmx_policy_ops */
	STRUCT(vmmx_policy_ops, 88);
	MEMBER(vmmx_policy_ops, abi_version, 0, 4);
	MEMBER(vmmx_policy_ops, size, 4, 4);
	MEMBER(vmmx_policy_ops, name, 8, 8);
	MEMBER(vmmx_policy_ops, description, 16, 8);
	MEMBER(vmmx_policy_ops, init, 24, 8);
	MEMBER(vmmx_policy_ops, fini, 32, 8);
	MEMBER(vmmx_policy_ops, place, 40, 8);
	MEMBER(vmmx_policy_ops, buf_event, 48, 8);
	MEMBER(vmmx_policy_ops, chunk_event, 56, 8);
	MEMBER(vmmx_policy_ops, advise, 64, 8);
	MEMBER(vmmx_policy_ops, evict, 72, 8);
	MEMBER(vmmx_policy_ops, rebalance, 80, 8);

	/* struct vmmx_policy_request */
	STRUCT(vmmx_policy_request, 88);
	MEMBER(vmmx_policy_request, size, 0, 8);
	MEMBER(vmmx_policy_request, buf_id, 8, 8);
	MEMBER(vmmx_policy_request, buf_capacity, 16, 8);
	MEMBER(vmmx_policy_request, offset, 24, 8);
	MEMBER(vmmx_policy_request, chunk_index, 32, 8);
	MEMBER(vmmx_policy_request, want, 40, 8);
	MEMBER(vmmx_policy_request, chunk_min, 48, 8);
	MEMBER(vmmx_policy_request, chunk_max, 56, 8);
	MEMBER(vmmx_policy_request, device, 64, 4);
	MEMBER(vmmx_policy_request, device_count, 68, 4);
	MEMBER(vmmx_policy_request, nroom, 72, 8);
	MEMBER(vmmx_policy_request, room, 80, 8);

	/* struct vmmx_policy_answer */
	STRUCT(vmmx_policy_answer, 80);
	MEMBER(vmmx_policy_answer, locs, 0, 64);
	MEMBER(vmmx_policy_answer, nlocs, 64, 4);
	MEMBER(vmmx_policy_answer, max_len, 72, 8);

	/* struct vmmx_policy_room */
	STRUCT(vmmx_policy_room, 32);
	MEMBER(vmmx_policy_room, loc, 0, 8);
	MEMBER(vmmx_policy_room, room, 8, 8);
	MEMBER(vmmx_policy_room, held, 16, 8);
	MEMBER(vmmx_policy_room, limit, 24, 8);

	/* struct vmmx_policy_host */
	STRUCT(vmmx_policy_host, 72);
	MEMBER(vmmx_policy_host, abi_version, 0, 4);
	MEMBER(vmmx_policy_host, size, 4, 4);
	MEMBER(vmmx_policy_host, policy_name, 8, 8);
	MEMBER(vmmx_policy_host, device, 16, 4);
	MEMBER(vmmx_policy_host, log, 24, 8);
	MEMBER(vmmx_policy_host, device_count, 32, 8);
	MEMBER(vmmx_policy_host, mem_info, 40, 8);
	MEMBER(vmmx_policy_host, limit, 48, 8);
	MEMBER(vmmx_policy_host, parse_size, 56, 8);
	MEMBER(vmmx_policy_host, counter_add, 64, 8);

	/* ---- versioned structs start with what identifies their version ---- */
	is_uint(0, offsetof(struct vmmx_config, size), "struct vmmx_config starts with size");
	is_uint(0, offsetof(struct vmmx_stats, size), "struct vmmx_stats starts with size");
	is_uint(0, offsetof(struct vmmx_ctx_info, size), "struct vmmx_ctx_info starts with size");
	is_uint(0, offsetof(struct vmmx_policy_request, size),
		"struct vmmx_policy_request starts with size");
	ok(offsetof(struct vmmx_policy_ops, abi_version) == 0 &&
	       offsetof(struct vmmx_policy_ops, size) == 4,
	   "struct vmmx_policy_ops starts with abi_version, then size");
	ok(offsetof(struct vmmx_policy_host, abi_version) == 0 &&
	       offsetof(struct vmmx_policy_host, size) == 4,
	   "struct vmmx_policy_host starts with abi_version, then size");

	/* ---- the plugin ABI ---- */
	is_uint(1, VMMX_POLICY_ABI_MAJOR, "VMMX_POLICY_ABI_MAJOR is 1");
	is_uint(1, VMMX_POLICY_ABI_MINOR, "VMMX_POLICY_ABI_MINOR is 1");
	is_uint((1u << 16) | 1u, VMMX_POLICY_ABI, "VMMX_POLICY_ABI is (1 << 16) | 1");
	is_uint(48, VMMX_POLICY_SIZE_THROUGH(struct vmmx_policy_ops, place),
		"the mandatory part of struct vmmx_policy_ops ends after place, at 48 bytes");
	is_uint(8, VMMX_POLICY_MAX_RANK, "VMMX_POLICY_MAX_RANK is 8");
	is_uint(17, VMMX_POLICY_MAX_ROOM, "VMMX_POLICY_MAX_ROOM is 17");

	/* ---- error codes: errno values below 256, libvmmx's own from 256 ---- */
	is_int(1, VMMX_EPERM, "VMMX_EPERM is 1");
	is_int(2, VMMX_ENOENT, "VMMX_ENOENT is 2");
	is_int(12, VMMX_ENOMEM, "VMMX_ENOMEM is 12");
	is_int(14, VMMX_EFAULT, "VMMX_EFAULT is 14");
	is_int(16, VMMX_EBUSY, "VMMX_EBUSY is 16");
	is_int(17, VMMX_EEXIST, "VMMX_EEXIST is 17");
	is_int(19, VMMX_ENODEV, "VMMX_ENODEV is 19");
	is_int(22, VMMX_EINVAL, "VMMX_EINVAL is 22");
	is_int(34, VMMX_ERANGE, "VMMX_ERANGE is 34");
	is_int(95, VMMX_ENOTSUP, "VMMX_ENOTSUP is 95");
	is_int(256, VMMX_EDRIVER, "VMMX_EDRIVER is 256");
	is_int(257, VMMX_ENODRIVER, "VMMX_ENODRIVER is 257");
	is_int(258, VMMX_ECONFIG, "VMMX_ECONFIG is 258");
	is_int(259, VMMX_ENOBACKEND, "VMMX_ENOBACKEND is 259");
	is_int(260, VMMX_EFAULTINJ, "VMMX_EFAULTINJ is 260");
	is_int(261, VMMX_EPOLICY, "VMMX_EPOLICY is 261");

	/* ---- enums that cross the API and the plugin ABI ---- */
	ok(VMMX_LOC_NONE == 0 && VMMX_LOC_DEVICE == 1 && VMMX_LOC_HOST == 2 &&
	       VMMX_LOC_HOST_NUMA == 3,
	   "enum vmmx_loc_kind: NONE 0, DEVICE 1, HOST 2, HOST_NUMA 3");
	ok(VMMX_LOG_NONE == 0 && VMMX_LOG_ERROR == 1 && VMMX_LOG_WARN == 2 && VMMX_LOG_INFO == 3 &&
		   VMMX_LOG_DEBUG == 4,
	   "enum vmmx_log_level: NONE 0 to DEBUG 4");
	is_uint(4, sizeof(enum vmmx_loc_kind), "sizeof(enum vmmx_loc_kind) is 4");
	is_uint(0x1u, VMMX_CONFIG_NO_ENV, "VMMX_CONFIG_NO_ENV is 0x1");

	is_int(0, VMMX_OP_RESERVE, "VMMX_OP_RESERVE is 0");
	is_int(1, VMMX_OP_UNRESERVE, "VMMX_OP_UNRESERVE is 1");
	is_int(2, VMMX_OP_CREATE, "VMMX_OP_CREATE is 2");
	is_int(3, VMMX_OP_RELEASE, "VMMX_OP_RELEASE is 3");
	is_int(12, VMMX_OP_COUNT, "VMMX_OP_COUNT is 12 (the length of vmmx_stats.driver_calls)");

	is_int(7, VMMX_STATS_VERSION, "VMMX_STATS_VERSION is 7");
	ok(VMMX_ADVISE_HOT == 1 && VMMX_ADVISE_COLD == 2 && VMMX_ADVISE_READ_MOSTLY == 3 &&
		   VMMX_ADVISE_WILL_NEED == 4 && VMMX_ADVISE_NOT_READ_MOSTLY == 5 &&
		   VMMX_ADVISE_CPU == 6,
	   "enum vmmx_advice: HOT 1 to CPU 6");
	ok(VMMX_OP_MAP == 4 && VMMX_OP_UNMAP == 5 && VMMX_OP_SET_ACCESS == 6 && VMMX_OP_COPY == 7 &&
		   VMMX_OP_MEMSET == 8 && VMMX_OP_SYNC == 9 && VMMX_OP_REGISTER == 10 &&
		   VMMX_OP_UNREGISTER == 11,
	   "enum vmmx_op: MAP 4 to UNREGISTER 11");
	return tap_done();
}
