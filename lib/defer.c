// SPDX-License-Identifier: MIT
/*
 * defer.c - deferred teardown: driver steps that undo (unmap, release,
 * unreserve) must not fail their caller, so a step that fails is tried
 * again a few times (an unmap: a range left mapped blocks every map at it)
 * and then queued on the context, to be retried by the next resize, buffer
 * destroy or context destroy.  Also the guarded waits before an unmap
 * (vmmx__wait_tries).
 *
 * Locking: ctx->lock protects the deferred list (FIFO); ndeferred is
 * written under it and read atomically.  Driver calls are made without it.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "internal/mem.h"

/* The step queued, @why logged ("failed (...)" or why it was not tried). */
static void enqueue(struct vmmx_ctx *ctx, enum vmmx_op op, void *va, size_t size, vmm_handle_t h,
		    struct vmmx_loc loc, const char *why)
{
	struct vmmx__deferred *d = calloc(1, sizeof(*d));

	if (!d) {
		vmmx__logf(&ctx->conf.log, VMMX_LOG_ERROR,
			   "%s of %p (%zu bytes) %s and cannot be queued for a retry: leaked",
			   vmm_op_name(op), va, size, why);
		return;
	}
	*d = (struct vmmx__deferred){ .op = op, .va = va, .size = size, .handle = h, .loc = loc };
	vmmx__logf(&ctx->conf.log, VMMX_LOG_WARN, "%s of %p (%zu bytes) %s; will retry",
		   vmm_op_name(op), va, size, why);
	pthread_mutex_lock(&ctx->lock);
	*ctx->deferred_tail = d;
	ctx->deferred_tail = &d->next;
	__atomic_fetch_add(&ctx->ndeferred, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&ctx->lock);
}

void vmmx__defer(struct vmmx_ctx *ctx, enum vmmx_op op, void *va, size_t size, vmm_handle_t h,
		 struct vmmx_loc loc)
{
	char why[256];

	snprintf(why, sizeof(why), "failed (%s)", vmmx_last_error());
	enqueue(ctx, op, va, size, h, loc, why);
}

int vmmx__unmap_tries(struct vmmx_ctx *ctx, void *va, size_t size)
{
	int err = 0;

	for (int i = 0; i < VMMX__TRIES; i++) {
		err = vmm_unmap(ctx->vmm, va, size);
		if (!err)
			break;
	}
	return err;
}

int vmmx__wait_tries(struct vmmx_ctx *ctx, vmm_stream_t s)
{
	int err = 0;

	for (int i = 0; i < VMMX__TRIES; i++) {
		err = vmm_stream_sync(ctx->vmm, s);
		if (!err)
			return 0;
	}
	for (int i = 0; i < VMMX__TRIES; i++) {
		err = vmm_sync(ctx->vmm);
		if (!err)
			return 0;
	}
	return err;
}

int vmmx__unmap_or_defer(struct vmmx_ctx *ctx, void *va, size_t size)
{
	if (!vmmx__unmap_tries(ctx, va, size))
		return 0;
	vmmx__defer(ctx, VMMX_OP_UNMAP, va, size, 0, (struct vmmx_loc){ 0 });
	return 1;
}

int vmmx__unmap_unreserve_or_defer(struct vmmx_ctx *ctx, void *va, size_t size)
{
	if (vmmx__unmap_or_defer(ctx, va, size)) {
		vmmx__defer(ctx, VMMX_OP_UNRESERVE, va, size, 0, (struct vmmx_loc){ 0 });
		return 1;
	}
	vmmx__unreserve_or_defer(ctx, va, size);
	return 0;
}

int vmmx__release_or_defer(struct vmmx_ctx *ctx, vmm_handle_t h, struct vmmx_loc loc, size_t size)
{
	/* A host handle's own mapping goes first (hva.c). */
	if (vmm_loc_is_host(loc))
		vmmx__hva_forget(ctx, h);
	if (!vmm_release(ctx->vmm, h)) {
		vmmx__uncharge(ctx, loc, size);
		vmmx__freecache_forget(ctx, loc);
		return 0;
	}
	/* The memory stays charged: it is still held until the release succeeds. */
	vmmx__defer(ctx, VMMX_OP_RELEASE, NULL, size, h, loc);
	return 1;
}

