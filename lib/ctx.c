// SPDX-License-Identifier: MIT
/*
 * ctx.c - contexts: configuration, the backend, sizes and limits, create,
 * query, room (vmmx_ctx_room, over room.c's vmmx__room), trim and destroy,
 * and the destructor of an inherited context in a forked child.  What a
 * context holds lives with its layer: charge and room (room.c), deferred
 * teardown (defer.c), the cache (cache.c), the buffer list (buflist.c).
 *
 * Locking: held[] and the counters are atomic; ctx->lock, reg_lock and
 * cache_lock are the other files' (internal/mem.h has the order).
 * Everything else is written once in vmmx_ctx_create and read-only after.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal/obj.h"

/*
 * Default largest chunk: none below the memory of the largest location, so
 * a grow that one location can take is one handle, like a raw
 * cuMemCreate/cuMemMap/cuMemSetAccess grow.  The driver's cost is per handle
 * (cuMemCreate 11 us and cuMemSetAccess 57 us for a 1 GiB device handle on
 * the H200), and with 1 GiB chunks a 64 GiB grow took 2.1x a one-handle
 * grow.  Policies that need a finer unit of migration bound their chunks
 * (policy answer's max_len: lru, tiered, interleave); VMMX_CHUNK_MAX bounds
 * every buffer of a context.
 */

/*
 * Default device headroom: device memory that grows leave free for the CUDA
 * runtime and libraries that allocate outside libvmmx: cuBLAS workspaces (up
 * to 32 MiB per handle and stream on Hopper), kernels loaded lazily at first
 * launch (CUDA_MODULE_LOADING=LAZY: cuBLAS and cuDNN modules take tens to
 * hundreds of MiB), NCCL's channel buffers, cuDNN workspaces, and a
 * framework's own allocations.  1 GiB, or 1/16 of a device smaller than
 * 16 GiB; docs/PERFORMANCE.md has what was measured.  0 gives every byte
 * to libvmmx.
 */
#define DEFAULT_HEADROOM (1ull << 30)
#define DEFAULT_HEADROOM_SHARE 16

/* Default bound of the chunk cache: enough to make repeated grow/shrink cycles
 * of a few GiB free of driver calls (HOST chunks cost ~160 us/MiB to create),
 * small enough not to surprise. */
#define DEFAULT_CACHE_LIMIT (1ull << 30)

/* The vmm layer reports errors and log lines through this hook. */
static void report(void *arg, int level, int err, const char *msg)
{
	struct vmmx_ctx *ctx = arg;

	if (err)
		vmmx__set_last_error(msg);
	vmmx__logf(&ctx->conf.log, (enum vmmx_log_level)level, "%s", msg);
}

struct vmm *vmmx__ctx_vmm(struct vmmx_ctx *ctx)
{
	return ctx->vmm;
}

