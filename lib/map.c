// SPDX-License-Identifier: MIT
/*
 * map.c - mapping one chunk: map a handle at an address and grant it to the
 * devices (and the CPU) that need it, or put a chunk back after a failed
 * step, undoing in exact reverse order (set access -> map).
 *
 * Locking: none of its own; the caller holds the buffer's lock or owns the
 * address range (a staging range).  Calls the driver.
 */
#include "config.h"

#include "internal/mem.h"

int vmmx__chunk_set_access(struct vmmx_ctx *ctx, void *va, size_t size, struct vmmx_loc loc,
			   bool cpu)
{
	struct vmm_access acc[3] = {
		{ .who = { VMMX_LOC_DEVICE, ctx->device }, .flags = VMM_ACCESS_RW },
	};
	int n = 1;

	/* A chunk on another GPU is granted to that GPU too; host chunks may be
	 * granted to the CPU, so they are plain host memory at the same address
	 * (the driver refuses CPU access to device memory).  The CPU grant is
	 * what makes host mappings expensive: on the H200 cuMemSetAccess of host
	 * memory took 20.8 ms per GiB with it and 7.5 ms without, and unmapping
	 * 13.9 ms against 2.3 ms; and only a GPU-only grant overlaps a running
	 * copy.  Yet the driver's own copy of a GPU-only host chunk to pageable
	 * memory (cuMemcpy) died with SIGSEGV (H100, driver 580), so the CPU is
	 * granted every host chunk unless VMMX_HOST_CPU_ACCESS says otherwise. */
	if (loc.kind == VMMX_LOC_DEVICE && loc.id != ctx->device)
		acc[n++] = (struct vmm_access){ .who = loc, .flags = VMM_ACCESS_RW };
	else if (cpu && vmm_loc_is_host(loc))
		acc[n++] = (struct vmm_access){ .who = { VMMX_LOC_HOST, 0 }, .flags = VMM_ACCESS_RW };
	return vmm_set_access(ctx->vmm, va, size, acc, n);
}

int vmmx__chunk_remap(struct vmmx_ctx *ctx, void *va, const struct vmmx__chunk *c)
{
	int err = vmm_map(ctx->vmm, va, c->size, c->handle);

	if (err)
		return err;
	err = vmmx__chunk_set_access(ctx, va, c->size, c->loc, c->cpu);
	if (err)
		vmmx__unmap_or_defer(ctx, va, c->size); /* mapped but unusable */
	return err;
}

/*
 * Map and grant, each step tried VMMX__TRIES times; a mapping that worked is
 * kept while the grant is tried again (mapping over it would fail).
 */
int vmmx__chunk_restore(struct vmmx_ctx *ctx, void *va, const struct vmmx__chunk *c)
{
	bool mapped = false;
	int err = 0;

	for (int i = 0; i < VMMX__TRIES; i++) {
		if (!mapped) {
			err = vmm_map(ctx->vmm, va, c->size, c->handle);
			if (err)
				continue;
			mapped = true;
		}
		err = vmmx__chunk_set_access(ctx, va, c->size, c->loc, c->cpu);
		if (!err)
			return 0;
	}
	if (mapped)
		vmmx__unmap_or_defer(ctx, va, c->size);
	return err;
}

int vmmx__chunk_map_new(struct vmmx_ctx *ctx, void *va, size_t size, struct vmmx_loc loc,
			vmm_handle_t h, bool cpu)
{
	int err = vmm_map(ctx->vmm, va, size, h);

	if (err)
		goto err_handle;
	err = vmmx__chunk_set_access(ctx, va, size, loc, cpu);
	if (err)
		goto err_map;
	return 0;

err_map:
	if (vmmx__unmap_or_defer(ctx, va, size)) {
		/* A handle still mapped somewhere must not be reused. */
		vmmx__release_or_defer(ctx, h, loc, size);
		return err;
	}
err_handle:
	/* The handle is fine, only its mapping failed: keep it. */
	vmmx__cache_put(ctx, loc, h, size);
	return err;
}
