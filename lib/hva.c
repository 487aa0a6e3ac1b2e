// SPDX-License-Identifier: MIT
/*
 * hva.c - a host handle's own mapping: the address where a parked chunk's
 * data, its host copy, is mapped and granted to the GPU when the chunk's
 * own address is left unmapped (vmmx_park(), migrate.c and shadow.c), and
 * where the move back to a device copies from.
 *
 * Mapping host memory and granting it to the GPU is the costly step of a
 * send back (about 1.5 ms per 128 MiB on the H200, docs/DRIVER.md), and a
 * second mapping of the same handle costs as much as the first.  So a
 * handle's own mapping, once made, is kept while the handle lives: when
 * its chunk is done with it (brought in, mapped in place again, given to
 * the cache) it stays mapped, unused, and the handle's next park finds it
 * (vmmx__hva_make()) with no driver call.  It is unmapped and its range
 * unreserved only when the handle is released (vmmx__hva_forget(), from
 * defer.c's one release path) or the context goes.  A mapping held by no
 * chunk is the handle's own: reached by nothing but libvmmx's copies.
 *
 * Locking: ctx->hva_lock, innermost; no other lock and no driver call is
 * taken under it.
 */
#include "config.h"

#include <stdlib.h>

#include "internal/mem.h"

/* hva_lock held: the kept mapping of @h (@size bytes) not in use, or of @va; NULL if none. */
static struct vmmx__hva *hva_find(struct vmmx_ctx *ctx, vmm_handle_t h, size_t size, void *va)
{
	for (size_t i = 0; i < ctx->nhvas; i++) {
		struct vmmx__hva *e = &ctx->hvas[i];

		if (va ? e->va == va : e->handle == h && e->size == size && !e->used)
			return e;
	}
	return NULL;
}

/* Remember @hva as @h's own mapping, in use; not kept when the table cannot
 * grow (the mapping is then dropped with its chunk, as before). */
static void hva_keep(struct vmmx_ctx *ctx, vmm_handle_t h, void *hva, size_t size)
{
	pthread_mutex_lock(&ctx->hva_lock);
	if (ctx->nhvas == ctx->hvas_cap) {
		size_t cap = ctx->hvas_cap ? 2 * ctx->hvas_cap : 16;
		struct vmmx__hva *v = realloc(ctx->hvas, cap * sizeof(*v));

		if (v) {
			ctx->hvas = v;
			ctx->hvas_cap = cap;
		}
	}
	if (ctx->nhvas < ctx->hvas_cap)
		ctx->hvas[ctx->nhvas++] = (struct vmmx__hva){ h, hva, size, true };
	pthread_mutex_unlock(&ctx->hva_lock);
}

int vmmx__hva_make(struct vmmx_ctx *ctx, vmm_handle_t h, struct vmmx_loc loc, size_t size,
		   void **hva_p)
{
	struct vmmx__hva *e;
	void *va;
	int err;

	/* Kept from an earlier park of the handle: mapped and granted already. */
	pthread_mutex_lock(&ctx->hva_lock);
	e = hva_find(ctx, h, size, NULL);
	if (e) {
		e->used = true;
		*hva_p = e->va;
	}
	pthread_mutex_unlock(&ctx->hva_lock);
	if (e) {
		__atomic_fetch_add(&ctx->ctr.hva_reused, 1, __ATOMIC_RELAXED);
		return 0;
	}
	err = vmm_reserve(ctx->vmm, size, ctx->gran, &va);
	if (err)
		return err;
	err = vmm_map(ctx->vmm, va, size, h);
	if (err)
		goto err_reserve;
	/* Only the copy engine reads it: the GPU alone (a CPU grant would
	 * cost more than twice as much, map.c). */
	err = vmmx__chunk_set_access(ctx, va, size, loc, false);
	if (err) {
		if (vmmx__unmap_unreserve_or_defer(ctx, va, size))
			vmmx__logf(&ctx->conf.log, VMMX_LOG_WARN,
				   "vmmx_park: a host copy's own mapping could not be undone at once; it is retried later");
		return err;
	}
	/* Not kept (no memory for the table): dropped with its chunk, as a
	 * mapping of no table is (vmmx__hva_drop()). */
	hva_keep(ctx, h, va, size);
	*hva_p = va;
	return 0;

err_reserve:
	vmmx__unreserve_or_defer(ctx, va, size);
	return err;
}

bool vmmx__hva_drop(struct vmmx_ctx *ctx, void *hva, size_t size)
{
	struct vmmx__hva *e;

	pthread_mutex_lock(&ctx->hva_lock);
	e = hva_find(ctx, 0, 0, hva);
	if (e)
		e->used = false;
	pthread_mutex_unlock(&ctx->hva_lock);
	return e ? true : !vmmx__unmap_unreserve_or_defer(ctx, hva, size);
}

void vmmx__hva_forget(struct vmmx_ctx *ctx, vmm_handle_t h)
{
	for (;;) {
		struct vmmx__hva gone = { 0 };
		bool found = false;

		pthread_mutex_lock(&ctx->hva_lock);
		for (size_t i = 0; i < ctx->nhvas; i++)
			if (ctx->hvas[i].handle == h) {
				gone = ctx->hvas[i];
				ctx->hvas[i] = ctx->hvas[--ctx->nhvas];
				found = true;
				break;
			}
		pthread_mutex_unlock(&ctx->hva_lock);
		if (!found)
			return;
		(void)vmmx__unmap_unreserve_or_defer(ctx, gone.va, gone.size);
	}
}

void vmmx__hva_teardown(struct vmmx_ctx *ctx, bool abandon)
{
	for (size_t i = 0; !abandon && i < ctx->nhvas; i++)
		(void)vmmx__unmap_unreserve_or_defer(ctx, ctx->hvas[i].va, ctx->hvas[i].size);
	free(ctx->hvas);
	ctx->hvas = NULL;
	ctx->nhvas = ctx->hvas_cap = 0;
}