static int setup_sizes(struct vmmx_ctx *ctx)
{
	const struct vmmx__log *log = &ctx->conf.log;
	struct vmmx_loc dev = { VMMX_LOC_DEVICE, ctx->device }, host = { VMMX_LOC_HOST, 0 };
	struct vmm_info vi;
	size_t gd, gh;
	char a[32], b[32];
	int err;

	err = vmm_query(ctx->vmm, &vi);
	if (err)
		return err;
	ctx->ndev = vi.device_count < VMMX__MAX_DEVICES ? vi.device_count : VMMX__MAX_DEVICES;
	if (ctx->device >= ctx->ndev)
		return vmmx__fail(log, -VMMX_ENODEV, "device %d: libvmmx handles devices 0 to %d",
				  ctx->device, VMMX__MAX_DEVICES - 1);
	err = vmm_granularity(ctx->vmm, dev, &gd);
	if (!err)
		err = vmm_granularity(ctx->vmm, host, &gh);
	if (err)
		return err;
	/* Chunks may be placed in either kind of memory: honour both granularities. */
	ctx->gran = gd > gh ? gd : gh;
	if (gd % gh && gh % gd)
		return vmmx__fail(log, -VMMX_ENOTSUP,
				  "device granularity %zu and host granularity %zu are not multiples of each other",
				  gd, gh);

	ctx->chunk_min = vmmx__size_resolve(&ctx->conf.chunk_size, 0, ctx->gran);
	if (!ctx->chunk_min || ctx->chunk_min % ctx->gran)
		return vmmx__fail(log, -VMMX_ECONFIG,
				  "VMMX_CHUNK_SIZE=%s: must be a nonzero multiple of the allocation granularity (%s)",
				  vmmx__fmt_size(ctx->chunk_min, a, sizeof(a)),
				  vmmx__fmt_size(ctx->gran, b, sizeof(b)));

	/*
	 * Limits and headroom apply to each device on its own, each device's
	 * percentages of its own memory; "N:SIZE" items set one device.  Only
	 * totals are read here: another device's free memory needs a CUDA
	 * context on it (vmm_mem_info), which a context creates only once it
	 * uses that device (vmmx__room).
	 */
	{
		int lmax = vmmx__dev_setting_max(&ctx->conf.device_limit);
		int hmax = vmmx__dev_setting_max(&ctx->conf.device_headroom);

		if (lmax >= ctx->ndev || hmax >= ctx->ndev)
			return vmmx__fail(log, -VMMX_ECONFIG,
					  "%s names device %d, but the %s backend has %d device%s (0 to %d)",
					  lmax >= ctx->ndev ? "VMMX_DEVICE_LIMIT" : "VMMX_DEVICE_HEADROOM",
					  lmax >= ctx->ndev ? lmax : hmax, vi.backend, ctx->ndev,
					  ctx->ndev == 1 ? "" : "s", ctx->ndev - 1);
	}
	for (int d = 0; d < ctx->ndev; d++) {
		uint64_t dflt;

		err = vmm_mem_info(ctx->vmm, (struct vmmx_loc){ VMMX_LOC_DEVICE, d }, NULL,
				   &ctx->total[d]);
		if (err)
			return err;
		ctx->limit[d] = vmmx__dev_resolve(&ctx->conf.device_limit, d, ctx->total[d],
						  UINT64_MAX);
		dflt = ctx->total[d] / DEFAULT_HEADROOM_SHARE;
		dflt = dflt < DEFAULT_HEADROOM ? dflt : DEFAULT_HEADROOM;
		ctx->headroom[d] = vmmx__dev_resolve(&ctx->conf.device_headroom, d, ctx->total[d],
						     vmmx__round_down(dflt, ctx->gran));
	}
	err = vmm_mem_info(ctx->vmm, host, NULL, &ctx->total[VMMX__HOST_SLOT]);
	if (err)
		return err;
	/* No default bound below the largest location (see the comment above DEFAULT_HEADROOM). */
	{
		uint64_t biggest = ctx->chunk_min;

		for (int k = 0; k < VMMX__NSLOTS; k++)
			biggest = ctx->total[k] > biggest ? ctx->total[k] : biggest;
		if (biggest > SIZE_MAX / 2)
			biggest = SIZE_MAX / 2;
		ctx->chunk_max = vmmx__size_resolve(&ctx->conf.chunk_max, 0,
						    vmmx__round_up(biggest, ctx->chunk_min));
	}
	if (ctx->chunk_max < ctx->chunk_min || ctx->chunk_max % ctx->chunk_min)
		return vmmx__fail(log, -VMMX_ECONFIG,
				  "VMMX_CHUNK_MAX=%s: must be a multiple of VMMX_CHUNK_SIZE (%s)",
				  vmmx__fmt_size(ctx->chunk_max, a, sizeof(a)),
				  vmmx__fmt_size(ctx->chunk_min, b, sizeof(b)));
	ctx->limit[VMMX__HOST_SLOT] = vmmx__size_resolve(&ctx->conf.host_limit,
							  ctx->total[VMMX__HOST_SLOT], UINT64_MAX);
	ctx->cache_limit = vmmx__size_resolve(&ctx->conf.cache_limit, 0, DEFAULT_CACHE_LIMIT);

	/* Chunks on another device are reached over peer access, where it exists. */
	for (int d = 0; d < ctx->ndev; d++) {
		int can = d == ctx->device;

		if (!can && vmm_can_access_peer(ctx->vmm, ctx->device, d, &can))
			can = 0;
		ctx->peer[d] = can;
	}
	ctx->active = 1ull << ctx->device;
	return 0;
}

