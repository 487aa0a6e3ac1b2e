// SPDX-License-Identifier: MIT
/*
 * cache.c - the one door to a physical handle (vmmx__handle_get: a grow's
 * chunk, a migration's destination, a trim's cut part, the preallocation)
 * and the physical-chunk cache behind it: handles unmapped by shrinks and
 * destroys are kept per location and mapped again by later grows, because
 * creating a handle costs (HOST chunks pin memory: hundreds of microseconds
 * per 2 MiB on the GPU machine) and the driver's cost is per handle.
 *
 * Cached handles stay charged against the limits (a limit caps what libvmmx
 * holds, cache included) and are counted as room by vmmx__room(), since
 * reusing one needs no new memory.  The host copies of read-mostly chunks
 * (shadow.c) count the same way: vmmx__make_room() releases them when the
 * cache alone cannot make room.  VMMX_CACHE_LIMIT bounds the total;
 * VMMX_DEVICE_PREALLOC fills the device's share up front and raises the
 * bound by that much.  vmmx_ctx_trim() and vmmx_ctx_destroy() release.
 *
 * The door is the only caller of vmm_create in lib/: the next change to
 * limits, eviction or fallback sizes is made there once.  It gives memory
 * back through vmmx__make_room(): the cache, then the host copies that the
 * object layer keeps, through the ctx->reclaim_host hook (this layer calls
 * nothing above it).
 *
 * Locking: ctx->cache_lock protects the lists (inner to buf->lock and never
 * held across a driver call); cache_bytes and cache_total are written under
 * it and read atomically without it.
 */
#include "config.h"

#include <stdlib.h>

#include "internal/mem.h"

bool vmmx__cache_take(struct vmmx_ctx *ctx, struct vmmx_loc loc, size_t max, size_t min,
		      vmm_handle_t *h, size_t *size)
{
	int k = vmmx__slot(ctx, loc);
	struct vmmx__cached **pp, **best = NULL, *c;

	if (k < 0 || !__atomic_load_n(&ctx->cache_bytes[k], __ATOMIC_RELAXED))
		return false;
	pthread_mutex_lock(&ctx->cache_lock);
	/* Largest that fits: fewest handles for the grow. Same location only
	 * (a HOST_NUMA node is a different location than plain HOST). */
	for (pp = &ctx->cache[k]; *pp; pp = &(*pp)->next) {
		c = *pp;
		if (c->loc.kind != loc.kind || c->loc.id != loc.id || c->size > max || c->size < min)
			continue;
		if (!best || c->size > (*best)->size)
			best = pp;
	}
	if (!best) {
		pthread_mutex_unlock(&ctx->cache_lock);
		return false;
	}
	c = *best;
	*best = c->next;
	__atomic_store_n(&ctx->cache_bytes[k], ctx->cache_bytes[k] - c->size, __ATOMIC_RELAXED);
	__atomic_store_n(&ctx->cache_total, ctx->cache_total - c->size, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&ctx->cache_lock);
	*h = c->handle;
	*size = c->size;
	free(c);
	return true;
}

void vmmx__cache_put(struct vmmx_ctx *ctx, struct vmmx_loc loc, vmm_handle_t h, size_t size)
{
	int k = vmmx__slot(ctx, loc);
	struct vmmx__cached *c;

	c = k >= 0 ? malloc(sizeof(*c)) : NULL;
	if (c) {
		pthread_mutex_lock(&ctx->cache_lock);
		if (ctx->cache_total + size <= ctx->cache_limit) {
			*c = (struct vmmx__cached){ .next = ctx->cache[k], .handle = h, .size = size,
						    .loc = loc };
			ctx->cache[k] = c;
			__atomic_store_n(&ctx->cache_bytes[k], ctx->cache_bytes[k] + size,
					 __ATOMIC_RELAXED);
			__atomic_store_n(&ctx->cache_total, ctx->cache_total + size, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&ctx->cache_lock);
			return;
		}
		pthread_mutex_unlock(&ctx->cache_lock);
		free(c);
	}
	/* Over the bound (or no memory for the record): give it back. */
	vmmx__release_or_defer(ctx, h, loc, size);
}

int vmmx__handle_get(struct vmmx_ctx *ctx, struct vmmx_loc loc, size_t size, size_t min,
		     unsigned int flags, vmm_handle_t *h, size_t *got, bool *hit,
		     enum vmmx__why *why)
{
	bool fresh = flags & VMMX__HANDLE_FRESH;
	bool evicted = fresh; /* FRESH gives nothing back */
	int err;