/* Whether an unmap in @kept (still failing) overlaps the range of @d. */
static bool still_mapped(const struct vmmx__deferred *kept, const struct vmmx__deferred *d)
{
	uintptr_t a = (uintptr_t)d->va, b = a + d->size;

	for (; kept; kept = kept->next)
		if (kept->op == VMMX_OP_UNMAP && (uintptr_t)kept->va < b &&
		    a < (uintptr_t)kept->va + kept->size)
			return true;
	return false;
}

int vmmx__unreserve_or_defer(struct vmmx_ctx *ctx, void *va, size_t size)
{
	const struct vmmx__deferred range = { .op = VMMX_OP_UNRESERVE, .va = va, .size = size };
	bool mapped = false;

	/* A failed unmap of some of it is queued: queued behind it, untried. */
	if (__atomic_load_n(&ctx->ndeferred, __ATOMIC_RELAXED)) {
		pthread_mutex_lock(&ctx->lock);
		mapped = still_mapped(ctx->deferred, &range);
		pthread_mutex_unlock(&ctx->lock);
	}
	if (mapped) {
		enqueue(ctx, VMMX_OP_UNRESERVE, va, size, 0, (struct vmmx_loc){ 0 },
			"not tried behind a failed unmap of its range");
		return 1;
	}
	if (!vmm_unreserve(ctx->vmm, va, size))
		return 0;
	vmmx__defer(ctx, VMMX_OP_UNRESERVE, va, size, 0, (struct vmmx_loc){ 0 });
	return 1;
}

static int run_deferred(struct vmmx_ctx *ctx, const struct vmmx__deferred *d)
{
	switch (d->op) {
	case VMMX_OP_UNMAP:
		return vmm_unmap(ctx->vmm, d->va, d->size);
	case VMMX_OP_RELEASE: {
		int err = vmm_release(ctx->vmm, d->handle);

		if (!err) {
			vmmx__uncharge(ctx, d->loc, d->size);
			vmmx__freecache_forget(ctx, d->loc);
		}
		return err;
	}
	case VMMX_OP_UNRESERVE:
		return vmm_unreserve(ctx->vmm, d->va, d->size);
	default:
		abort(); /* only teardown steps are ever deferred */
	}
}

uint64_t vmmx__deferred_retry(struct vmmx_ctx *ctx)
{
	struct vmmx__deferred *list, *d, *next, *kept = NULL, **kept_tail = &kept;
	uint64_t left = 0;

	if (!__atomic_load_n(&ctx->ndeferred, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&ctx->lock);
	list = ctx->deferred;
	ctx->deferred = NULL;
	ctx->deferred_tail = &ctx->deferred;
	pthread_mutex_unlock(&ctx->lock);

	/*
	 * In order: unmaps were queued before the unreserve of their range,
	 * which is kept without being tried while one of them still fails
	 * (the driver is never asked to free a range that is mapped).
	 */
	for (d = list; d; d = next) {
		next = d->next;
		d->next = NULL;
		if (!(d->op == VMMX_OP_UNRESERVE && still_mapped(kept, d)) && !run_deferred(ctx, d)) {
			free(d);
			continue;
		}
		*kept_tail = d;
		kept_tail = &d->next;
		left++;
	}

	pthread_mutex_lock(&ctx->lock);
	/* Items queued meanwhile go after the older ones. */
	*kept_tail = ctx->deferred;
	if (!ctx->deferred)
		ctx->deferred_tail = kept ? kept_tail : &ctx->deferred;
	ctx->deferred = kept ? kept : ctx->deferred;
	left = 0;
	for (d = ctx->deferred; d; d = d->next)
		left++;
	__atomic_store_n(&ctx->ndeferred, left, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&ctx->lock);
	return left;
}

void vmmx__deferred_abandon(struct vmmx_ctx *ctx)
{
	struct vmmx__deferred *d;

	while ((d = ctx->deferred)) {
		ctx->deferred = d->next;
		free(d);
	}
}