VMMX_API int vmmx_ctx_create(const struct vmmx_config *cfg, struct vmmx_ctx **ctx_p)
{
	struct vmmx_ctx *ctx;
	struct vmm_params p;
	int err;

	vmmx__clear_last_error();
	if (!ctx_p)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_ctx_create: ctx_p is NULL");
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return vmmx__fail(NULL, -VMMX_ENOMEM, "vmmx_ctx_create: out of memory");
	err = vmmx__conf_load(cfg, &ctx->conf);
	if (err)
		goto err_free;
	ctx->device = ctx->conf.device;
	ctx->trace_fd = -1;
	ctx->reclaim_host = vmmx__shadow_reclaim; /* the memory layer's hook (internal/mem.h) */
	ctx->bufs = calloc(1, sizeof(*ctx->bufs));
	if (!ctx->bufs) {
		err = vmmx__fail(NULL, -VMMX_ENOMEM, "vmmx_ctx_create: out of memory");
		goto err_free;
	}
	ctx->deferred_tail = &ctx->deferred;
	if (pthread_mutex_init(&ctx->lock, NULL)) {
		err = vmmx__fail(NULL, -VMMX_ENOMEM, "vmmx_ctx_create: pthread_mutex_init failed");
		goto err_bufs;
	}
	if (pthread_mutex_init(&ctx->cache_lock, NULL)) {
		err = vmmx__fail(NULL, -VMMX_ENOMEM, "vmmx_ctx_create: pthread_mutex_init failed");
		goto err_lock;
	}
	if (pthread_mutex_init(&ctx->reg_lock, NULL)) {
		err = vmmx__fail(NULL, -VMMX_ENOMEM, "vmmx_ctx_create: pthread_mutex_init failed");
		goto err_cache_lock;
	}
	if (pthread_mutex_init(&ctx->hva_lock, NULL)) {
		err = vmmx__fail(NULL, -VMMX_ENOMEM, "vmmx_ctx_create: pthread_mutex_init failed");
		goto err_mutex;
	}
	err = vmmx__ctx_list_add(ctx);
	if (err)
		goto err_hva_lock;

	p = (struct vmm_params){
		.backend = ctx->conf.backend,
		.device = ctx->conf.device,
		.sim_device_mem = ctx->conf.sim_device_mem,
		.sim_host_mem = ctx->conf.sim_host_mem,
		.sim_devices = ctx->conf.sim_devices,
		.sim_pageable = ctx->conf.sim_pageable,
		.report = report,
		.report_arg = ctx,
	};
	err = vmm_open(&p, &ctx->vmm);
	if (err) {
		char detail[512];

		snprintf(detail, sizeof(detail), "%s", vmmx_last_error());
		err = vmmx__fail(&ctx->conf.log, err, "cannot open the %s backend on device %d: %s",
				 ctx->conf.backend, ctx->conf.device,
				 detail[0] ? detail : vmmx_strerror(err));
		goto err_list;
	}
	for (int i = 0; i < VMM_OP_COUNT && ctx->conf.faults[i].op >= 0; i++)
		vmm_fault_arm(ctx->vmm, (enum vmmx_op)ctx->conf.faults[i].op, ctx->conf.faults[i].nth, 0);
	err = setup_sizes(ctx);
	if (err)
		goto err_vmm;
	vmmx__host_setup(ctx);
	err = vmmx__trace_open(ctx);
	if (err)
		goto err_vmm;
	err = vmmx__policy_get(ctx, ctx->conf.policy, &ctx->policy);
	if (err)
		goto err_trace;
	if (ctx->conf.device_prealloc.set) {
		err = vmmx__cache_prealloc(ctx, vmmx__size_resolve(&ctx->conf.device_prealloc,
								  ctx->total[ctx->device], 0));
		if (err)
			goto err_policy;
	}
	*ctx_p = ctx;
	return 0;

err_policy:
	vmmx__cache_evict(ctx, (struct vmmx_loc){ VMMX_LOC_NONE, 0 }, UINT64_MAX);
	vmmx__policy_put(ctx, ctx->policy);
err_trace:
	vmmx__trace_close(ctx);
err_vmm:
	vmm_close(ctx->vmm);
err_list:
	vmmx__ctx_list_del(ctx);
err_hva_lock:
	pthread_mutex_destroy(&ctx->hva_lock);
err_mutex:
	pthread_mutex_destroy(&ctx->reg_lock);
err_cache_lock:
	pthread_mutex_destroy(&ctx->cache_lock);
err_lock:
	pthread_mutex_destroy(&ctx->lock);
err_bufs:
	free(ctx->bufs);
err_free:
	free(ctx);
	return err;
}