	while (size >= min) {
		size_t take_min = vmmx__round_down(size / 2, ctx->chunk_min);

		if (take_min < min)
			take_min = min;
		if (!fresh && vmmx__cache_take(ctx, loc, size, take_min, h, got)) {
			*hit = true;
			__atomic_fetch_add(&ctx->ctr.cache_hits, 1, __ATOMIC_RELAXED);
			return 0;
		}
		*hit = false;
		err = vmmx__charge(ctx, loc, size);
		if (err == -VMMX_ENOMEM) {
			/* Cached handles too big to reuse still count: free them. */
			if (!evicted && vmmx__make_room(ctx, loc, size)) {
				evicted = true;
				continue;
			}
			*why = VMMX__WHY_LIMIT;
			if (!fresh)
				return err;
			/* Filling the cache up to the room it was told: a
			 * smaller handle may still fit under the limit. */
			size = vmmx__round_down(size / 2, ctx->chunk_min);
			continue;
		}
		if (err)
			return err;
		err = vmm_create(ctx->vmm, loc, size, h);
		if (!err) {
			if (!fresh)
				__atomic_fetch_add(&ctx->ctr.cache_misses, 1, __ATOMIC_RELAXED);
			*got = size;
			return 0;
		}
		vmmx__uncharge(ctx, loc, size);
		if (err != -VMMX_ENOMEM)
			return err;
		*why = VMMX__WHY_OOM;
		if (!evicted && vmmx__make_room(ctx, loc, size)) {
			evicted = true;
			continue;
		}
		/* Memory may be fragmented or taken by others: try a smaller handle. */
		size = vmmx__round_down(size / 2, ctx->chunk_min);
	}
	if (*why == VMMX__WHY_OK)
		*why = VMMX__WHY_OOM;
	return -VMMX_ENOMEM;
}

uint64_t vmmx__make_room(struct vmmx_ctx *ctx, struct vmmx_loc loc, uint64_t bytes)
{
	uint64_t freed = vmmx__cache_evict(ctx, loc, bytes);

	if (freed < bytes && vmm_loc_is_host(loc) && ctx->reclaim_host)
		freed += ctx->reclaim_host(ctx, bytes - freed);
	return freed;
}

uint64_t vmmx__cache_evict(struct vmmx_ctx *ctx, struct vmmx_loc loc, uint64_t bytes)
{
	int first = 0, last = VMMX__NSLOTS - 1;
	struct vmmx__cached *victims = NULL, *c;
	uint64_t freed = 0;

	if (loc.kind != VMMX_LOC_NONE) {
		first = last = vmmx__slot(ctx, loc);
		if (first < 0)
			return 0;
	}
	pthread_mutex_lock(&ctx->cache_lock);
	for (int k = first; k <= last && freed < bytes; k++) {
		while (ctx->cache[k] && freed < bytes) {
			c = ctx->cache[k];
			ctx->cache[k] = c->next;
			__atomic_store_n(&ctx->cache_bytes[k], ctx->cache_bytes[k] - c->size,
					 __ATOMIC_RELAXED);
			__atomic_store_n(&ctx->cache_total, ctx->cache_total - c->size,
					 __ATOMIC_RELAXED);
			freed += c->size;
			c->next = victims;
			victims = c;
		}
	}
	pthread_mutex_unlock(&ctx->cache_lock);
	/* Driver calls outside the lock. */
	while ((c = victims)) {
		victims = c->next;
		vmmx__release_or_defer(ctx, c->handle, c->loc, c->size);
		__atomic_fetch_add(&ctx->ctr.cache_released, 1, __ATOMIC_RELAXED);
		free(c);
	}
	return freed;
}

int vmmx__cache_prealloc(struct vmmx_ctx *ctx, uint64_t bytes)
{
	struct vmmx_loc loc = { VMMX_LOC_DEVICE, ctx->device };
	enum vmmx__why why, got_why;
	uint64_t room = vmmx__room(ctx, loc, bytes, &why, NULL), done = 0;
	char a[32], b[32];

	if (bytes > room) {
		vmmx__logf(&ctx->conf.log, VMMX_LOG_WARN,
			   "VMMX_DEVICE_PREALLOC: %s asked, only %s available (%s): taking that",
			   vmmx__fmt_size(bytes, a, sizeof(a)), vmmx__fmt_size(room, b, sizeof(b)),
			   vmmx__why_name(why));
		bytes = room;
	}
	bytes = vmmx__round_down(bytes, ctx->chunk_min);
	/* The preallocated memory is the cache's to keep, whatever
	 * VMMX_CACHE_LIMIT says: raise the bound first so that the puts below
	 * keep it, then lower it to what was really taken. */
	ctx->cache_limit += bytes;
	while (done < bytes) {
		size_t size = bytes - done < ctx->chunk_max ? bytes - done : ctx->chunk_max;
		vmm_handle_t h;
		bool hit;
		int err;

		/* Fragmented or shared memory: smaller handles may still fit. */
		got_why = VMMX__WHY_OK;
		err = vmmx__handle_get(ctx, loc, size, ctx->chunk_min, VMMX__HANDLE_FRESH, &h, &size,
				       &hit, &got_why);
		if (err) {
			vmmx__logf(&ctx->conf.log, VMMX_LOG_WARN,
				   "VMMX_DEVICE_PREALLOC: stopped at %s of %s: %s",
				   vmmx__fmt_size(done, a, sizeof(a)), vmmx__fmt_size(bytes, b, sizeof(b)),
				   vmmx_last_error());
			ctx->cache_limit -= bytes - done;
			if (err != -VMMX_ENOMEM)
				return err;
			break;
		}
		vmmx__cache_put(ctx, loc, h, size);
		done += size;
	}
	vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO, "VMMX_DEVICE_PREALLOC: %s of device %d cached",
		   vmmx__fmt_size(done, a, sizeof(a)), ctx->device);
	return 0;
}

void vmmx__cache_abandon(struct vmmx_ctx *ctx)
{
	struct vmmx__cached *c;

	for (int k = 0; k < VMMX__NSLOTS; k++) {
		while ((c = ctx->cache[k])) {
			ctx->cache[k] = c->next;
			free(c);
		}
	}
}