VMMX_API void vmmx_ctx_destroy(struct vmmx_ctx *ctx)
{
	struct vmmx__deferred *d, *next;

	if (!ctx)
		return;
	if (vmmx__inherited(ctx)) {
		vmmx__ctx_abandon(ctx);
		return;
	}
	while (ctx->bufs->n) {
		struct vmmx_buf *buf = ctx->bufs->bufs[ctx->bufs->n - 1];

		/* A sleep stash goes with the buffer it belongs to. */
		if (buf->stash_of)
			buf = buf->stash_of;
		vmmx__logf(&ctx->conf.log, VMMX_LOG_WARN,
			   "vmmx_ctx_destroy: buffer %p (capacity %zu) was not destroyed; destroying it",
			   (void *)buf->base, buf->capacity);
		vmmx_buf_destroy(buf);
	}
	vmmx__host_teardown(ctx);
	vmmx__cache_evict(ctx, (struct vmmx_loc){ VMMX_LOC_NONE, 0 }, UINT64_MAX);
	/* Every handle is released by now, with its own mapping: none is left but a leak's. */
	vmmx__hva_teardown(ctx, false);
	if (vmmx__deferred_retry(ctx)) {
		for (d = ctx->deferred; d; d = next) {
			next = d->next;
			vmmx__logf(&ctx->conf.log, VMMX_LOG_ERROR,
				   "vmmx_ctx_destroy: %s of %p (%zu bytes) failed again; leaked",
				   vmm_op_name(d->op), d->va, d->size);
			free(d);
		}
	}
	vmmx__policy_put(ctx, ctx->policy);
	while (ctx->policies) /* leaked references: unload anyway */
		vmmx__policy_put(ctx, ctx->policies);
	vmmx__trace_close(ctx);
	/* Retired tables are freed before the context goes. */
	vmmx__reclaim(ctx);
	vmm_close(ctx->vmm);
	vmmx__ctx_list_del(ctx);
	pthread_mutex_destroy(&ctx->hva_lock);
	pthread_mutex_destroy(&ctx->reg_lock);
	pthread_mutex_destroy(&ctx->cache_lock);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx->bufs);
	free(ctx);
}

VMMX_API int vmmx_ctx_trim(struct vmmx_ctx *ctx, size_t keep_bytes)
{
	uint64_t total, cached;

	vmmx__clear_last_error();
	if (!ctx)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_ctx_trim: ctx is NULL");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_ctx_trim");
	/* Cached handles first, then the host copies of read-mostly chunks. */
	cached = __atomic_load_n(&ctx->cache_total, __ATOMIC_RELAXED);
	total = cached + __atomic_load_n(&ctx->shadow_bytes, __ATOMIC_RELAXED);
	if (total > keep_bytes && cached)
		vmmx__cache_evict(ctx, (struct vmmx_loc){ VMMX_LOC_NONE, 0 },
				  total - keep_bytes < cached ? total - keep_bytes : cached);
	if (total > keep_bytes && total - keep_bytes > cached)
		vmmx__shadow_reclaim(ctx, total - keep_bytes - cached);
	vmmx__deferred_retry(ctx);
	return 0;
}

VMMX_API int vmmx_ctx_room(struct vmmx_ctx *ctx, struct vmmx_loc loc, size_t want, size_t *room_p)
{
	enum vmmx__why why;
	uint64_t room;
	char name[32];

	vmmx__clear_last_error();
	if (!ctx || !room_p)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_ctx_room: %s is NULL",
				  ctx ? "room_p" : "ctx");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_ctx_room");
	if (!vmmx__loc_usable(ctx, loc))
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_ctx_room: location %s is not usable by this context",
				  vmmx_loc_name(loc, name, sizeof(name)));
	/* No snapshot: the driver's free memory now, not a grow's shared figure. */
	room = vmmx__room(ctx, loc, want, &why, NULL);
	*room_p = room < want ? (size_t)room : want;
	return 0;
}

VMMX_API int vmmx_ctx_query(struct vmmx_ctx *ctx, struct vmmx_ctx_info *info)
{
	struct vmmx_ctx_info out;
	struct vmm_info vi;
	uint64_t fr, tot;
	size_t n;
	int err;

	vmmx__clear_last_error();
	if (!ctx || !info || info->size < offsetof(struct vmmx_ctx_info, device))
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL,
				  "vmmx_ctx_query: NULL argument or info->size not set");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_ctx_query");
	err = vmm_query(ctx->vmm, &vi);
	if (!err)
		err = vmm_mem_info(ctx->vmm, (struct vmmx_loc){ VMMX_LOC_DEVICE, ctx->device }, &fr,
				   &tot);
	if (err)
		return err;
	memset(&out, 0, sizeof(out));
	out.backend = vi.backend;
	out.device = ctx->device;
	out.device_count = vi.device_count;
	out.driver_version = vi.driver_version;
	out.granularity = ctx->gran;
	out.chunk_min = ctx->chunk_min;
	out.chunk_max = ctx->chunk_max;
	out.device_total = tot;
	out.device_free = fr;
	out.host_total = ctx->total[VMMX__HOST_SLOT];
	out.device_limit = ctx->limit[ctx->device];
	out.host_limit = ctx->limit[VMMX__HOST_SLOT];
	out.device_headroom = ctx->headroom[ctx->device];
	out.cache_limit = ctx->cache_limit;
	out.host_access = (enum vmmx_host_access)ctx->host_access;
	snprintf(out.device_name, sizeof(out.device_name), "%s", vi.device_name);
	snprintf(out.policy, sizeof(out.policy), "%.63s", ctx->conf.policy);
	snprintf(out.policy_source, sizeof(out.policy_source), "%.*s",
		 (int)sizeof(out.policy_source) - 1, ctx->policy->where);
	n = info->size < sizeof(out) ? info->size : sizeof(out);
	out.size = info->size;
	memcpy(info, &out, n);
	return 0;
}


/* In a forked child: host-side records only, no driver, no plugin (fork.c). */
void vmmx__ctx_abandon(struct vmmx_ctx *ctx)
{
	while (ctx->bufs->n)
		vmmx__buf_abandon(ctx->bufs->bufs[ctx->bufs->n - 1]);
	free(ctx->bufs);
	vmmx__table_abandon(ctx);
	vmmx__deferred_abandon(ctx);
	vmmx__cache_abandon(ctx);
	vmmx__hva_teardown(ctx, true);
	vmmx__host_abandon(ctx);
	vmmx__policy_abandon(ctx);
	vmmx__trace_close(ctx);
	vmm_abandon(ctx->vmm);
	vmmx__ctx_list_del(ctx);
	free(ctx);
}
